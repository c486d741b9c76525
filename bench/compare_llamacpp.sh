#!/usr/bin/env bash
# clinfer against llama.cpp's CPU backend on the same GGUF files, in one run.
#
#  1. Builds the llama.cpp programs of bench/peer.sh (llama-bench, llama-quantize, llama-simple,
#     ...) once from the llama-cpp-python source distribution on PyPI
#     (tools/fetch_llamacpp_sdist.sh: pinned, SHA-256 checked; it carries llama.cpp's source in
#     vendor/llama.cpp) into its cache folder: $CLINFER_BENCH_CACHE, else ~/.cache/clinfer/llama.cpp.
#  2. Builds clinfer (build-compare/ of this checkout) unless $CLINFER_BIN names a binary.
#  3. Takes the default model (tools/fetch_model.sh: SmolLM2-135M-Instruct Q4_1) and makes F16,
#     Q8_0 and Q4_0 variants of it with `llama-quantize --allow-requantize --pure` (every matrix
#     in the one type) into the cache folder.
#  4. Refuses to report when the 1-minute load average is above 1.0 (--force overrides; the
#     load is printed either way, before and after).
#  5. Runs `llama-bench -t 2 -p 128 -n 64 -r 3` and `clinfer bench -p 128 -n 64 -r 3 --act q8`
#     (8-bit activations, as llama.cpp's CPU backend) on each
#     file, back to back, for --rounds rounds (default 3), and prints a markdown table: tokens/s
#     of both and the ratio clinfer / llama.cpp for pp128 and tg64, time to first token of a
#     16-token prompt and peak resident memory. Speeds and times are medians over the rounds
#     (± the median round's stddev), ratios the median of the rounds' ratios: on a shared
#     machine the speed of both drifts by tens of percent within minutes, and a ratio taken
#     from two runs a minute apart inherits that.
#
# Time to first token: clinfer's is what `clinfer bench` measures in-process (model load, the
# 16-token prompt, the first greedy token; warm kernel cache), plus one cold start with an empty
# kernel cache for the Q4_1 file. llama.cpp's is the wall time of a whole
# `llama-bench -p 16 -n 0 -r 1 --no-warmup` process (load and one 16-token prefill; an upper
# bound: process start and exit are in it). Peak memory: each benchmark process's maximum
# resident set size (wait4's ru_maxrss).
#
# usage: bench/compare_llamacpp.sh [--force] [--threads N] [--reps R] [--rounds K]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/peer.sh"
cache=$peer_cache
force=0
threads=2
reps=3
rounds=3
while [ $# -gt 0 ]; do
    case $1 in
    --force) force=1 ;;
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "compare_llamacpp: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
    shift
done

say() { echo "compare_llamacpp: $*" >&2; }

# ---- 1. llama.cpp, once; 2. clinfer -------------------------------------------------------
peer_build || exit 1
llama_bin=$peer_bin
clinfer_build || exit 1

# ---- 3. model files -----------------------------------------------------------------------
q4_1=$(bash "$root/tools/fetch_model.sh")
base=$(basename "$q4_1" .Q4_1.gguf)
mkdir -p "$cache/models"
files=()
for type in F16 Q8_0 Q4_0; do
    variant="$cache/models/$base.$type.gguf"
    if [ ! -s "$variant" ]; then
        say "making $variant"
        "$llama_bin/llama-quantize" --allow-requantize --pure "$q4_1" "$variant.tmp" "$type" \
            >"$cache/quantize-$type.log" 2>&1 ||
            { say "llama-quantize failed; see $cache/quantize-$type.log"; exit 1; }
        mv "$variant.tmp" "$variant"
    fi
    files+=("$variant")
done
files+=("$q4_1")

# ---- 4. a quiet machine -------------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average before: $load_before"
if awk '{ exit !($1 > 1.0) }' /proc/loadavg; then
    if [ "$force" = 0 ]; then
        say "the 1-minute load average is above 1.0: the machine is busy, figures would be" \
            "wrong. Wait, or pass --force to report anyway."
        exit 2
    fi
    say "busy machine, going on because of --force"
fi

# ---- 5. both engines on every file --------------------------------------------------------
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
PYTHONPATH=$root/bench python3 - "$clinfer" "$llama_bin/llama-bench" "$threads" "$reps" "$rounds" \
    "$scratch" "${files[@]}" <<'EOF'
import json, os, statistics, sys, tempfile

from side_by_side import run

clinfer, llama_bench, threads, reps, rounds, scratch = sys.argv[1:7]
files = sys.argv[7:]

def one_round(path, name):
    """Both engines on one file, back to back: their speeds, TTFTs and peak RSS."""
    lb_cmd = [llama_bench, "-m", path, "-t", threads, "-p", "128", "-n", "64", "-r", reps,
              "-o", "json"]
    text, _, lb_rss = run(lb_cmd)
    speed = {("pp" if r["n_gen"] == 0 else "tg"): (r["avg_ts"], r["stddev_ts"])
             for r in json.loads(text)}
    _, lb_ttft, _ = run([llama_bench, "-m", path, "-t", threads, "-p", "16", "-n", "0",
                         "-r", "1", "--no-warmup", "-o", "json"])
    # 8-bit activations as llama.cpp's CPU backend: like against like (clinfer's default for
    # models under 1B parameters is f32, docs/PERFORMANCE.md)
    cl_cmd = [clinfer, "bench", "-m", path, "-p", "128", "-n", "64", "-r", reps, "--json",
              "--act", "q8"]
    cl = json.loads(run(cl_cmd)[0])
    ours = {t["test"][:2]: (t["avg_ts"], t["stddev_ts"]) for t in cl["tests"]}
    return {"ours": ours, "theirs": speed, "ttft": cl["ttft_ms"], "lb_ttft": lb_ttft * 1e3,
            "rss": cl["peak_rss_mib"], "lb_rss": lb_rss, "backend": cl["backend"]}

def median_of(results, key, test):
    """The median round's (mean, stddev) of one engine's test."""
    ordered = sorted((r[key][test] for r in results), key=lambda v: v[0])
    return ordered[(len(ordered) - 1) // 2]

rows = []
for path in files:
    name = os.path.basename(path)
    sys.stderr.write("compare_llamacpp: %s\n" % name)
    results = [one_round(path, name) for _ in range(int(rounds))]
    cold = None
    if name.endswith("Q4_1.gguf"):
        with tempfile.TemporaryDirectory(dir=scratch) as empty:
            env = dict(os.environ, CLINFER_CACHE_DIR=empty)
            cold = json.loads(run([clinfer, "bench", "-m", path, "-p", "0", "-n", "0", "-r", "1",
                                   "--json"], env)[0])["ttft_ms"]
    row = {"name": name, "cold": cold, "backend": results[0]["backend"]}
    for test in ("pp", "tg"):
        row[test] = (median_of(results, "ours", test), median_of(results, "theirs", test),
                     statistics.median(r["ours"][test][0] / r["theirs"][test][0]
                                       for r in results))
    for key in ("ttft", "lb_ttft"):
        row[key] = statistics.median(r[key] for r in results)
    for key in ("rss", "lb_rss"):
        row[key] = max(r[key] for r in results)
    rows.append(row)

def ts(v):
    return "%.1f ± %.1f" % v

print("| model | pp128 clinfer | pp128 llama.cpp | pp ratio | tg64 clinfer | tg64 llama.cpp "
      "| tg ratio | TTFT clinfer (cold) | TTFT llama.cpp | peak RSS clinfer | peak RSS llama.cpp |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    cells = [r["name"]]
    for test in ("pp", "tg"):
        ours, theirs, ratio = r[test]
        cells += [ts(ours), ts(theirs), "%.2f" % ratio]
    cells += ["%.0f ms%s" % (r["ttft"], " (%.0f ms)" % r["cold"] if r["cold"] is not None else ""),
              "%.0f ms" % r["lb_ttft"], "%.0f MiB" % r["rss"], "%.0f MiB" % r["lb_rss"]]
    print("| " + " | ".join(cells) + " |")
print()
print("clinfer device: %s; llama.cpp: CPU backend, %s threads; %s repetitions per run, medians "
      "over %s rounds of both engines back to back" % (rows[0]["backend"], threads, reps, rounds))
EOF
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
