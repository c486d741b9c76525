#!/bin/sh
# Load time and peak RSS with the weight cache (backends/opencl/weight_cache_cl.c), in turns:
#   bench/weight_cache_load.sh MODEL.gguf OLD_CLINFER NEW_CLINFER
# Per round, in this order: OLD (a build without the cache), NEW with CLINFER_WEIGHT_CACHE=0,
# NEW mapping its cache file (written by a first load before the rounds, timed as "first"), and
# llama.cpp's llama-simple (LLAMA_BIN_DIR, default the cached build). clinfer's load_ms is from
# `bench -p 0 -n 0 -r 1 --json` (which then evaluates its first-token prompt: the RSS includes
# every weight page read), llama.cpp's from llama-simple's "load time" line (bench/real_shapes.py's
# method). The weight cache goes to a temp CLINFER_CACHE_DIR whose kernel binaries link to the
# usual cache, removed at the end. Prints each run, then the median per program.
set -eu
model=$1
old=$2
new=$3
rounds=${ROUNDS:-3}
llama=${LLAMA_BIN_DIR:-/root/.cache/clinfer/llama.cpp/build/bin}/llama-simple
kernels=${CLINFER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/clinfer}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/cache"
for f in "$kernels"/*.clbin; do ln -s "$f" "$tmp/cache/"; done
prompt="The quick brown fox jumps over the lazy dog while the old cat sleeps on the warm mat"

# one clinfer run: prints "load_ms rss_mib"
clinfer_run() {
    CLINFER_CACHE_DIR=$tmp/cache /usr/bin/time -f 'RSS %M' "$@" bench -m "$model" -p 0 -n 0 \
        -r 1 --json > "$tmp/out" 2>&1
    load=$(sed -n 's/.*"load_ms":[[:space:]]*\([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
    rss=$(sed -n 's/^RSS \([0-9]*\)$/\1/p' "$tmp/out")
    echo "${load:-nan} $((rss / 1024))"
}

llama_run() {
    /usr/bin/time -f 'RSS %M' "$llama" -m "$model" -n 1 "$prompt" > "$tmp/out" 2>&1
    load=$(sed -n 's/.*load time = *\([0-9.]*\) ms.*/\1/p' "$tmp/out" | head -1)
    rss=$(sed -n 's/^RSS \([0-9]*\)$/\1/p' "$tmp/out")
    echo "${load:-nan} $((rss / 1024))"
}

echo "first (writes the cache): $(clinfer_run "$new")"
echo "cache file: $(ls -l "$tmp"/cache/weights-*.clw | awk '{print $5}') bytes"
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    echo "round $r, load average $(cut -d' ' -f1 /proc/loadavg)"
    echo "old $(clinfer_run "$old")" | tee -a "$tmp/fig"
    echo "nocache $(CLINFER_WEIGHT_CACHE=0 clinfer_run "$new")" | tee -a "$tmp/fig"
    echo "cached $(clinfer_run "$new")" | tee -a "$tmp/fig"
    echo "llama $(llama_run)" | tee -a "$tmp/fig"
done
for p in old nocache cached llama; do
    load=$(grep "^$p " "$tmp/fig" | awk '{print $2}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    rss=$(grep "^$p " "$tmp/fig" | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    echo "median $p: load $load ms, peak RSS $rss MiB"
done
