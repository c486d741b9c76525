"""The placement flags of the CLI (tools/cli_placement.c) on two PoCL devices
(POCL_DEVICES="pthread pthread", tests/split.cmake) and a tiny model: `clinfer info` prints a
split's placement; `clinfer run` split by --device A,B, --tensor-split and -ngl gives one device's
greedy text; `clinfer serve` split across both answers as on one; bad placements and a model that
fits no split (CLINFER_DEVICE_MEMORY) exit 1 with one line saying why.
Usage: test_split_cli.py CLINFER WRITE_TINY_MODEL"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server  # noqa: E402

clinfer, writer = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAILED:", what)


def cli(*args, env=None):
    """The command's run, stdout and stderr as text (a tiny model's bytes replaced where they
    are not UTF-8)."""
    r = subprocess.run([clinfer, *args], capture_output=True, timeout=300,
                       env={**os.environ, **(env or {})})
    r.stdout = r.stdout.decode("utf-8", errors="replace")
    r.stderr = r.stderr.decode("utf-8", errors="replace")
    return r


devices = cli("devices").stdout
if len(re.findall(r"^\*? *\d+ +Portable Computing Language", devices, re.M)) < 2:
    print("fewer than two PoCL devices (POCL_DEVICES=\"pthread pthread\"): skipped")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="clinfer-split-cli-")
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)

info = cli("info", "-m", model, "--device", "0,1", "-q")
check(info.returncode == 0, f"info --device 0,1: {info.stderr}")
check(re.search(r"placement:\n  device 0: layers 0-0, embeddings.*\n  device 1: layers 1-1, head",
                info.stdout), f"info --device 0,1 placement:\n{info.stdout}")
info = cli("info", "-m", model, "-ngl", "1", "--device", "1", "-q")
check(re.search(r"device 0: layers 0-0, embeddings, head.*\n  device 1: layers 1-1,",
                info.stdout), f"info -ngl 1 --device 1 placement:\n{info.stdout}")

run = ["run", "-m", model, "-p", "hello world", "-n", "12", "--temp", "0", "-q"]
one = cli(*run, "--device", "0")
check(one.returncode == 0 and one.stdout, f"run on one device: {one.stderr}")
for flags in (["--device", "0,1"], ["--device", "1,0", "--tensor-split", "1,3"],
              ["-ngl", "1", "--device", "1"], ["--n-gpu-layers", "2", "--device", "1"],
              ["-dev", "0,1", "-ts", "3,1"]):
    got = cli(*run, *flags)
    check(got.returncode == 0 and got.stdout == one.stdout,
          f"run {' '.join(flags)}: {got.stdout!r} (exit {got.returncode}, {got.stderr}) "
          f"against one device's {one.stdout!r}")

refusals = [
    (["--device", "0,0"], {}, "listed twice"),
    (["--device", "0,1", "-ngl", "1"], {}, "exclude each other"),
    (["--device", "0,"], {}, "not a list"),
    (["--device", "0,1", "--tensor-split", "1,x"], {}, "not a number"),
    (["-ngl", "-2"], {}, "not a whole number"),
    (["--device", "0,7"], {}, "no device with that index"),
    ([], {"CLINFER_DEVICE_MEMORY": "4096"}, "do not fit"),
    (["--tensor-split", "1,3"], {}, "name 2 device(s), but the device list (--device A,B) has 0"),
    (["--device", "0,1", "--tensor-split", "1,1,1"], {}, "name 3 device(s), but the device list (--device A,B) has 2"),
    (["--reference", "-ngl", "1"], {}, "the reference backend"),
    (["--reference", "--device", "0,1"], {}, "the reference backend"),
    (["--reference", "--tensor-split", "1,1"], {}, "the reference backend"),
]
for flags, env, says in refusals:
    got = cli("info", "-m", model, "-q", *flags, env=env)
    lines = got.stderr.strip().split("\n")
    check(got.returncode == 1 and len(lines) == 1 and says in got.stderr,
          f"info {' '.join(flags)} {env}: exit {got.returncode}, stderr {got.stderr!r}, "
          f"wanted one line with '{says}'")

body = {"prompt": "hello world", "max_tokens": 12, "temperature": 0}
texts = []
for flags in (["--device", "0"], ["--device", "0,1"], ["-ngl", "1", "--device", "1"]):
    server = Server(clinfer, model, "--chat-template", "llama2", "-q", "-np", "2", *flags)
    status, resp = server.request("POST", "/v1/completions", body)
    check(status == 200, f"serve {' '.join(flags)}: {status} {resp}")
    texts.append(resp["choices"][0]["text"] if status == 200 else None)
    check(server.stop() == 0, f"serve {' '.join(flags)} exit status")
check(texts[0] and texts.count(texts[0]) == len(texts), f"served texts differ: {texts}")

subprocess.run(["rm", "-rf", tmp])
print(f"test_split_cli: {failures} failed")
sys.exit(1 if failures else 0)
