#!/usr/bin/env python3
"""Fails (exit 1) on a source file outside tests/ longer than MAX_LINES, kernels and scripts
included: a file past it holds more than one thing to read (issue 45's rule; split it by what
its parts are for).

usage: check_file_lines.py SOURCE_DIR
"""
import os
import sys

MAX_LINES = 600
DIRS = ["include", "base", "src", "backends", "cl", "tools", "bench"]
EXTENSIONS = (".c", ".h", ".cl", ".clh", ".cpp", ".py", ".sh", ".cmake")


def main():
    root = sys.argv[1]
    long_files = []
    for top in DIRS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    n = sum(1 for _ in f)
                if n > MAX_LINES:
                    long_files.append((os.path.relpath(path, root), n))
    for path, n in long_files:
        print(f"{path}: {n} lines, more than {MAX_LINES}")
    if not long_files:
        print(f"every source file outside tests/ has at most {MAX_LINES} lines")
    return 1 if long_files else 0


if __name__ == "__main__":
    sys.exit(main())
