#!/usr/bin/env python3
"""Where a process's resident memory goes at its peak: runs COMMAND, reads /proc/PID/smaps every
50 ms, and prints the largest resident set seen with its mappings summed by name (a file, or
[anon], [heap], [stack]), largest first. A sample, so a peak shorter than 50 ms can be missed; the
total is within a few MiB of wait4's peak RSS (`/usr/bin/time -v`).

usage: bench/rss_map.py [-n TOP] COMMAND [ARGS...]   (TOP: mappings printed, default 8)"""
import collections
import re
import subprocess
import sys
import time

MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def sample(pid):
    """Resident KiB per mapping name, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    rss, name = collections.Counter(), "[anon]"
    for line in lines:
        if MAPPING.match(line):
            fields = line.split(None, 5)
            name = fields[5] if len(fields) > 5 else "[anon]"
        elif line.startswith("Rss:"):
            rss[name] += int(line.split()[1])
    return rss


def main(argv):
    top = 8
    if len(argv) > 2 and argv[0] == "-n":
        top, argv = int(argv[1]), argv[2:]
    if not argv:
        sys.exit(__doc__)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    peak = collections.Counter()
    while proc.poll() is None:
        rss = sample(proc.pid)
        if rss and sum(rss.values()) > sum(peak.values()):
            peak = rss
        time.sleep(0.05)
    print(f"peak resident (sampled): {sum(peak.values()) // 1024} MiB, exit status {proc.returncode}")
    for name, kib in peak.most_common(top):
        print(f"{kib // 1024:8d} MiB  {name}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
