#!/usr/bin/env bash
# clinfer serve's /v1/embeddings against llama-server --embeddings --pooling mean on the same
# model ($CLINFER_MODEL): both return each text's mean-pooled hidden states scaled to length 1;
# prints the cosine similarity of the two vectors of each text, and fails (exit 1) below 0.999.
# (They are not identical: llama.cpp rounds every matmul's input to 8 bits on quantized weights,
# clinfer's default activations for a model under 1B parameters are f32; SmolLM2-135M Q4_1
# measured 0.9997 to 0.9999.)
#   bench/embeddings_compare.sh [--bin CLINFER] [clinfer serve options, e.g. --reference]
# Exit 77 without the model, the peer's llama-server (bench/peer.sh) or python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
clinfer=$root/build/clinfer
if [ "${1:-}" = --bin ]; then
    clinfer=$2
    shift 2
fi
say() { echo "embeddings_compare: $*" >&2; }
model=${CLINFER_MODEL:-}
[ -n "$model" ] && [ -f "$model" ] || { say "skipped: set CLINFER_MODEL"; exit 77; }
[ -x "$peer_bin/llama-server" ] || { say "skipped: $peer_bin/llama-server is not built"; exit 77; }
command -v python3 >/dev/null || { say "skipped: no python3"; exit 77; }

python3 - "$root/bench" "$model" "$peer_bin/llama-server" "$clinfer" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from peer_server import post, serving
model, server, clinfer, extra = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
texts = ["The capital of France is Paris.", "hello",
         "Water boils at one hundred degrees Celsius at sea level, and at a lower temperature on "
         "a mountain, because the air pressure there is lower."]

def vectors(cmd):
    with serving(cmd) as url:
        return [d["embedding"] for d in post(url, "/v1/embeddings", {"input": texts})["data"]]

peer = vectors([server, "-m", model, "--embeddings", "--pooling", "mean", "-c", "512"])
ours = vectors([clinfer, "serve", "-m", model, "-c", "512", "-q"] + extra)
worst = 1.0
for t, a, b in zip(texts, peer, ours):
    cos = sum(x * y for x, y in zip(a, b)) / (sum(x * x for x in a) * sum(y * y for y in b)) ** .5
    worst = min(worst, cos if len(a) == len(b) else -1)
    print(f"cosine {cos:.6f} ({len(b)} values; llama-server {len(a)}): {t[:40]}")
sys.exit(0 if worst >= 0.999 else 1)
PY
