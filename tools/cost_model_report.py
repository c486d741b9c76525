#!/usr/bin/env python3
"""The table of tools/cost_model.sh: for runs 1 .. N in DIR (N.op: cost_ops's JSON line,
N.launches: the plugin's JSON lines, N.kernels: new or old), one row per kernel launch.

usage: cost_model_report.py DIR N [JSON_FILE]
"""
import json
import sys


def rows(folder, count):
    for i in range(1, count + 1):
        with open(f"{folder}/{i}.op") as f:
            op = json.loads(f.readline())
        with open(f"{folder}/{i}.kernels") as f:
            kernels = f.read().strip()
        with open(f"{folder}/{i}.launches") as f:
            launches = [json.loads(line) for line in f if line.strip()]
        if op["op"] == "matvec":
            case = f"matvec {op['type']} {op['m']} x {op['k']}"
        else:
            case = (f"attention {op['heads']}/{op['kv_heads']} x {op['head_dim']}, n {op['n']}, "
                    f"pos0 {op['pos0']}, {op['kv']}")
        for launch in launches:
            items = launch["global"][0] * launch["global"][1] * launch["global"][2]
            sectors = launch["sectors"]
            yield {
                "case": case,
                "kernels": kernels,
                "kernel": launch["kernel"],
                "op_bytes": op["bytes"],
                "items": items,
                "groups": launch["groups"],
                "local": launch["local"][0] * launch["local"][1] * launch["local"][2],
                "insts_per_byte": launch["insts"] / op["bytes"],
                "loaded_per_byte": launch["load_bytes"] / op["bytes"],
                "unique_per_byte": launch["unique_bytes"] / op["bytes"],
                "coalesced": launch["min_sectors"] / sectors if sectors else 1.0,
                "longest_item": launch["max_item_insts"],
                "insts": launch["insts"],
            }


def main():
    folder, count = sys.argv[1], int(sys.argv[2])
    table = list(rows(folder, count))
    print("| case | kernels | kernel | items (groups of) | insts/B | loaded/B | unique/B | "
          "coalesced | longest item |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in table:
        print(f"| {r['case']} | {r['kernels']} | {r['kernel']} | {r['items']} ({r['local']}) | "
              f"{r['insts_per_byte']:.2f} | {r['loaded_per_byte']:.2f} | "
              f"{r['unique_per_byte']:.2f} | {r['coalesced']:.2f} | {r['longest_item']} |")
    if len(sys.argv) > 3 and sys.argv[3]:
        with open(sys.argv[3], "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
