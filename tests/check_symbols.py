#!/usr/bin/env python3
"""libclinfer.so exports exactly the functions include/clinfer.h declares (with the headers beside
it that it includes), and the headers mark every function they declare CLINFER_API.

usage: check_symbols.py CC NM HEADER LIBRARY

The header goes through the C preprocessor with CLINFER_API defined as a marker, so comments,
macros and line breaks inside declarations do not matter; only the lines that come from the
headers of the header's own directory are read (not the system headers it includes). Then
`nm -D --defined-only` of the library gives what it exports. Exit 1 with a listing of every difference.
"""
import os
import re
import subprocess
import sys

MARK = "__clinfer_api_mark__"
# Defined by the linker or by a sanitizer's instrumentation (CLINFER_SANITIZE, CLINFER_FUZZ),
# not by the library's code.
TOOL_SYMBOLS = re.compile(r"^(_init|_fini|_edata|_end|__bss_start|__(odr_)?asan\w*|__sancov\w*"
                          r"|__ubsan\w*|__start_\w+|__stop_\w+)$")


def header_functions(cc, header):
    """(functions marked CLINFER_API, functions declared without it)."""
    out = subprocess.run([cc, "-E", f"-DCLINFER_API={MARK}", "-x", "c", header],
                         check=True, capture_output=True, text=True).stdout
    own, text = False, []
    for line in out.splitlines():
        m = re.match(r'#\s*\d+\s+"([^"]*)"', line)
        if m:
            own = os.path.dirname(m.group(1)) == os.path.dirname(header)
        elif own:
            text.append(line)
    text = " ".join(text)
    # After preprocessing, a name followed by "(" is a function declaration, unless the "(" opens
    # a function pointer's "(*name)" (its return type comes before it); the header declares no
    # other kind.
    declared = set(re.findall(r"\b([A-Za-z_]\w*)\s*\((?!\s*\*)", text)) - {MARK}
    marked = set(re.findall(MARK + r"[^;{}()]*?\b([A-Za-z_]\w*)\s*\(", text))
    return marked, declared - marked


def exported(nm, library):
    """{name: nm type letter} of the library's defined dynamic symbols."""
    out = subprocess.run([nm, "-D", "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    symbols = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            name = fields[2].split("@")[0]
            if not TOOL_SYMBOLS.match(name):
                symbols[name] = fields[1]
    return symbols


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    cc, nm, header, library = sys.argv[1:]
    marked, unmarked = header_functions(cc, header)
    symbols = exported(nm, library)
    functions = {n for n, t in symbols.items() if t in "TWi"}
    data = {n: t for n, t in symbols.items() if t not in "TWi"}
    problems = []
    if not marked:
        problems.append(f"{header}: no CLINFER_API declarations found")
    for name in sorted(unmarked):
        problems.append(f"declared without CLINFER_API (so hidden): {name}")
    for name in sorted(functions - marked):
        problems.append(f"exported, not in {header}: {name}")
    for name in sorted(data):
        problems.append(f"exported data ({data[name]}), not a function of the header: {name}")
    for name in sorted(marked - functions):
        problems.append(f"in {header}, not exported: {name}")
    if problems:
        print("\n".join(problems))
        print(f"{len(problems)} difference(s) between {library} and {header}")
        return 1
    print(f"{library} exports the {len(marked)} functions of {header}, nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main())
