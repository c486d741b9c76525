"""`clinfer serve` through the official `openai` Python client from PyPI, installed into a venv
in the build tree (kept for later runs); skipped (77) when the registry cannot be reached.
Chat, streaming (the streamed text equals the whole answer at temperature 0), completions,
embeddings (base64, as the client asks by default, and float), models, an API key, an error
status raised as the client's exception, and structured output (parse() with a Pydantic model,
json_object, a schema refused).
Usage: test_serve_openai.py CLINFER WRITE_TINY_MODEL VENV_DIR"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Literal

clinfer, writer, venv = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
py = os.path.join(venv, "bin", "python")

if os.environ.get("CLINFER_SERVE_OPENAI_INNER") != "1":
    if not os.path.exists(os.path.join(venv, ".openai-installed")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "openai"], capture_output=True, text=True, timeout=600)
        if pip.returncode:
            print("skipped: cannot install the openai client from PyPI:\n" + pip.stderr[-2000:])
            sys.exit(77)
        open(os.path.join(venv, ".openai-installed"), "w").close()
    env = {**os.environ, "CLINFER_SERVE_OPENAI_INNER": "1"}
    sys.exit(subprocess.run([py, os.path.abspath(__file__), *sys.argv[1:]], env=env).returncode)

# ---- inside the venv ----
import openai  # noqa: E402

sys.path.insert(0, here)
from serve_fixture import Server, check, finish  # noqa: E402

tmp = tempfile.mkdtemp(prefix="clinfer-serve-openai-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
s = Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", "-np", "2",
           "-c", "1024", "--api-key", "k-123")
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
    import pydantic  # the client's own dependency

    class Thing(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        ok: bool
        n: int
        color: Literal["red", "green", "blue"]

    for seed in range(10):
        p = client.chat.completions.parse(model="tiny.gguf", messages=messages, max_tokens=500,
                                          temperature=0.9, seed=seed, response_format=Thing)
        check(isinstance(p.choices[0].message.parsed, Thing), f"parse {seed}: {p}")
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
