#!/usr/bin/env bash
# Fetches the source distribution of llama-cpp-python from PyPI (pinned version, SHA-256
# checked): it carries llama.cpp's source in vendor/llama.cpp, which bench/compare_llamacpp.sh
# builds, and its vocab-only test files in vendor/llama.cpp/models, which tools/fetch_vocab.sh
# takes. The tarball (77 MB) is kept in $CLINFER_BENCH_CACHE, else ~/.cache/clinfer/llama.cpp.
# Prints the tarball's path on stdout. Quick and quiet when it is already there.
#
# usage: tools/fetch_llamacpp_sdist.sh
set -euo pipefail

PACKAGE=llama-cpp-python
VERSION=0.3.36
FILE=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

cache=${CLINFER_BENCH_CACHE:-$HOME/.cache/clinfer/llama.cpp}

say() { echo "fetch_llamacpp_sdist: $*" >&2; }
. "$(dirname "${BASH_SOURCE[0]}")/pypi.sh"

if verified "$cache/$FILE" "$SHA256"; then
    echo "$cache/$FILE"
    exit 0
fi
python=$(pip_python "$PACKAGE")

mkdir -p "$cache"
# Downloaded beside its final place, so that the move below is a rename.
tmp=$(mktemp -d "$cache/.download-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
say "downloading $PACKAGE==$VERSION (source distribution, about 77 MB) from PyPI"
"$python" -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
    "$PACKAGE==$VERSION" -d "$tmp" >&2

if ! verified "$tmp/$FILE" "$SHA256"; then
    say "SHA-256 mismatch for $FILE: expected $SHA256, got" \
        "$( (sha256sum "$tmp/$FILE" 2>/dev/null || echo none) | cut -d' ' -f1)"
    exit 1
fi
mv "$tmp/$FILE" "$cache/$FILE"
say "stored $cache/$FILE"
echo "$cache/$FILE"
