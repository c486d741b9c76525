#!/usr/bin/env bash
# What each activation mode (--act) costs in quality and gains in speed, on one model and text:
#  1. the base: the reference backend with f32 activations (the exact products), saved with
#     `clinfer perplexity --kl-divergence-base`;
#  2. per mode (q8, f32-head, f32-ends, f32) on the OpenCL device: perplexity, mean and 99th
#     percentile KL divergence against the base, top-1 agreement, decode tokens/s
#     (`clinfer bench -p 0 -n 64`), and the greedy answer to the README's demo question;
#  3. a markdown table on stdout.
#
# usage: bench/activations.sh [-m MODEL] [-f TEXT] [-c 512] [--chunks 4] [--bin CLINFER]
# Defaults: the default model, /usr/share/common-licenses/GPL-3 (on every Debian machine),
# -c 512, 4 chunks, build/clinfer.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=""
text=/usr/share/common-licenses/GPL-3
ctx=512
chunks=4
bin=$root/build/clinfer
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift ;;
    -f) text=$2; shift ;;
    -c) ctx=$2; shift ;;
    --chunks) chunks=$2; shift ;;
    --bin) bin=$2; shift ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "activations: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
    shift
done
[ -n "$model" ] || model=$(bash "$root/tools/fetch_model.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
base=$work/base.kld
say() { echo "activations: $*" >&2; }

say "base: reference backend, f32 activations ($chunks chunks of $ctx; minutes)"
"$bin" perplexity -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" --reference --act f32 \
    --kl-divergence-base "$base" >"$work/base.txt" 2>"$work/base.err"
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

echo "| --act | PPL | PPL / PPL(base) | mean KLD | KLD 99% | same top | decode tok/s | demo answer |"
echo "|---|---|---|---|---|---|---|---|"
for act in q8 f32-head f32-ends f32; do
    say "$act"
    "$bin" perplexity -m "$model" -c "$ctx" --chunks "$chunks" --act "$act" \
        --kl-divergence-base "$base" --kl-divergence --json >"$work/$act.json" 2>/dev/null
    "$bin" bench -m "$model" -p 0 -n 64 -r 3 --act "$act" --json >"$work/$act.bench" 2>/dev/null
    answer=$("$bin" run -m "$model" --chat -p "What is the capital of France?" --temp 0 -n 16 \
        --act "$act" 2>/dev/null | head -1 | cut -c1-48)
    k=$work/$act.json
    printf '| %s | %.4f | %.4f | %.5f | %.4f | %.2f%% | %.1f | %s |\n' "$act" \
        "$(json "$k" "d['ppl']")" "$(json "$k" "d['kl_divergence']['ppl_ratio']")" \
        "$(json "$k" "d['kl_divergence']['mean']")" \
        "$(json "$k" "d['kl_divergence']['percentiles']['99']")" \
        "$(json "$k" "100 * d['kl_divergence']['same_top']")" \
        "$(json "$work/$act.bench" "d['tests'][0]['avg_ts']")" "$answer"
done
