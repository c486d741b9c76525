#!/usr/bin/env bash
# The checklist for a machine with a GPU and its vendor's OpenCL driver (or any OpenCL device:
# on PoCL it checks the CPU). Every step's output goes to a log in the results folder, and what
# was measured to summary.md there, ready to paste into docs (docs/DEVICES.md takes its row).
#
#  1. Builds clinfer (Release, in its own build folder, build-gpucheck/ by default) and prints
#     `clinfer devices` and, when clinfo is installed, `clinfo -l`.
#  2. Runs the CTest suite (all of it, or --label L) on the chosen device: CLINFER_DEVICE for
#     the library, CLINFER_TEST_DEVICES set to its index for the OpenCL tests, which otherwise
#     loop over every device. Reports passed/failed/skipped in all and per kernel path (the
#     tests that force CLINFER_KERNEL_PATH, see tests/ops_cl.cmake).
#  3. Runs `clinfer bench` on the default model (tools/fetch_model.sh) and on Llama-3.2-1B-shaped
#     files with random weights (bench/make_shape_model.py in a venv with the PyPI packages gguf
#     and numpy; kept in ~/.cache/clinfer/models, delete them to rebuild).
#  4. Where nvcc is found and nvidia-smi lists a GPU, builds llama.cpp's llama-bench with CUDA
#     from the llama-cpp-python source distribution (as bench/compare_llamacpp.sh does, into its
#     cache folder, build-cuda/) and runs it with -ngl 99 on the same files, beside clinfer's
#     figures.
#  5. Prints summary.md (written by tools/gpu_check_summary.py): the machine, each step's
#     result, the devices, the suite's counts, the bench table and a ready docs/DEVICES.md row
#     per kernel path.
#  With --legacy, step 3 benches each file again with CLINFER_GPU_LEGACY=1 (the GPU kernels
#  before issue 46) and runs `bench_ops --json` for each type of --types both ways (the copy
#  bandwidth and FMA probes, matvec GB/s); with --results DIR, tools/gpu_results.py writes
#  DIR/gpu-YYYYMMDD.json in issue 46's format from all of it.
# Steps go on after a failure where they can; the exit status is 1 when any step failed.
#
# usage: tools/gpu_check.sh [--out DIR] [--device SPEC] [--label L] [--types "F16 Q4_0"]
#            [-p N] [-n N] [-r R] [--no-tests] [--no-bench] [--no-1b] [--no-llama]
#            [--tests REGEX] [--legacy] [--results DIR]
#   --out DIR      results folder (default: $OUT when set, else build-gpucheck/results-TIME)
#   --device SPEC  the device, as CLINFER_DEVICE takes it: an index, gpu, cpu or part of its
#                  name (default: $CLINFER_DEVICE, else clinfer's default: the strongest)
#   --label L      run only the CTest tests labelled L (quick, slow, model; default: all)
#   --types LIST   weight types of the 1B-shaped files (default "F16 Q4_0"; any type
#                  bench/make_shape_model.py writes, e.g. Q8_0)
#   -p, -n, -r     clinfer bench / llama-bench prompt tokens, generated tokens, repetitions
#                  (default 128, 64, 3)
#   -E REGEX       leave out the CTest tests whose names match REGEX
#   --tests REGEX  run only the CTest tests whose names match REGEX (ctest -R)
#   --legacy       also bench with CLINFER_GPU_LEGACY=1, and run bench_ops both ways (above)
#   --results DIR  write DIR/gpu-YYYYMMDD.json (tools/gpu_results.py)
#   --prebuilt     use build-gpucheck/ as it is, built on another machine with the same source
#                  path (for a machine without the build's -dev packages)
#   --models LIST  bench these GGUF files instead of the default model and the 1B-shaped ones,
#                  and fetch nothing (for a machine without network; the model-label tests
#                  then skip unless $CLINFER_MODEL is set)
#   --no-tests     skip step 2;  --no-bench: skip steps 3 and 4;  --no-1b: bench only the
#                  default model;  --no-llama: skip step 4 even where nvcc is found
# Environment: CLINFER_JOBS (build jobs, default nproc), CLINFER_BENCH_CACHE (llama.cpp's
# folder, default ~/.cache/clinfer/llama.cpp), LLAMA_CPP_PYTHON_VERSION (default 0.3.36).

# shellcheck disable=SC2317  # the step functions are called through run_step
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
args="$*"
out=${OUT:-}
build="$root/build-gpucheck"
label=""
types="F16 Q4_0"
n_prompt=128
n_gen=64
reps=3
do_tests=1
do_bench=1
do_1b=1
do_llama=1
exclude=""
only=""
legacy=0
results=""
prebuilt=0
models=""
device=""
# shellcheck source=tools/script_opts.sh
. "$root/tools/script_opts.sh"
opts_parse gpu_check --out=out --device=device --label=label --types=types -p=n_prompt \
    -n=n_gen -r=reps --no-tests:do_tests=0 --no-bench:do_bench=0 --no-1b:do_1b=0 \
    --no-llama:do_llama=0 -E=exclude --tests=only --legacy:legacy=1 --results=results \
    --prebuilt:prebuilt=1 --models=models -- "$@"
[ -z "$device" ] || export CLINFER_DEVICE="$device"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
out=${out:-$build/results-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# What an earlier run left in the same folder must not reach this run's summary.
rm -f "$out"/{summary.md,steps.tsv,devices.json,devices.txt,clinfo.txt,nvidia-smi.txt} \
    "$out"/{ctest-tests.json,ctest-junit.xml,ctest.log} "$out"/{clinfer,llama}-bench-*.{json,log} \
    "$out"/clinfer-legacy-bench-*.{json,log} "$out"/bench-ops-*.{json,log}
jobs=${CLINFER_JOBS:-$(nproc)}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/clinfer
llama_cache=${CLINFER_BENCH_CACHE:-$cache/llama.cpp}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

say() { echo "gpu_check: $*" >&2; }

# ---- step bookkeeping ----------------------------------------------------------------------
# One line per step in $out/steps.tsv: name, passed|failed|skipped, note.
: >"$out/steps.tsv"
failed=0
record() {
    printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$out/steps.tsv"
    say "$1: $2${3:+ ($3)}"
    if [ "$2" = failed ]; then failed=1; fi
}
# run_step NAME LOG COMMAND...: runs COMMAND with its output in $out/LOG; records the result.
run_step() {
    local name=$1 log=$2
    shift 2
    say "$name ..."
    if "$@" >"$out/$log" 2>&1; then
        record "$name" passed "$log"
    else
        record "$name" failed "exit $?, see $log"
        return 1
    fi
}

# ---- 1. build, devices ---------------------------------------------------------------------
build_clinfer() {
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release &&
        cmake --build "$build" -j"$jobs"
}
clinfer="$build/clinfer"
built=0
if [ "$prebuilt" = 1 ]; then
    if [ -x "$clinfer" ]; then
        built=1
        record build skipped "--prebuilt: $build as found"
    else
        record build failed "--prebuilt, but $clinfer is missing"
    fi
elif run_step build build.log build_clinfer; then built=1; fi

# The chosen device's index and description from `clinfer devices --json` (device.json).
device_index=""
if [ "$built" = 1 ]; then
    if run_step devices devices.txt "$clinfer" devices &&
        "$clinfer" devices --json >"$out/devices.json" 2>>"$out/devices.txt"; then
        device_index=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("" if d["default"] is None else d["default"])' "$out/devices.json")
        [ -n "$device_index" ] ||
            record device failed "CLINFER_DEVICE '${CLINFER_DEVICE:-}' picks none: see devices.txt"
    fi
fi
if command -v clinfo >/dev/null; then
    clinfo -l >"$out/clinfo.txt" 2>&1 || true
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || true
fi

# ---- 2. the test suite on that device ------------------------------------------------------
model=""
if [ "$do_tests" = 0 ]; then
    record tests skipped "--no-tests"
elif [ -z "$device_index" ]; then
    record tests skipped "no build or no device"
else
    # The SmolLM2 end-to-end test (label model) needs the default model.
    model=${CLINFER_MODEL:-}
    [ -n "$model" ] || [ -n "$models" ] ||
        model=$(bash "$root/tools/fetch_model.sh" 2>>"$out/fetch_model.log") || model=""
    (
        [ -z "$model" ] || export CLINFER_MODEL="$model"
        export CLINFER_TEST_DEVICES="$device_index"
        cd "$build"
        ctest --show-only=json-v1 >"$out/ctest-tests.json"
        run_step tests ctest.log ctest ${label:+-L "$label"} ${exclude:+-E "$exclude"} \
            ${only:+-R "$only"} --output-on-failure \
            --output-junit "$out/ctest-junit.xml"
    ) || failed=1
fi

# ---- 3. clinfer bench on the default model and 1B-shaped files -----------------------------
# venv_python: py, the python of a venv with gguf and numpy for bench/make_shape_model.py.
py=""
venv_python() { py=$(bash "$root/tools/gguf_venv.sh"); }

bench_files=()
if [ "$do_bench" = 1 ] && [ "$built" = 1 ] && [ -n "$models" ]; then
    read -r -a bench_files <<<"$models"
elif [ "$do_bench" = 1 ] && [ "$built" = 1 ]; then
    [ -n "$model" ] || model=$(bash "$root/tools/fetch_model.sh" 2>>"$out/fetch_model.log") ||
        record fetch_model failed "see fetch_model.log"
    [ -z "$model" ] || bench_files+=("$model")
    if [ "$do_1b" = 1 ] && [ -n "$model" ] && run_step venv venv.log venv_python; then
        mkdir -p "$cache/models"
        for type in $types; do
            file="$cache/models/llama-3.2-1b-shape.$type.gguf"
            if [ -s "$file" ] ||
                run_step "make 1B $type" "make-1b-$type.log" "$py" \
                    "$root/bench/make_shape_model.py" "$file" --type "$type" \
                    --tokenizer-from "$model"; then
                bench_files+=("$file")
            fi
        done
    fi
fi

# bench_name FILE: the file's name without .gguf, for log names.
bench_name() { basename "$1" .gguf; }
# json_to FILE COMMAND...: COMMAND's stdout (a bench's JSON) to FILE, apart from the progress
# messages on stderr, which run_step logs.
json_to() {
    local json=$1
    shift
    "$@" >"$json"
}
for file in "${bench_files[@]}"; do
    name=$(bench_name "$file")
    run_step "clinfer bench $name" "clinfer-bench-$name.log" json_to "$out/clinfer-bench-$name.json" \
        "$clinfer" bench -m "$file" -p "$n_prompt" -n "$n_gen" -r "$reps" --json || true
    [ "$legacy" = 0 ] ||
        CLINFER_GPU_LEGACY=1 run_step "clinfer bench $name (legacy kernels)" \
            "clinfer-legacy-bench-$name.log" json_to "$out/clinfer-legacy-bench-$name.json" \
            "$clinfer" bench -m "$file" -p "$n_prompt" -n "$n_gen" -r "$reps" --json || true
done
# bench_ops per weight type (Q4_K_M's matrices are mostly Q4_K), new kernels and legacy ones
if [ "$legacy" = 1 ] && [ "$do_bench" = 1 ] && [ "$built" = 1 ]; then
    for type in $types; do
        t=${type%_M}
        run_step "bench_ops $t" "bench-ops-$t.log" json_to "$out/bench-ops-$t.json" \
            "$build/bench_ops" --type "$t" --json || true
        CLINFER_GPU_LEGACY=1 run_step "bench_ops $t (legacy kernels)" "bench-ops-$t-legacy.log" \
            json_to "$out/bench-ops-$t-legacy.json" "$build/bench_ops" --type "$t" --json || true
    done
fi

# ---- 4. llama.cpp with CUDA on the same files ----------------------------------------------
# llama.cpp's source tree, from the llama-cpp-python source distribution on PyPI (which carries
# it in vendor/llama.cpp), downloaded and unpacked once; the same steps as
# bench/compare_llamacpp.sh. Prints the tree's path.
llama_cpp_source() {
    local sdist src
    sdist=$(bash "$root/tools/fetch_llamacpp_sdist.sh") || return 1
    src="$llama_cache/$(basename "$sdist" .tar.gz)/vendor/llama.cpp"
    [ -f "$src/CMakeLists.txt" ] || { mkdir -p "$llama_cache" && tar -xzf "$sdist" -C "$llama_cache"; } || return 1
    echo "$src"
}
llama_bench="$llama_cache/build-cuda/bin/llama-bench"
build_llama_cuda() {
    local src
    src=$(llama_cpp_source) &&
        cmake -S "$src" -B "$llama_cache/build-cuda" -DCMAKE_BUILD_TYPE=Release \
            -DGGML_CUDA=ON -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF &&
        cmake --build "$llama_cache/build-cuda" -j"$jobs" --target llama-bench
}
if [ "$do_bench" = 0 ] || [ "$do_llama" = 0 ]; then
    record "llama.cpp CUDA" skipped "--no-bench/--no-llama"
elif ! command -v nvcc >/dev/null; then
    record "llama.cpp CUDA" skipped "no nvcc"
elif ! grep -q '^GPU ' "$out/nvidia-smi.txt" 2>/dev/null; then
    record "llama.cpp CUDA" skipped "nvcc, but nvidia-smi -L lists no GPU"
elif [ -x "$llama_bench" ] || run_step "build llama-bench (CUDA)" llama-build.log build_llama_cuda
then
    for file in "${bench_files[@]}"; do
        name=$(bench_name "$file")
        run_step "llama-bench $name" "llama-bench-$name.log" json_to "$out/llama-bench-$name.json" \
            "$llama_bench" -m "$file" -ngl 99 -p "$n_prompt" -n "$n_gen" -r "$reps" -o json ||
            true
    done
fi

# ---- 5. summary.md -------------------------------------------------------------------------
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] ||
    commit="$commit (with uncommitted changes)"
python3 "$root/tools/gpu_check_summary.py" "$out" "$started" "$commit" "tools/gpu_check.sh $args" \
    "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "${label:-all}" "${bench_files[@]}" \
    >"$out/summary.md"
cat "$out/summary.md"
if [ -n "$results" ]; then
    mkdir -p "$results"
    python3 "$root/tools/gpu_results.py" "$out" "$commit" "${bench_files[@]}" \
        >"$results/gpu-$(date -u +%Y%m%d).json" || record results failed "tools/gpu_results.py"
    say "issue 46's figures in $results/gpu-$(date -u +%Y%m%d).json"
fi
say "results in $out"
exit "$failed"
