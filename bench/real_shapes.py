"""The measuring half of bench/real_shapes.sh (see its header for what and why): both engines on
each GGUF file, alternating, and one markdown table.

usage: real_shapes.py CLINFER PEER_BIN READ_BANDWIDTH THREADS REPS ROUNDS FILE...
       real_shapes.py --table LOG BANDWIDTH_GBS THREADS REPS ROUNDS
READ_BANDWIDTH is bench/read_bandwidth.c's program, run before each round: the box is shared, and
the bandwidth left to a run moves with the load as much as the engines' speeds do. The second form
prints the table of the files a run finished from its stderr (LOG), should the run not get to the
end (BANDWIDTH_GBS for rows that carry none). Runs in bench/peer.sh's venv (the gguf package sizes the weights)."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import gguf

from side_by_side import run

ROW_MARK = "real_shapes:   {"
# about 16 tokens in the Llama 3 and SmolLM2 tokenizers: llama-simple's prompt for its load time
PROMPT = "The quick brown fox jumps over the lazy dog while the old cat sleeps on the warm mat"


def say(text):
    sys.stderr.write("real_shapes: %s\n" % text)


def weight_bytes(path):
    """Bytes a decoded token reads: every tensor once (the tied embedding is the output
    matrix; norms and biases are a rounding error); of a mixture of experts' tensors (*_exps),
    the share of the experts one token chooses (expert_used_count of expert_count)."""
    reader = gguf.GGUFReader(path)
    keys = {k.rsplit(".", 1)[-1]: f.contents() for k, f in reader.fields.items()
            if k.endswith((".expert_count", ".expert_used_count"))}
    share = keys["expert_used_count"] / keys["expert_count"] if len(keys) == 2 else 1.0
    return int(sum(int(t.n_bytes) * (share if "_exps." in t.name else 1.0)
                   for t in reader.tensors))


def evict(path):
    """Drops the file from the page cache; returns the MiB still resident (pages another
    process maps stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         stdout=subprocess.PIPE, text=True).stdout.strip()
    return int(out) / 2**20 if out.isdigit() else float("nan")


def clinfer_bench(path, p, n, r, env=None):
    out, wall, rss = run([clinfer, "bench", "-m", path, "-p", str(p), "-n", str(n), "-r", str(r),
                          "--json", "--act", "q8"], env)
    js = json.loads(out)
    return {t["test"]: t["avg_ts"] for t in js["tests"]}, js, wall, rss


def ours(path):
    """clinfer: speeds, in-process load, the wall of a load-and-16-token-prompt process. A first
    `-p 0 -n 0` run fills the kernel cache (and the weight cache), as any earlier use would, so
    that compiling counts only in the cold column, not in the warm figures and peak RSS."""
    clinfer_bench(path, 0, 0, 1)
    speed, js, _, rss = clinfer_bench(path, 512, 32, reps)
    speed.update(clinfer_bench(path, 64, 0, reps)[0])
    _, first, wall, _ = clinfer_bench(path, 0, 0, 1)
    return {"speed": speed, "rss": rss, "load": first["load_ms"] / 1e3, "ttft": wall,
            "backend": js["backend"]}


def peer_load_s(path):
    """llama.cpp's own model load time, from llama-simple's timing report."""
    out = run([llama_simple, "-m", path, "-n", "1", PROMPT], with_stderr=True)[0]
    m = re.search(r"load time\s*=\s*([0-9.]+) ms", out)
    return float(m.group(1)) / 1e3 if m else float("nan")


def peer_ttft(path):
    return run([llama_bench, "-m", path, "-t", threads, "-p", "16", "-n", "0", "-r", "1",
                "--no-warmup", "-o", "json"])[1]


def theirs(path):
    out, _, rss = run([llama_bench, "-m", path, "-t", threads, "-p", "64,512", "-n", "32",
                       "-r", reps, "-o", "json"])
    speed = {("tg%d" % r["n_gen"]) if r["n_gen"] else ("pp%d" % r["n_prompt"]): r["avg_ts"]
             for r in json.loads(out)}
    return {"speed": speed, "rss": rss, "load": peer_load_s(path), "ttft": peer_ttft(path)}


def cold(path):
    """Both engines' first-token process after evicting the file from the page cache; clinfer's
    with an empty kernel cache too (llama.cpp's CPU backend compiles nothing at run time)."""
    left = [evict(path)]
    lb = peer_ttft(path)
    left.append(evict(path))
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, CLINFER_CACHE_DIR=empty)
        _, js, wall, _ = clinfer_bench(path, 0, 0, 1, env)
    return {"ours": wall, "ours_load": js["load_ms"] / 1e3, "theirs": lb,
            "resident_mib": max(left)}


def measure(path):
    """Both engines on one file, for ROUNDS rounds, then cold: its table row."""
    name = os.path.basename(path)
    say("%s (%d rounds)" % (name, rounds))
    results, bws = [], []
    for k in range(rounds):
        # alternate who goes first: a drift in the machine's load hits both alike
        if k % 2:
            b = ours(path)
            a = theirs(path)
        else:
            a = theirs(path)
            b = ours(path)
        results.append((b, a))
        bws.append(float(run([read_bandwidth, threads])[0]))
        say("  round %d: tg32 %.2f / %.2f, pp512 %.1f / %.1f" % (
            k + 1, b["speed"]["tg32"], a["speed"]["tg32"], b["speed"]["pp512"],
            a["speed"]["pp512"]))
    row = {"name": name, "bytes": weight_bytes(path), "cold": cold(path),
           "bandwidth": statistics.median(bws),
           "backend": results[0][0]["backend"]}
    for test in ("tg32", "pp64", "pp512"):
        row[test] = (statistics.median(b["speed"][test] for b, _ in results),
                     statistics.median(a["speed"][test] for _, a in results),
                     statistics.median(b["speed"][test] / a["speed"][test] for b, a in results))
    for key in ("load", "ttft"):
        row[key] = (statistics.median(b[key] for b, _ in results),
                    statistics.median(a[key] for _, a in results))
    row["rss"] = (max(b["rss"] for b, _ in results), max(a["rss"] for _, a in results))
    say(ROW_MARK[len("real_shapes: "):] + json.dumps(row)[1:])  # should the run not finish
    return row


def cached(row):
    """A note for a cold cell whose file partly stayed in the page cache."""
    mib = row["cold"]["resident_mib"]
    return " (%.0f MiB of the file stayed cached)" % mib if mib >= 1 else ""


def print_table(rows, bandwidth, threads, reps, rounds):
    print("| model | weights | tg32 t/s clinfer / llama.cpp | tg32 ratio | % of read roofline "
          "clinfer / llama.cpp | pp64 t/s | pp64 ratio | pp512 t/s | pp512 ratio | load s | "
          "TTFT warm s | TTFT cold s | peak RSS MiB |")
    print("| --- |" + " ---: |" * 12)
    for r in rows:
        roof = r.get("bandwidth", bandwidth) * 1e9 / r["bytes"]
        tg, pp64, pp512 = tuple(r["tg32"]), tuple(r["pp64"]), tuple(r["pp512"])
        cells = [r["name"], "%.2f GiB" % (r["bytes"] / 2**30),
                 "%.2f / %.2f" % tg[:2], "%.2f" % tg[2],
                 "%.0f%% / %.0f%% of %.1f GB/s" % (100 * tg[0] / roof, 100 * tg[1] / roof,
                                                   r.get("bandwidth", bandwidth)),
                 "%.1f / %.1f" % pp64[:2], "%.2f" % pp64[2], "%.1f / %.1f" % pp512[:2],
                 "%.2f" % pp512[2], "%.2f / %.2f" % tuple(r["load"]), "%.2f / %.2f" % tuple(r["ttft"]),
                 "%.1f / %.1f" % (r["cold"]["ours"], r["cold"]["theirs"]) + cached(r),
                 "%.0f / %.0f" % tuple(r["rss"])]
        print("| " + " | ".join(cells) + " |")
    print()
    print("Pairs are clinfer / llama.cpp; ratios clinfer / llama.cpp (the median of the rounds' "
          "ratios), speeds medians over %d rounds that alternate which engine goes first, each "
          "engine's figure the mean of %s repetitions after a warm-up. clinfer device: %s, "
          "--act q8; llama.cpp: CPU backend, %s threads. Read roofline: the GB/s "
          "bench/read_bandwidth.c (%s threads) measured after each round (median); roofline t/s "
          "= that / the file's weight bytes (a mixture of experts': those one token reads). "
          "Cold: file evicted from the page cache (unless another process maps it: the cell "
          "says so) and, for clinfer, an empty kernel cache (its load alone took %s s)."
          % (rounds, reps, rows[0]["backend"], threads, threads,
             ", ".join("%.1f" % r["cold"]["ours_load"] for r in rows)))


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        log, bandwidth, threads, reps, rounds = sys.argv[2:7]
        with open(log) as f:
            rows = [json.loads("{" + line.split(ROW_MARK, 1)[1]) for line in f if ROW_MARK in line]
    else:
        clinfer, peer_bin, read_bandwidth, threads, reps, rounds = sys.argv[1:7]
        bandwidth, rounds = "nan", int(rounds)
        llama_bench = os.path.join(peer_bin, "llama-bench")
        llama_simple = os.path.join(peer_bin, "llama-simple")
        rows = [measure(path) for path in sys.argv[7:]]
    print_table(rows, float(bandwidth), threads, reps, int(rounds))
