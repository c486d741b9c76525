#!/usr/bin/env python3
"""Writes tools/gpu_check.sh's summary.md (on stdout) from what it left in its results folder:
steps.tsv, devices.json, devices.txt, clinfo.txt, nvidia-smi.txt, ctest-tests.json (ctest
--show-only=json-v1), ctest-junit.xml, clinfer-bench-NAME.json and llama-bench-NAME.json.

usage: tools/gpu_check_summary.py OUT STARTED COMMIT COMMAND LOAD_BEFORE LOAD_AFTER LABEL [GGUF...]
"""
import json, os, platform, sys
import xml.etree.ElementTree as ET

out, started, commit, command, load_before, load_after, label = sys.argv[1:8]
files = sys.argv[8:]

def read(name):
    path = os.path.join(out, name)
    return open(path, errors="replace").read() if os.path.exists(path) else None

def load_json(name):
    try:
        return json.loads(read(name) or "null")
    except ValueError:
        return None

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), platform.machine())
print("# clinfer GPU check, %s\n" % started)
print("- command: `%s`" % command.strip())
print("- commit: %s" % commit)
print("- host: %s %s, %s, %d CPUs; load average %s before, %s after"
      % (platform.system(), platform.release(), cpu, os.cpu_count(), load_before, load_after))
if read("nvidia-smi.txt"):
    print("- nvidia-smi -L: %s" % "; ".join(read("nvidia-smi.txt").split("\n")).strip("; "))
devices = load_json("devices.json")
dev = None
if devices and devices.get("default") is not None:
    dev = devices["devices"][devices["default"]]
    print("- device %d: %s (%s %s, driver %s, %s), kernel path %s; %s"
          % (dev["index"], dev["name"], dev["platform"], dev["platform_version"],
             dev["driver_version"], dev["device_version"], dev["kernel_path"], devices["reason"]))

print("\n## Steps\n\n| step | result | log / note |\n| --- | --- | --- |")
steps = [l.split("\t") for l in (read("steps.tsv") or "").splitlines() if l]
for name, result, note in steps:
    print("| %s | %s | %s |" % (name, result, note))
counts = {r: sum(1 for s in steps if s[1] == r) for r in ("passed", "failed", "skipped")}
print("\n%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"],
                                              counts["skipped"]))

for name, title in (("devices.txt", "clinfer devices"), ("clinfo.txt", "clinfo -l")):
    if read(name):
        print("\n## %s\n\n```\n%s```" % (title, read(name)))

# The suite: every test's result (JUnit) and the kernel path it forces (CTest's properties).
paths = {}
tests = load_json("ctest-tests.json") or {"tests": []}
for t in tests["tests"]:
    env = next((p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"), [])
    forced = [e.split("=", 1)[1] for e in env if e.startswith("CLINFER_KERNEL_PATH=")]
    paths[t["name"]] = forced[0] if forced else None
results = {}
if read("ctest-junit.xml"):
    for case in ET.parse(os.path.join(out, "ctest-junit.xml")).getroot().iter("testcase"):
        # CTest writes status "notrun" both for a skip (exit 77) and for a test it could not
        # start (an executable missing); only the first is a skip.
        status, skip = case.get("status"), case.find("skipped")
        skipped = status == "disabled" or (
            skip is not None and skip.get("message", "").startswith("SKIP_"))
        results[case.get("name")] = ("skipped" if skipped
                                     else "failed" if status in ("notrun", "fail")
                                     or case.find("failure") is not None else "passed")

def tally(names):
    c = {r: 0 for r in ("passed", "failed", "skipped")}
    for n in names:
        c[results[n]] += 1
    return "%d passed, %d failed, %d skipped" % (c["passed"], c["failed"], c["skipped"])

# Tests grouped by kernel path: the device's own (tests that force none), then each forced one.
default_path = dev["kernel_path"] if dev else "default"
by_path = {}
for n in results:
    by_path.setdefault(paths.get(n), []).append(n)
groups = sorted(by_path.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""))

def path_label(p):
    return "%s (the device's)" % default_path if p is None else "%s (forced)" % p

if results:
    print("\n## Tests (label %s)\n" % label)
    print("All %d: %s.\n" % (len(results), tally(results)))
    print("| kernel path | tests | result |\n| --- | --- | --- |")
    for p, names in groups:
        print("| %s | %s | %s |" % (path_label(p), ", ".join(sorted(names)), tally(names)))
    others = [n for n in sorted(results) if results[n] != "passed"]
    if others:
        print("\nNot passed:\n")
        for n in others:
            print("- %s: %s" % (n, results[n]))

# The bench table: clinfer beside llama.cpp (CUDA) where it ran.
bench = []
for f in files:
    name = os.path.basename(f)[:-len(".gguf")]
    ours = load_json("clinfer-bench-%s.json" % name)
    theirs = load_json("llama-bench-%s.json" % name)
    if not ours:
        continue
    mine = {t["test"][:2]: t for t in ours["tests"]}
    other = {("pp" if r["n_gen"] == 0 else "tg"): r for r in theirs or []}
    for test in ("pp", "tg"):
        if test not in mine:
            continue
        t = mine[test]
        cells = [name, "%.0f MiB" % (ours["size_bytes"] / 2**20), t["test"],
                 "%.2f ± %.2f" % (t["avg_ts"], t["stddev_ts"])]
        o = other.get(test)
        cells += (["%.2f ± %.2f" % (o["avg_ts"], o["stddev_ts"]),
                   "%.2f" % (t["avg_ts"] / o["avg_ts"])] if o else ["", ""])
        cells += ["%.0f ms" % ours["ttft_ms"], "%.0f MiB" % ours["peak_rss_mib"]]
        bench.append(cells)
if bench:
    print("\n## Bench\n")
    print("| model | size | test | clinfer t/s | llama.cpp CUDA t/s | ratio | clinfer TTFT "
          "| clinfer peak RSS |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for cells in bench:
        print("| " + " | ".join(cells) + " |")
    print("\nclinfer: `clinfer bench -p N -n N -r R` (mean ± stddev after a warm-up; TTFT of a "
          "16-token prompt with the model load); llama.cpp: `llama-bench -ngl 99` with the same "
          "-p/-n/-r. The llama-3.2-1b-shape files have random weights "
          "(bench/make_shape_model.py).")

if dev:
    print("\n## Rows for docs/DEVICES.md\n")
    # PoCL's platform version goes on with its build options after a comma.
    version = " ".join(dev["platform_version"].split(",")[0].split())
    suite = "ctest " + ("(all labels)" if label == "all" else "-L " + label)
    for p, names in groups or [(None, [])]:
        if not names:
            ran = "clinfer bench" if bench else "nothing"
        elif p is None:
            ran = "%s: the %d tests that force no path%s" % (suite, len(names),
                                                              "; clinfer bench" if bench else "")
        else:
            ran = "%s: %s (CLINFER_KERNEL_PATH=%s)" % (suite, ", ".join(sorted(names)), p)
        print("| %s | %s | %s | %s | %s | %s | %s | %s |"
              % (dev["platform"], version, dev["driver_version"], dev["name"], path_label(p),
                 ran, tally(names) if names else "suite not run", started.split()[0]))
