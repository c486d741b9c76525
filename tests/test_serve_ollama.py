"""`clinfer serve` through the official `ollama` Python client from PyPI, installed into a venv in
the build tree (kept for later runs); skipped (77) when the registry cannot be reached. Against
a tiny generated model on 127.0.0.1: chat and generate, whole and streamed (the streamed text
equals the whole answer at temperature 0), list (tags: the loaded model and one `clinfer pull`
stored), show (of both), tools (a Python function; a history with a call and its result),
embed and embeddings, format "json" and a JSON schema (the answer parses and validates as a
Pydantic model), the API key through the client's headers, and an error raised as the
client's ResponseError.
Usage: test_serve_ollama.py CLINFER WRITE_TINY_MODEL VENV_DIR"""
import json
import os
import shutil
import sys
import tempfile

clinfer, writer, venv = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from serve_fixture import check, finish, pydantic_thing, run_in_venv, tiny_server  # noqa

run_in_venv(venv, "ollama", "CLINFER_SERVE_OLLAMA_INNER")

# ---- inside the venv ----
import ollama  # noqa: E402
import pydantic  # noqa: E402  (the client's own dependency)

# a model `clinfer pull` stored, beside the one served
cache = tempfile.mkdtemp(prefix="clinfer-serve-ollama-cache-")
os.makedirs(os.path.join(cache, "clinfer", "models"))
os.environ["XDG_CACHE_HOME"] = cache
model, s = tiny_server(clinfer, writer, "serve-ollama", "-np", "2", "-c", "1024", "--api-key",
                       "k-123")
pulled = os.path.join(cache, "clinfer", "models", "pulled-7b.gguf")
shutil.copy(model, pulled)
try:
    client = ollama.Client(host=f"http://127.0.0.1:{s.port}",
                           headers={"Authorization": "Bearer k-123"})
    messages = [{"role": "user", "content": "tell me something"}]
    opts = {"temperature": 0, "num_predict": 16}

    r = client.chat(model="tiny.gguf", messages=messages, options=opts)
    text = r.message.content
    check(r.done and r.message.role == "assistant" and text and r.eval_count > 0 and
          r.prompt_eval_count > 0 and r.done_reason in ("stop", "length") and
          r.total_duration > 0, f"chat: {r}")
    parts = list(client.chat(model="tiny.gguf", messages=messages, options=opts, stream=True))
    check("".join(p.message.content for p in parts) == text and parts[-1].done and
          not any(p.done for p in parts[:-1]) and parts[-1].eval_count == r.eval_count,
          f"streamed chat {parts} != {text!r}")

    g = client.generate(model="tiny.gguf", prompt="hello", options=opts)
    check(g.done and g.response and g.eval_count > 0, f"generate: {g}")
    parts = list(client.generate(model="tiny.gguf", prompt="hello", options=opts, stream=True))
    check("".join(p.response for p in parts) == g.response and parts[-1].done,
          f"streamed generate {parts} != {g.response!r}")
    raw = client.generate(model="tiny.gguf", prompt="hello", raw=True, options=opts)
    check(raw.done and raw.prompt_eval_count < g.prompt_eval_count, f"raw: {raw}")
    load = client.generate(model="tiny.gguf")
    check(load.done and load.done_reason == "load", f"load: {load}")

    # structured output: a Pydantic model's schema as format, and "json"
    Thing = pydantic_thing()

    for seed in range(5):
        r = client.chat(model="tiny.gguf", messages=messages, format=Thing.model_json_schema(),
                        options={"temperature": 0.9, "seed": seed, "num_predict": 500})
        try:
            Thing.model_validate_json(r.message.content)
        except pydantic.ValidationError as e:
            check(False, f"format schema {seed}: {r.message.content!r}: {e}")
    j = client.generate(model="tiny.gguf", prompt="json", format="json",
                        options={"temperature": 0.9, "seed": 3, "num_predict": 500})
    try:
        check(isinstance(json.loads(j.response), dict), f"format json: {j}")
    except ValueError:
        check(j.done_reason == "length" and j.response.lstrip().startswith("{"),
              f"format json: {j}")

    tags = client.list()
    check(len(tags.models) == 2 and tags.models[0].model == "tiny.gguf" and
          tags.models[0].size == os.path.getsize(model) and
          tags.models[0].details.family == "llama" and tags.models[0].modified_at and
          tags.models[1].model == "pulled-7b.gguf" and
          tags.models[1].size == os.path.getsize(pulled) and tags.models[1].modified_at and
          tags.models[1].digest != tags.models[0].digest, f"list: {tags}")
    show = client.show("tiny.gguf")
    check(show.details.family == "llama" and show.details.quantization_level and
          show.modelinfo["general.architecture"] == "llama" and
          "completion" in show.capabilities and "tools" in show.capabilities, f"show: {show}")
    other = client.show("pulled-7b.gguf")
    check(other.details.format == "gguf" and other.modelinfo == {} and other.modified_at,
          f"show of the pulled model: {other}")

    # tools as ollama's clients send them: a Python function (its docstring as the schema); the
    # model calls it or answers; a history with a call (arguments as an object) and its result
    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
          city: the city's name
        """
        return "sunny"

    ask = [{"role": "user", "content": "what is the weather in Paris?"}]
    t = client.chat(model="tiny.gguf", messages=ask, tools=[get_weather], options=opts)
    calls = t.message.tool_calls or []
    check(t.done and (t.message.content or calls) and
          all(c.function.name == "get_weather" and isinstance(c.function.arguments, dict)
              for c in calls), f"chat with tools: {t}")
    history = ask + [{"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"}]
    parts = list(client.chat(model="tiny.gguf", messages=history, tools=[get_weather],
                             options=opts, stream=True))
    check(parts and parts[-1].done, f"a history with a call and its result: {parts}")

    e = client.embed(model="tiny.gguf", input=["a b", "c"])
    check(len(e.embeddings) == 2 and len(e.embeddings[0]) == 64 and e.prompt_eval_count > 0,
          f"embed: {len(e.embeddings)} vectors")
    one = client.embeddings(model="tiny.gguf", prompt="a b")
    check(max(abs(x - y) for x, y in zip(one.embedding, e.embeddings[0])) < 1e-6,
          "embeddings agrees with embed")

    try:
        client.chat(model="tiny.gguf", messages=messages, options={"mirostat": 2})
        check(False, "options.mirostat was accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 400 and "options.mirostat" in err.error, f"400: {err}")
    try:
        list(client.chat(model="tiny.gguf", messages=messages, stream=True,
                         options={"num_predict": 5000}))
        check(False, "num_predict past the context was accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 400 and "context" in err.error, f"400: {err}")
    try:
        ollama.Client(host=f"http://127.0.0.1:{s.port}").list()
        check(False, "no key was accepted")
    except ollama.ResponseError as err:
        check(err.status_code == 401, f"401: {err}")
finally:
    rc = s.stop()
    shutil.rmtree(cache, True)
check(rc == 0, f"the server exited with {rc}")
finish("test_serve_ollama")
