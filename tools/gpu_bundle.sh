#!/usr/bin/env bash
# Prepares tools/gpu_check.sh for a lent machine that has an OpenCL GPU driver but neither
# clinfer's -dev packages nor network (the NVIDIA machines of docs/DEVICES.md), so that one call
# there runs the quick suite on the GPU and benches 1B-shaped files made there. Here it builds
# build-gpucheck/ (Release; python3 pinned to /usr/bin/python3, which such images have, for the
# serve tests) and writes beside it, in build-gpucheck/bundle/:
#   lib/            the shared libraries the build links other than the C runtime and the
#                   OpenCL loader (CLBlast, cJSON, libmicrohttpd, ...); run.sh puts on the library
#                   path only those the machine lacks
#   wheels/         the gguf wheel for bench/make_shape_model.py (its numpy, pyyaml, tqdm and
#                   requests are on those images)
#   tokenizer.gguf  the default model's tokenizer keys alone (under 2 MiB), which the 1B-shaped
#                   files copy (--tokenizer-from)
#   run.sh          the command there
# Carry build-gpucheck/ with the checkout (about 50 MiB), then there, from the checkout:
#   bash build-gpucheck/bundle/run.sh OUT [gpu_check test options, e.g. -E REGEX]
# run.sh links the checkout to this machine's path where it lies elsewhere (the build's CTest
# files name that path), runs `gpu_check.sh --prebuilt --label quick` less the tests that need
# what is not there (the vocabulary files, the -dev packages, PyPI), then `--no-tests` on the
# files of $TYPES (default "F16 Q8_0 Q4_0") with $BENCH (default "-p 512 -n 128 -r 3"), each
# also with the GPU kernels before issue 46 (--legacy, bench_ops both ways), and leaves both
# results folders in OUT and issue 46's OUT/gpu-YYYYMMDD.json (tools/gpu_results.py).
#
# usage: tools/gpu_bundle.sh   (CLINFER_JOBS: build jobs, default nproc)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-gpucheck
bundle=$build/bundle
say() { echo "gpu_bundle: $*" >&2; }

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build "$build" -j"${CLINFER_JOBS:-$(nproc)}" >/dev/null
rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/wheels"

# Every executable's libraries, less the C runtime and the loader every OpenCL machine has.
find "$build" -maxdepth 2 -type f -perm -u+x ! -name '*.so*' -exec ldd {} + 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libOpenCL)\.so' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done

python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$bundle/wheels" "$(bash "$root/tools/gguf_venv.sh" --pin)"

py=$(bash "$root/tools/gguf_venv.sh")
model=$(bash "$root/tools/fetch_model.sh")
"$py" - "$model" "$bundle/tokenizer.gguf" "$root/bench" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
import gguf
import make_shape_model

w = gguf.GGUFWriter(sys.argv[2], "llama")
make_shape_model.copy_tokenizer(w, sys.argv[1])
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
EOF

cat >"$bundle/run.sh" <<EOF
#!/usr/bin/env bash
# Written by tools/gpu_bundle.sh: see there.
set -u
src=$root
EOF
cat >>"$bundle/run.sh" <<'EOF'
out=${1:?usage: run.sh OUT [gpu_check options]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ "$here" != "$src" ]; then
    if [ -e "$src" ] && [ ! -L "$src" ]; then
        echo "run.sh: the build wants the checkout at $src, which holds something else" >&2
        exit 1
    fi
    mkdir -p "$(dirname "$src")" && ln -sfn "$here" "$src"
fi
cd "$src" || exit 1
b=build-gpucheck/bundle
mkdir -p /tmp/clinfer-lib /tmp/clinfer-shapes
for lib in "$b"/lib/*; do
    ldconfig -p | grep -q "/$(basename "$lib")\$" || ln -sf "$src/$lib" /tmp/clinfer-lib/
done
export LD_LIBRARY_PATH=/tmp/clinfer-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -m pip install -q --no-index --no-deps --target /tmp/clinfer-site "$b"/wheels/*.whl &&
    export PYTHONPATH=/tmp/clinfer-site${PYTHONPATH:+:$PYTHONPATH}
files=()
for type in ${TYPES:-F16 Q8_0 Q4_0}; do
    files+=("/tmp/clinfer-shapes/llama-3.2-1b-shape.$type.gguf")
    [ -s "${files[-1]}" ] || python3 bench/make_shape_model.py "${files[-1]}" --type "$type" \
        --tokenizer-from "$b/tokenizer.gguf" >"$out/make-$type.log" 2>&1 &
done
# --models: fetch nothing (no network); the model-label tests skip without CLINFER_MODEL
CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-8} bash tools/gpu_check.sh --prebuilt --no-bench \
    --label quick --models none --out "$out/tests" \
    -E 'install_consumers|test_serve_openai|tokenizer|cli_tokenize' "$@"
status=$?
wait
# shellcheck disable=SC2086  # BENCH: several options
bash tools/gpu_check.sh --prebuilt --no-tests --no-llama --models "${files[*]}" \
    --types "${TYPES:-F16 Q8_0 Q4_0}" --legacy --results "$out" \
    ${BENCH:--p 512 -n 128 -r 3} --out "$out/bench" || status=1
exit $status
EOF
chmod +x "$bundle/run.sh"
say "$(du -sh "$build" | cut -f1) in $build; carry it, then there: bash build-gpucheck/bundle/run.sh OUT"
