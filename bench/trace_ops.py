#!/usr/bin/env python3
"""Per-op summary of a CLINFER_TRACE file: ops grouped by kind and size (bytes moved), with
their count per token, kernel launches per op, time per op, GB/s and ms per token, largest
first. The profile table (CLINFER_PROFILE) sums per op kind; this splits, e.g., the matmuls by
weight shape. A graph launch (a decode step in one launch on CPU devices) is one `graph` event:
trace with CLINFER_GRAPH=0 to see its ops one by one.

usage: bench/trace_ops.py TRACE.json TOKENS [ROWS]
  TOKENS  the tokens the traced run evaluated (for a `clinfer bench -p 0 -n 64 -r 3`:
          4 x 64 decode tokens; its 16-token first-token prompt shows as its own rows)
  ROWS    rows to print (default 12)
"""
import collections
import json
import sys

if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
events = json.load(open(sys.argv[1]))["traceEvents"]
tokens = float(sys.argv[2])
limit = int(sys.argv[3]) if len(sys.argv) == 4 else 12

groups = collections.defaultdict(lambda: [0, 0.0, 0])  # ops, ms, launches
for e in events:
    g = groups[(e["name"], e["args"]["bytes"])]
    g[0] += 1
    g[1] += e["args"]["ms"]
    g[2] += e["args"]["launches"]

print("%-10s %10s %10s %11s %9s %7s %9s" %
      ("op", "KB", "ops/token", "launches/op", "us/op", "GB/s", "ms/token"))
for (name, size), (ops, ms, launches) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:limit]:
    per_op = ms / ops
    print("%-10s %10.1f %10.1f %11.2f %9.1f %7.1f %9.3f" %
          (name, size / 1e3, ops / tokens, launches / ops, 1e3 * per_op,
           size / (per_op / 1e3) / 1e9 if per_op > 0 else 0.0, ms / tokens))
