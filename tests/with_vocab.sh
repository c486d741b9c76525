#!/usr/bin/env bash
# Runs COMMAND on one file of the tokenizer vectors (tools/fetch_vocab.sh), for tests that pass
# it on a command line: every ARG that is exactly {} becomes the file's path. The directory is
# $CLINFER_VOCAB_DIR, else $CLINFER_TEST_VOCAB_DIR (the checkout's models/vocab, from CMake).
# A missing file is a skip (exit 77), not a failure: the vectors are a download.
#
# usage: with_vocab.sh FILE COMMAND [ARG...]
set -euo pipefail
file=$1
shift
dir=${CLINFER_VOCAB_DIR:-${CLINFER_TEST_VOCAB_DIR:-.}}
if [ ! -f "$dir/$file" ]; then
    echo "skipped: $dir/$file is missing (fetch the tokenizer vectors with" \
        "'bash tools/fetch_vocab.sh' and set CLINFER_VOCAB_DIR to the directory it prints;" \
        "tools/test.sh does both)"
    exit 77
fi
args=()
for arg in "$@"; do
    if [ "$arg" = "{}" ]; then args+=("$dir/$file"); else args+=("$arg"); fi
done
exec "${args[@]}"
