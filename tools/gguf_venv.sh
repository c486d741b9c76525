#!/usr/bin/env bash
# The venv with the PyPI packages gguf (pinned here) and numpy that bench/make_shape_model.py
# runs under, ${XDG_CACHE_HOME:-~/.cache}/clinfer/venv-gguf (bench/peer.sh's peer_venv): made
# once, then its python's path printed. --pin prints the gguf requirement instead
# (tools/gpu_bundle.sh downloads that wheel).
#
# usage: tools/gguf_venv.sh [--pin]
set -euo pipefail

pin="gguf==0.19.0"
if [ "${1:-}" = --pin ]; then
    echo "$pin"
    exit 0
fi
venv=${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/venv-gguf
if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$pin" numpy >&2
fi
echo "$venv/bin/python"
