#!/bin/bash
# A split's decode speed against its layers' on their devices alone (issue 47's goal: a split's
# time per token at most 10% above the sum of its layers' times on their devices alone), on two
# PoCL devices (POCL_DEVICES="pthread pthread", both on all of this machine's cores):
# bench/bench_split.c decodes on device 0, on device 1 and split across both in turn, a token
# each, so that the machine's load falls on all three alike; see its comment for the figure.
#
# usage: bench/split_decode.sh [BUILD [MODEL [ROUNDS [STEPS]]]]
#   BUILD  the build folder (default build; bench_split is its tests/ target); MODEL default
#   $CLINFER_MODEL; ROUNDS default 8; STEPS tokens per round of each (default 32)
set -euo pipefail
build=${1:-build}
model=${2:-${CLINFER_MODEL:?no MODEL given and CLINFER_MODEL unset}}
export POCL_DEVICES="pthread pthread"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tests/bench_split" "$model" "${3:-8}" "${4:-32}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
