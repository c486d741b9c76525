# Sourced by the bench scripts that run beside llama.cpp: where its build lives (built once by
# bench/compare_llamacpp.sh into $CLINFER_BENCH_CACHE, else ~/.cache/clinfer/llama.cpp), and the
# venv with the PyPI packages gguf and numpy that writes random-weight models (tools/gpu_check.sh
# makes it), and the final perplexity of either tool on a model, as a number ("-" when the tool
# cannot load it).
# ppl_peer and ppl_clinfer take MODEL TEXT CTX CHUNKS; ppl_clinfer needs $clinfer set and adds
# its further arguments.
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
