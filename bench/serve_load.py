"""Load generator of bench/serve_load.sh: C clients at once, each streaming R chat completions of
the same prompt from an OpenAI-compatible server, for each C given. Prints one line per C:
aggregate generated tokens/s (all clients' tokens over the wall time of the round), and p50/p95
time to first token (request sent to the first chunk with text), and the mean decode rate of
one request (its tokens after the first over the time after its first). Tokens are the server's
own count (stream_options.include_usage), else the chunks with text.
With --schema ROUNDS: for each C, ROUNDS rounds of free text alternated with as many whose
requests carry a JSON schema (response_format json_schema, constrained decoding), the same
prompt; a line per round, then the median of the constrained rounds' tokens/s over the median of
the free ones'.
Usage: serve_load.py PORT MAX_TOKENS REQUESTS_PER_CLIENT [--schema ROUNDS] C..."""
import http.client
import json
import statistics
import sys
import threading
import time

port, max_tokens, per_client = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
args = sys.argv[4:]
schema_rounds = int(args[1]) if args[:1] == ["--schema"] else 0
streams = list(map(int, args[2:] if schema_rounds else args))
PROMPT = "Write a short story about a lighthouse keeper and a storm."
# a story as JSON: long strings, so that a round is mostly decoding under the grammar
SCHEMA = {"type": "json_schema", "json_schema": {"name": "story", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["title", "keeper", "story"],
    "properties": {"title": {"type": "string"}, "keeper": {"type": "string"},
                   "story": {"type": "string"}}}}}


def one(results, schema):
    body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": max_tokens, "temperature": 0, "stream_options": {"include_usage": True}}
    if schema:
        body["response_format"] = SCHEMA
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
    end = time.monotonic() - t0
    n = usage if usage is not None else chunks
    ttft = ttft if ttft is not None else end
    results.append((ttft, n, (n - 1) / (end - ttft) if n > 1 and end > ttft else 0.0))


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def round_of(clients, schema):
    """(tokens/s, the line to print) of one round of `clients` streams."""
    results = []

    def client():
        for _ in range(per_client):
            one(results, schema)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    tokens = sum(n for _, n, _ in results)
    ttfts = [t * 1e3 for t, _, _ in results]
    decode = statistics.mean(d for _, _, d in results)
    return tokens / wall, decode, (
        f"{tokens / wall:7.2f} tok/s aggregate ({tokens} tokens, {len(results)} requests, "
        f"{wall:.1f} s), TTFT p50 {statistics.median(ttfts):.0f} ms p95 "
        f"{percentile(ttfts, 95):.0f} ms, decode {decode:.1f} tok/s a request")


for clients in streams:
    if not schema_rounds:
        print(f"streams {clients}: {round_of(clients, False)[2]}", flush=True)
        continue
    speeds, decodes = {False: [], True: []}, {False: [], True: []}
    for r in range(schema_rounds):
        for schema in (False, True):
            speed, decode, line = round_of(clients, schema)
            speeds[schema].append(speed)
            decodes[schema].append(decode)
            print(f"streams {clients} round {r + 1} {'schema' if schema else 'free  '}: {line}",
                  flush=True)
    med = statistics.median
    print(f"streams {clients}: JSON schema {med(speeds[True]):.2f} against free text "
          f"{med(speeds[False]):.2f} tok/s aggregate, {med(speeds[True]) / med(speeds[False]):.3f}x;"
          f" decode a request {med(decodes[True]):.1f} against {med(decodes[False]):.1f}, "
          f"{med(decodes[True]) / med(decodes[False]):.3f}x (medians of {schema_rounds} rounds "
          f"each)", flush=True)
