#!/usr/bin/env python3
"""Checks that the code's layers call and include only downward (docs/ARCHITECTURE.md).

How it reads the code:
- calls: `nm` of every object of the library and the CLI. An object that uses a symbol another
  object defines calls that object's source file; static inline functions in headers are not seen.
- includes: every `#include "NAME"` line of the sources, resolved as the build does (the
  including file's folder, then include/, base/, src/, backends/, cl/, tools/).
- a header belongs to the .c file of the same stem in its folder; one with none is a node of its own.

It fails (exit 1) on a cycle of calls among files (a file that calls another which, through any
chain, calls it back), and on any call or include from a file to one in a higher layer of LAYERS.
Files in one layer may call each other as long as they make no cycle.

usage: check_layers.py SOURCE_DIR OBJECT...
"""
import collections
import fnmatch
import os
import re
import subprocess
import sys

# Lowest first. A file takes the layer of its first matching pattern.
LAYERS = [
    ("api", ["include/*"]),
    ("base", ["base/*"]),
    ("backend interface", ["backends/backend.*", "backends/op_check.c", "backends/op_info.c"]),
    ("reference backend", ["backends/reference/*"]),
    # backends/opencl, by what each file needs: nothing of the backend's context, then the core
    # every family stands on, then the weights and activations, the op families, graph launches
    # and the interface.
    ("opencl: devices, programs, faults", ["backends/opencl/fault.*", "backends/opencl/device.*",
                                            "backends/opencl/cache_dir.*",
                                            "backends/opencl/params.*", "backends/opencl/program.*",
                                            "backends/opencl/route_cl.*",
                                            "cl/*"]),
    ("opencl: core", ["backends/opencl/cl_backend.h", "backends/opencl/launch_cl.c",
                      "backends/opencl/build_cl.c", "backends/opencl/device_setup_cl.c"]),
    ("opencl: kernels per weight type", ["backends/opencl/type_kernels_cl.*"]),
    ("opencl: weight store", ["backends/opencl/repack_cl.c", "backends/opencl/arena_cl.*",
                              "backends/opencl/weight_cache_cl.*", "backends/opencl/weights_cl.*"]),
    ("opencl: activations", ["backends/opencl/act_q8_cl.*"]),
    ("opencl: op families", ["backends/opencl/clblast_cl.c", "backends/opencl/matmul_cl.*",
                             "backends/opencl/gpu_*_cl.*", "backends/opencl/ops_cl.*",
                             "backends/opencl/attention_cl.*", "backends/opencl/moe_cl.*"]),
    ("opencl: graph launches", ["backends/opencl/graph_encode_cl.*", "backends/opencl/graph_cl.*"]),
    ("opencl: the backend", ["backends/opencl/backend_cl.c"]),
    ("backend registry", ["backends/registry.c"]),
    ("core", ["src/*"]),
    ("cli", ["tools/*"]),
]

INCLUDE_DIRS = ["include", "base", "src", "backends", "cl", "tools"]


def layer_of(path):
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatch(path, p) for p in patterns):
            return i
    return None


def node_of(path, root):
    """A header's node is its .c file of the same stem, where there is one."""
    stem, ext = os.path.splitext(path)
    if ext == ".h" and os.path.exists(os.path.join(root, stem + ".c")):
        return stem + ".c"
    return path


def source_of(obj):
    """The source an object was compiled from: CMake names it DIR/FILE.c.o under TARGET.dir/."""
    rel = obj.split(".dir/", 1)[1]
    return rel[:-2] if rel.endswith(".o") else rel


def symbols(objects):
    defined, used = {}, collections.defaultdict(set)
    for obj in objects:
        if "/generated/" in obj:  # data the build writes (the embedded kernels, the model table)
            continue
        src = source_of(obj)
        out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            name, kind = f[0], f[1]
            if kind == "U":
                used[src].add(name)
            elif kind in "TDBRCGV":
                defined[name] = src
    calls = collections.defaultdict(dict)
    for src, names in used.items():
        for name in names:
            target = defined.get(name)
            if target and target != src:
                calls[src].setdefault(target, []).append(name)
    return calls


def includes(root, files):
    edges = collections.defaultdict(dict)
    pattern = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        for name in pattern.findall(text):
            here = os.path.dirname(path)
            for d in [here] + INCLUDE_DIRS:
                cand = os.path.normpath(os.path.join(d, name))
                if os.path.exists(os.path.join(root, cand)):
                    edges[node_of(path, root)].setdefault(node_of(cand, root), []).append(name)
                    break
    return edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {t for e in edges.values() for t in e})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root, objects = sys.argv[1], sys.argv[2:]
    calls = symbols(objects)
    files = []
    for top in ["include", "base", "src", "backends", "tools"]:
        for d, _, names in os.walk(os.path.join(root, top)):
            if os.path.relpath(d, root).startswith("tools/fuzz"):
                continue
            files += [os.path.relpath(os.path.join(d, n), root) for n in names
                      if n.endswith((".c", ".h"))]
    incl = includes(root, sorted(files))
    problems = []
    for comp in cycles(calls):
        problems.append("call cycle among " + ", ".join(comp) + ":")
        for a in comp:
            for b in comp:
                if b in calls.get(a, {}):
                    problems.append(f"  {a} -> {b}: {', '.join(sorted(calls[a][b])[:4])}")
    for kind, edges in (("calls", calls), ("includes", incl)):
        for a in sorted(edges):
            la = layer_of(a)
            for b, what in sorted(edges[a].items()):
                lb = layer_of(b)
                if la is None or lb is None:
                    missing = a if la is None else b
                    problems.append(f"{missing}: in no layer of tests/check_layers.py")
                elif lb > la:
                    problems.append(f"{a} ({LAYERS[la][0]}) {kind} {b} ({LAYERS[lb][0]}): "
                                    f"{', '.join(sorted(set(what))[:4])}")
    for p in dict.fromkeys(problems):
        print(p)
    n_calls = sum(len(e) for e in calls.values())
    n_incl = sum(len(e) for e in incl.values())
    print(f"check_layers: {len(objects)} objects, {n_calls} file-to-file calls, {n_incl} includes, "
          f"{len(dict.fromkeys(problems))} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
