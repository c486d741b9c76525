#!/usr/bin/env bash
# Gemma 3 270M (Q4_K_M, $CLINFER_GEMMA3_MODEL) against llama.cpp's llama-simple, greedy, 32 tokens
# on the prompts of tests/gemma3_greedy.txt (tests/test_gemma3.c compares clinfer with the texts
# recorded there). llama-simple runs on the file's F32 dequantization (clinfer quantize ... F32
# --allow-requantize: the same weights), where its matmuls take f32 activations; clinfer runs
# the Q4_K_M file with --act f32, the same exact products. (On the Q4_K_M file llama.cpp rounds
# every matmul's input to 8 bits, in blocks of 256 for the K-quant weights, clinfer in blocks
# of 32: the texts part after a few tokens on some prompts.)
#   bench/gemma3_greedy.sh [--bin CLINFER]          compare live: exit 1 when a text differs
#   bench/gemma3_greedy.sh [--bin CLINFER] --write  record llama-simple's texts in the fixture
# Exit 77 without the model, the peer's llama-simple (bench/peer.sh) or python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
clinfer=$root/build/clinfer
fixture=$root/tests/gemma3_greedy.txt
write=0
while [ $# -gt 0 ]; do
    case $1 in
    --bin) clinfer=$2; shift ;;
    --write) write=1 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gemma3_greedy: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
say() { echo "gemma3_greedy: $*" >&2; }
model=${CLINFER_GEMMA3_MODEL:-}
[ -n "$model" ] && [ -f "$model" ] || { say "skipped: set CLINFER_GEMMA3_MODEL"; exit 77; }
[ -x "$peer_bin/llama-simple" ] || { say "skipped: $peer_bin/llama-simple is not built"; exit 77; }
command -v python3 >/dev/null || { say "skipped: no python3"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The fixture's prompts, one file each (values are escaped: \n, \t, \\).
python3 - "$fixture" "$work" <<'PY'
import sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("prompt "):
        text = line[7:].rstrip("\n").encode().decode("unicode_escape").encode("latin-1").decode()
        open("%s/prompt%d" % (sys.argv[2], n), "w", encoding="utf-8").write(text)
        n += 1
PY
"$clinfer" quantize "$model" "$work/f32.gguf" F32 --allow-requantize >/dev/null 2>&1 ||
    { say "clinfer quantize to F32 failed"; exit 1; }
fail=0
for p in "$work"/prompt*; do
    i=${p##*prompt}
    text=$(cat "$p")
    # llama-simple echoes <bos> and the prompt before the continuation
    "$peer_bin/llama-simple" -m "$work/f32.gguf" -n 32 "$text" 2>/dev/null >"$work/peer$i"
    python3 - "$work/peer$i" "$p" "$work/expect$i" <<'PY'
import sys
out = open(sys.argv[1], encoding="utf-8").read()
prefix = "<bos>" + open(sys.argv[2], encoding="utf-8").read()
if not out.startswith(prefix):
    sys.exit("llama-simple did not echo the prompt")
open(sys.argv[3], "w", encoding="utf-8").write(out[len(prefix):].removesuffix("\n"))  # its last line end
PY
    if [ $write = 0 ]; then
        "$clinfer" run -m "$model" -p "$text" -n 32 --temp 0 --act f32 -q 2>/dev/null >"$work/ours$i"
        printf '\n' >>"$work/expect$i" # as clinfer run ends its text
        if cmp -s "$work/expect$i" "$work/ours$i"; then
            say "prompt $i: the same text"
        else
            say "prompt $i differs:"$'\n'"  llama.cpp: $(cat "$work/expect$i")"$'\n'"  clinfer:   $(cat "$work/ours$i")"
            fail=1
        fi
    fi
done
if [ $write = 1 ]; then
    python3 - "$fixture" "$work" <<'PY'
import sys
def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
lines, n = [], 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("expect "):
        continue
    lines.append(line)
    if line.startswith("prompt "):
        lines.append("expect " + esc(open("%s/expect%d" % (sys.argv[2], n), encoding="utf-8").read()) + "\n")
        n += 1
open(sys.argv[1], "w", encoding="utf-8").write("".join(lines))
PY
    say "wrote $fixture"
fi
exit $fail
