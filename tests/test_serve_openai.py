"""`clinfer serve` through the official `openai` Python client from PyPI, installed into a venv
in the build tree (kept for later runs); skipped (77) when the registry cannot be reached.
Chat, streaming (the streamed text equals the whole answer at temperature 0), completions,
embeddings (base64, as the client asks by default, and float), models, an API key, an error
status raised as the client's exception, structured output (parse() with a Pydantic model,
json_object, a schema refused), logprobs (sorted, the chosen token first at temperature 0), n=2,
and tools with tool_choice "required" (arguments that validate against the function's schema,
whole, parsed and streamed, the arguments in pieces as they are generated).
With --default-model (label model): parse() with a Pydantic model on $CLINFER_MODEL (skipped,
77, without it), 50 requests, 4 at a time, each answer validating.
Usage: test_serve_openai.py CLINFER WRITE_TINY_MODEL VENV_DIR [--default-model]"""
import json
import math
import os
import sys
from typing import Literal

clinfer, writer, venv = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from serve_fixture import (Server, check, finish, pydantic_thing, run_in_venv,  # noqa
                           run_threads, tiny_server)

default_model = sys.argv[4:] == ["--default-model"]
if default_model and not os.path.exists(os.environ.get("CLINFER_MODEL", "")):
    print("skipped: no $CLINFER_MODEL")
    sys.exit(77)
run_in_venv(venv, "openai", "CLINFER_SERVE_OPENAI_INNER")

# ---- inside the venv ----
import openai  # noqa: E402
import pydantic  # noqa: E402  (the client's own dependency)


def parse_on_default_model():
    """50 parse() calls on the default model, 4 at a time: each answer validates."""
    class Weather(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        city: str = pydantic.Field(max_length=20)
        sunny: bool
        unit: Literal["celsius", "fahrenheit"]

    s = Server(clinfer, os.environ["CLINFER_MODEL"], "-np", "4", "-c", "2048", "-q")
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="none",
                               max_retries=0, timeout=300)
        ask = [{"role": "user", "content": "What is the weather like in Paris today?"}]
        results = [None] * 50

        def worker(t):
            for i in range(t, 50, 4):
                try:
                    p = client.chat.completions.parse(model="any", messages=ask, max_tokens=60,
                                                      temperature=0.8, seed=i,
                                                      response_format=Weather)
                    results[i] = isinstance(p.choices[0].message.parsed, Weather) or repr(p)
                except Exception as e:  # the client raises when the answer does not validate
                    results[i] = repr(e)

        run_threads(4, worker)
        bad = [(i, r) for i, r in enumerate(results) if r is not True]
        check(not bad, f"{50 - len(bad)} of 50 validate; the others: {bad[:3]}")
    finally:
        code = s.stop()
    check(code == 0, f"exit {code}")
    finish("test_serve_openai --default-model")


if default_model:
    parse_on_default_model()

model, s = tiny_server(clinfer, writer, "serve-openai", "-np", "2", "-c", "1024", "--api-key",
                       "k-123")
try:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="k-123",
                           max_retries=0)
    models = client.models.list()
    check([m.id for m in models.data] == ["tiny.gguf"], f"models: {models}")

    messages = [{"role": "user", "content": "tell me something"}]
    r = client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=16,
                                       temperature=0)
    text = r.choices[0].message.content
    check(r.choices[0].message.role == "assistant" and text and r.usage.completion_tokens > 0,
          f"chat: {r}")
    chunks = client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=16,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    parts, usage, finish_reason = [], None, None
    for ch in chunks:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            parts.append(c.delta.content or "")
            finish_reason = c.finish_reason or finish_reason
    check("".join(parts) == text, f"streamed chat {''.join(parts)!r} != {text!r}")
    check(usage and usage.completion_tokens == r.usage.completion_tokens, f"usage {usage}")
    check(finish_reason == r.choices[0].finish_reason, f"finish {finish_reason}")

    # logprobs: each token's, the top ones sorted with the chosen one among them (temperature 0:
    # the first), exp-sums at most 1; streamed the same
    r = client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=8,
                                       temperature=0, logprobs=True, top_logprobs=4)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens, f"logprobs: {r}")
    for e in content:
        lps = [t.logprob for t in e.top_logprobs]
        check(len(lps) == 4 and lps == sorted(lps, reverse=True) and
              abs(lps[0] - e.logprob) < 1e-5 and e.top_logprobs[0].token == e.token and
              sum(math.exp(x) for x in lps) <= 1 + 1e-4, f"logprobs entry {e}")
    streamed = [e for ch in client.chat.completions.create(
        model="tiny.gguf", messages=messages, max_tokens=8, temperature=0, logprobs=True,
        top_logprobs=4, stream=True) for c in ch.choices if c.logprobs
        for e in c.logprobs.content]
    check([(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in content],
          "streamed logprobs equal the whole answer's")
    lc = client.completions.create(model="tiny.gguf", prompt="once", max_tokens=6,
                                   temperature=0, logprobs=2).choices[0].logprobs
    check(len(lc.tokens) == len(lc.token_logprobs) == len(lc.top_logprobs) and
          all(max(t.values()) == x for t, x in zip(lc.top_logprobs, lc.token_logprobs)),
          f"completion logprobs {lc}")
    two = client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=8,
                                         n=2, seed=1)
    check([c.index for c in two.choices] == [0, 1] and all(c.message.content for c in two.choices),
          f"n=2: {two}")
    try:
        client.chat.completions.create(model="tiny.gguf", messages=messages, logprobs=True,
                                       top_logprobs=21)
        check(False, "top_logprobs 21 was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "top_logprobs" in str(e), f"400: {e}")

    c = client.completions.create(model="tiny.gguf", prompt="once", max_tokens=12, temperature=0,
                                  stop=["\n\n"], seed=5)
    ctext = c.choices[0].text
    check(c.usage.prompt_tokens > 0 and c.choices[0].finish_reason in ("stop", "length"),
          f"completion: {c}")
    streamed = "".join(ch.choices[0].text for ch in client.completions.create(
        model="tiny.gguf", prompt="once", max_tokens=12, temperature=0, stop=["\n\n"], seed=5,
        stream=True) if ch.choices)
    check(streamed == ctext, f"streamed completion {streamed!r} != {ctext!r}")

    # embeddings: the client asks for base64 unless told, and decodes it
    e = client.embeddings.create(model="tiny.gguf", input=["hello there", "the cat"])
    floats = client.embeddings.create(model="tiny.gguf", input="hello there",
                                      encoding_format="float")
    v, f = e.data[0].embedding, floats.data[0].embedding
    check(len(e.data) == 2 and [d.index for d in e.data] == [0, 1] and len(v) == 64 and
          e.usage.prompt_tokens > 0, f"embeddings: {len(e.data)} vectors of {len(v)}, {e.usage}")
    check(max(abs(a - b) for a, b in zip(v, f)) < 1e-6 and abs(sum(x * x for x in v) - 1) < 1e-5,
          "base64 and float embeddings agree and have length 1")
    # structured output: parse() sends a Pydantic model's JSON schema (strict) and validates
    Thing = pydantic_thing()

    for seed in range(10):
        p = client.chat.completions.parse(model="tiny.gguf", messages=messages, max_tokens=500,
                                          temperature=0.9, seed=seed, response_format=Thing)
        check(isinstance(p.choices[0].message.parsed, Thing), f"parse {seed}: {p}")
    # tools: tool_choice "required" gives calls whose arguments parse and validate against the
    # function's schema, 10 of 10; streamed too, and the stream helper puts the deltas together
    class GetWeather(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        city: str = pydantic.Field(max_length=12)
        unit: Literal["celsius", "fahrenheit"]
        days: int

    tool = openai.pydantic_function_tool(GetWeather)
    ask = [{"role": "user", "content": "what is the weather in Paris?"}]
    for seed in range(10):
        t = client.chat.completions.create(model="tiny.gguf", messages=ask, tools=[tool],
                                           tool_choice="required", max_tokens=300, seed=seed)
        c = t.choices[0]
        calls = c.message.tool_calls or []
        check(c.finish_reason == "tool_calls" and len(calls) == 1 and
              calls[0].function.name == "GetWeather", f"tools {seed}: {t}")
        for call in calls:
            try:
                GetWeather.model_validate_json(call.function.arguments)
            except pydantic.ValidationError as e:
                check(False, f"tools {seed}: arguments {call.function.arguments!r}: {e}")
    p = client.chat.completions.parse(model="tiny.gguf", messages=ask, tools=[tool],
                                      tool_choice="required", max_tokens=300, seed=1)
    parsed = p.choices[0].message.tool_calls[0].function.parsed_arguments
    check(isinstance(parsed, GetWeather), f"parse() with a tool: {p}")
    # streamed: the arguments come in pieces as they are generated, which the stream helper puts
    # together into the whole answer's
    pieces = 0
    with client.chat.completions.stream(model="tiny.gguf", messages=ask, tools=[tool],
                                        tool_choice="required", max_tokens=300,
                                        seed=1) as stream:
        for event in stream:
            pieces += event.type == "tool_calls.function.arguments.delta"
        final = stream.get_final_completion()
    fc = final.choices[0].message.tool_calls[0]
    check(fc.function.arguments == p.choices[0].message.tool_calls[0].function.arguments and
          isinstance(fc.function.parsed_arguments, GetWeather), f"streamed tool call: {final}")
    check(pieces > 3, f"the streamed arguments came in {pieces} pieces")
    # the call and its result in the history
    follow = client.chat.completions.create(model="tiny.gguf", max_tokens=8, tools=[tool],
                                            messages=ask + [p.choices[0].message.model_dump(
                                                exclude_none=True, exclude={"parsed"})] + [
                                                {"role": "tool", "tool_call_id": fc.id,
                                                 "content": "22 degrees"}])
    check(follow.choices[0].finish_reason in ("stop", "length", "tool_calls"),
          f"history with a tool result: {follow}")
    j = client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=500,
                                       temperature=0.9, seed=3,
                                       response_format={"type": "json_object"})
    check(isinstance(json.loads(j.choices[0].message.content), dict), f"json_object: {j}")
    try:
        client.chat.completions.create(model="tiny.gguf", messages=messages, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"format": "date"}}})
        check(False, "a schema with 'format' was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "'format'" in str(e), f"400: {e}")
    try:
        client.embeddings.create(model="tiny.gguf", input="")
        check(False, "an empty input was accepted")
    except openai.BadRequestError as err:
        check(err.status_code == 400 and "empty" in str(err), f"400: {err}")
    try:
        client.chat.completions.create(model="tiny.gguf", messages=messages, max_tokens=5000)
        check(False, "max_tokens past the context was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "context" in str(e), f"400: {e}")
    try:
        openai.OpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key="wrong",
                      max_retries=0).models.list()
        check(False, "a wrong key was accepted")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, f"401: {e}")
finally:
    code = s.stop()
check(code == 0, f"exit {code}")
finish("test_serve_openai")
