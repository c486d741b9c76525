#!/usr/bin/env bash
# The default model on Mesa's rusticl (label rusticl): `clinfer verify -n 20` (a prompt of 19
# tokens, past the 16-column batch path that once computed garbage there, then a decode step),
# and the greedy answer to the README's question equal to PoCL's, token for token.
# usage: rusticl_model.sh CLINFER   (the model: $CLINFER_MODEL; exit 77 without it or without
# rusticl)
set -uo pipefail
clinfer=$1
model=${CLINFER_MODEL:-}
[ -n "$model" ] && [ -f "$model" ] || { echo "skipped: no CLINFER_MODEL"; exit 77; }
run=$(dirname "${BASH_SOURCE[0]}")/rusticl_run.sh
ask=(run -m "$model" --chat -p "What is the capital of France?" -n 16 --temp 0 -q)
bash "$run" "$clinfer" verify -m "$model" -n 20
rc=$?
[ "$rc" -eq 0 ] || exit "$rc" # 77 passes through: rusticl is not there
pocl=$(OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd "$clinfer" "${ask[@]}" 2>/dev/null) ||
    { echo "FAILED: the answer on PoCL"; exit 1; }
rusticl=$(bash "$run" "$clinfer" "${ask[@]}" 2>/dev/null) ||
    { echo "FAILED: the answer on rusticl"; exit 1; }
echo "PoCL:    $pocl"
echo "rusticl: $rusticl"
[ "$pocl" = "$rusticl" ] || { echo "FAILED: the greedy answers differ"; exit 1; }
