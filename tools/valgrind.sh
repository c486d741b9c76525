#!/bin/bash
# valgrind memcheck on `clinfer run` with a tiny generated model, on the reference backend and on
# the first OpenCL device (PoCL here; once more with CLBlast's GEMM): fails on any memory error
# or "definitely lost" block.
# tools/valgrind.supp holds the only exceptions, each inside the OpenCL stack with no clinfer
# frame involved, each justified there.
# Usage: tools/valgrind.sh [BUILD_DIR] (default: build; needs clinfer and tests/write_tiny_model)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
clinfer=$build/clinfer
work=$(mktemp -d /tmp/clinfer-valgrind-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$build/tests/write_tiny_model" "$work/tiny.gguf"

failed=0
# check NAME ARGS...: runs clinfer ARGS under memcheck and prints one summary line.
check() {
  local name=$1 log="$work/$1.log" code=0
  shift
  valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --suppressions="$root/tools/valgrind.supp" --error-exitcode=99 --num-callers=40 \
    --log-file="$log" "$clinfer" "$@" >/dev/null 2>"$work/$name.stderr" || code=$?
  echo "valgrind $name:" \
    "$(grep -oE 'definitely lost: [0-9,]+ bytes in [0-9,]+ blocks|no leaks are possible' "$log")," \
    "$(grep -oE 'ERROR SUMMARY: .*' "$log" | tail -1);" \
    "$(grep -oE 'total heap usage: .*' "$log")"
  if [ "$code" -ne 0 ]; then
    echo "valgrind $name: clinfer exited $code; stderr:"
    cat "$work/$name.stderr"
    grep -vE '^==[0-9]+== (Memcheck|Copyright|Using|Command|Parent)' "$log"
    failed=1
  fi
}

check reference run -m "$work/tiny.gguf" --reference -p "hello world" -n 8
if "$clinfer" devices >/dev/null 2>&1; then
  check opencl run -m "$work/tiny.gguf" -p "hello world" -n 8
  # A prompt of more than 8 tokens is a GEMM per weight; forced through CLBlast, whose program
  # cache must be emptied before the context goes (matmul_cl.c).
  CLINFER_CLBLAST=1 check opencl-clblast run -m "$work/tiny.gguf" \
    -p "the same transformer runs on any vendor's device" -n 4
else
  echo "valgrind opencl: skipped (no OpenCL device)"
fi
exit "$failed"
