#!/usr/bin/env bash
# Fetches the tokenizer tests' vectors: llama.cpp's vocab-only GGUF files for GPT-2 (byte-level
# BPE), LLaMA (SentencePiece) and BGE (WordPiece), each with its .inp texts and the .out ids
# llama.cpp gives them. They come from llama.cpp's models/ folder inside the llama-cpp-python
# source distribution (tools/fetch_llamacpp_sdist.sh, pinned and SHA-256 checked; cached for
# the benchmark too); each file is checked against a pinned SHA-256 and stored in models/vocab
# of this checkout (git-ignored), or in ${XDG_CACHE_HOME:-~/.cache}/clinfer/vocab when that is
# not writable. Prints the directory on stdout: tests take it from $CLINFER_VOCAB_DIR
# (tools/test.sh and .ci/run set it from here). Quick and quiet when the files are already there.
#
# usage: tools/fetch_vocab.sh [DIR]    (DIR: the only place to look for and store the files)
set -euo pipefail

# The files, their SHA-256, and where they are in the source distribution.
MEMBERS=vendor/llama.cpp/models
SUMS="\
fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854  ggml-vocab-bert-bge.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-bert-bge.gguf.inp
8f95b1d4e5680634af06ac5a1b19f15ddeb743d3a6240056625e4345a4b06917  ggml-vocab-bert-bge.gguf.out
cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac  ggml-vocab-gpt-2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-gpt-2.gguf.inp
48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60  ggml-vocab-gpt-2.gguf.out
16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69  ggml-vocab-llama-spm.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-llama-spm.gguf.inp
ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29  ggml-vocab-llama-spm.gguf.out
"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/vocab"

say() { echo "fetch_vocab: $*" >&2; }

# All files present in $1 with their pinned SHA-256?
verified() { [ -d "$1" ] && (cd "$1" && echo "$SUMS" | sha256sum --check --status 2>/dev/null); }

# Already fetched into DIR, or (without DIR) into one of the places this stores them?
if [ $# -gt 0 ]; then places=("$1"); else places=("$root/models/vocab" "$cache"); fi
for dir in "${places[@]}"; do
    if verified "$dir"; then
        echo "$dir"
        exit 0
    fi
done

dest=${1:-}
if [ -z "$dest" ]; then
    if mkdir -p "$root/models/vocab" 2>/dev/null && [ -w "$root/models/vocab" ]; then
        dest="$root/models/vocab"
    else
        dest="$cache"
    fi
fi
mkdir -p "$dest"

sdist=$(bash "$root/tools/fetch_llamacpp_sdist.sh")
top=$(basename "$sdist" .tar.gz)
mapfile -t names < <(echo "$SUMS" | awk 'NF { print $2 }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Only these members; the folders above them stripped.
tar -xzf "$sdist" -C "$tmp" --strip-components=4 "${names[@]/#/$top/$MEMBERS/}"
if ! (cd "$tmp" && echo "$SUMS" | sha256sum --check --quiet >&2); then
    say "SHA-256 mismatch in $sdist (listed above)"
    exit 1
fi
for name in "${names[@]}"; do
    mv "$tmp/$name" "$dest/$name.part"
    mv "$dest/$name.part" "$dest/$name"
done
say "stored the vocab files in $dest"
echo "$dest"
