# Sourced by the bench scripts that run beside llama.cpp: where its build lives (built once by
# bench/compare_llamacpp.sh into $CLINFER_BENCH_CACHE, else ~/.cache/clinfer/llama.cpp), and the
# venv with the PyPI packages gguf and numpy that writes random-weight models (tools/gguf_venv.sh
# makes it), and the final perplexity of either tool on a model, as a number ("-" when the tool
# cannot load it).
# ppl_peer and ppl_clinfer take MODEL TEXT CTX CHUNKS; ppl_clinfer needs $clinfer set and adds
# its further arguments. peer_build and clinfer_build (below) build either engine where needed.
peer_cache=${CLINFER_BENCH_CACHE:-$HOME/.cache/clinfer/llama.cpp}
peer_bin=$peer_cache/build/bin
# The llama.cpp programs the bench scripts and the CTest label peer run.
peer_targets=(llama-bench llama-quantize llama-perplexity llama-simple llama-tokenize llama-server)
peer_venv=$peer_cache/../venv-gguf

ppl_peer() {
    "$peer_bin/llama-perplexity" -m "$1" -f "$2" -c "$3" --chunks "$4" -t 2 2>&1 |
        sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' | grep . || echo -
}

ppl_clinfer() {
    local model=$1 text=$2 ctx=$3 chunks=$4
    shift 4
    "$clinfer" perplexity -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" -q "$@" 2>/dev/null |
        sed -n 's/.*PPL = \([0-9.]*\).*/\1/p' | grep . || echo -
}

# -j2 on a quiet machine, -j1 on a busy one (the box is shared).
jobs_for_load() { awk '{ print ($1 < 1.0) ? 2 : 1 }' /proc/loadavg; }

# -march=native, less AMX: on the Xeon VMs here (Sapphire Rapids class, amx_int8 in cpuinfo and
# granted by arch_prctl) the pinned version's AMX matrix kernels die of SIGILL at their first
# tileloadd (Q8_0 prefill, any thread count), so the peer is its AVX-512 VNNI CPU backend there.
peer_flags=
grep -qw amx_tile /proc/cpuinfo 2>/dev/null && peer_flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

# Builds whichever of peer_targets is missing, once, from the llama-cpp-python source
# distribution on PyPI (tools/fetch_llamacpp_sdist.sh: pinned, SHA-256 checked), and all of them
# again where the build was made with other flags ($peer_cache/build/flags). Needs $root.
peer_build() {
    local t missing=() sdist src jobs stamp="$peer_cache/build/flags"
    [ "$(cat "$stamp" 2>/dev/null)" = "$peer_flags" ] || rm -rf "$peer_cache/build"
    for t in "${peer_targets[@]}"; do [ -x "$peer_bin/$t" ] || missing+=("$t"); done
    [ ${#missing[@]} -gt 0 ] || return 0
    sdist=$(bash "$root/tools/fetch_llamacpp_sdist.sh") || return 1
    src="$peer_cache/$(basename "$sdist" .tar.gz)/vendor/llama.cpp"
    [ -f "$src/CMakeLists.txt" ] || tar -xzf "$sdist" -C "$peer_cache" || return 1
    jobs=$(jobs_for_load)
    echo "peer: building ${missing[*]} (CPU backend, -j$jobs; about 15 minutes)" >&2
    cmake -S "$src" -B "$peer_cache/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DCMAKE_C_FLAGS="$peer_flags" -DCMAKE_CXX_FLAGS="$peer_flags" \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_SERVER=ON >"$peer_cache/cmake.log" &&
        cmake --build "$peer_cache/build" -j"$jobs" --target "${missing[@]}" \
            >"$peer_cache/build.log" && echo "$peer_flags" >"$stamp"
}

# Sets $clinfer: $CLINFER_BIN, else a Release build of this checkout in $root/build-compare.
clinfer_build() {
    clinfer=${CLINFER_BIN:-}
    [ -z "$clinfer" ] || return 0
    local log="$root/build-compare/build.log"
    mkdir -p "$root/build-compare"
    { cmake -S "$root" -B "$root/build-compare" -DCMAKE_BUILD_TYPE=Release -DCLINFER_TESTS=OFF &&
        cmake --build "$root/build-compare" -j"$(jobs_for_load)" --target clinfer_cli; } \
        >"$log" 2>&1 || { echo "peer: building clinfer failed; see $log" >&2; return 1; }
    clinfer="$root/build-compare/clinfer"
}
