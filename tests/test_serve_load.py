"""A bounded load test of `clinfer serve`: 200 requests from 16 clients (chat and completions,
streamed and whole) on 4 slots with a queue of 8, so that the queue fills. Every answer is 200
or the documented 503 of a full queue (with an OpenAI error object), which the client retries
after a pause, as clients do; all 200 end answered and complete; the server's RSS afterwards is
back near its level after warm-up (not with --sanitized: ASan keeps freed memory in quarantine,
and its leak check at exit is the stronger test there); it still answers and exits 0.
Usage: test_serve_load.py CLINFER WRITE_TINY_MODEL [--sanitized]"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, check, finish, metric, run_threads, streamed_text  # noqa: E402

clinfer, writer = sys.argv[1], sys.argv[2]
sanitized = "--sanitized" in sys.argv[3:]
tmp = tempfile.mkdtemp(prefix="clinfer-serve-load-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
s = Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", "-np", "4",
           "--queue", "8", "-c", "512")
REQUESTS, CLIENTS = 200, 16


def request(i):
    chat = i % 2 == 0
    body = {"max_tokens": 16 + i % 48, "temperature": 0.8, "seed": i}
    if chat:
        body["messages"] = [{"role": "user", "content": f"request {i}"}]
    else:
        body["prompt"] = f"request {i}"
    path = "/v1/chat/completions" if chat else "/v1/completions"
    if i % 3 == 0:
        st, events, done = s.stream(path, body)
        ok = st != 200 or (done and events[-1]["choices"][0]["finish_reason"] is not None)
        return st, ok, streamed_text(events, chat) if st == 200 else None
    st, r = s.request("POST", path, body)
    ok = st != 200 or r["choices"][0]["finish_reason"] in ("stop", "length")
    if st == 503:
        ok = r["error"]["code"] == 503 and "busy" in r["error"]["message"]
    return st, ok, None


def warm_up(_):
    for i in range(2 * CLIENTS):
        request(i)


results, lock, next_i = [], threading.Lock(), [0]


def client(_):
    while True:
        with lock:
            i = next_i[0]
            next_i[0] += 1
        if i >= REQUESTS:
            return
        busy = 0
        while True:
            r = request(i)
            if r[0] != 503 or not r[1]:
                break
            busy += 1
            time.sleep(0.02)
        with lock:
            results.append((i,) + r + (busy,))


try:
    # warm-up: threads and allocator arenas of a loaded server, at the same concurrency
    run_threads(4, warm_up)
    idle = s.rss_kib()
    t0 = time.monotonic()
    run_threads(CLIENTS, client)
    seconds = time.monotonic() - t0
    busy = sum(r[4] for r in results)
    bad = [r for r in results if r[1] != 200 or not r[2]]
    check(len(results) == REQUESTS and not bad, f"not answered in full: {bad[:5]}")
    time.sleep(0.5)
    after = s.rss_kib()
    st, text = s.request("GET", "/metrics")
    check(metric(text, "clinfer_slots_active") == 0 and metric(text, "clinfer_queue_depth") == 0,
          "slots and queue empty afterwards")
    check(metric(text, "clinfer_requests_in_flight") == 1, "only /metrics itself in flight")
    # growth allowed: the allocator keeps some freed memory; a leak per request would show here
    check(sanitized or after <= idle * 1.25 + 4096,
          f"RSS {idle} KiB after warm-up, {after} KiB after load")
    print(f"{REQUESTS} requests from {CLIENTS} clients in {seconds:.1f} s, {busy} 503s retried; "
          f"RSS {idle} -> {after} KiB", flush=True)
finally:
    code = s.stop()
check(code == 0, f"exit {code}")
finish("test_serve_load")
