#!/usr/bin/env bash
# clinfer against llama.cpp at the layer shapes of real models (issue 16): random-weight GGUF
# files of Llama-3.2-1B, Qwen2.5-1.5B and Llama-3.2-3B's shapes, in the usual weight types, and
# one markdown table for docs/PERFORMANCE.md.
#
#  shape     arch   dim   layers  q / kv heads  head  FFN   rope base  (the models' config.json)
#  1b        llama  2048  16      32 / 8        64    8192  500000
#  1.5b      qwen2  1536  28      12 / 2        128   8960  1000000    q/k/v biases
#  3b        llama  3072  28      24 / 8        128   8192  500000
#  olmoe     olmoe  2048  16      16 / 16       128   1024  10000      64 experts, 8 per token
# (olmoe: OLMoE-1B-7B's, only where SHAPES names it: 6.9 B parameters, 1.3 B of them active per
# token; its Q4_K_M file is about 4 GB, written from a 13 GB F16 one.)
# All three tie the output matrix to the embedding, as bench/make_shape_model.py writes. The
# vocabulary is the default model's (SmolLM2, 49152 tokens), not the real 128256 / 151936: the
# layer stack is exact, the embedding / output matrix is smaller than the real model's (by about
# 160 M parameters at 1B and 1.5B, 240 M at 3B), so a real file reads that much more per token.
#
# Files: $SHAPE_DIR (default ~/.cache/clinfer/shapes, shared: reused when there, written under a
# temporary name and renamed) holds <shape>-<type>.gguf, shape llama1b, qwen1.5b or llama3b,
# type in lower case: the F16 one from bench/make_shape_model.py, the others from it by
# `llama-quantize` (its default mixes, as in published files of those names: Q4_K_M keeps some
# matrices in Q6_K, Q4_0 the tied embedding / output matrix).
#
# On each file, for $ROUNDS rounds that alternate which engine goes first:
#   llama.cpp  llama-bench -t $THREADS -p 64,512 -n 32 -r $REPS; its load time from llama-simple's
#              timing report; warm TTFT: the wall time of `llama-bench -p 16 -n 0 -r 1
#              --no-warmup` (load, 16-token prompt; process start and exit included)
#   clinfer    one `clinfer bench -p 0 -n 0 -r 1` that fills its kernel cache, as any earlier
#              run would; then clinfer bench --act q8 -p 512 -n 32, then -p 64 -n 0 (-r $REPS;
#              8-bit activations as llama.cpp's CPU backend); its load time and warm TTFT from
#              the wall time of `clinfer bench -p 0 -n 0 -r 1` (load, 16-token prompt, first
#              token)
# then once, cold: the file evicted from the page cache (posix_fadvise DONTNEED; needs no root,
# but cannot drop pages another process maps: the table's note says how much stayed) before each
# engine's TTFT process, and for clinfer an empty kernel cache ($CLINFER_CACHE_DIR), so that its
# OpenCL kernels are compiled. Cold therefore means: weights from disk, kernels from source.
# Peak RSS: the benchmark process's maximum resident set (wait4; what /usr/bin/time -v prints).
# Read roofline: bench/read_bandwidth.c, compiled here, sums a 1 GiB buffer with $THREADS threads
# after each round (the bandwidth left to us moves with the shared machine's load); % of roofline
# = decode t/s / (the rounds' median bandwidth / the file's weight bytes).
#
# The machine is shared: the load average is printed before and after, and only the ratios
# (median of the rounds' ratios) compare the two engines. Each file's figures also go to stderr
# as it finishes; `bench/real_shapes.py --table LOG BANDWIDTH THREADS REPS ROUNDS` makes the
# table of those from a saved stderr, should a run be cut short.
#
# usage: [SHAPES="1b 1.5b 3b"] [TYPES="F16 Q8_0 Q4_0 Q4_K_M Q6_K"] [ROUNDS=2] [REPS=2]
#        [THREADS=2] [CLINFER_BIN=...] bench/real_shapes.sh
# e.g. a quick run: SHAPES=1b TYPES="Q4_0 Q4_K_M" ROUNDS=1 REPS=1 bench/real_shapes.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ${1:-} in
-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
"") ;;
*) echo "real_shapes: no arguments, only the variables of --help" >&2; exit 1 ;;
esac
source "$root/bench/peer.sh"
shapes=${SHAPES:-1b 1.5b 3b}
types=${TYPES:-F16 Q8_0 Q4_0 Q4_K_M Q6_K}
rounds=${ROUNDS:-2}
reps=${REPS:-2}
threads=${THREADS:-2}
shape_dir=${SHAPE_DIR:-$HOME/.cache/clinfer/shapes}
say() { echo "real_shapes: $*" >&2; }

# make_shape_model.py's flags of each shape (header table)
shape_file() {
    case $1 in
    1b | llama1b) echo llama1b ;;
    1.5b | qwen1.5b) echo qwen1.5b ;;
    3b | llama3b) echo llama3b ;;
    olmoe | olmoe1b7b) echo olmoe1b7b ;;
    *) say "unknown shape '$1' (1b, 1.5b, 3b or olmoe)"; return 1 ;;
    esac
}
shape_flags() {
    case $1 in
    llama1b) echo --arch llama --dim 2048 --layers 16 --heads 32 --kv-heads 8 --ffn 8192 \
        --rope-base 500000 ;;
    qwen1.5b) echo --arch qwen2 --dim 1536 --layers 28 --heads 12 --kv-heads 2 --ffn 8960 \
        --rope-base 1000000 ;;
    llama3b) echo --arch llama --dim 3072 --layers 28 --heads 24 --kv-heads 8 --ffn 8192 \
        --rope-base 500000 ;;
    olmoe1b7b) echo --arch olmoe --dim 2048 --layers 16 --heads 16 --kv-heads 16 --ffn 1024 \
        --experts 64,8 --rope-base 10000 ;;
    esac
}

peer_build
clinfer_build
[ -x "$peer_venv/bin/python" ] ||
    { say "no venv with gguf at $peer_venv (tools/gguf_venv.sh makes it)"; exit 1; }

# ---- model files --------------------------------------------------------------------------
mkdir -p "$shape_dir"
files=()
for s in $shapes; do
    name=$(shape_file "$s")
    f16="$shape_dir/$name-f16.gguf"
    if [ ! -s "$f16" ]; then
        say "writing $f16"
        # shellcheck disable=SC2046 # the flags are words
        "$peer_venv/bin/python" "$root/bench/make_shape_model.py" "$f16.tmp.$$" --type F16 \
            --name "$name-shape" $(shape_flags "$name") >&2
        mv "$f16.tmp.$$" "$f16"
    fi
    for t in $types; do
        f="$shape_dir/$name-${t,,}.gguf"
        if [ ! -s "$f" ]; then
            say "quantizing $f"
            "$peer_bin/llama-quantize" "$f16" "$f.tmp.$$" "$t" "$threads" >"$f.log.$$" 2>&1 ||
                { say "llama-quantize failed; see $f.log.$$"; exit 1; }
            mv "$f.tmp.$$" "$f"
            rm -f "$f.log.$$"
        fi
        files+=("$f")
    done
done

# ---- the read roofline, then both engines -------------------------------------------------
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cc -O2 -march=native -pthread "$root/bench/read_bandwidth.c" -o "$scratch/read_bandwidth"
if [ -n "${CLINFER_BIN:-}" ]; then
    built="CLINFER_BIN=$CLINFER_BIN"
else
    built="commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD ||
        echo ' + local changes')"
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average before: $load_before"
PYTHONPATH=$root/bench "$peer_venv/bin/python" "$root/bench/real_shapes.py" "$clinfer" \
    "$peer_bin" "$scratch/read_bandwidth" "$threads" "$reps" "$rounds" "${files[@]}"
echo
echo "clinfer: $built; load average (1, 5, 15 min) before: $load_before, after:" \
    "$(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
