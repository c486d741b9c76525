#!/usr/bin/env bash
# clinfer chat on the default model: Ctrl-C (SIGINT) during a long answer stops that answer, and
# the session goes on to answer the next message; Ctrl-C at the prompt then ends it with exit 0.
# Answers are capped at 256 tokens: where the first answer stops varies, and with it the second
# answer, which at temp 0 can loop without end.
# usage: test_chat_interrupt.sh CLINFER   (the model: $CLINFER_MODEL; exit 77 without it)
set -uo pipefail
clinfer=$1
model=${CLINFER_MODEL:-}
[ -n "$model" ] && [ -f "$model" ] || { echo "skipped: no CLINFER_MODEL"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/in"
"$clinfer" chat -m "$model" -q -c 4096 -n 256 --temp 0 <"$dir/in" >"$dir/out" 2>"$dir/err" &
pid=$!
exec 3>"$dir/in"
echo "Tell me a very long story about dragons, with many chapters." >&3
for _ in $(seq 1200); do # the answer has begun (up to 60 s: a cold kernel cache compiles first)
    [ "$(stat -c %s "$dir/out")" -gt 20 ] && break
    sleep 0.05
done
kill -INT "$pid"
# The answer has stopped once its message is out (its line's end is printed first); on a loaded
# machine that can take seconds, and output read before it would count as the second answer's.
for _ in $(seq 600); do
    grep -q "answer stopped" "$dir/err" && break
    sleep 0.1
done
stopped_at=$(stat -c %s "$dir/out")
echo "What is 2+2?" >&3
last=-1
still=0
ended=0
for _ in $(seq 240); do # the second answer has ended: output that has not grown for 3 s, ending a line
    size=$(stat -c %s "$dir/out")
    if [ "$size" -gt "$stopped_at" ] && [ "$size" -eq "$last" ] &&
        [ "$(tail -c 1 "$dir/out" | od -An -tx1 | tr -d ' ')" = 0a ]; then
        still=$((still + 1))
        [ "$still" -lt 6 ] || { ended=1; break; }
    else
        still=0
    fi
    last=$size
    sleep 0.5
done
kill -INT "$pid" # at the prompt: quits
exec 3>&-
wait "$pid"
rc=$?
fail=0
[ "$ended" -eq 1 ] || { echo "FAILED: the second answer did not end within 120 s"; fail=1; }
[ "$rc" -eq 0 ] || { echo "FAILED: chat exited $rc"; fail=1; }
grep -q "answer stopped (Ctrl-C)" "$dir/err" || { echo "FAILED: no 'answer stopped'"; fail=1; }
[ "$(grep -c "answer stopped" "$dir/err")" -eq 1 ] || { echo "FAILED: stopped twice?"; fail=1; }
[ "$(stat -c %s "$dir/out")" -gt "$((stopped_at + 2))" ] ||
    { echo "FAILED: the second question got no answer"; fail=1; }
echo "--- stdout (tail)"; tail -c 300 "$dir/out"; echo "--- stderr"; cat "$dir/err"
exit $fail
