#!/bin/sh
# Load time, time to first token and peak memory: whole processes that load a model and make one
# token, run in turns (ROUNDS rounds of each program in order, so a busy machine weighs on all
# alike), with the median of each figure.
#   bench/load_first_token.sh MODEL.gguf [CLINFER_BIN ...]
# Each clinfer binary runs `run -m MODEL -n 1 -p hi`; llama.cpp's llama-simple (LLAMA_BIN_DIR,
# default the cached build) runs `-m MODEL -n 1 hi`. Printed per program: whole-process wall
# seconds; load_ms, the load before the first forward pass, and first_ms, that pass (clinfer's
# "load" and "prefill"; llama.cpp's "load time" less its first "eval time", and that eval time),
# whose sum is the time to first token; peak RSS in MiB. COLD=1 gives every clinfer run an empty kernel
# cache (CLINFER_CACHE_DIR in a temp dir) to time first starts.
set -eu
model=$1
shift
[ $# -gt 0 ] || set -- build/clinfer
rounds=${ROUNDS:-5}
llama=${LLAMA_BIN_DIR:-/root/.cache/clinfer/llama.cpp/build/bin}/llama-simple
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for bin in "$@" "$llama"; do
    n=$((n + 1))
    echo "$bin" > "$tmp/name.$n"
done
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    i=0
    for bin in "$@" "$llama"; do
        i=$((i + 1))
        out=$tmp/out.$i.$r
        if [ "$bin" = "$llama" ]; then
            /usr/bin/time -f 'TIME %e %M' "$bin" -m "$model" -n 1 hi > "$out" 2>&1
            # its "load time" runs to the end of the first decode, timed as "eval time"
            first=$(sed -n 's/.*llama_perf_context_print: *eval time = *\([0-9.]*\) ms.*/\1/p' "$out")
            load=$(sed -n 's/.*llama_perf_context_print: *load time = *\([0-9.]*\) ms.*/\1/p' "$out" |
                awk -v f="$first" '{print $1 - f}')
        else
            cache=""
            [ "${COLD:-0}" = 1 ] && cache=$(mktemp -d "$tmp/cache.XXXXXX")
            CLINFER_CACHE_DIR=$cache /usr/bin/time -f 'TIME %e %M' "$bin" run -m "$model" -n 1 \
                -p hi > "$out" 2>&1
            load=$(sed -n 's/.*clinfer: load \([0-9]*\) ms.*/\1/p' "$out")
            first=$(sed -n 's/.*prefill .*(1 tokens, \([0-9]*\) ms).*/\1/p' "$out")
        fi
        sed -n 's/^TIME \([0-9.]*\) \([0-9]*\)$/\1 \2/p' "$out" |
            awk -v l="${load:-nan}" -v f="${first:-nan}" '{print $1, l, f, $2 / 1024}' \
                >> "$tmp/fig.$i"
    done
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-45s %8s %8s %8s %8s\n' program wall_s load_ms first_ms rss_MiB
i=0
while [ "$i" -lt "$n" ]; do
    i=$((i + 1))
    f=$tmp/fig.$i
    printf '%-45s %8s %8s %8s %8.0f\n' "$(cat "$tmp/name.$i")" "$(cut -d' ' -f1 "$f" | median)" \
        "$(cut -d' ' -f2 "$f" | median)" "$(cut -d' ' -f3 "$f" | median)" \
        "$(cut -d' ' -f4 "$f" | median)"
done
