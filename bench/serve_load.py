"""Load generator of bench/serve_load.sh: C clients at once, each streaming R chat completions of
the same prompt from an OpenAI-compatible server, for each C given. Prints one line per C:
aggregate generated tokens/s (all clients' tokens over the wall time of the round), and p50/p95
time to first token (request sent to the first chunk with text). Tokens are the server's own
count (stream_options.include_usage), else the chunks with text.
Usage: serve_load.py PORT MAX_TOKENS REQUESTS_PER_CLIENT C..."""
import http.client
import json
import statistics
import sys
import threading
import time

port, max_tokens, per_client = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
PROMPT = "Write a short story about a lighthouse keeper and a storm."


def one(results):
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": max_tokens, "temperature": 0, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:200]}")
    ttft, chunks, usage = None, 0, None
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        e = json.loads(line[6:])
        if e.get("usage"):
            usage = e["usage"]["completion_tokens"]
        for ch in e.get("choices") or []:
            if (ch.get("delta") or {}).get("content"):
                chunks += 1
                if ttft is None:
                    ttft = time.monotonic() - t0
    c.close()
    results.append((ttft if ttft is not None else time.monotonic() - t0,
                    usage if usage is not None else chunks))


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


for clients in map(int, sys.argv[4:]):
    results = []

    def client():
        for _ in range(per_client):
            one(results)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    tokens = sum(n for _, n in results)
    ttfts = [t * 1e3 for t, _ in results]
    print(f"streams {clients}: {tokens / wall:7.2f} tok/s aggregate ({tokens} tokens, "
          f"{len(results)} requests, {wall:.1f} s), TTFT p50 {statistics.median(ttfts):.0f} ms "
          f"p95 {percentile(ttfts, 95):.0f} ms", flush=True)
