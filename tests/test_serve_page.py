"""The chat page of `clinfer serve` (tools/serve_page.html at /) in a real browser: headless
Chromium from Debian, driven through the Chrome DevTools protocol on its --remote-debugging-port
by a small websocket client of the standard library's sockets (no download). Against a tiny
generated model on 127.0.0.1: the page asks for the API key, then shows the model's name; a
message typed and sent with clicks streams an answer that equals the API's own at temperature 0;
the second turn carries the first (the conversation is kept), "New chat" forgets it; markup in a
message stays text; an error is shown; Stop ends a long answer and the server cancels it. Also,
without a browser: GET / gives the page with a Content-Security-Policy to a browser's Accept and
"Ollama is running" to ollama's clients (and HEAD /). Skipped (77) without chromium.
Usage: test_serve_page.py CLINFER WRITE_TINY_MODEL"""
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

clinfer, writer = sys.argv[1:3]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from serve_fixture import Server, check, finish, tiny_server  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    print("skipped: no chromium (apt-get install chromium)")
    sys.exit(77)
KEY = "k-page"


class DevTools:
    """One page target of Chromium over the DevTools protocol: a websocket client (RFC 6455,
    text frames, client-masked) enough for its JSON calls."""

    def __init__(self, ws_url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", ws_url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise EOFError("the DevTools websocket closed during its handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"DevTools websocket handshake: {head!r}")
        self.next_id = 0
        self.events = []

    def _send(self, text, opcode=0x1):
        data = text.encode() if isinstance(text, str) else text
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the DevTools websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _message(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise EOFError("the DevTools websocket closed")
            if opcode == 0x9:
                self._send(payload, 0xA)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return json.loads(message)

    def call(self, method, **params):
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = self._message()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def js(self, expression):
        """The value of a JavaScript expression in the page."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expression, what, timeout=60):
        """Polls until the expression is truthy; its value, or None (a failed check) at the
        timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.js(expression)
            if v:
                return v
            time.sleep(0.02)
        state = self.js("[document.body.dataset.state, document.getElementById('error')"
                        ".textContent, document.getElementById('log').innerText.slice(-300)]")
        check(False, f"timed out waiting for {what} ({expression}); the page's state, error "
              f"and log's end: {state}")
        return None

    def click(self, selector):
        """A left click at the centre of the element, as a mouse would."""
        x, y = self.js(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                       ".getBoundingClientRect(); return [r.x + r.width / 2, "
                       "r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def type(self, selector, text):
        """Clicks the field and types the text into it."""
        self.click(selector)
        self.call("Input.insertText", text=text)


def start_chromium(profile):
    """(process, DevTools of its page): headless Chromium on a free DevTools port."""
    log = open(os.path.join(profile, "stderr"), "w+")
    proc = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--no-first-run",
                             "--no-default-browser-check", "--disable-extensions",
                             "--no-proxy-server", f"--user-data-dir={profile}",
                             "--remote-debugging-port=0", "--window-size=1000,800",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 60
    port = None
    while port is None and time.monotonic() < deadline and proc.poll() is None:
        log.seek(0)
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", log.read())
        port = m and int(m.group(1))
        time.sleep(0.05)
    if port is None:
        proc.kill()
        log.seek(0)
        raise RuntimeError(f"chromium did not start:\n{log.read()[-3000:]}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
        pages = [t for t in json.load(r) if t["type"] == "page"]
    tab = DevTools(pages[0]["webSocketDebuggerUrl"])
    tab.call("Page.enable")
    tab.call("Runtime.enable")
    # CSP violations, recorded from before the page's own script runs
    tab.call("Page.addScriptToEvaluateOnNewDocument", source=(
        "window.__csp = []; document.addEventListener('securitypolicyviolation', "
        "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"))
    return proc, tab


def open_page(tab, port):
    tab.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
    tab.wait("document.readyState === 'complete' && document.body.dataset.state !== 'starting'",
             "the page to load")


ANSWERS = "[...document.querySelectorAll('#log .msg.assistant .text')].map(e => e.textContent)"
IDLE = "document.body.dataset.state === 'idle'"
ERROR = "document.getElementById('error').textContent"


def send(tab, text, n_answers):
    """Types text, clicks Send, and waits for the page to be idle with n_answers answers; the
    last answer's text."""
    tab.type("#input", text)
    tab.click("#send")
    tab.wait(f"{IDLE} && {ANSWERS}.length === {n_answers}", f"answer {n_answers}")
    return tab.js(f"{ANSWERS}.at(-1)")


def api_answer(s, messages):
    st, r = s.request("POST", "/v1/chat/completions",
                      {"messages": messages, "temperature": 0, "max_tokens": 24},
                      headers={"Authorization": "Bearer " + KEY})
    return r["choices"][0]["message"]["content"] if st == 200 else f"status {st}: {r}"


def without_browser(s):
    c = s.connect()
    c.request("GET", "/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    r = c.getresponse()
    page, csp = r.read().decode(), r.getheader("Content-Security-Policy") or ""
    check(r.status == 200 and r.getheader("Content-Type").startswith("text/html") and
          "<script>" in page and "/v1/chat/completions" in page, f"GET / as a browser: {r.status}")
    check("script-src 'sha256-" in csp and "unsafe" not in csp and "connect-src 'self'" in csp,
          f"the page's CSP: {csp}")
    check(r.getheader("Vary") == "Accept", "Vary: Accept")
    c.close()
    st, text = s.request("GET", "/", headers={"Authorization": "Bearer " + KEY})
    check(st == 200 and text == "Ollama is running", f"GET / as ollama's clients: {st} {text!r}")
    st, r = s.request("GET", "/")
    check(st == 401, f"GET / without text/html nor a key: {st}")
    c = s.connect()
    c.request("HEAD", "/", headers={"Accept": "text/html", "Authorization": "Bearer " + KEY})
    r = c.getresponse()
    check(r.status == 200 and r.getheader("Content-Type").startswith("text/plain") and
          r.read() == b"", f"HEAD / stays ollama's: {r.status}")
    c.close()


def conversation(tab, s):
    open_page(tab, s.port)
    check(tab.js("document.body.dataset.state") == "key", "the page asks for the key")
    tab.type("#key", KEY)
    tab.click("#keysave")
    check(tab.wait(f"{IDLE} && document.getElementById('model').textContent", "the model's name")
          == "tiny.gguf", "the model's name from /v1/models")
    tab.type("#temp", "0")
    tab.type("#maxtok", "24")
    first = "<b>hello</b> <img src=x onerror=alert(1)> there"
    a1 = send(tab, first, 1)
    check(a1 and a1 == api_answer(s, [{"role": "user", "content": first}]),
          f"the page's answer {a1!r} is the API's")
    check(tab.js("document.querySelector('#log .msg.user .text').textContent") == first and
          tab.js("document.querySelector('#log b, #log img') === null"),
          "markup in a message stays text")
    a2 = send(tab, "and then?", 2)
    history = [{"role": "user", "content": first}, {"role": "assistant", "content": a1},
               {"role": "user", "content": "and then?"}]
    check(a2 and a2 == api_answer(s, history), f"the second turn {a2!r} carries the first")
    check(tab.js("document.querySelectorAll('#log .msg').length") == 4, "four messages shown")
    tab.click("#new")
    check(tab.js("document.querySelectorAll('#log .msg').length") == 0, "New chat clears the log")
    again = send(tab, first, 1)
    check(again == a1, f"after New chat the same message gets the first answer: {again!r}")
    # an error: more tokens than the context holds; the server's message is shown
    tab.js("document.getElementById('maxtok').value = '100000'")
    send(tab, "too long", 2)
    error = tab.js(ERROR)
    check(error.startswith("400") and "context" in error, f"the error is shown: {error!r}")
    check(tab.js("window.__csp") == [], f"CSP violations: {tab.js('window.__csp')}")


def stop_button(tab, s):
    open_page(tab, s.port)
    check(tab.wait(IDLE, "the page, without a key"), "no key asked of a server without one")
    tab.type("#temp", "0")  # greedy: this message's answer on the tiny model runs to the context
    tab.type("#input", "story")
    tab.click("#send")
    length = "(" + ANSWERS + ".at(-1) || '').length"
    n1 = tab.wait(f"document.body.dataset.state === 'busy' && {length}", "the answer to start")
    time.sleep(0.3)
    n2 = tab.js(length)
    check(tab.js("document.body.dataset.state") == "busy" and n1 and n2 > n1,
          f"the answer streams: {n1} then {n2} characters")
    tab.click("#stop")
    tab.wait(IDLE, "Stop to end the answer", timeout=5)
    n3 = tab.js(length)
    time.sleep(0.3)
    note = tab.js("(document.querySelector('#log .note') || {}).textContent")
    check(tab.js(length) == n3 and note == "stopped",
          f"the answer stopped and says so: {note!r}, "
          f"error {tab.js(ERROR)!r}")
    deadline = time.monotonic() + 10
    cancelled = 0
    while time.monotonic() < deadline and cancelled < 1:
        st, text = s.request("GET", "/metrics")
        m = re.search(r"^clinfer_generations_cancelled_total (\d+)", text, re.M)
        cancelled = int(m.group(1)) if m else 0
        time.sleep(0.05)
    check(cancelled == 1, "the server cancelled the stopped generation")


start = time.monotonic()
profile = tempfile.mkdtemp(prefix="clinfer-page-chromium-")
proc = None
model, s = tiny_server(clinfer, writer, "serve-page", "-np", "1", "-c", "1024", "--api-key", KEY)
try:
    without_browser(s)
    proc, tab = start_chromium(profile)
    conversation(tab, s)
    exceptions = [e for e in tab.events if e.get("method") == "Runtime.exceptionThrown"]
    check(not exceptions, f"the page threw: {exceptions}")
    check(s.stop() == 0, "exit 0")
    long = Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", "-np", "1",
                  "-c", "16384")
    try:
        stop_button(tab, long)
    finally:
        check(long.stop() == 0, "exit 0 (the long server)")
finally:
    if s.proc.poll() is None:
        s.stop()
    if proc:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    for _ in range(20):  # a helper process of Chromium may still write there for a moment
        shutil.rmtree(profile, True)
        if not os.path.exists(profile):
            break
        time.sleep(0.1)
print(f"test_serve_page: {time.monotonic() - start:.1f} s")
finish("test_serve_page")
