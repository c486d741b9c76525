#!/bin/bash
# Runs a command on Mesa's rusticl alone, its llvmpipe device (a CPU device that no one here
# wrote: label rusticl, tests/rusticl.cmake): the ICD loader is given rusticl's ICD only, so the
# device is index 0 and the default. Exits 77 (skipped) where rusticl is not installed (Debian
# packages mesa-opencl-icd, libclc-15, libllvmspirvlib15) or lists no device.
#
# usage: rusticl_run.sh COMMAND [ARGS...]
set -uo pipefail
icd=${CLINFER_RUSTICL_ICD:-/etc/OpenCL/vendors/rusticl.icd}
if [ ! -r "$icd" ]; then
    echo "rusticl is not installed (no $icd; Debian package mesa-opencl-icd): skipped"
    exit 77
fi
export OCL_ICD_VENDORS=$icd RUSTICL_ENABLE=${RUSTICL_ENABLE:-swrast}
if command -v clinfo >/dev/null 2>&1 && ! clinfo -l 2>/dev/null | grep -q 'Device #'; then
    echo "rusticl lists no device (RUSTICL_ENABLE=$RUSTICL_ENABLE; libclc-15 and libllvmspirvlib15 installed?): skipped"
    exit 77
fi
"$@"
