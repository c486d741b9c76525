#!/bin/bash
# `clinfer info -m F` and `clinfer run -m F -p hi -n 1` on every bad GGUF file (the reader's
# corpus from test_gguf_corpus and the lying models from test_hostile_model): each must exit
# with status 1 (not a signal) and print exactly one line on stderr.
# Usage: test_hostile_cli.sh CLINFER TEST_GGUF_CORPUS TEST_HOSTILE_MODEL
set -u
clinfer=$1
dir=$(mktemp -d /tmp/clinfer-hostile-cli-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$2" "$dir" >/dev/null || { echo "FAILED: $2 $dir"; exit 1; }
"$3" "$dir" >/dev/null || { echo "FAILED: $3 $dir"; exit 1; }

files=0 failures=0
for f in "$dir"/*.gguf; do
  files=$((files + 1))
  for cmd in "info -m $f" "run -m $f -p hi -n 1"; do
    # shellcheck disable=SC2086 # the command's words split on purpose
    "$clinfer" $cmd </dev/null >/dev/null 2>"$dir/stderr"
    code=$?
    lines=$(wc -l <"$dir/stderr")
    if [ "$code" -ne 1 ] || [ "$lines" -ne 1 ]; then
      echo "FAILED: clinfer $cmd exited $code with $lines stderr lines:"
      cat "$dir/stderr"
      failures=$((failures + 1))
    fi
  done
done
echo "test_hostile_cli: $files files, 2 commands each, $failures failed"
[ "$files" -ge 80 ] && [ "$failures" -eq 0 ]
