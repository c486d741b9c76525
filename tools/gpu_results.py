#!/usr/bin/env python3
"""Issue 46's machine-readable GPU figures (bench/results/gpu-YYYYMMDD.json, on stdout) from a
tools/gpu_check.sh --legacy results folder: devices.json, clinfer-bench-NAME.json and
clinfer-legacy-bench-NAME.json, llama-bench-NAME.json where llama.cpp CUDA ran there (else the
figures recorded in bench/results/llamacpp-cuda-h200.json for the same file on an H200, marked
as such), bench-ops-TYPE.json and bench-ops-TYPE-legacy.json.

  matvec_pct       bench_ops' matvec at 14336 x 4096 (f32 x) as % of its copy bandwidth probe
  prefill_pct_fma  pp512 x 2 x n_params FLOP/s (the matmuls' work, attention left out) as % of
                   its FMA probe
Files are named llama-3.2-1b-shape.TYPE.gguf (shape 1b) or llama-3.1-8b-shape.TYPE.gguf (8b).

usage: gpu_results.py OUT COMMIT GGUF...
"""
import json
import os
import re
import sys

MATVEC_SHAPE = (14336, 4096)


def load(folder, name):
    try:
        with open(os.path.join(folder, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def clinfer_rates(bench):
    """{"tg128": t/s, "pp512": t/s} of a clinfer bench --json object."""
    if not bench:
        return None
    return {t["test"]: t["avg_ts"] for t in bench.get("tests", [])}


def llama_rates(entries):
    """The same from llama-bench -o json."""
    if not entries:
        return None
    rates = {}
    for e in entries:
        name = f"pp{e['n_prompt']}" if e.get("n_gen", 0) == 0 else f"tg{e['n_gen']}"
        rates[name] = e["avg_ts"]
    return rates


def matvec_pct(ops, type_name):
    if not ops:
        return None
    for mv in ops.get("matvec", []):
        if (mv["m"], mv["k"]) == MATVEC_SHAPE and not mv["x_q8"] and mv["type"] == type_name:
            return mv["pct_bandwidth"]
    return None


def main():
    out, commit, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    recorded = load(os.path.join(root, "bench", "results"), "llamacpp-cuda-h200.json") or {}
    devices = load(out, "devices.json") or {}
    dev = {}
    if devices.get("default") is not None:
        dev = devices["devices"][devices["default"]]
    result = {"device": dev.get("name"), "driver": dev.get("driver_version"), "commit": commit,
              "copy_gbps": None, "fma_gflops": None, "rows": []}
    for path in files:
        base = os.path.basename(path)
        m = re.match(r"llama-3\.[12]-(1b|8b)-shape\.(.+)\.gguf$", base)
        if not m:
            continue
        shape, type_name = m.group(1), m.group(2)
        name = base[:-len(".gguf")]
        ops_type = type_name[:-2] if type_name.endswith("_M") else type_name
        ops = load(out, f"bench-ops-{ops_type}.json")
        ops_old = load(out, f"bench-ops-{ops_type}-legacy.json")
        if ops and result["copy_gbps"] is None:
            result["copy_gbps"] = ops["roofline"]["read_gbps"]
            result["fma_gflops"] = ops["roofline"]["fma_gflops"]
        bench = load(out, f"clinfer-bench-{name}.json")
        row = {"shape": shape, "type": type_name, "clinfer": clinfer_rates(bench),
               "clinfer_legacy": clinfer_rates(load(out, f"clinfer-legacy-bench-{name}.json")),
               "llamacpp": llama_rates(load(out, f"llama-bench-{name}.json")),
               "matvec_pct": matvec_pct(ops, ops_type),
               "matvec_pct_legacy": matvec_pct(ops_old, ops_type), "prefill_pct_fma": None}
        if row["llamacpp"] is None and f"{shape} {type_name}" in recorded.get("rows", {}):
            row["llamacpp"] = recorded["rows"][f"{shape} {type_name}"]
            row["llamacpp_source"] = recorded["source"]
        pp = (row["clinfer"] or {}).get("pp512")
        fma = ops["roofline"]["fma_gflops"] if ops else None
        if pp and fma and bench and bench.get("n_params"):
            row["prefill_pct_fma"] = 100 * pp * 2 * bench["n_params"] / (fma * 1e9)
        result["rows"].append(row)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
