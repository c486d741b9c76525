#!/usr/bin/env bash
# clinfer's tokenizers against llama.cpp's, beyond the published vectors: every vocab file of
# tools/fetch_vocab.sh, and the GPT-2 vocabulary once under each pre-tokenizer name clinfer
# knows (bench/tokenizer_variants.py writes those copies and a corpus: the published inputs plus
# texts in more scripts, marks, digit runs and whitespace). Both tools tokenize the corpus
# without BOS (llama-tokenize --ids, clinfer tokenize); the ids must be equal. The peer is the
# llama.cpp build of bench/compare_llamacpp.sh, with its llama-tokenize target built; the gguf
# package comes from bench/peer.sh's venv. Exit 77 without them or the vocab files; 1 when a file
# differs (the first texts that differ are printed).
#
# usage: bench/crosscheck_tokenizers.sh [--bin CLINFER]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
venv=$peer_venv
clinfer=$root/build/clinfer
[ "${1:-}" = --bin ] && clinfer=$2
say() { echo "crosscheck_tokenizers: $*" >&2; }
[ -x "$peer_bin/llama-tokenize" ] || { say "skipped: $peer_bin/llama-tokenize is not built"; exit 77; }
"$venv/bin/python" -c 'import gguf' 2>/dev/null ||
    { say "skipped: no venv with gguf at $venv (tools/gpu_check.sh makes it)"; exit 77; }
vocab=${CLINFER_VOCAB_DIR:-${CLINFER_TEST_VOCAB_DIR:-$root/models/vocab}}
[ -f "$vocab/ggml-vocab-gpt-2.gguf.inp" ] ||
    { say "skipped: no vocab files in $vocab (tools/fetch_vocab.sh)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$root/bench/tokenizer_variants.py" "$vocab" \
    "$root/src/tok_pretok_table.c" "$work"

peer_ids() { "$peer_bin/llama-tokenize" -m "$1" -f "$2" --ids --no-bos --no-escape --log-disable \
    2>/dev/null | tail -n 1 | tr -d '[],' | xargs; }
clinfer_ids() { "$clinfer" tokenize -m "$1" --no-bos --no-special - <"$2" 2>/dev/null | xargs; }

fail=0 n=0
for model in "$vocab"/ggml-vocab-*.gguf "$work"/pre-*.gguf; do
    name=$(basename "$model" .gguf)
    # llama.cpp's whitespace pre-tokenizer cannot take GPT-2's merges (it asserts): not comparable
    [ "$name" = pre-whitespace ] && continue
    n=$((n + 1))
    [ "$(peer_ids "$model" "$work/corpus.txt")" = "$(clinfer_ids "$model" "$work/corpus.txt")" ] &&
        continue
    fail=1
    say "$name: the ids differ; first texts that differ:"
    "$venv/bin/python" - "$work/corpus.txt" "$work" <<'PY'
import sys
corpus, work = sys.argv[1:3]
for i, text in enumerate(open(corpus, encoding="utf-8").read().split("\n")):
    open(f"{work}/text{i}.txt", "w", encoding="utf-8").write(text)
PY
    shown=0
    for t in "$work"/text*.txt; do
        a=$(peer_ids "$model" "$t") b=$(clinfer_ids "$model" "$t")
        [ "$a" = "$b" ] && continue
        echo "  $(head -c 60 "$t" | tr '\n' ' ')"$'\n'"    llama.cpp: $a"$'\n'"    clinfer:   $b" >&2
        shown=$((shown + 1))
        [ $shown = 3 ] && break
    done
    rm -f "$work"/text*.txt
done
[ $fail = 0 ] && echo "crosscheck_tokenizers: $n vocabularies give llama.cpp's ids"
exit $fail
