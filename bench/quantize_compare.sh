#!/usr/bin/env bash
# clinfer quantize against llama.cpp's llama-quantize on the same source file, judged by
# perplexity: for each TYPE, both tools quantize one F16 model, and llama-perplexity (the peer)
# and clinfer perplexity score both outputs on the same text. Passes when each tool loads both
# files, the two tools score each file within 1% of each other (the same blocks read the same
# way), and, per scoring tool, clinfer's output is within 1% of llama.cpp's or better (the
# quantizers are each tool's own: clinfer's Q3_K fits beat llama.cpp's on SmolLM2's ffn_down).
# Prints a markdown table.
#
# The source is the default model (SmolLM2-135M-Instruct Q4_1) written back as F16 by clinfer
# quantize --allow-requantize, so both tools start from the same F16 weights. SmolLM2's rows of
# 576 leave most matrices to the K types' 32-element fallbacks, so a second table does the same
# for the K file types (--k-types) on a random-weight llama whose rows are all multiples of 256
# (bench/make_shape_model.py: width 256, FFN 512, 2 layers, weights of std 0.1, F32), where every
# matrix is in the mix's K types. Its perplexities are those of noise, so there only each file's
# two scores are judged, not one quantizer's output against the other's. It needs a venv with
# the gguf package (bench/peer.sh's peer_venv) and is left out
# without it (--k-only: only this table). The peer is the llama.cpp build of
# bench/compare_llamacpp.sh ($CLINFER_BENCH_CACHE or ~/.cache/clinfer/llama.cpp/build/bin);
# exit 77 when it is not built (this script does not build it).
#
# usage: bench/quantize_compare.sh [--bin CLINFER] [-f TEXT] [-c 512] [--chunks 4]
#            [--k-types "Q2_K Q3_K_M Q5_K_M"] [--k-only] [TYPE...]
# TYPEs default to Q8_0 Q4_0 Q4_1 Q6_K Q4_K_M Q2_K Q3_K_M Q5_K_M.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
peer=$peer_bin
clinfer=$root/build/clinfer
text=/usr/share/common-licenses/GPL-3
ctx=512
chunks=4
types=()
k_types="Q2_K Q3_K_M Q5_K_M"
k_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --bin) clinfer=$2; shift ;;
    -f) text=$2; shift ;;
    -c) ctx=$2; shift ;;
    --chunks) chunks=$2; shift ;;
    --k-types) k_types=$2; shift ;;
    --k-only) k_only=1 ;;
    -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
    *) types+=("$1") ;;
    esac
    shift
done
[ ${#types[@]} -gt 0 ] || types=(Q8_0 Q4_0 Q4_1 Q6_K Q4_K_M Q2_K Q3_K_M Q5_K_M)
say() { echo "quantize_compare: $*" >&2; }
if [ ! -x "$peer/llama-quantize" ] || [ ! -x "$peer/llama-perplexity" ]; then
    say "skipped: llama.cpp's llama-quantize and llama-perplexity are not built in $peer" \
        "(bench/compare_llamacpp.sh builds them)"
    exit 77
fi
model=$(bash "$root/tools/fetch_model.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ "$k_only" = 1 ] || "$clinfer" quantize "$model" "$work/f16.gguf" F16 --allow-requantize \
    2>"$work/f16.log" || { cat "$work/f16.log" >&2; exit 1; }

# 1 when both are numbers within 1% of each other, 0 when not, - when one is missing.
within() {
    python3 -c "import sys
a, b = sys.argv[1:]
print('-' if '-' in (a, b) else int(abs(float(a) / float(b) - 1) <= 0.01))" "$1" "$2"
}

# 1 when perplexity a is at most 1% above b, 0 when not, - when one is missing.
no_worse() {
    python3 -c "import sys
a, b = sys.argv[1:]
print('-' if '-' in (a, b) else int(float(a) / float(b) - 1 <= 0.01))" "$1" "$2"
}

fail=0
# compare SOURCE TYPE CTX JUDGE: one table row, both tools' TYPE of SOURCE scored by both tools;
# JUDGE 1: also clinfer's output against llama.cpp's.
compare() {
    local src=$1 type=$2 c=$3 judge=$4
    say "$type of $(basename "$src")"
    local mine=$work/clinfer.$type.gguf theirs=$work/llama.$type.gguf
    "$clinfer" quantize "$src" "$mine" "$type" 2>"$work/q.log" || { cat "$work/q.log" >&2; exit 1; }
    "$peer/llama-quantize" "$src" "$theirs" "$type" 2 >"$work/lq.log" 2>&1 ||
        { cat "$work/lq.log" >&2; exit 1; }
    local p1 p2 c1 c2
    p1=$(ppl_peer "$mine" "$text" "$c" "$chunks") p2=$(ppl_peer "$theirs" "$text" "$c" "$chunks")
    c1=$(ppl_clinfer "$mine" "$text" "$c" "$chunks" --act q8)
    c2=$(ppl_clinfer "$theirs" "$text" "$c" "$chunks" --act q8)
    [ "$p1" != - ] || { say "$type: llama.cpp cannot load clinfer's output"; fail=1; }
    [ "$c2" != - ] || { say "$type: clinfer cannot load llama.cpp's output"; fail=1; }
    [ "$(within "$p1" "$c1")" != 0 ] && [ "$(within "$p2" "$c2")" != 0 ] ||
        { say "$type: the two tools score one file more than 1% apart"; fail=1; }
    [ "$judge" = 0 ] || { [ "$(no_worse "$p1" "$p2")" != 0 ] && [ "$(no_worse "$c1" "$c2")" != 0 ]; } ||
        { say "$type: clinfer's output scores more than 1% worse than llama.cpp's"; fail=1; }
    printf '| %s | %d / %d KiB | %s / %s | %s / %s |\n' "$type" \
        $(($(stat -c %s "$mine") >> 10)) $(($(stat -c %s "$theirs") >> 10)) "$p1" "$p2" "$c1" "$c2"
}

header() {
    echo "| type | size clinfer / llama.cpp | llama-perplexity: clinfer's / llama.cpp's | clinfer perplexity: clinfer's / llama.cpp's |"
    echo "|---|---|---|---|"
}

if [ "$k_only" = 0 ]; then
    echo "SmolLM2-135M from F16, -c $ctx --chunks $chunks:"
    header
    for type in "${types[@]}"; do
        compare "$work/f16.gguf" "$type" "$ctx" 1
    done
    echo
fi

venv=$peer_venv
if [ -n "$k_types" ] && "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
    "$venv/bin/python" "$root/bench/make_shape_model.py" "$work/k256.gguf" --type F32 --dim 256 \
        --layers 2 --heads 4 --kv-heads 2 --ffn 512 --ctx 512 --std 0.1 --seed 1 \
        2>"$work/make.log" || { cat "$work/make.log" >&2; exit 1; }
    echo "Random-weight llama of width 256 from F32, -c 128 --chunks $chunks:"
    header
    for type in $k_types; do
        compare "$work/k256.gguf" "$type" 128 0
    done
else
    say "no K-width table: no venv with gguf and numpy at $venv"
fi
exit $fail
