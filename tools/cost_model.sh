#!/usr/bin/env bash
# The cost model you can run without a GPU (issue 46, item 7): the kernels of a decode step's
# ops run once each under Oclgrind with tools/cost_model_plugin.cpp counting every launch, on
# the GPU path (gpu-local-reduce, Oclgrind's own), and the figures per kernel printed as a
# markdown table (and written as JSON with --json FILE):
#   items, groups     the launch's work-items and work-groups
#   insts/B           LLVM instructions per byte the op must read (weights as stored, or the KV
#                     cache): the kernel's work per byte, which a GPU pays at its issue rate
#   loaded/B          global bytes loaded per byte the op must read: 1 when each byte is loaded
#                     once (x's re-reads by every work-group add to it)
#   coalesced         min_sectors / sectors of the plugin: 1 when each 32 items' loads touch
#                     as few 32-byte sectors as their bytes need (a GPU's warp load), 1/8 when
#                     each item's 4 bytes lie in a sector of its own
#   longest item      instructions of the busiest work-item: the serial chain a launch waits on
# Each case runs with the new GPU kernels and with CLINFER_GPU_LEGACY=1 (the kernels before
# issue 46), side by side. Small shapes: Oclgrind interprets every work-item (a few minutes in
# all on 2 cores).
#
# usage: tools/cost_model.sh [--build DIR] [--json FILE] [--quick] [--units N]
#   --build DIR  a build folder with cost_ops (default build/)
#   --units N    compute units the simulated device reports (default 132, an H200's), which
#                set how attention splits its positions
#   --json FILE  the figures as JSON too
#   --quick      matvec Q4_0 and decode attention only
# Needs oclgrind and liboclgrind-dev (the plugin's headers); g++.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
json=""
quick=0
units=132
# shellcheck source=tools/script_opts.sh
. "$root/tools/script_opts.sh"
opts_parse cost_model --build=build --json=json --quick:quick=1 --units=units -- "$@"
command -v oclgrind >/dev/null || { echo "cost_model: oclgrind is not installed" >&2; exit 77; }
[ -f /usr/include/oclgrind/Plugin.h ] ||
    { echo "cost_model: liboclgrind-dev (the plugin's headers) is not installed" >&2; exit 77; }
[ -x "$build/cost_ops" ] || { echo "cost_model: $build/cost_ops is not built" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plugin="$build/cost_model_plugin.so"
if [ ! "$plugin" -nt "$root/tools/cost_model_plugin.cpp" ]; then
    # Oclgrind's Kernel.h includes LLVM's StringRef.h; liboclgrind is built without RTTI
    llvm_include=$(llvm-config --includedir 2>/dev/null || ls -d /usr/lib/llvm-*/include | tail -1)
    g++ -std=c++17 -O2 -shared -fPIC -fno-rtti -I"$llvm_include" -o "$plugin" \
        "$root/tools/cost_model_plugin.cpp" -loclgrind
fi

# The cases: cost_ops arguments (see bench/cost_ops.c).
cases=("matvec Q4_0 256 1024" "attention 8 2 64 1 255 f16")
if [ "$quick" = 0 ]; then
    cases=("matvec F16 256 1024" "matvec Q8_0 256 1024" "matvec Q4_0 256 1024"
        "matvec Q4_K 256 1024" "matvec Q6_K 256 1024"
        "attention 8 2 64 1 255 f16" "attention 8 2 64 1 1023 f16" "attention 8 2 64 16 0 f16")
fi
export CLINFER_CACHE_DIR="$work/cache" CLINFER_KERNEL_PATH=gpu-local-reduce CLINFER_WEIGHT_CACHE=0
i=0
for c in "${cases[@]}"; do
    for kernels in new old; do
        i=$((i + 1))
        read -r -a args <<<"$c"
        echo "cost_model: $c ($kernels kernels)" >&2
        if [ "$kernels" = old ]; then legacy=1; else legacy=0; fi
        CLINFER_GPU_LEGACY=$legacy CLINFER_COST_OUT="$work/$i.launches" \
            oclgrind --compute-units "$units" --plugins "$plugin" "$build/cost_ops" "${args[@]}" >"$work/$i.op"
        [ -s "$work/$i.launches" ] || { echo "cost_model: the plugin counted nothing" >&2; exit 1; }
        printf '%s\n' "$kernels" >"$work/$i.kernels"
    done
done
python3 "$root/tools/cost_model_report.py" "$work" "$i" "${json:-}"
