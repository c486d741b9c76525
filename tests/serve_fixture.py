"""What the tests of `clinfer serve` share: a server on a free loopback port (--port 0; the port
is read from its 'listening' line), HTTP calls with the standard library, and checks that count
failures rather than stop at the first. Traffic goes to 127.0.0.1 only."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, flush=True)
    return cond


def finish(name):
    print(f"{name}: {len(failures)} failed", flush=True)
    sys.exit(1 if failures else 0)


def run_in_venv(venv, package, inner_env):
    """Runs this script again with the Python of venv, where package from PyPI is installed once
    (kept for later runs), and exits with its status; exits 77 (skipped) when the registry cannot
    be reached. Inside (inner_env set to 1 by the outer run) it returns at once."""
    if os.environ.get(inner_env) == "1":
        return
    py = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, f".{package}-installed")
    if not os.path.exists(marker):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              package], capture_output=True, text=True, timeout=600)
        if pip.returncode:
            print(f"skipped: cannot install the {package} client from PyPI:\n" +
                  pip.stderr[-2000:])
            sys.exit(77)
        open(marker, "w").close()
    env = {**os.environ, inner_env: "1"}
    sys.exit(subprocess.run([py, os.path.abspath(sys.argv[0]), *sys.argv[1:]],
                            env=env).returncode)


class Server:
    """`clinfer serve` on 127.0.0.1:0 with the given options; stop() sends SIGTERM and returns
    the exit status."""

    def __init__(self, clinfer, model, *args, wait_ready=True):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                            f"clinfer-serve-{os.getpid()}-{time.monotonic_ns()}.log")
        # the server appends through a descriptor of its own: one shared with our reads would
        # share their file offset, and a line written after a seek would overwrite the start
        with open(path, "a") as out:
            self.proc = subprocess.Popen([clinfer, "serve", "-m", model, "--port", "0", *args],
                                         stdout=subprocess.DEVNULL, stderr=out)
        self.log = open(path)
        self.port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m and (not wait_ready or "clinfer: ready" in self.stderr()):
                self.port = int(m.group(1))
                return
            time.sleep(0.02)
        if self.proc.poll() is None:
            self.proc.kill()
        raise RuntimeError(f"the server did not start (exit {self.proc.wait()}):\n"
                           f"{self.stderr()}")

    def stderr(self):
        self.log.seek(0)
        return self.log.read()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def connect(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, raw=None):
        """(status, parsed JSON or text) of one request on a fresh connection."""
        c = self.connect()
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        text = r.read().decode("utf-8", errors="replace")
        c.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text

    def stream(self, path, body):
        """(status, the events' JSON objects, whether it ended with [DONE])."""
        c = self.connect()
        c.request("POST", path, body=json.dumps({**body, "stream": True}))
        r = c.getresponse()
        events, done = [], False
        if r.status == 200:
            for line in r.read().decode("utf-8").split("\n"):
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    events.append(json.loads(line[6:]))
        c.close()
        return r.status, events, done

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends sig (None: none, the server is ending by itself) and returns the exit status."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.log.close()
            os.unlink(self.log.name)


def tiny_server(clinfer, writer, name, *args):
    """(model, Server): the tiny llama model written into a temporary folder (removed at exit),
    served on the reference backend with the llama2 chat template and args."""
    import atexit
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix=f"clinfer-{name}-")
    atexit.register(shutil.rmtree, tmp, True)
    model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([writer, model, "llama"], check=True)
    return model, Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", *args)


def run_threads(n, fn):
    """fn(0) .. fn(n - 1), each on its own thread, all at once; returns when all are done."""
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def pydantic_thing():
    """The Pydantic model the client tests (in their venvs, where pydantic is) ask structured
    output for: a bool, an integer and an enum, no other members."""
    from typing import Literal

    import pydantic

    class Thing(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        ok: bool
        n: int
        color: Literal["red", "green", "blue"]

    return Thing


def chat_text(resp):
    return resp["choices"][0]["message"]["content"]


def streamed_text(events, chat):
    key = "delta" if chat else None
    out = []
    for e in events:
        for ch in e.get("choices", []):
            out.append(ch[key].get("content", "") if chat else ch["text"])
    return "".join(out)


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None
