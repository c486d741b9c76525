#!/bin/bash
# clinfer serve under load, beside llama-server where built: aggregate generated tokens/s and
# p50/p95 time to first token at 1, 4 and 8 concurrent streams (bench/serve_load.py), the same
# model, 8 slots of CTX tokens each, greedy chat completions of MAX_TOKENS tokens.
# llama-server comes from the llama.cpp build of bench/peer.sh (cmake --build BUILD --target
# llama-server); skipped with a note where it is not there.
# --schema ROUNDS: clinfer serve alone, at 1 and 8 streams, ROUNDS rounds of free text
# alternated with as many constrained by a JSON schema (response_format), and the ratio of
# their tokens/s (serve_load.py --schema).
# Usage: bench/serve_load.sh [--bin build/clinfer] [-m MODEL] [-n MAX_TOKENS] [-r PER_CLIENT]
#                            [-c CTX] [--schema ROUNDS] [-- clinfer serve options...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/peer.sh
source "$here/peer.sh"
clinfer=$here/../build/clinfer
model=${CLINFER_MODEL:-$HOME/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf}
max_tokens=64 per_client=2 ctx=1024 slots=8 schema=
while [ $# -gt 0 ]; do
    case $1 in
    --bin) clinfer=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    -n) max_tokens=$2; shift 2 ;;
    -r) per_client=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    --schema) schema=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "serve_load.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
log=$(mktemp /tmp/clinfer-serve-load-XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$log"' EXIT

# wait_health URL: until /health answers 200 (the model is loaded), at most 10 minutes
wait_health() {
    for _ in $(seq 6000); do
        curl -sf "$1/health" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
        sleep 0.1
    done
    return 1
}

stop_server() { # SIGTERM, and wait for it to answer what is in flight and exit
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

run_load() { # NAME PORT
    echo "== $1: $(basename "$model"), $slots slots of $ctx tokens, $max_tokens tokens per" \
        "request, $per_client requests per stream; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ -n "$schema" ]; then
        python3 "$here/serve_load.py" "$2" "$max_tokens" "$per_client" --schema "$schema" 1 8
    else
        python3 "$here/serve_load.py" "$2" "$max_tokens" "$per_client" 1 4 8
    fi
}

"$clinfer" serve -m "$model" --port 0 -np "$slots" -c "$ctx" -q "$@" 2>"$log" &
pid=$!
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
done
wait_health "http://127.0.0.1:$port"
run_load "clinfer serve" "$port"
stop_server

if [ -n "$schema" ]; then
    exit 0
elif [ -x "$peer_bin/llama-server" ]; then
    port=$((20000 + RANDOM % 20000))
    # llama-server divides -c among its slots
    "$peer_bin/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -np "$slots" \
        -c $((ctx * slots)) -t 2 >"$log" 2>&1 &
    pid=$!
    wait_health "http://127.0.0.1:$port"
    run_load "llama-server (CPU, 2 threads)" "$port"
    stop_server
else
    echo "== llama-server: not built ($peer_bin/llama-server); skipped"
fi
