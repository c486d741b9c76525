"""`clinfer serve`'s OpenAI and llama-server features beyond plain text, on a tiny generated model
(reference backend) through the standard library's HTTP client: logprobs and top_logprobs
(chat and completions, whole and streamed), n choices, tools and tool_choice, /tokenize,
/detokenize and /props, and the 400s that name a bad field.
Usage: test_serve_features.py CLINFER WRITE_TINY_MODEL"""
import atexit
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, check, finish, run_threads  # noqa: E402

clinfer, writer = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="clinfer-serve-features-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
M = [{"role": "user", "content": "tell me something"}]


def expect_400(s, path, body, field):
    st, r = s.request("POST", path, body)
    check(st == 400 and f"'{field}'" in r.get("error", {}).get("message", ""),
          f"{body}: want 400 naming '{field}', got {st} {r}")


def check_entry(e, where, top_n, sampled):
    """One chat logprobs entry: its top list sorted, within a distribution, the chosen among it
    when it is as likely as the last of them (always at temperature 0: it is the first)."""
    top = e["top_logprobs"]
    lps = [t["logprob"] for t in top]
    ok = len(top) == top_n and lps == sorted(lps, reverse=True) and \
        sum(math.exp(x) for x in lps) <= 1 + 1e-4 and e["logprob"] <= 0 and \
        bytes(e["bytes"]).decode("utf-8", "replace") == e["token"]
    if top:
        chosen = [t for t in top if t["token"] == e["token"] and t["bytes"] == e["bytes"]]
        if e["logprob"] >= lps[-1] - 1e-6:
            ok = ok and chosen and abs(chosen[0]["logprob"] - e["logprob"]) < 1e-5
        if not sampled:
            ok = ok and abs(lps[0] - e["logprob"]) < 1e-5
    check(ok, f"{where}: logprobs entry {e}")


def logprobs(s):
    req = {"messages": M, "max_tokens": 12, "temperature": 0, "logprobs": True,
           "top_logprobs": 5}
    st, r = s.request("POST", CHAT, req)
    check(st == 200, f"chat logprobs: {st} {r}")
    if st != 200:
        return
    content = r["choices"][0]["logprobs"]["content"]
    text = r["choices"][0]["message"]["content"]
    check(len(content) == r["usage"]["completion_tokens"], f"one entry a token: {r}")
    for e in content:
        check_entry(e, "chat", 5, False)
    joined = b"".join(bytes(e["bytes"]) for e in content).decode("utf-8", "replace")
    if "\ufffd" not in text:
        check(joined == text, f"the tokens' bytes make the text: {joined!r} {text!r}")
    st, events, done = s.stream(CHAT, req)
    streamed = [e for ev in events for ch in ev["choices"] if ch.get("logprobs")
                for e in ch["logprobs"]["content"]]
    check(st == 200 and done and streamed == content, f"streamed logprobs {streamed} {content}")
    # sampled: the chosen token among the top ones whenever it is as likely as the last
    st, r = s.request("POST", CHAT, {**req, "temperature": 1.5, "seed": 7, "top_logprobs": 20,
                                     "top_k": 0, "top_p": 1, "min_p": 0})
    for e in r["choices"][0]["logprobs"]["content"]:
        check_entry(e, "sampled chat", 20, True)
    # without top_logprobs: each token's own, an empty top list
    st, r = s.request("POST", CHAT, {**req, "top_logprobs": 0})
    check(st == 200 and all(e["top_logprobs"] == [] for e in
                            r["choices"][0]["logprobs"]["content"]), f"top 0: {r}")
    st, r = s.request("POST", CHAT, {"messages": M, "max_tokens": 3})
    check(st == 200 and r["choices"][0]["logprobs"] is None, f"no logprobs asked: {r}")

    creq = {"prompt": "once", "max_tokens": 10, "temperature": 0, "logprobs": 3}
    st, c = s.request("POST", COMPL, creq)
    lp = c["choices"][0]["logprobs"]
    n = c["usage"]["completion_tokens"]
    check(st == 200 and len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"])
          == len(lp["text_offset"]) == n, f"completion logprobs: {c}")
    for tok, x, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        vals = list(top.values())
        check(len(top) <= 3 and x <= 0 and abs(max(vals) - x) < 1e-5 and
              sum(math.exp(v) for v in vals) <= 1 + 1e-4, f"completion entry {tok} {x} {top}")
    check(lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0,
          f"offsets {lp['text_offset']}")
    st, events, done = s.stream(COMPL, creq)
    toks = [t for ev in events for ch in ev["choices"] if ch.get("logprobs")
            for t in ch["logprobs"]["tokens"]]
    offs = [t for ev in events for ch in ev["choices"] if ch.get("logprobs")
            for t in ch["logprobs"]["text_offset"]]
    check(toks == lp["tokens"] and offs == lp["text_offset"], f"streamed {toks} {offs}")
    # a stop string: no entries for the tokens past it
    st, c2 = s.request("POST", COMPL, {**creq, "stop": [c["choices"][0]["text"][3:5] or "zz"]})
    lp2 = c2["choices"][0]["logprobs"]
    check(st == 200 and all(o < max(len(c2["choices"][0]["text"].encode()), 1)
                            for o in lp2["text_offset"]), f"logprobs with a stop: {c2}")

    expect_400(s, CHAT, {"messages": M, "logprobs": True, "top_logprobs": 21}, "top_logprobs")
    expect_400(s, CHAT, {"messages": M, "top_logprobs": 2}, "top_logprobs")
    expect_400(s, CHAT, {"messages": M, "logprobs": 2}, "logprobs")
    expect_400(s, COMPL, {"prompt": "x", "logprobs": 21}, "logprobs")
    expect_400(s, COMPL, {"prompt": "x", "logprobs": -1}, "logprobs")
    expect_400(s, COMPL, {"prompt": "x", "top_logprobs": 2}, "top_logprobs")


def choices(s):
    """n choices: indexed, each of its own seed, the prompt evaluated once (the others copy
    it and evaluate only its last token), streamed with their index; n past the slots: 400."""
    def prompt_tokens():
        st, text = s.request("GET", "/metrics")
        return float(re.search(r"^clinfer_prompt_tokens_total (\S+)$", text, re.M).group(1))

    req = {"messages": [{"role": "user", "content": "a longer prompt, so that sharing shows"}],
           "max_tokens": 8, "seed": 11, "temperature": 1.0}
    before = prompt_tokens()
    st, r = s.request("POST", CHAT, {**req, "n": 3})
    after = prompt_tokens()
    ch = r.get("choices", [])
    texts = [c["message"]["content"] for c in ch]
    check(st == 200 and [c["index"] for c in ch] == [0, 1, 2] and
          all(c["finish_reason"] in ("stop", "length") for c in ch), f"n=3: {st} {r}")
    check(len(set(texts)) > 1, f"the choices differ: {texts}")
    n_prompt = r["usage"]["prompt_tokens"]
    check(3 <= r["usage"]["completion_tokens"] <= 24 and after - before <= n_prompt + 2,
          f"the prompt evaluated once: {before} -> {after}, prompt {n_prompt}, {r['usage']}")
    st, again = s.request("POST", CHAT, {**req, "n": 3})
    check([c["message"]["content"] for c in again["choices"]] == texts, "a seed repeats all")
    st, one = s.request("POST", CHAT, req)
    check(one["choices"][0]["message"]["content"] == texts[0], "choice 0 is n=1's answer")
    st, events, done = s.stream(CHAT, {**req, "n": 3})
    parts, finishes = {}, {}
    for ev in events:
        for c in ev["choices"]:
            parts.setdefault(c["index"], []).append(c["delta"].get("content") or "")
            if c["finish_reason"]:
                finishes[c["index"]] = c["finish_reason"]
    check(st == 200 and done and ["".join(parts.get(i, [])) for i in range(3)] == texts and
          sorted(finishes) == [0, 1, 2], f"streamed n=3: {parts} {finishes} {texts}")
    st, c = s.request("POST", COMPL, {"prompt": "once", "max_tokens": 5, "n": 2, "seed": 3})
    check(st == 200 and [x["index"] for x in c["choices"]] == [0, 1], f"completions n=2: {c}")
    # three requests of n=2 on 3 slots at once: each waits for 2 free slots, all answered
    results = []
    run_threads(3, lambda i: results.append(s.request("POST", COMPL, {
        "prompt": f"p{i}", "max_tokens": 6, "n": 2})))
    check(all(st == 200 and len(r["choices"]) == 2 for st, r in results),
          f"groups queued: {results}")
    expect_400(s, CHAT, {"messages": M, "n": 4}, "n")
    expect_400(s, CHAT, {"messages": M, "n": 0}, "n")
    expect_400(s, COMPL, {"prompt": "x", "n": 1.5}, "n")


WEATHER = {"type": "object", "additionalProperties": False, "required": ["city", "unit", "days"],
           "properties": {"city": {"type": "string", "maxLength": 10},
                          "unit": {"enum": ["celsius", "fahrenheit"]},
                          "days": {"type": "integer"}, "hourly": {"type": "boolean"}}}
TIME = {"type": "object", "properties": {"zone": {"$ref": "#/$defs/zone"}}, "required": ["zone"],
        "additionalProperties": False,
        "$defs": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "the weather",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": TIME}}]


def valid(value, schema, defs):
    """Whether value meets schema (the keywords the tests' schemas use)."""
    if "$ref" in schema:
        return valid(value, defs[schema["$ref"].split("/")[-1]], defs)
    if "enum" in schema:
        return value in schema["enum"]
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties", {})
        return isinstance(value, dict) and all(k in value for k in schema.get("required", [])) \
            and all(k in props for k in value) and all(valid(v, props[k], defs)
                                                       for k, v in value.items())
    if t == "string":
        return isinstance(value, str) and len(value) <= schema.get("maxLength", 1 << 30)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return False


def check_calls(where, choice, names):
    """A choice that called one of names, its arguments a JSON string meeting the schema."""
    m = choice["message"]
    calls = m.get("tool_calls") or []
    ok = choice["finish_reason"] == "tool_calls" and len(calls) == 1 and m.get("content") is None
    for c in calls:
        schema = {"get_weather": WEATHER, "get_time": TIME}.get(c["function"]["name"])
        try:
            args = json.loads(c["function"]["arguments"])
        except ValueError:
            args = None
        ok = ok and c["type"] == "function" and c["id"].startswith("call_") and \
            c["function"]["name"] in names and schema and \
            valid(args, schema, schema.get("$defs", {}))
    check(ok, f"{where}: tool calls {choice}")
    return calls


def tools(s, template):
    """tool_choice required and named give calls that parse and meet the schema, whole and
    streamed (as deltas: id, type and name, then the arguments); auto and none take free text;
    the history's calls and results render; bad tools get 400 naming the field."""
    base = {"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": TOOLS,
            "max_tokens": 300, "temperature": 0.8}
    for seed in range(6):
        st, r = s.request("POST", CHAT, {**base, "seed": seed, "tool_choice": "required"})
        check(st == 200, f"{template} required: {st} {r}")
        if st == 200:
            check_calls(f"{template} required {seed}", r["choices"][0], ["get_weather", "get_time"])
    named = {"type": "function", "function": {"name": "get_time"}}
    st, r = s.request("POST", CHAT, {**base, "seed": 1, "tool_choice": named, "n": 2})
    for c in r.get("choices", []):
        check_calls(f"{template} named", c, ["get_time"])
    check(st == 200 and len(r["choices"]) == 2, f"{template} named n=2: {st} {r}")
    st, events, done = s.stream(CHAT, {**base, "seed": 2, "tool_choice": "required"})
    calls, finish = {}, None
    for ev in events:
        for c in ev["choices"]:
            finish = c["finish_reason"] or finish
            for d in c["delta"].get("tool_calls") or []:
                cur = calls.setdefault(d["index"], {"id": None, "name": "", "arguments": ""})
                cur["id"] = d.get("id") or cur["id"]
                cur["name"] += d.get("function", {}).get("name") or ""
                cur["arguments"] += d.get("function", {}).get("arguments") or ""
    st2, whole = s.request("POST", CHAT, {**base, "seed": 2, "tool_choice": "required"})
    want = whole["choices"][0]["message"]["tool_calls"]
    got = [{"name": c["name"], "arguments": c["arguments"]} for c in calls.values()]
    check(st == 200 and done and finish == "tool_calls" and got == [
        {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in want],
        f"{template} streamed calls {got} != {want}")
    # the arguments come as they are generated, not in one piece at the end
    pieces = sum(1 for ev in events for c in ev["choices"] for d in c["delta"].get("tool_calls")
                 or [] if d.get("function", {}).get("arguments"))
    check(pieces > 3, f"{template}: the streamed arguments came in {pieces} pieces")
    for choice in ("auto", "none"):
        st, r = s.request("POST", CHAT, {**base, "tool_choice": choice, "max_tokens": 8})
        check(st == 200 and r["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"),
              f"{template} {choice}: {st} {r}")
    # auto, streamed: the content comes as it is made (not held to the end) once it cannot be
    # a call, and adds up to the whole answer's
    for seed in range(4):
        req = {**base, "tool_choice": "auto", "max_tokens": 24, "seed": seed}
        st, whole = s.request("POST", CHAT, req)
        st2, events, done = s.stream(CHAT, req)
        text = whole["choices"][0]["message"].get("content") or ""
        parts = [c["delta"]["content"] for ev in events for c in ev["choices"]
                 if c["delta"].get("content")]
        check(st == st2 == 200 and done and "".join(parts) == text, f"{template} auto streamed "
              f"{parts} != {text!r}")
        plain = not whole["choices"][0]["message"].get("tool_calls") and \
            text.lstrip()[:1] not in ("{", "[", "<") and "<tool_call>" not in text
        # held to the end it would come in one part; more than one is all the bytes of these
        # random vocabularies promise (a piece that ends inside a character waits for the rest:
        # one run of 24 tokens came in 2 parts)
        if plain and len(text) > 8:
            check(len(parts) > 1, f"{template} auto: the content streamed in {len(parts)} parts")
    # the history: an assistant's calls (arguments as a JSON string), the tool's result
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather",
                         "arguments": '{"city": "Paris", "unit": "celsius", "days": 1}'}}
    history = [{"role": "system", "content": "be brief"},
               {"role": "user", "content": "weather in Paris?"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_1", "content": "22 degrees"}]
    st, r = s.request("POST", CHAT, {"messages": history, "tools": TOOLS, "max_tokens": 4})
    check(st == 200, f"{template} history with calls: {st} {r}")
    st, r = s.request("POST", CHAT, {"messages": history, "max_tokens": 4})
    check(st == 200, f"{template} history without tools: {st} {r}")


def no_silent_fields(s):
    """Fields OpenAI documents that the server does not do get 400 naming them, in messages,
    stream_options, response_format and embeddings too; those at the values clients send
    unasked are taken, and the developer role is the system's."""
    for body, field in (
            ({"messages": [{"role": "user", "content": "x", "audio": {"id": "a"}}]},
             "messages[0].audio"),
            ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages[0].name"),
            ({"messages": [{"role": "assistant", "content": "x", "prefix": True}]},
             "messages[0].prefix"),
            ({"messages": M, "stream": True, "stream_options": {"chunk_size": 3}},
             "stream_options.chunk_size"),
            ({"messages": M, "stream": True, "stream_options": {"include_obfuscation": True}},
             "stream_options.include_obfuscation"),
            ({"messages": M, "response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "object"}, "description": "d"}}},
             "response_format.json_schema.description"),
            ({"messages": M, "response_format": {"type": "json_object", "mode": 1}},
             "response_format.mode"),
            ({"messages": M, "modalities": ["text", "audio"]}, "modalities"),
            ({"messages": M, "reasoning_effort": "low"}, "reasoning_effort"),
            ({"messages": M, "n_probs": 3}, "n_probs")):
        expect_400(s, CHAT, body, field)
    expect_400(s, "/v1/embeddings", {"input": "x", "embd_normalize": -1}, "embd_normalize")
    ok = [{"role": "developer", "content": "be brief"},
          {"role": "user", "content": "hi"},
          {"role": "assistant", "content": "hello", "refusal": None, "annotations": []},
          {"role": "user", "content": "again"}]
    st, r = s.request("POST", CHAT, {"messages": ok, "max_tokens": 2, "modalities": ["text"],
                                     "prompt_cache_key": "k", "safety_identifier": "u1",
                                     "stream_options": {"include_usage": False,
                                                        "include_obfuscation": False}})
    check(st == 200, f"the fields clients send unasked: {st} {r}")
    st, r = s.request("POST", "/v1/embeddings", {"input": "x", "user": "u1"})
    check(st == 200, f"embeddings with a user: {st} {r}")


def bad_tools(s):
    t = TOOLS[0]
    expect_400(s, CHAT, {"messages": M, "tools": {"a": 1}}, "tools")
    expect_400(s, CHAT, {"messages": M, "tools": [5]}, "tools[0]")
    expect_400(s, CHAT, {"messages": M, "tools": [{"type": "code", "function": {}}]},
               "tools[0].type")
    expect_400(s, CHAT, {"messages": M, "tools": [{"type": "function"}]}, "tools[0].function")
    expect_400(s, CHAT, {"messages": M, "tools": [{"type": "function", "function": {
        "name": "bad name"}}]}, "tools[0].function.name")
    expect_400(s, CHAT, {"messages": M, "tools": [t, t]}, "tools[1].function.name")
    expect_400(s, CHAT, {"messages": M, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": "x"}}]}, "tools[0].function.parameters")
    expect_400(s, CHAT, {"messages": M, "tool_choice": "required",
                         "tools": [{"type": "function", "function": {
                             "name": "f", "parameters": {"type": "string", "format": "date"}}}]},
               "tools[0].function.parameters")
    expect_400(s, CHAT, {"messages": M, "tools": TOOLS, "tool_choice": "always"}, "tool_choice")
    expect_400(s, CHAT, {"messages": M, "tool_choice": "required"}, "tool_choice")
    expect_400(s, CHAT, {"messages": M, "tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "nope"}}}, "tool_choice")
    expect_400(s, CHAT, {"messages": M, "tools": TOOLS, "tool_choice": "required",
                         "response_format": {"type": "json_object"}}, "tool_choice")
    expect_400(s, CHAT, {"messages": M, "tools": TOOLS, "parallel_tool_calls": 1},
               "parallel_tool_calls")
    expect_400(s, COMPL, {"prompt": "x", "tools": TOOLS}, "tools")
    expect_400(s, CHAT, {"messages": [{"role": "user", "content": "x", "tool_calls": []}]},
               "messages[0].tool_calls")
    expect_400(s, CHAT, {"messages": [{"role": "assistant", "content": None,
                                       "tool_calls": [{"function": 3}]}]},
               "messages[0].tool_calls[0]")
    expect_400(s, CHAT, {"messages": [{"role": "tool", "content": "x", "tool_call_id": 5}]},
               "messages[0].tool_call_id")


def llama_server_endpoints(s):
    """/tokenize, /detokenize and /props as llama-server has them."""
    text = "hello world, once upon a time"
    st, t = s.request("POST", "/tokenize", {"content": text})
    ids = t.get("tokens")
    check(st == 200 and ids and all(isinstance(i, int) for i in ids), f"/tokenize: {st} {t}")
    st, d = s.request("POST", "/detokenize", {"tokens": ids})
    check(st == 200 and d["content"].strip() == text, f"/detokenize: {st} {d}")
    st, p = s.request("POST", "/tokenize", {"content": text, "with_pieces": True})
    pieces = p["tokens"]
    check(st == 200 and [x["id"] for x in pieces] == ids and
          "".join(x["piece"] for x in pieces).strip() == text, f"with_pieces: {p}")
    st, b = s.request("POST", "/tokenize", {"content": text, "add_special": True})
    st2, props = s.request("GET", "/props")
    check(st == 200 and b["tokens"][1:] == ids, f"add_special: BOS first: {b} {ids}")
    st, sp = s.request("POST", "/tokenize", {"content": "<s>", "parse_special": True})
    st, pl = s.request("POST", "/tokenize", {"content": "<s>", "parse_special": False})
    check(len(sp["tokens"]) == 1 and len(pl["tokens"]) > 1, f"parse_special: {sp} {pl}")
    check(st2 == 200 and props["total_slots"] == 3 and
          props["default_generation_settings"]["n_ctx"] == 2048 and
          props["default_generation_settings"]["params"]["temperature"] == 0.8 and
          props["model_path"] == model and props["chat_template"] == "llama2" and
          props["bos_token"] == "<s>", f"/props: {props}")
    st, r = s.request("POST", "/detokenize", {"tokens": [1, 99999]})
    check(st == 400 and "tokens[1]" in r["error"]["message"], f"out of the vocabulary: {r}")
    expect_400(s, "/detokenize", {"tokens": [1, -2]}, "tokens[1]")
    expect_400(s, "/detokenize", {"tokens": "1 2"}, "tokens")
    expect_400(s, "/tokenize", {"content": 5}, "content")
    expect_400(s, "/tokenize", {"content": "x", "add_special": "yes"}, "add_special")
    expect_400(s, "/tokenize", {"content": "x", "frobnicate": 1}, "frobnicate")
    st, r = s.request("GET", "/tokenize")
    check(st == 405, f"GET /tokenize: {st}")
    st, r = s.request("POST", "/props", {})
    check(st == 405, f"POST /props: {st}")


s = Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", "-np", "3",
           "-c", "2048")
try:
    logprobs(s)
    choices(s)
    bad_tools(s)
    no_silent_fields(s)
    llama_server_endpoints(s)
    tools(s, "llama2 (generic JSON)")
finally:
    code = s.stop()
check(code == 0, f"exit {code}")
# ChatML (Hermes' <tool_call>), Llama 3 ({"name", "parameters"}), Gemma (generic JSON)
for template in ("chatml", "llama3", "gemma"):
    s = Server(clinfer, model, "--reference", "--chat-template", template, "-q", "-np", "2",
               "-c", "2048")
    try:
        tools(s, template)
    finally:
        code = s.stop()
    check(code == 0, f"exit {code}")
finish("test_serve_features")
