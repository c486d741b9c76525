#!/usr/bin/env bash
# Each architecture's forward pass against llama.cpp's, without downloading a model: a small
# random-weight GGUF per architecture (bench/make_shape_model.py, the default model's tokenizer,
# weights of std 0.3 so that the distributions are sharp and any difference shows), then
#   - perplexity of both tools on the same text (llama-perplexity and clinfer perplexity with
#     f32 activations, -c 128, 4 chunks): within 1e-3 of each other;
#   - greedy continuations of three prompts (16 tokens): llama-server's, fed to clinfer token by
#     token (bench/greedy_compare.py with bench/teacher_force), must be clinfer's choice at every
#     step but a tie (llama.cpp's two best within 0.1 in log-probability, clinfer choosing the
#     other as near to its best), and clinfer run --temp 0 must print the same text up to a tie;
#   - clinfer verify (OpenCL against the reference backend, op by op) within its bounds.
# The peer is the llama.cpp build of bench/compare_llamacpp.sh ($CLINFER_BENCH_CACHE or
# ~/.cache/clinfer/llama.cpp); the gguf package comes from a venv made there once (PyPI gguf
# 0.19.0 and numpy). Exit 77 without the peer or the venv; 1 when an architecture differs.
#
# gemma3 gets a sliding window of 16 on every other layer (sliding_window_pattern 2), so that the
# perplexity chunks of 128 tokens run past it on its local layers. llama3 is llama with Llama
# 3.2's rotation (a rope_freqs tensor for rope_scaling factor 32, low_freq_factor 1,
# high_freq_factor 4) scaled down with the model: original context 64, so that its three kinds
# of pairs all turn within the texts; its greedy texts are 32 tokens, on each kernel path. So are
# those of qwen2-yarn (YaRN, factor 4 over an original context of 64) and of phi3-longrope
# (longrope's tables with the converter's attn_factor, original context 64: both tools take the
# long table, llama-server's context being 256, which clinfer is given too) and
# phi3-longrope-short (original context 256: the short table throughout).
# gemma2, smollm3, granite, olmo2 and olmo2-swa (OLMo 3's window on every other layer) take
# 32-token greedy texts on each kernel path too, and 8-bit activations on both sides beside:
# the file's Q4_K copy (`llama-quantize --pure`: llama.cpp rounds x for it per 256 with an f32
# scale, as clinfer --act q8 does; its Q8_0 x takes an f16 scale, which clinfer's does not),
# whose `clinfer verify --act q8` is checked, and whose perplexity ratio and greedy texts are
# told but not checked: each rounding that lands on the other side of a step between the two
# tools (sums of another order, in some 1e-5 of the values) grows through these random layers,
# so the 8-bit texts part after some 5-25 tokens and the perplexities lie 1e-3 to 1e-2 apart,
# as far as either is from its own f32 run. gemma2's soft-caps are 20 and 8 (the scores and
# logits of these weights reach them; its files say 50 and 30); granite's embedding and residual
# scales are Granite 3.x 8B's (12, 0.22), its attention scale 1/64 (heads of 64 here, 8B's 1/128
# for heads of 128) and its logit scale 4 (8B's 16 would flatten these logits to near ties);
# smollm3 has 4 layers, so that its last does not rotate. The mixtures of experts the same way
# (F32 checked, their Q4_K copy told): qwen3moe (8 experts, 2 per token, renormalised gates),
# olmoe (8, 4, the softmax's gates; as many KV heads as heads: llama.cpp's olmoe takes a k norm
# of n_embd) and mixtral (llama's files with experts: 8, 2). gpt-oss likewise (8 experts, 4 per
# token, the softmax of the chosen; heads of 96, so that q's 384 exceed n_embd as 64 x 64 exceed
# 2880 in gpt-oss-20b; YaRN x32 over an original context of 64, rope base 150000, the window of
# 16 on layer 0): its F32 file checked, its copy as llama-quantize's MXFP4_MOE writes it told
# (MXFP4 experts, Q8_0 elsewhere, which both tools run with 8-bit x), with its clinfer verify
# checked. Its greedy tokens are compared over an f32 KV cache on both sides (llama-server -ctk
# f32 -ctv f32 -fa off): over f16 ones one step of 'Once upon a time' lay 0.109 apart in
# log-probability, past a tie, where the f16 rounding of K and V moved a near-even expert choice.
#
# usage: bench/crosscheck_archs.sh [--bin CLINFER] [--force TEACHER_FORCE] [ARCH...]
#        (ARCHs: llama qwen2 qwen3 phi3 gemma3 llama3 qwen2-yarn phi3-longrope
#         phi3-longrope-short gemma2 smollm3 granite olmo2 olmo2-swa qwen3moe olmoe mixtral
#         gpt-oss)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
peer=$peer_bin
venv=$peer_venv
clinfer=$root/build/clinfer force=$root/build/teacher_force
archs=()
while [ $# -gt 0 ]; do
    case $1 in
    --bin) clinfer=$2; shift ;;
    --force) force=$2; shift ;;
    -h | --help) sed -n '2,49p' "$0"; exit 0 ;;
    *) archs+=("$1") ;;
    esac
    shift
done
[ ${#archs[@]} -gt 0 ] ||
    archs=(llama qwen2 qwen3 phi3 gemma3 llama3 qwen2-yarn phi3-longrope phi3-longrope-short
        gemma2 smollm3 granite olmo2 olmo2-swa qwen3moe olmoe mixtral gpt-oss)
say() { echo "crosscheck_archs: $*" >&2; }
for tool in llama-perplexity llama-server llama-simple llama-quantize; do
    [ -x "$peer/$tool" ] || { say "skipped: $peer/$tool is not built"; exit 77; }
done
"$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null ||
    { say "skipped: no venv with gguf and numpy at $venv (tools/gpu_check.sh makes it)"; exit 77; }
text=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prompts=("The quick brown fox" "Once upon a time" "def main():")

fail=0
echo "| arch | PPL llama.cpp | PPL clinfer | ratio | greedy texts equal | 8-bit PPL ratio |" \
    "8-bit texts equal | verify |"
echo "|---|---|---|---|---|---|---|---|"
for arch in "${archs[@]}"; do
    model=$work/$arch.gguf
    shape=(--arch "$arch") n_gen=16 paths=("") run=() layers=2 q8=0 kv=2 kv_type=f16
    q8_type=Q4_K_M q8_pure=--pure # llama-quantize's type for the 8-bit copy, and its --pure
    case $arch in
    llama3) shape=(--arch llama --rope-llama3 32,1,4,64) ;;
    qwen2-yarn) shape=(--arch qwen2 --rope-yarn 4,64) ;;
    phi3-longrope) shape=(--arch phi3 --rope-longrope 64) run=(-c 256) ;;
    phi3-longrope-short) shape=(--arch phi3 --rope-longrope 256) run=(-c 256) ;;
    gemma2 | granite | olmo2) q8=1 ;;
    smollm3) q8=1 layers=4 ;;
    olmo2-swa) shape=(--arch olmo2 --swa) q8=1 ;;
    qwen3moe) shape=(--arch qwen3moe --experts 8,2) q8=1 ;;
    olmoe) shape=(--arch olmoe --experts 8,4) q8=1 kv=4 ;;
    mixtral) shape=(--arch llama --experts 8,2) q8=1 ;;
    gpt-oss)
        shape=(--arch gpt-oss --experts 8,4 --head-dim 96 --rope-base 150000 --rope-yarn 32,64)
        q8=1 q8_type=MXFP4_MOE q8_pure= kv_type=f32 ;;
    esac
    [ "${shape[1]}" = "$arch" ] && [ $q8 = 0 ] || n_gen=32 paths=(cpu-rows gpu-local-reduce)
    "$venv/bin/python" "$root/bench/make_shape_model.py" "$model" "${shape[@]}" --type F32 \
        --dim 256 --layers $layers --heads 4 --kv-heads $kv --ffn 512 --ctx 512 --std 0.3 --seed 1 \
        --window 16 --swa-pattern 2 --softcaps 20,8 --granite-scales 4,0.22,12,0.015625 \
        2>"$work/make.log" || { cat "$work/make.log" >&2; exit 1; }
    p1=$(ppl_peer "$model" "$text" 128 4) p2=$(ppl_clinfer "$model" "$text" 128 4 --act f32)
    ratio=$(python3 -c "import sys; print('%.6f' % (float(sys.argv[2]) / float(sys.argv[1])))" \
        "${p1/-/nan}" "${p2/-/nan}")
    python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - 1) > 1e-3)" "$ratio" ||
        { say "$arch: perplexities differ: llama.cpp $p1, clinfer $p2"; fail=1; }
    ctx=0
    [ ${#run[@]} = 0 ] || ctx=${run[1]}
    paths_arg=$(IFS=,; echo "${paths[*]}")
    read -r same texts ties < <(python3 "$root/bench/greedy_compare.py" "$peer/llama-server" \
        "$force" "$clinfer" "$model" $ctx $n_gen "$paths_arg" $kv_type "${prompts[@]}" || true)
    [ "${same:-0}" = "${texts:-}" ] || fail=1
    # the Q4_K copy with 8-bit activations on both sides, told but not checked: see the header
    scored=$model scored_act=f32 q8_ratio=- q8_same=- # the file verify runs, and its activations
    if [ $q8 = 1 ]; then
        scored=$work/$arch-$q8_type.gguf scored_act=q8 q8_same=0
        "$peer/llama-quantize" ${q8_pure:+"$q8_pure"} "$model" "$scored" "$q8_type" \
            >"$work/make.log" 2>&1 ||
            { cat "$work/make.log" >&2; exit 1; }
        q1=$(ppl_peer "$scored" "$text" 128 4) q2=$(ppl_clinfer "$scored" "$text" 128 4 --act q8)
        q8_ratio=$(python3 -c "import sys; print('%.6f' % (float(sys.argv[2]) / float(sys.argv[1])))" \
            "${q1/-/nan}" "${q2/-/nan}")
        for p in "${prompts[@]}"; do
            a=$("$peer/llama-simple" -m "$scored" -n 32 "$p" 2>/dev/null | head -c 4096)
            b=$("$clinfer" run -m "$scored" -p "$p" -n 32 --temp 0 --act q8 -q 2>/dev/null |
                head -c 4096)
            [ "$a" != "$p$b" ] || q8_same=$((q8_same + 1))
        done
        q8_same="$q8_same of 3"
    fi
    verified=passed
    "$clinfer" verify -m "$scored" -n 40 --act $scored_act >"$work/verify.log" 2>&1 || {
        verified=failed fail=1
        say "$arch: clinfer verify failed:"
        tail -n 20 "$work/verify.log" >&2
    }
    echo "| $arch | $p1 | $p2 | $ratio | ${same:-0} of ${texts:-?} (${ties:-?} ties) | $q8_ratio | $q8_same | $verified |"
done
exit $fail
