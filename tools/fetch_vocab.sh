#!/usr/bin/env bash
# Fetches the tokenizer tests' vectors: every vocab-only GGUF file llama.cpp publishes (byte-level
# BPE with many pre-tokenizers, SentencePiece, WordPiece, Gemma 4's BPE, T5's unigram), most
# with .inp texts and the .out ids llama.cpp gives them. They come from llama.cpp's models/ folder inside the llama-cpp-python
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
7c53c3c516ac67c7ca12977b9690fdea3d2ef13bbaed6378f98191a13ef5ca00  ggml-vocab-aquila.gguf
4f5b955697f3bd3108070b1d5936c7eb9fc542b81c6932e59abddec75bca1963  ggml-vocab-baichuan.gguf
fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854  ggml-vocab-bert-bge.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-bert-bge.gguf.inp
8f95b1d4e5680634af06ac5a1b19f15ddeb743d3a6240056625e4345a4b06917  ggml-vocab-bert-bge.gguf.out
a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9  ggml-vocab-command-r.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-command-r.gguf.inp
d2a601336e422b60a264858c01b14c5d37575fe1f9adfcafc2f3b3707903903f  ggml-vocab-command-r.gguf.out
91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1  ggml-vocab-deepseek-coder.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-deepseek-coder.gguf.inp
c2cea4584b0487e67fbd81f491bb44f89238722062126120d2c412edb3dbd853  ggml-vocab-deepseek-coder.gguf.out
867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76  ggml-vocab-deepseek-llm.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-deepseek-llm.gguf.inp
87cfc1a8a9a7ef25d04d28c26a67b6a620af7be938c9bd0feeb4d319b9302832  ggml-vocab-deepseek-llm.gguf.out
9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad  ggml-vocab-falcon.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-falcon.gguf.inp
f8c80a0483582ef195c2129b69bb2e4e421b0f31ed7b35d84b63511d7ebae7cd  ggml-vocab-falcon.gguf.out
58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65  ggml-vocab-gemma-4.gguf
0528aa007b06965f980181d252b5dff7bb170a77af6157bd48bba56885374448  ggml-vocab-gemma-4.gguf.inp
ba8c596bcd05e97e62566fa994b42eeaeffd6a4e4b4a4abe7b5b689aa6b43bf3  ggml-vocab-gemma-4.gguf.out
cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac  ggml-vocab-gpt-2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-gpt-2.gguf.inp
48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60  ggml-vocab-gpt-2.gguf.out
ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d  ggml-vocab-gpt-neox.gguf
97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e  ggml-vocab-llama-bpe.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-llama-bpe.gguf.inp
118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b  ggml-vocab-llama-bpe.gguf.out
16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69  ggml-vocab-llama-spm.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-llama-spm.gguf.inp
ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29  ggml-vocab-llama-spm.gguf.out
59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f  ggml-vocab-mpt.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-mpt.gguf.inp
9d0982a7e7950b81bc2e325fb61bb7e295d2238934ab889737494de2dc4d906b  ggml-vocab-mpt.gguf.out
90a6746926454784a98389ad36a36d89bc9cfc81db9cb0f33c941bcc959fe5f9  ggml-vocab-nomic-bert-moe.gguf
967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326  ggml-vocab-phi-3.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-phi-3.gguf.inp
ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29  ggml-vocab-phi-3.gguf.out
44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c  ggml-vocab-qwen2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-qwen2.gguf.inp
de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363  ggml-vocab-qwen2.gguf.out
63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c  ggml-vocab-qwen35.gguf
0fc6547e7876cd5b2ef64a9d319c6e39040eb53986660bd4227ed7ddef017a94  ggml-vocab-qwen35.gguf.inp
5efe225820325303857d0a087a8d59216f0d1e9a9e31133e7a5b44c3c4e1e9ca  ggml-vocab-qwen35.gguf.out
ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678  ggml-vocab-refact.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-refact.gguf.inp
c7e5c1c5dc1dfd3e0d56576bf699d2aca0b760b80779523ea9d323aad6cd1b88  ggml-vocab-refact.gguf.out
fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d  ggml-vocab-starcoder.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-starcoder.gguf.inp
3ef12183c57ad076f9defd8e5eb454f509f5f0865cad35646abb4c4b2d2c5764  ggml-vocab-starcoder.gguf.out
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
