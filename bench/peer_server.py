"""A server of either engine (llama-server, clinfer serve) on a free loopback port, for the bench
scripts that ask both the same thing: `with serving(cmd) as url:` starts cmd with --port, waits
for its /health (five minutes at most: a cold kernel cache compiles first), and stops it after;
post(url, path, body) sends one JSON request and returns the JSON answer."""
import contextlib
import json
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, path, body, timeout=600):
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


@contextlib.contextmanager
def serving(cmd):
    port = free_port()
    p = subprocess.Popen(cmd + ["--port", str(port)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(1500):
            if p.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited ({p.returncode}) before serving")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.2)
        yield url
    finally:
        p.terminate()
        p.wait()
