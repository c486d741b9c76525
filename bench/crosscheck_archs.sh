#!/usr/bin/env bash
# Each architecture's forward pass against llama.cpp's, without downloading a model: a small
# random-weight GGUF per architecture (bench/make_shape_model.py, the default model's tokenizer,
# weights of std 0.3 so that the distributions are sharp and any difference shows), then
#   - perplexity of both tools on the same text (llama-perplexity and clinfer perplexity with
#     f32 activations, -c 128, 4 chunks): within 1e-3 of each other;
#   - greedy continuations of three prompts (llama-simple and clinfer run --temp 0, 16 tokens):
#     the same text.
# The peer is the llama.cpp build of bench/compare_llamacpp.sh ($CLINFER_BENCH_CACHE or
# ~/.cache/clinfer/llama.cpp); the gguf package comes from a venv made there once (PyPI gguf
# 0.19.0 and numpy). Exit 77 without the peer or the venv; 1 when an architecture differs.
#
# gemma3 gets a sliding window of 16 on every other layer (sliding_window_pattern 2), so that the
# perplexity chunks of 128 tokens run past it on its local layers.
#
# usage: bench/crosscheck_archs.sh [--bin CLINFER] [ARCH...]   (ARCHs: llama qwen2 qwen3 phi3 gemma3)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
peer=$peer_bin
venv=$peer_venv
clinfer=$root/build/clinfer
archs=()
while [ $# -gt 0 ]; do
    case $1 in
    --bin) clinfer=$2; shift ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) archs+=("$1") ;;
    esac
    shift
done
[ ${#archs[@]} -gt 0 ] || archs=(llama qwen2 qwen3 phi3 gemma3)
say() { echo "crosscheck_archs: $*" >&2; }
for tool in llama-perplexity llama-simple; do
    [ -x "$peer/$tool" ] || { say "skipped: $peer/$tool is not built"; exit 77; }
done
"$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null ||
    { say "skipped: no venv with gguf and numpy at $venv (tools/gpu_check.sh makes it)"; exit 77; }
text=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prompts=("The quick brown fox" "Once upon a time" "def main():")

fail=0
echo "| arch | PPL llama.cpp | PPL clinfer | ratio | greedy texts equal |"
echo "|---|---|---|---|---|"
for arch in "${archs[@]}"; do
    model=$work/$arch.gguf
    "$venv/bin/python" "$root/bench/make_shape_model.py" "$model" --arch "$arch" --type F32 \
        --dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 --ctx 512 --std 0.3 --seed 1 \
        --window 16 --swa-pattern 2 \
        2>"$work/make.log" || { cat "$work/make.log" >&2; exit 1; }
    p1=$(ppl_peer "$model" "$text" 128 4) p2=$(ppl_clinfer "$model" "$text" 128 4 --act f32)
    ratio=$(python3 -c "import sys; print('%.6f' % (float(sys.argv[2]) / float(sys.argv[1])))" \
        "${p1/-/nan}" "${p2/-/nan}")
    python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - 1) > 1e-3)" "$ratio" ||
        { say "$arch: perplexities differ: llama.cpp $p1, clinfer $p2"; fail=1; }
    same=0
    for p in "${prompts[@]}"; do
        # llama-simple echoes the prompt before the continuation; clinfer run prints only the latter
        a=$("$peer/llama-simple" -m "$model" -n 16 "$p" 2>/dev/null | head -c 4096)
        b=$("$clinfer" run -m "$model" -p "$p" -n 16 --temp 0 --act f32 -q 2>/dev/null | head -c 4096)
        if [ "$a" = "$p$b" ]; then
            same=$((same + 1))
        else
            say "$arch: '$p' continues differently:"$'\n'"  llama.cpp: $a"$'\n'"  clinfer:   $p$b"
            fail=1
        fi
    done
    echo "| $arch | $p1 | $p2 | $ratio | $same of ${#prompts[@]} |"
done
exit $fail
