"""`clinfer serve` at the HTTP level, through raw sockets on 127.0.0.1, on a tiny generated model:
framing that could smuggle a request (two Content-Lengths, Content-Length with chunked in
either order, an unknown Transfer-Encoding), an invalid Content-Length, malformed header lines,
Expect: 100-continue past --max-body (413 before any "100 Continue"), each refused with one
status line, on a connection's first request, a later one and one sent before the previous
answer (pipelined); and connections that must not starve others:
300 idle connections while clients get answers and /health answers within a second (with the
slots and the queue full too), the header and body deadlines against idle and trickling
clients, --max-connections (the longest-idle connection makes room; when all are busy, 503
with Retry-After) and --max-connections-per-ip. Every loop is bounded, every socket has a
timeout.
Usage: test_serve_http.py CLINFER WRITE_TINY_MODEL"""
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, check, finish, metric, run_threads  # noqa: E402

clinfer, writer = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="clinfer-serve-http-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
BASE = ["--reference", "--chat-template", "llama2", "-q"]
BODY = b'{"prompt": "hi", "max_tokens": 2, "temperature": 0}'
LONG = {"prompt": "a long story", "max_tokens": 4000, "temperature": 0, "presence_penalty": -2}


def exchange(port, data, wait=3.0, on_continue=None):
    """Sends data, reads until the server closes or `wait` seconds pass; on_continue: bytes
    sent once "100 Continue" arrives. Returns what came back."""
    c = socket.create_connection(("127.0.0.1", port), timeout=wait)
    c.sendall(data)
    out, _ = rest_of(c, wait, on_continue)
    c.close()
    return out


def rest_of(sock, wait=3.0, on_continue=None):
    """(what sock receives until the server closes it or `wait` seconds pass, whether it
    closed); on_continue: bytes sent once "100 Continue" arrives."""
    out, end = b"", time.monotonic() + wait
    sock.settimeout(0.2)
    while time.monotonic() < end:
        try:
            got = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            break
        if not got:
            return out, True
        out += got
        if on_continue and b"100 Continue" in out:
            sock.sendall(on_continue)
            on_continue = None
    return out, False


def post(headers, body=b""):
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + b"".join(h + b"\r\n" for h in headers)
    return head + b"\r\n" + body


def chunked(body):
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def status_lines(reply):
    return [ln for ln in reply.split(b"\r\n") if ln.startswith(b"HTTP/1.")]


def error_of(reply):
    try:
        return json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
    except (IndexError, ValueError, KeyError):
        return None


def framing(s):
    n = b"Content-Length: %d" % len(BODY)
    for name, data, status, says in (
            ("two Content-Lengths", post([n, b"Content-Length: 5"], BODY), 400, "Content-Length"),
            ("Content-Length, then chunked", post([b"Content-Length: 5",
                                                   b"Transfer-Encoding: chunked"], chunked(BODY)),
             400, "Transfer-Encoding"),
            ("chunked, then Content-Length", post([b"Transfer-Encoding: chunked",
                                                   b"Content-Length: 5"], chunked(BODY)),
             400, "Transfer-Encoding"),
            ("Transfer-Encoding gzip", post([b"Transfer-Encoding: gzip"], BODY), 501, "gzip"),
            ("two Transfer-Encodings", post([b"Transfer-Encoding: chunked",
                                             b"Transfer-Encoding: chunked"], chunked(BODY)),
             501, "Transfer-Encoding"),
            ("Expect: 100-continue past --max-body",
             post([b"Content-Length: 70000", b"Expect: 100-continue"]), 413, "limit")):
        reply = exchange(s.port, data)
        e = error_of(reply)
        lines = status_lines(reply)
        check(len(lines) == 1 and lines[0].startswith(b"HTTP/1.1 %d " % status) and e and
              e["code"] == status and says in e["message"],
              f"{name}: want one {status} naming {says!r}, got {reply[:300]!r}")
    # the same Content-Length twice frames the body one way: taken
    reply = exchange(s.port, post([n, n, b"Connection: close"], BODY))
    check(reply.startswith(b"HTTP/1.1 200"), f"the same Content-Length twice: {reply[:80]!r}")
    # chunked alone, and Expect within the limit: "100 Continue", then the answer
    reply = exchange(s.port, post([b"Transfer-Encoding: chunked", b"Connection: close"],
                                  chunked(BODY)))
    check(reply.startswith(b"HTTP/1.1 200"), f"a chunked body: {reply[:80]!r}")
    reply = exchange(s.port, post([n, b"Expect: 100-continue", b"Connection: close"]),
                     on_continue=BODY)
    check(status_lines(reply) == [b"HTTP/1.1 100 Continue", b"HTTP/1.1 200 OK"],
          f"Expect within the limit: {status_lines(reply)}")
    # what libmicrohttpd would refuse itself (writing its answer's head twice) is refused once
    big = b"X-Big: " + b"y" * 20000
    for name, data, status, says in (
            ("Content-Length abc", post([b"Content-Length: abc"], BODY), 400, "Content-Length"),
            ("Content-Length -5", post([b"Content-Length: -5"], BODY), 400, "Content-Length"),
            ("Content-Length 5, 6", post([b"Content-Length: 5, 6"], BODY), 400, "Content-Length"),
            ("Content-Length +5", post([b"Content-Length: +5"], BODY), 400, "Content-Length"),
            ("Content-Length of 30 digits", post([b"Content-Length: " + b"9" * 30], BODY), 413,
             "limit"),
            ("a folded header", post([n, b"X-A: 1", b" 2"], BODY), 400, "folded"),
            ("a header without a colon", post([n, b"X-A 1"], BODY), 400, "name"),
            ("a space before the colon", post([b"Content-Length : 5"], BODY), 400, "name"),
            ("a control byte in a value", post([n, b"X-A: 1\x01"], BODY), 400, "control"),
            ("HTTP/1.1 without Host", b"GET /health HTTP/1.1\r\n\r\n", 400, "Host"),
            ("a head over 16 KiB", post([n, big], BODY), 431, "headers")):
        reply = exchange(s.port, data)
        e = error_of(reply)
        lines = status_lines(reply)
        check(len(lines) == 1 and lines[0].startswith(b"HTTP/1.1 %d " % status) and
              b"\r\nConnection: close\r\n" in reply and e and e["code"] == status and
              says in e["message"], f"{name}: want one {status} naming {says!r}, got {reply[:300]!r}")
    # ollama's endpoints answer in ollama's shape
    reply = exchange(s.port, b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n")
    body = reply.split(b"\r\n\r\n", 1)[-1]
    check(status_lines(reply) == [b"HTTP/1.1 400 Bad Request"] and
          isinstance(json.loads(body or b"null"), dict) and
          "Content-Length" in json.loads(body).get("error", ""), f"/api/chat: {reply[:300]!r}")
    keep_alive(s)


def read_response(sock):
    """One response with a Content-Length from sock: (status line, head, body); None when the
    server closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        if not got:
            return None
        data += got
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(ln.split(b":", 1)[1] for ln in head.split(b"\r\n")
                      if ln.lower().startswith(b"content-length:")))
    while len(body) < length:
        got = sock.recv(65536)
        if not got:
            break
        body += got
    return head.split(b"\r\n", 1)[0], head, body


def keep_alive(s):
    """A connection stays open across requests, and a later request's head is checked as the
    first's: a bad one gets one 400 and the connection closes. A request sent before the
    previous one's answer is not read unchecked: the first is answered with Connection: close."""
    good = post([b"Content-Length: %d" % len(BODY)], BODY)
    k = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    for i in range(3):
        r = read_response(k.sendall(good) or k)
        check(r and r[0] == b"HTTP/1.1 200 OK" and b"Connection: close" not in r[1],
              f"request {i} on one connection: {r and r[:2]}")
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    r = read_response(k.sendall(get) or k)
    check(r and r[0] == b"HTTP/1.1 200 OK", f"a GET after them: {r and r[0]}")
    k.sendall(post([b"Content-Length: 5, 6"], BODY))
    out, closed = rest_of(k)
    e = error_of(out)
    check(status_lines(out) == [b"HTTP/1.1 400 Bad Request"] and closed and e and
          "Content-Length" in e["message"], f"a bad head after 4 requests: {out[:300]!r}")
    k.close()
    for name, second in (("a bad head", post([b"Content-Length: abc"], BODY)), ("a good one", good)):
        k = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        k.sendall(good + second)
        out, closed = rest_of(k)
        check(status_lines(out) == [b"HTTP/1.1 200 OK"] and b"\r\nConnection: close\r\n" in out
              and closed, f"{name} pipelined behind a request: {out[:300]!r}")
        k.close()
    st, text = s.request("GET", "/metrics")
    check(st == 200 and metric(text, 'clinfer_responses_total{code="4xx"}') >= 15,
          "the refused heads count as 4xx responses")


def timed_health(s, limit=1.0):
    t = time.monotonic()
    try:
        st, _ = s.request("GET", "/health")
    except OSError as e:
        st = str(e)
    took = time.monotonic() - t
    return check(st == 200 and took < limit, f"/health: {st} in {took:.2f} s"), took


def hold(port, n):
    """n idle connections (nothing sent) to port."""
    socks = []
    for _ in range(n):
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    return socks


def closed_by_server(sock, within):
    """Whether the server closes sock within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def idle_crowd():
    """300 idle connections (no bytes sent): 8 clients stream their completions to the end and
    /health answers within 1 s throughout; then, with every slot streaming and the queue full
    too, /health and /metrics still answer within 1 s and a further completion gets 503 at
    once."""
    slots = 4
    s = Server(clinfer, model, *BASE, "-np", str(slots), "--queue", str(slots), "-c", "4096")
    socks = hold(s.port, 300)
    try:
        results, stop = [None] * 8, threading.Event()
        slowest = [0.0]

        def watch():
            while not stop.is_set():
                slowest[0] = max(slowest[0], timed_health(s)[1])
                time.sleep(0.1)

        watcher = threading.Thread(target=watch)
        watcher.start()

        def client(i):
            st, events, done = s.stream("/v1/completions", {"prompt": f"client {i}",
                                                            "max_tokens": 8, "temperature": 0})
            last = events[-1]["choices"][0] if events else {}
            results[i] = st, done and last.get("finish_reason") is not None

        run_threads(8, client)
        stop.set()
        watcher.join()
        check(all(r == (200, True) for r in results),
              f"8 streaming clients beside 300 idle connections: {results}")
        check(slowest[0] < 1.0, f"/health took up to {slowest[0]:.2f} s")

        streams = []
        for i in range(2 * slots):  # the slots' streaming before the rest come, which queue
            c = s.connect()
            c.request("POST", "/v1/completions", body=json.dumps({**LONG, "stream": True}))
            if i < slots:
                check(c.getresponse().readline().startswith(b"data: "), f"slot {i} streams")
            streams.append(c)
        deadline, depth = time.monotonic() + 5, None
        while depth != slots and time.monotonic() < deadline:
            t = time.monotonic()
            st, text = s.request("GET", "/metrics")
            took = time.monotonic() - t
            check(st == 200 and took < 1.0, f"/metrics while the slots fill: {st} in {took:.2f} s")
            depth = metric(text, "clinfer_queue_depth") if st == 200 else None
        check(depth == slots, f"the queue holds {depth} of the long requests, not {slots}")
        timed_health(s)
        t = time.monotonic()
        st, r = s.request("POST", "/v1/completions", {"prompt": "one more", "max_tokens": 2})
        check(st == 503 and time.monotonic() - t < 1.0, f"past the queue: {st} {r}")
        for c in streams:
            c.close()
    finally:
        for k in socks:
            k.close()
    check(s.stop() == 0, "exit 0")


def deadlines():
    """--header-timeout 1: an idle connection, one that trickles its headers a byte at a time
    and one idle after its response are closed within 2.5 s; --body-timeout 1: one that sends
    half its body too. A request sent in time is answered."""
    s = Server(clinfer, model, *BASE, "--header-timeout", "1", "--body-timeout", "1")
    idle = hold(s.port, 1)[0]
    trickle = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    half = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    half.sendall(post([b"Content-Length: %d" % len(BODY)], BODY[:10]))
    after = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    after.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    after.recv(4096)
    t0, trickled, gone = time.monotonic(), 0, False
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100
    while time.monotonic() - t0 < 2.5 and not gone:
        try:
            trickle.sendall(request[trickled:trickled + 1])
            trickled += 1
        except OSError:
            gone = True
        gone = gone or closed_by_server(trickle, 0.2)
    check(gone, f"a client trickling its headers ({trickled} bytes) was not closed in 2.5 s")
    for name, k in (("idle", idle), ("half a body", half), ("idle after a response", after)):
        check(closed_by_server(k, 2.5 - (time.monotonic() - t0) + 0.5),
              f"a connection {name} was not closed by its deadline")
        k.close()
    trickle.close()
    reply = exchange(s.port, post([b"Content-Length: %d" % len(BODY), b"Connection: close"],
                                  BODY))
    check(reply.startswith(b"HTTP/1.1 200"), f"a prompt request beside them: {reply[:80]!r}")
    check(s.stop() == 0, "exit 0")


def connection_limit():
    """--max-connections 20: 40 idle connections leave room for a request (each newcomer
    closes the connection idle longest); 20 connections each part way through a body leave
    none, and the next request gets 503 with Retry-After, /health still 200."""
    s = Server(clinfer, model, *BASE, "--max-connections", "20")
    socks = hold(s.port, 40)
    try:
        timed_health(s)
        reply = exchange(s.port, post([b"Content-Length: %d" % len(BODY), b"Connection: close"],
                                      BODY))
        check(reply.startswith(b"HTTP/1.1 200"), f"past 40 idle connections: {reply[:80]!r}")
        closed = sum(closed_by_server(k, 0.05) for k in socks)
        check(closed >= 20, f"{closed} of 40 idle connections closed to keep 20")
        for k in socks:
            k.close()
        socks = []
        # Until the server has seen those go, a newcomer may take the place of one of the 20
        # below whose headers it has not read yet.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            st, text = s.request("GET", "/metrics")
            if st == 200 and metric(text, "clinfer_connections_open") <= 1:  # this request's
                break
            time.sleep(0.05)
        for attempt in range(3):
            for _ in range(20):
                k = socket.create_connection(("127.0.0.1", s.port), timeout=5)
                k.sendall(post([b"Content-Length: %d" % len(BODY)], BODY[:5]))
                socks.append(k)
            time.sleep(1.5)  # all 20 read into their bodies, on a loaded machine too
            # A connection still being answered (the last /metrics) holds a place it cannot
            # give up, so one of the 20 not yet read may have been closed to make room: then
            # they are not 20 busy ones, and the setup is made again.
            if not any(closed_by_server(k, 0.01) for k in socks):
                break
            for k in socks:
                k.close()
            socks = []
            time.sleep(1.0)
        reply = exchange(s.port, post([b"Content-Length: %d" % len(BODY)], BODY))
        e = error_of(reply)
        check(reply.startswith(b"HTTP/1.1 503") and b"\r\nRetry-After: 1\r\n" in reply and
              e and "connections" in e["message"], f"past 20 busy connections: {reply[:300]!r}")
        reply = exchange(s.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", wait=1.0)
        check(reply.startswith(b"HTTP/1.1 200"), f"/health past 20 busy: {reply[:80]!r}")
    finally:
        for k in socks:
            k.close()
    check(s.stop() == 0, "exit 0")


def per_address_limit():
    """--max-connections-per-ip 4: a fifth connection from 127.0.0.1 is closed at once, and
    once one of the four leaves, a request is answered."""
    s = Server(clinfer, model, *BASE, "--max-connections-per-ip", "4")
    socks = hold(s.port, 4)
    try:
        fifth = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        check(closed_by_server(fifth, 1.0), "a fifth connection from one address stayed open")
        fifth.close()
        socks.pop().close()
        time.sleep(0.2)
        timed_health(s)
    finally:
        for k in socks:
            k.close()
    check(s.stop() == 0, "exit 0")


s = Server(clinfer, model, *BASE, "--max-body", "65536")
try:
    framing(s)
finally:
    code = s.stop()
check(code == 0, f"SIGTERM: exit {code}")
idle_crowd()
deadlines()
connection_limit()
per_address_limit()
finish("test_serve_http")
