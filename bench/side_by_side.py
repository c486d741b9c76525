"""What the side-by-side bench scripts (bench/compare_llamacpp.sh, bench/real_shapes.sh) share:
running one engine's process and measuring it from outside."""
import os
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None, with_stderr=False):
    """Runs cmd; returns (stdout, wall seconds, the process's peak resident MiB: wait4's
    ru_maxrss, the figure /usr/bin/time -v prints as its maximum resident set size). stdout
    has stderr in it with with_stderr. Exits with the command's stderr when it fails."""
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if with_stderr else err, text=True, env=env)
        stdout = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            sys.exit("bench: %s failed (%d):\n%s" % (" ".join(cmd), code, err.read()[-2000:]))
        return stdout, wall, usage.ru_maxrss / 1024
