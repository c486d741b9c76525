"""`clinfer serve` on a tiny generated model (reference backend: no device, no download), through
the standard library's HTTP client and through curl: every endpoint, streamed against whole
answers, embeddings (their shape, length 1, a batch against single texts, token ids,
base64), stop strings, seeds, 8 concurrent clients against the same requests one at a time,
each bad request of the list with its status (strict JSON, NUL in text, unknown roles
included), special tokens' text in chat content read as plain text, the API key, a full queue,
a client that leaves mid-stream, a long prompt beside a stream (chunked prefill), the prompt cache, /health before
the model is loaded, SIGTERM during a stream, a second signal, and streams (running and
queued) cut by --drain-timeout after SIGTERM.
Usage: test_serve.py CLINFER WRITE_TINY_MODEL"""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import (Server, chat_text, check, finish, metric, run_threads,  # noqa: E402
                           streamed_text)

clinfer, writer = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="clinfer-serve-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
# The tiny model answers ChatML turns with end-of-generation at once; llama2's turns give text.
BASE = ["--reference", "--chat-template", "llama2", "-q"]
CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
EMBD = "/v1/embeddings"


def msgs(text):
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def endpoints(s):
    st, body = s.request("GET", "/health")
    check(st == 200 and body == {"status": "ok"}, f"/health: {st} {body}")
    st, body = s.request("GET", "/v1/models")
    check(st == 200 and body["data"][0]["id"] == "tiny" and body["object"] == "list",
          f"/v1/models with --alias tiny: {st} {body}")

    req = {"messages": msgs("hello there"), "max_tokens": 12, "temperature": 0}
    st, whole = s.request("POST", CHAT, req)
    check(st == 200, f"chat: {st} {whole}")
    if st != 200:
        return
    text = chat_text(whole)
    u = whole["usage"]
    check(whole["object"] == "chat.completion" and whole["model"] == "tiny" and
          whole["choices"][0]["message"]["role"] == "assistant", f"chat shape: {whole}")
    check(u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"] +
          u["completion_tokens"] and 0 < u["completion_tokens"] <= 12, f"chat usage: {u}")
    fin = whole["choices"][0]["finish_reason"]
    check(fin == ("length" if u["completion_tokens"] == 12 else "stop"), f"finish {fin}: {u}")
    st, events, done = s.stream(CHAT, req)
    check(st == 200 and done, f"chat stream: {st}, [DONE] {done}")
    check(events and events[0]["choices"][0]["delta"].get("role") == "assistant",
          "the first chat chunk carries the role")
    check(streamed_text(events, True) == text,
          f"streamed chat {streamed_text(events, True)!r} != whole {text!r}")
    check(events[-1]["choices"][0]["finish_reason"] == fin, "the last chunk has the finish")
    check(all(e["object"] == "chat.completion.chunk" and e["id"] == events[0]["id"]
              for e in events), "chunks share one id and the chunk object")

    req = {"prompt": "once upon", "max_tokens": 20, "temperature": 0}
    st, whole = s.request("POST", COMPL, req)
    check(st == 200 and whole["object"] == "text_completion", f"completions: {st} {whole}")
    text = whole["choices"][0]["text"]
    st, events, done = s.stream(COMPL, {**req, "stream_options": {"include_usage": True}})
    check(st == 200 and done and streamed_text(events, False) == text,
          f"streamed completion {streamed_text(events, False)!r} != whole {text!r}")
    check(events[-1]["choices"] == [] and events[-1]["usage"] == whole["usage"],
          f"include_usage: the last chunk has the usage: {events[-1]}")

    # stop strings: cut where the first one begins, streamed or not
    # stop strings of two ASCII letters or digits (three in a row), not at the start
    at = next((i for i in range(1, len(text) - 2) if text[i:i + 3].isalnum() and
               text[i:i + 3].isascii()), None)
    if check(at is not None, f"a completion with a stop string to pick: {text!r}"):
        stop = text[at:at + 2]
        later = text[at + 1:at + 3]  # listed first, found after: the earlier match cuts
        for stops in (stop, ["\u00ff\u00fe", stop], [later, stop]):
            listed = [stops] if isinstance(stops, str) else stops
            cut = text[:min(text.index(x) for x in listed if x in text)]
            st, r = s.request("POST", COMPL, {**req, "stop": stops})
            check(st == 200 and r["choices"][0]["text"] == cut and
                  r["choices"][0]["finish_reason"] == "stop",
                  f"stop {stops!r}: {r} (want {cut!r})")
            st, events, done = s.stream(COMPL, {**req, "stop": stops})
            check(streamed_text(events, False) == cut, f"streamed stop {stops!r}")

    # a seed repeats a sampled answer; penalties are accepted
    req = {"prompt": "the", "max_tokens": 16, "temperature": 1.0, "seed": 7, "top_k": 0,
           "top_p": 1, "min_p": 0, "presence_penalty": 0.5, "frequency_penalty": 0.5}
    a, b = s.request("POST", COMPL, req), s.request("POST", COMPL, req)
    check(a[0] == 200 and b[0] == 200 and a[1]["choices"] == b[1]["choices"],
          f"seed 7 twice: {a} / {b}")

    st, text = s.request("GET", "/metrics")
    for name in ("clinfer_generated_tokens_total", "clinfer_prompt_tokens_total",
                 "clinfer_queue_depth", "clinfer_slots_active", "clinfer_slots",
                 "clinfer_generated_tokens_per_second",
                 "clinfer_time_to_first_token_seconds_count"):
        check(metric(text, name) is not None, f"/metrics has {name}")
    check(metric(text, "clinfer_slots") == 8, "/metrics: 8 slots")


def embeddings(s):
    """Vectors of length 1 and of n_embd (64 in the tiny model), the same for a text alone or in
    a batch, for its token ids, and through base64; different texts, different vectors."""
    def vec(body):
        st, r = s.request("POST", EMBD, body)
        check(st == 200, f"embeddings {body}: {st} {r}")
        return r if st == 200 else None

    one = vec({"input": "hello there", "model": "tiny"})
    if not one:
        return
    e = one["data"][0]["embedding"]
    check(one["object"] == "list" and one["model"] == "tiny" and len(one["data"]) == 1 and
          one["data"][0]["object"] == "embedding" and one["data"][0]["index"] == 0,
          f"embeddings shape: { {k: v for k, v in one.items() if k != 'data'} }")
    check(len(e) == 64 and abs(sum(x * x for x in e) - 1) < 1e-5, f"a vector of {len(e)}, "
          f"squared length {sum(x * x for x in e)}")
    u = one["usage"]
    check(u["prompt_tokens"] > 0 and u["total_tokens"] == u["prompt_tokens"], f"usage {u}")
    many = vec({"input": ["the cat", "hello there", "x"]})
    if many:
        d = many["data"]
        check([x["index"] for x in d] == [0, 1, 2], f"indices {[x['index'] for x in d]}")
        diff = max(abs(a - b) for a, b in zip(d[1]["embedding"], e))
        check(diff < 1e-6, f"a text in a batch against alone: differs by {diff}")
        cos = sum(a * b for a, b in zip(d[0]["embedding"], e))
        check(cos < 0.9999, f"two texts, cosine {cos}")
        single = [vec({"input": t})["usage"]["prompt_tokens"] for t in ("the cat", "x")]
        check(many["usage"]["prompt_tokens"] == u["prompt_tokens"] + sum(single),
              f"batch usage {many['usage']} against {u} and {single}")
    out = subprocess.run([clinfer, "tokenize", "-m", model, "hi there"], capture_output=True,
                         text=True, check=True).stdout
    ids = [int(t) for t in out.replace("[", " ").replace("]", " ").replace(",", " ").split()]
    by_ids, by_text = vec({"input": ids}), vec({"input": "hi there"})
    two = vec({"input": [ids, ids[1:]]})
    if by_ids and by_text and two:
        check(by_ids["usage"]["prompt_tokens"] == len(ids), f"ids usage {by_ids['usage']}")
        check(len(two["data"]) == 2 and two["data"][0]["embedding"] == by_ids["data"][0]
              ["embedding"] and two["data"][1]["embedding"] != by_ids["data"][0]["embedding"],
              "an array of token arrays gives each its vector")
        diff = max(abs(a - b) for a, b in
                   zip(by_ids["data"][0]["embedding"], by_text["data"][0]["embedding"]))
        check(diff < 1e-6, f"token ids {ids} against their text: differ by {diff}")
    b64 = vec({"input": "hello there", "encoding_format": "base64"})
    if b64:
        import base64
        import struct
        raw = base64.b64decode(b64["data"][0]["embedding"])
        got = struct.unpack(f"<{len(raw) // 4}f", raw)
        check(len(got) == 64 and max(abs(a - b) for a, b in zip(got, e)) < 1e-6,
              "base64 decodes to the float vector")


def curl(s):
    """The same server through curl, a client of its own."""
    url = f"http://127.0.0.1:{s.port}"
    body = json.dumps({"messages": msgs("hi curl"), "max_tokens": 8, "temperature": 0})
    out = subprocess.run(["curl", "-sS", "-f", url + CHAT, "-H", "Content-Type: application/json",
                          "-d", body], capture_output=True, text=True)
    check(out.returncode == 0, f"curl chat: {out.stderr}")
    if out.returncode:
        return
    whole = chat_text(json.loads(out.stdout))
    out = subprocess.run(["curl", "-sS", "-N", url + CHAT, "-d",
                          json.dumps({**json.loads(body), "stream": True})],
                         capture_output=True, text=True)
    lines = [ln[6:] for ln in out.stdout.split("\n") if ln.startswith("data: ")]
    check(lines and lines[-1] == "[DONE]", "curl stream ends with [DONE]")
    events = [json.loads(ln) for ln in lines[:-1]]
    check(streamed_text(events, True) == whole, "curl: streamed text equals the whole answer")
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + CHAT,
                          "-d", "{bad"], capture_output=True, text=True)
    check(out.stdout == "400", f"curl malformed JSON: {out.stdout}")


def concurrent(s):
    """8 clients at once on 8 slots get exactly the greedy texts that the same requests get one
    at a time: together, their tokens share every step's batch (prompts and decode tokens of
    several sequences mixed, the second round's prompts partly from the slots' prompt cache);
    alone, each has the batches to itself. Exact here because the reference backend sums each
    token's column of a matrix product in the same order whatever the batch holds, and attention
    reads only the token's own sequence. On OpenCL a batch of several columns takes other
    kernels than one column (tiled products instead of a matvec), so logits can differ in the
    last bits and a greedy pick between near-equal tokens could flip on a real model
    (test_batch bounds those differences). An embeddings request among them, evaluated between
    the steps on a context of its own, gets the vectors it gets alone."""
    reqs = [(CHAT, {"messages": msgs(f"question {i}"), "max_tokens": 24, "temperature": 0})
            if i % 2 else
            (COMPL, {"prompt": f"story number {i}", "max_tokens": 24, "temperature": 0})
            for i in range(8)]
    reqs.append((EMBD, {"input": ["the cat", "hello there"]}))  # between the steps
    alone = [s.request("POST", p, r) for p, r in reqs]
    together = [None] * 9

    def run(i):
        together[i] = s.request("POST", *reqs[i])

    run_threads(9, run)
    check(alone[8] == together[8], "embeddings beside 8 generations equal those alone")
    alone, together = alone[:8], together[:8]

    def texts(rs):
        return [(st, chat_text(b) if "message" in b["choices"][0] else b["choices"][0]["text"])
                if st == 200 else (st, b) for st, b in rs]
    check(texts(alone) == texts(together),
          f"8 at once differ from one at a time:\n{texts(alone)}\n{texts(together)}")
    check(all(st == 200 for st, _ in alone), "all 8 answered")


def bad_requests(s):
    def expect(status, method, path, body=None, raw=None, contains=None):
        st, r = s.request(method, path, body=body, raw=raw)
        ok = st == status and isinstance(r, dict) and isinstance(r.get("error"), dict) and \
            r["error"].get("code") == status and isinstance(r["error"].get("message"), str) and \
            isinstance(r["error"].get("type"), str)
        if contains and ok:
            ok = contains in r["error"]["message"]
        check(ok, f"{method} {path} {raw or body}: want {status}, got {st} {r}")

    m = msgs("x")
    expect(400, "POST", CHAT, raw="{not json")
    expect(400, "POST", CHAT, raw="")
    expect(400, "POST", CHAT, raw="[1, 2]")
    expect(400, "POST", CHAT, raw='{"messages": ' + '[' * 10000)
    expect(400, "POST", CHAT, {"max_tokens": 4}, contains="messages")
    expect(400, "POST", CHAT, {"messages": []})
    expect(400, "POST", CHAT, {"messages": "hello"})
    expect(400, "POST", CHAT, {"messages": [{"role": "user"}, 5]})
    expect(400, "POST", CHAT, {"messages": [{"content": "no role"}]})
    expect(400, "POST", CHAT, {"messages": [{"role": "user", "content": 42}]})
    expect(400, "POST", CHAT, {"messages": m, "temperature": "hot"}, contains="temperature")
    expect(400, "POST", CHAT, {"messages": m, "temperature": -1})
    expect(400, "POST", CHAT, {"messages": m, "top_p": 0})
    expect(400, "POST", CHAT, {"messages": m, "max_tokens": 1.5}, contains="max_tokens")
    expect(400, "POST", CHAT, {"messages": m, "max_tokens": "9"})
    expect(400, "POST", CHAT, {"messages": m, "stop": 5}, contains="stop")
    expect(400, "POST", CHAT, {"messages": m, "stop": ["a", "b", "c", "d", "e"]})
    expect(400, "POST", CHAT, {"messages": m, "stream": "yes"}, contains="stream")
    expect(400, "POST", CHAT, {"messages": m, "n": 0}, contains="'n'")
    # a member clinfer does not implement is named, not ignored; defaults clients send are fine
    expect(400, "POST", CHAT, {"messages": m, "frobnicate": 1}, contains="'frobnicate'")
    expect(400, "POST", CHAT, {"messages": m, "logit_bias": {"5": 10}}, contains="logit_bias")
    expect(400, "POST", COMPL, {"prompt": "hi", "suffix": "!"}, contains="suffix")
    expect(400, "POST", CHAT, {"messages": m, "tool_choice": "required"}, contains="tool_choice")
    st, r = s.request("POST", CHAT, {"messages": m, "max_tokens": 2, "user": "u1", "store": False,
                                     "logit_bias": {}, "parallel_tool_calls": True})
    check(st == 200, f"members at their defaults are accepted: {st} {r}")
    expect(400, "POST", CHAT, {"messages": m, "seed": "x"})
    expect(400, "POST", CHAT, {"messages": m, "model": 3})
    expect(400, "POST", COMPL, {"max_tokens": 3}, contains="prompt")
    expect(400, "POST", COMPL, {"prompt": [1, 2, 3]})
    # the context is 128 tokens: prompt + max_tokens beyond it
    expect(400, "POST", COMPL, {"prompt": "hi", "max_tokens": 1000}, contains="context")
    expect(400, "POST", COMPL, {"prompt": "x" * 400}, contains="context")
    expect(413, "POST", COMPL, raw=json.dumps({"prompt": "y" * 70000}))
    expect(404, "GET", "/v2/nothing")
    expect(405, "GET", CHAT)
    expect(405, "POST", "/v1/models", {})
    expect(405, "GET", EMBD)
    expect(400, "POST", EMBD, {}, contains="input")
    expect(400, "POST", EMBD, {"input": ""}, contains="empty")
    expect(400, "POST", EMBD, {"input": []}, contains="empty")
    expect(400, "POST", EMBD, {"input": [[]]}, contains="empty")
    expect(400, "POST", EMBD, {"input": 5}, contains="input")
    expect(400, "POST", EMBD, {"input": ["a", 3]}, contains="input[1]")
    expect(400, "POST", EMBD, {"input": [1, -2]}, contains="token id")
    expect(400, "POST", EMBD, {"input": [1, 2.5]}, contains="token id")
    expect(400, "POST", EMBD, {"input": [1, 99999]}, contains="vocabulary")
    expect(400, "POST", EMBD, {"input": ["a"] * 2049}, contains="at most")
    expect(400, "POST", EMBD, {"input": "x" * 400}, contains="context")
    expect(400, "POST", EMBD, {"input": "a", "encoding_format": "int8"}, contains="encoding")
    expect(400, "POST", EMBD, {"input": "a", "dimensions": 8}, contains="dimensions")
    expect(400, "POST", EMBD, {"input": "a", "model": 1}, contains="model")
    expect(400, "POST", EMBD, raw=b"[1]")
    # strict JSON: what cJSON alone would take, and read otherwise than other parsers
    ok = '{"prompt": "hi", "max_tokens": 2}'
    expect(400, "POST", COMPL, raw=ok + " x", contains="follows the value")
    expect(400, "POST", COMPL, raw=ok + ok, contains="follows the value")
    expect(400, "POST", COMPL, raw='{"prompt": "hi", "prompt": "ho"}', contains="'prompt' twice")
    expect(400, "POST", CHAT, raw='{"messages": [{"role": "user", "role": "system", '
           '"content": "x"}]}', contains="'role' twice")
    for num in ("02", "-01", "00", "1.", "1.e3", "-.5"):
        expect(400, "POST", COMPL, raw='{"prompt": "hi", "max_tokens": %s}' % num,
               contains="number")
    for num in (".5", "+1", "1e", "0x10"):
        expect(400, "POST", COMPL, raw='{"prompt": "hi", "max_tokens": %s}' % num)
    expect(400, "POST", COMPL, raw='{"prompt": "a\x01b"}', contains="control byte")
    expect(400, "POST", COMPL, raw='{\x01"prompt": "ab"}', contains="control byte")
    # NUL would cut the text where it stands: refused, naming the field
    expect(400, "POST", COMPL, raw='{"prompt": "Hello\\u0000world world world"}',
           contains="'prompt' holds NUL")
    expect(400, "POST", CHAT, raw='{"messages": [{"role": "user", "content": "a\\u0000b"}]}',
           contains="'content' holds NUL")
    expect(400, "POST", CHAT, raw='{"messages": [{"role": "user", "content": [{"type": "text", '
           '"text": "a\\u0000"}]}]}', contains="'text' holds NUL")
    expect(400, "POST", COMPL, raw='{"prompt": "a", "stop": ["x\\u0000"]}',
           contains="'stop' holds NUL")
    expect(400, "POST", EMBD, raw='{"input": ["a", "b\\u0000"]}', contains="'input' holds NUL")
    expect(400, "POST", CHAT, {"messages": [{"role": "hacker", "content": "x"}]},
           contains="'hacker'")
    expect(400, "POST", CHAT, {"messages": [{"role": "User", "content": "x"}]}, contains="'User'")
    for fine in ('{"prompt": "hi", "max_tokens": 2e0}', '{"prompt": "hi", "max_tokens": -0}',
                 ' {"prompt": "a\\u0001", "max_tokens": 1} \r\n\t'):
        st, r = s.request("POST", COMPL, raw=fine)
        check(st == 200, f"strict JSON still takes {fine!r}: {st} {r}")
    # a body over 16x the limit is answered before it is read, and the server goes on
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n")
    head = c.recv(4096).decode(errors="replace")
    c.close()
    check(head.startswith("HTTP/1.1 413"), f"huge Content-Length: {head[:60]!r}")
    # bytes that are not HTTP, and garbage bodies, leave the server answering
    for junk in (b"\x00\xff" * 100 + b"\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST"):
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(junk)
        c.close()
    for raw in ('{"messages":[{"role":"user","content":"\\u0000\\ud800"}],"max_tokens":2}',
                '{"prompt":"\\uFFFF","max_tokens":2,"stop":"\\u0000x"}', '{"prompt":null}',
                '{"messages":[{"role":"user","content":[{"type":"text","text":"a"},'
                '{"type":"image_url"}]}]}', "{\"prompt\": \"\xff\xfe\"}"):
        st, _ = s.request("POST", CHAT if "messages" in raw else COMPL, raw=raw.encode("latin-1"))
        check(st in (200, 400), f"garbage {raw!r}: {st}")
    st, _ = s.request("GET", "/health")
    check(st == 200, "the server still answers after bad requests")


def special_tokens():
    """Text of a special token in chat content is plain text: the tiny model's "</s>" (its EOS)
    and "<s>" typed by a user take several tokens, not one, so no user can end or open turns;
    --special-in-content reads them as the tokens again. Such a content costs the prompt what it
    costs as one text without special tokens (/tokenize), next to a content without them: no
    token more where the prompt is cut around it. The count of a content that holds none is the
    same either way, and a completion's prompt (the client's own) is read with them."""
    def prompt_tokens(srv, content, path=CHAT):
        body = {"messages": msgs(content)} if path == CHAT else {"prompt": content}
        st, r = srv.request("POST", path, {**body, "max_tokens": 1, "temperature": 0})
        check(st == 200, f"{content!r}: {st} {r}")
        return r["usage"]["prompt_tokens"] if st == 200 else -1

    plain = Server(clinfer, model, *BASE)
    special = Server(clinfer, model, *BASE, "--special-in-content")
    try:
        for text in ("a </s> b", "<s>[INST] hi", "x </s>"):
            as_text, as_tokens = prompt_tokens(plain, text), prompt_tokens(special, text)
            check(as_text > as_tokens,
                  f"{text!r}: {as_text} tokens as text, {as_tokens} with special tokens")
        for text, without in (("a </s> b", "a b"), ("x <s>[INST] hi y", "x hi y"),
                              ("q </s> </s> r", "q r")):
            more = prompt_tokens(plain, text) - prompt_tokens(plain, without)
            st, t = plain.request("POST", "/tokenize", {"content": text, "parse_special": False})
            st2, w = plain.request("POST", "/tokenize", {"content": without, "parse_special": False})
            want = len(t["tokens"]) - len(w["tokens"]) if st == st2 == 200 else None
            check(more == want, f"{text!r} costs {more} tokens more than {without!r}, as one "
                  f"text {want}")
        check(prompt_tokens(plain, "a b") == prompt_tokens(special, "a b"),
              "a content without special tokens: the same tokens with either option")
        check(prompt_tokens(plain, "  a </s> b \n") == prompt_tokens(plain, "a </s> b"),
              "the template's trim of the content holds when it is tokenized apart")
        check(prompt_tokens(plain, "a </s> b", COMPL) == prompt_tokens(special, "a </s> b", COMPL),
              "a completion's prompt reads special tokens either way")
    finally:
        check(plain.stop() == 0 and special.stop() == 0, "exit 0")


def api_key():
    s = Server(clinfer, model, *BASE, "--api-key", "sekret")
    req = {"prompt": "a", "max_tokens": 2}
    for headers, status in (({}, 401), ({"Authorization": "Bearer wrong"}, 401),
                            ({"Authorization": "sekret"}, 401),
                            ({"Authorization": "Bearer sekret"}, 200)):
        st, r = s.request("POST", COMPL, req, headers=headers)
        check(st == status, f"--api-key with {headers}: {st} {r}")
    st, _ = s.request("GET", "/v1/models")
    check(st == 401, "/v1/models without the key")
    st, _ = s.request("GET", "/health")
    check(st == 200, "/health stays open with --api-key")
    check(s.stop() == 0, "exit 0 after SIGTERM")


# Long generations for the tests that need a busy slot (a second or so on a context of 4096 of
# the tiny model): greedy, with seen tokens favoured so that the model loops rather than ends.
LONG = {"prompt": "a long story", "max_tokens": 1000, "temperature": 0, "presence_penalty": -2}


def full_queue():
    """One slot, one waiting place: of 6 long requests at once, at most 2 are served and the
    rest get 503 with an error object."""
    s = Server(clinfer, model, *BASE, "-np", "1", "--queue", "1", "-c", "4096")
    results = [None] * 6

    def run(i):
        results[i] = s.request("POST", COMPL, LONG)

    run_threads(6, run)
    codes = sorted(st for st, _ in results)
    check(codes.count(503) >= 4 and set(codes) <= {200, 503}, f"full queue: {codes}")
    check(all(r["error"]["code"] == 503 for st, r in results if st == 503), "503 error objects")
    st, text = s.request("GET", "/metrics")
    check(metric(text, "clinfer_generations_cancelled_total") == 0 and
          metric(text, "clinfer_generations_total") == codes.count(200),
          "a request refused with 503 neither ran nor counts as cancelled")
    check(s.stop() == 0, "exit 0")


def disconnect():
    """A client that leaves mid-stream frees its slot at once: with one slot, the next request
    is answered while the first would still be generating, and /metrics counts a cancel."""
    s = Server(clinfer, model, *BASE, "-np", "1", "-c", "4096")
    st, r = s.request("POST", COMPL, LONG)
    full = r["usage"]["completion_tokens"] if st == 200 else 0
    check(full == 1000, f"the long request generated {full} tokens, not its max_tokens")
    c = s.connect()
    c.request("POST", COMPL, body=json.dumps({**LONG, "stream": True}))
    resp = c.getresponse()
    check(resp.readline().startswith(b"data: "), "the long stream started")
    c.close()
    time.sleep(0.2)
    st, text = s.request("GET", "/metrics")
    check(metric(text, "clinfer_generations_cancelled_total") == 1,
          "the stream's generation was cancelled")
    check(metric(text, "clinfer_slots_active") == 0, "the slot is free again")
    generated = metric(text, "clinfer_generated_tokens_total") - full
    check(generated < full, f"the cancelled stream generated {generated} of {full} tokens")
    check(s.stop() == 0, "exit 0")


def chunked_prefill():
    """A long prompt that arrives while a stream runs is spread over steps of -b 16 tokens, and
    the stream gets a token in every one of them: /metrics counts steps and generated tokens in
    the same step, so the counts say it without timing."""
    s = Server(clinfer, model, *BASE, "-np", "2", "-b", "16", "-c", "4096")
    c = s.connect()
    c.request("POST", COMPL, body=json.dumps({**LONG, "max_tokens": 4000, "stream": True}))
    resp = c.getresponse()
    check(resp.readline().startswith(b"data: "), "the long stream started")
    st, text = s.request("GET", "/metrics")
    steps0, gen0 = metric(text, "clinfer_batch_steps_total"), \
        metric(text, "clinfer_generated_tokens_total")
    st, r = s.request("POST", COMPL, {"prompt": "the cat sat on the mat " * 40, "max_tokens": 1,
                                      "temperature": 0})
    st2, text = s.request("GET", "/metrics")
    steps = metric(text, "clinfer_batch_steps_total") - steps0
    generated = metric(text, "clinfer_generated_tokens_total") - gen0
    n = r["usage"]["prompt_tokens"] if st == 200 else 0
    check(n > 100, f"the long prompt: {st} {r}")
    check(steps >= n / 15, f"{n} prompt tokens took {steps} steps of at most 15 beside a stream")
    check(generated >= steps, f"the stream got {generated} tokens in {steps} steps")
    c.close()
    check(s.stop() == 0, "exit 0")


def prompt_cache():
    """A slot keeps its last request's tokens: the same prompt again evaluates only its last
    token (for its logits), a longer one only what was added, and the answers are the same."""
    s = Server(clinfer, model, *BASE, "-np", "2", "-c", "1024")

    def evaluated(body):
        before = metric(s.request("GET", "/metrics")[1], "clinfer_prompt_tokens_total")
        st, r = s.request("POST", COMPL, {**body, "max_tokens": 8, "temperature": 0})
        after = metric(s.request("GET", "/metrics")[1], "clinfer_prompt_tokens_total")
        check(st == 200, f"prompt cache: {st} {r}")
        return after - before, r["choices"][0]["text"], r["usage"]["prompt_tokens"]

    first, text, n = evaluated({"prompt": "a story about a cat and a dog"})
    check(first == n, f"a new prompt: {first} of {n} tokens evaluated")
    again, text2, n2 = evaluated({"prompt": "a story about a cat and a dog"})
    check(again == 1 and text2 == text and n2 == n,
          f"the same prompt: {again} evaluated, {text2!r} vs {text!r}")
    longer, _, n3 = evaluated({"prompt": "a story about a cat and a dog that ran"})
    check(0 < longer < n3, f"a longer prompt: {longer} of {n3} tokens evaluated")
    check(s.stop() == 0, "exit 0")


def health_before_load():
    """/health is 503 until the model is loaded: here it never is (the model is a FIFO nobody
    writes, so loading waits), then the load fails and the server exits 1."""
    fifo = os.path.join(tmp, "loading.gguf")
    os.mkfifo(fifo)
    s = Server(clinfer, fifo, *BASE, wait_ready=False)
    st, r = s.request("GET", "/health")
    check(st == 503 and r["error"]["code"] == 503, f"/health while loading: {st} {r}")
    st, r = s.request("POST", COMPL, {"prompt": "a"})
    check(st == 503, f"a completion while loading: {st}")
    with open(fifo, "w"):
        pass  # unblocks the loader, which fails: not a GGUF file
    code = s.stop(None, 30)
    check(code == 1, f"a model that fails to load: exit {code}")


def sigterm_mid_stream():
    """SIGTERM during a stream: the stream still ends with [DONE], new connections are refused,
    and the server exits 0."""
    s = Server(clinfer, model, *BASE, "-np", "1", "-c", "4096")
    c = s.connect()
    c.request("POST", COMPL, body=json.dumps({**LONG, "stream": True}))
    resp = c.getresponse()
    first = resp.readline()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
        check(False, "a new connection was accepted after SIGTERM")
    except OSError:
        pass
    rest = resp.read().decode("utf-8", errors="replace")
    check(first.startswith(b"data: ") and rest.rstrip().endswith("data: [DONE]"),
          "the stream in flight finished after SIGTERM")
    code = s.stop(None)
    check(code == 0, f"exit {code} after SIGTERM")


def second_signal():
    """A second SIGINT while the first waits for a long stream ends the server at once."""
    s = Server(clinfer, model, *BASE, "-np", "1", "-c", "4096")
    c = s.connect()
    c.request("POST", COMPL, body=json.dumps({**LONG, "max_tokens": 3000, "stream": True}))
    check(c.getresponse().readline().startswith(b"data: "), "the long stream started")
    s.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGINT)
    code = s.stop(None, 10)
    check(code == -signal.SIGINT, f"a second SIGINT: exit {code}")


def drain_timeout():
    """SIGTERM with streams that outlast --drain-timeout 1 (two running, one queued): after the
    second, each ends with an error event saying the server is stopping, then [DONE], and the
    server exits 0."""
    s = Server(clinfer, model, *BASE, "-np", "2", "-c", "16384", "--drain-timeout", "1")
    body = json.dumps({**LONG, "max_tokens": 16000, "stream": True})  # some 10 s or more
    conns = [s.connect() for _ in range(3)]
    resps = []
    for i, c in enumerate(conns):  # the third once the first two run: it waits for a slot
        c.request("POST", COMPL, body=body)
        resps.append(c.getresponse())
        check(resps[-1].status == 200 and (i == 2 or resps[-1].readline().startswith(b"data: ")),
              f"stream {i} started")
    start = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    rests = [r.read().decode("utf-8", errors="replace") for r in resps]
    code = s.stop(None, 30)
    took = time.monotonic() - start
    for i, rest in enumerate(rests):
        lines = [ln for ln in rest.split("\n") if ln.startswith("data: ")]
        last = json.loads(lines[-2][6:]) if len(lines) >= 2 else {}
        check(lines and lines[-1] == "data: [DONE]" and
              "server is stopping" in last.get("error", {}).get("message", ""),
              f"stream {i} ends saying the server is stopping: {lines[-2:]}")
    check(code == 0 and took < 15, f"exit {code} {took:.1f} s after SIGTERM")


# Structured output: a schema of every kind the checks below look at, bounded so that the tiny
# model's near-random draws end well inside max_tokens.
SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["name", "n", "ok", "color", "tags"],
          "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer"},
                         "ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                  "maxItems": 2}}}


def schema_errors(v):
    """What in v breaks SCHEMA, by hand: keys, types, enum, lengths."""
    if not isinstance(v, dict):
        return [f"not an object: {v!r}"]
    errs = [] if sorted(v) == sorted(SCHEMA["required"]) else [f"keys {sorted(v)}"]
    want = {"name": lambda x: isinstance(x, str) and len(x) <= 6,
            "n": lambda x: isinstance(x, int) and not isinstance(x, bool),
            "ok": lambda x: isinstance(x, bool), "color": lambda x: x in ("red", "green", "blue"),
            "tags": lambda x: isinstance(x, list) and len(x) <= 2 and
            all(isinstance(t, str) and len(t) <= 3 for t in x)}
    return errs + [f"{k}: {v[k]!r}" for k, ok in want.items() if k in v and not ok(v[k])]


def structured_output():
    """response_format json_object and json_schema, json_schema, grammar: 10 sampled answers of
    each parse and match, streamed as whole; max_tokens cuts with "length"; refusals name why."""
    s = Server(clinfer, model, *BASE, "-np", "4", "-c", "1024")
    rf_schema = {"type": "json_schema",
                 "json_schema": {"name": "thing", "strict": True, "schema": SCHEMA}}
    cases = [("json_object", {"response_format": {"type": "json_object"}}, CHAT),
             ("json_schema", {"response_format": rf_schema}, CHAT),
             ("completions json_schema", {"json_schema": SCHEMA}, COMPL)]
    for name, extra, path in cases:
        def run(i):
            body = {"messages": msgs("a thing"), "prompt": "a thing", "max_tokens": 700,
                    "temperature": 0.9, "seed": 100 + i, **extra}
            return s.request("POST", path, body), s.stream(path, {**body, "stream": True})
        for i in range(10):
            (st, whole), (sst, events, done) = run(i)
            if not check(st == 200 and sst == 200, f"{name} {i}: {st} {whole}"):
                break
            chat = path == CHAT
            ch = whole["choices"][0]
            text = ch["message"]["content"] if chat else ch["text"]
            try:
                v = json.loads(text)
                errs = schema_errors(v) if "schema" in name else \
                    ([] if isinstance(v, dict) else [f"not an object: {v!r}"])
            except ValueError as e:
                errs = [f"does not parse ({e})"]
            check(not errs and ch["finish_reason"] == "stop", f"{name} {i} {text!r}: {errs}, "
                  f"finish {ch['finish_reason']}")
            check(done and streamed_text(events, chat) == text,
                  f"{name} {i}: streamed {streamed_text(events, chat)!r} != {text!r}")
    cut = s.request("POST", CHAT, {"messages": msgs("x"), "max_tokens": 5, "temperature": 0,
                                   "response_format": rf_schema})[1]
    check(cut["choices"][0]["finish_reason"] == "length" and
          cut["usage"]["completion_tokens"] == 5, f"json_schema at max_tokens: {cut}")

    # GBNF: answers match the regex of the same language
    gbnf = 'root ::= ("yes" | "no") " " num\nnum ::= [1-9] [0-9]{0,2}\n'
    for i, path in enumerate([CHAT, COMPL] * 5):
        st, r = s.request("POST", path, {"messages": msgs("x"), "prompt": "x", "grammar": gbnf,
                                         "max_tokens": 20, "temperature": 1, "seed": i})
        ch = r["choices"][0] if st == 200 else {}
        text = ch.get("message", {}).get("content") if path == CHAT else ch.get("text")
        check(st == 200 and re.fullmatch(r"(yes|no) [1-9][0-9]{0,2}", text or "") and
              ch["finish_reason"] == "stop", f"grammar {path} {i}: {st} {r}")

    def refused(body, why, path=CHAT):
        st, r = s.request("POST", path, {"messages": msgs("x"), "prompt": "x", **body})
        check(st == 400 and why in r["error"]["message"], f"{body}: want 400 naming {why!r}, "
              f"got {st} {r}")
    refused({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "string", "pattern": "a+"}}}}, "'pattern'")
    refused({"json_schema": {"type": "object", "oneOf": []}}, "'oneOf'", COMPL)
    refused({"grammar": "root ::= foo"}, "line 1, column")
    refused({"grammar": 'root ::= "a'}, "line 1, column", COMPL)
    refused({"grammar": 5}, "'grammar' must be a string")
    refused({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}},
            "'grammar' and 'response_format'")
    refused({"json_schema": SCHEMA, "response_format": rf_schema}, "both constrain")
    refused({"response_format": {"type": "xml"}}, "response_format.type")
    refused({"response_format": "json"}, "'response_format' must be an object")
    refused({"response_format": {"type": "json_schema"}}, "needs 'json_schema'")
    refused({"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}},
            "'response_format.json_schema.schema' must be an object")
    refused({"response_format": {"type": "json_schema", "json_schema": {"strict": "yes"}}},
            "strict")
    st, r = s.request("POST", CHAT, {"messages": msgs("x"), "max_tokens": 4, "grammar": "",
                                     "response_format": {"type": "text"}})
    check(st == 200, f"an empty grammar and a text response_format are free text: {st} {r}")
    check(s.stop() == 0, "the structured output server exits 0")


s = Server(clinfer, model, *BASE, "-np", "8", "--alias", "tiny", "--max-body", "65536")
try:
    endpoints(s)
    embeddings(s)
    curl(s)
    concurrent(s)
    bad_requests(s)
finally:
    code = s.stop()
check(code == 0, f"SIGTERM: exit {code}")
structured_output()
special_tokens()
api_key()
full_queue()
disconnect()
chunked_prefill()
prompt_cache()
health_before_load()
sigterm_mid_stream()
second_signal()
drain_timeout()
finish("test_serve")
