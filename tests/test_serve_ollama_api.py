"""`clinfer serve`'s ollama API on a tiny generated model (reference backend) through the
standard library's HTTP client: the NDJSON lines of /api/chat and /api/generate (streamed by
default, whole with stream false), the load call, format (json and a schema), raw, options,
/api/tags, /api/show, /api/embed, /api/embeddings, /api/version, GET and HEAD /, the API key,
and the 400s, in ollama's {"error": message} shape, that name a member this server does not do.
Usage: test_serve_ollama_api.py CLINFER WRITE_TINY_MODEL"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Server, check, finish  # noqa: E402

clinfer, writer = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="clinfer-serve-ollama-api-")
atexit.register(shutil.rmtree, tmp, True)
model = os.path.join(tmp, "tiny.gguf")
subprocess.run([writer, model, "llama"], check=True)
M = [{"role": "user", "content": "tell me something"}]
KEY = {"Authorization": "Bearer k-9"}
DONE_FIELDS = ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration",
               "eval_count", "eval_duration"]


def lines(s, path, body, headers=KEY):
    """(status, Content-Type, the NDJSON lines parsed) of one streamed request."""
    c = s.connect()
    c.request("POST", path, body=json.dumps(body), headers=headers)
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    if r.status != 200:
        return r.status, r.getheader("Content-Type"), text
    check(text.endswith("\n"), f"{path}: the stream ends with a newline: {text[-40:]!r}")
    return r.status, r.getheader("Content-Type"), [json.loads(x) for x in text.splitlines()]


def post(s, path, body):
    return s.request("POST", path, body, headers=KEY)


def expect_400(path, body, name):
    st, r = post(s, path, body)
    check(st == 400 and isinstance(r, dict) and isinstance(r.get("error"), str) and
          (f"'{name}'" in r["error"] or r["error"].startswith(name + " ")),
          f"{path} {body}: want 400 naming '{name}', got {st} {r}")


def check_done(r, where, n_predict=None):
    check(r["done"] is True and r["done_reason"] in ("stop", "length") and
          all(isinstance(r.get(k), int) and r[k] >= 0 for k in DONE_FIELDS) and
          r["prompt_eval_count"] > 0 and r["total_duration"] > 0 and
          r["created_at"].endswith("Z") and r["model"] == "tiny.gguf", f"{where}: done {r}")
    if n_predict is not None:
        check(r["eval_count"] <= n_predict, f"{where}: eval_count {r['eval_count']} > {n_predict}")


os.environ["XDG_CACHE_HOME"] = tmp  # no models `clinfer pull` stored: /api/tags lists one
s = Server(clinfer, model, "--reference", "--chat-template", "llama2", "-q", "-np", "2",
           "-c", "512", "--api-key", "k-9")
try:
    # / as ollama answers it; the key is asked there too
    st, text = s.request("GET", "/", headers=KEY)
    check(st == 200 and text == "Ollama is running", f"GET /: {st} {text!r}")
    c = s.connect()
    c.request("HEAD", "/", headers=KEY)
    r = c.getresponse()
    check(r.status == 200 and r.read() == b"", f"HEAD /: {r.status}")
    c.close()
    st, r = s.request("GET", "/api/tags")
    check(st == 401 and isinstance(r.get("error"), str), f"no key: {st} {r}")
    st, r = s.request("GET", "/api/version", headers=KEY)
    check(st == 200 and isinstance(r.get("version"), str), f"version: {st} {r}")

    # /api/chat, streamed by default: pieces, then one done line with the counts
    opts = {"temperature": 0, "num_predict": 12}
    st, ctype, ls = lines(s, "/api/chat", {"model": "tiny", "messages": M, "options": opts})
    check(st == 200 and ctype == "application/x-ndjson" and len(ls) >= 2, f"chat: {st} {ls}")
    if st == 200:
        check(all(x["done"] is False and x["message"]["role"] == "assistant" for x in ls[:-1]),
              f"chat pieces: {ls}")
        check_done(ls[-1], "chat stream", 12)
        streamed = "".join(x["message"]["content"] for x in ls)
        st, whole = post(s, "/api/chat", {"messages": M, "options": opts, "stream": False})
        check(st == 200 and whole["message"]["content"] == streamed, f"chat whole {whole}")
        check_done(whole, "chat whole", 12)
        check(whole["eval_count"] == ls[-1]["eval_count"], "the same count whole and streamed")

    # /api/generate: the prompt through the chat template (after system), or raw
    st, r = post(s, "/api/generate", {"model": "tiny", "prompt": "hello", "stream": False,
                                      "system": "be brief", "options": opts})
    check(st == 200 and isinstance(r.get("response"), str) and "message" not in r,
          f"generate: {st} {r}")
    check_done(r, "generate")
    st, raw = post(s, "/api/generate", {"prompt": "hello", "raw": True, "stream": False,
                                        "options": opts})
    check(st == 200 and raw["prompt_eval_count"] < r["prompt_eval_count"],
          f"raw: fewer prompt tokens than templated ({raw} vs {r})")
    st, ctype, ls = lines(s, "/api/generate", {"prompt": "hello", "options": opts})
    check(st == 200 and all("response" in x for x in ls) and ls[-1]["done"], f"generate: {ls}")
    # seed: the same answer twice at a temperature above 0
    seeded = {"prompt": "hello", "stream": False,
              "options": {"temperature": 1.0, "seed": 42, "num_predict": 10, "top_k": 20,
                          "top_p": 0.9, "stop": ["zzz"]}}
    a, b = post(s, "/api/generate", seeded)[1], post(s, "/api/generate", seeded)[1]
    check(a["response"] == b["response"], f"seeded: {a} vs {b}")
    # no prompt (no messages): ollama's "load the model", answered at once
    st, r = post(s, "/api/generate", {"model": "tiny"})
    check(st == 200 and r["done"] and r["done_reason"] == "load" and r["response"] == "",
          f"load: {st} {r}")
    st, r = post(s, "/api/chat", {"model": "tiny", "messages": []})
    check(st == 200 and r["done_reason"] == "load", f"chat load: {st} {r}")
    st, r = post(s, "/api/chat", {"messages": M, "stream": False, "keep_alive": "5m",
                                  "options": {"num_predict": 2, "num_ctx": 512}})
    check(st == 200 and r["done"], f"keep_alive and num_ctx: {st} {r}")

    # format: the grammar machinery; a schema's answer validates
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                               "color": {"enum": ["red", "green"]}},
              "required": ["ok", "color"], "additionalProperties": False}
    for seed in range(5):
        st, r = post(s, "/api/chat", {"messages": M, "format": schema, "stream": False,
                                      "options": {"seed": seed, "num_predict": 200}})
        v = json.loads(r["message"]["content"]) if st == 200 else None
        check(isinstance(v, dict) and set(v) == {"ok", "color"} and isinstance(v["ok"], bool) and
              v["color"] in ("red", "green"), f"format schema {seed}: {st} {r}")
    st, r = post(s, "/api/generate", {"prompt": "json please", "format": "json", "stream": False,
                                      "options": {"seed": 3, "num_predict": 400,
                                                  "temperature": 0.9}})
    try:
        ok = st == 200 and isinstance(json.loads(r["response"]), dict)
    except ValueError:
        ok = r.get("done_reason") == "length"  # cut by num_predict: a prefix of an object
    check(ok and r["response"].lstrip().startswith("{"), f"format json: {st} {r}")

    # the model: tags, show
    st, r = s.request("GET", "/api/tags", headers=KEY)
    m = r["models"][0] if st == 200 else {}
    check(st == 200 and len(r["models"]) == 1 and m["name"] == "tiny.gguf" and
          m["size"] == os.path.getsize(model) and m["digest"] and
          m["details"]["family"] == "llama" and m["details"]["format"] == "gguf" and
          m["details"]["parameter_size"] and m["details"]["quantization_level"],
          f"tags: {st} {r}")
    st, r = post(s, "/api/show", {"model": "tiny.gguf"})
    check(st == 200 and r["details"] == m["details"] and
          r["model_info"]["general.architecture"] == "llama" and
          r["model_info"]["llama.embedding_length"] == 64, f"show: {st} {r}")

    # embeddings
    st, r = post(s, "/api/embed", {"model": "tiny", "input": ["a b", "c"]})
    check(st == 200 and len(r["embeddings"]) == 2 and len(r["embeddings"][0]) == 64 and
          r["prompt_eval_count"] > 0, f"embed: {st} {str(r)[:300]}")
    st, one = post(s, "/api/embed", {"input": "a b", "truncate": True, "keep_alive": 0})
    check(st == 200 and len(one["embeddings"]) == 1 and
          max(abs(x - y) for x, y in zip(one["embeddings"][0], r["embeddings"][0])) < 1e-6,
          f"embed one: {st}")
    st, legacy = post(s, "/api/embeddings", {"model": "tiny", "prompt": "a b"})
    check(st == 200 and len(legacy["embedding"]) == 64 and
          max(abs(x - y) for x, y in zip(legacy["embedding"], r["embeddings"][0])) < 1e-6,
          f"embeddings: {st}")

    # what is refused: 400 naming the member, in ollama's error shape
    expect_400("/api/chat", {"messages": M, "bogus": 1}, "bogus")
    expect_400("/api/chat", {"messages": M, "options": {"mirostat": 1}}, "options.mirostat")
    expect_400("/api/chat", {"messages": M, "options": {"num_predict": -5}},
               "options.num_predict")
    expect_400("/api/chat", {"messages": M, "options": {"temperature": "hot"}},
               "options.temperature")
    expect_400("/api/chat", {"messages": M, "options": {"stop": [""]}}, "options.stop")
    expect_400("/api/chat", {"messages": M, "options": {"num_ctx": 100000}}, "options.num_ctx")
    expect_400("/api/chat", {"messages": M, "options": []}, "options")
    expect_400("/api/chat", {"messages": M, "format": "yaml"}, "format")
    expect_400("/api/chat", {"messages": M, "format": {"type": "string", "format": "date"}},
               "format")
    expect_400("/api/chat", {"messages": M, "stream": "yes"}, "stream")
    expect_400("/api/chat", {"messages": M, "think": True}, "think")
    expect_400("/api/chat", {"messages": M, "logprobs": True}, "logprobs")
    expect_400("/api/chat", {"messages": M, "tools": [{"type": "function"}]}, "tools[0].function")
    expect_400("/api/chat", {"messages": M, "tools": {"type": "function"}}, "tools")
    expect_400("/api/chat", {"messages": [{"role": "user", "content": "x", "images": ["AA=="]}]},
               "messages[0].images")
    expect_400("/api/chat", {"messages": [{"role": "user", "content": "x", "name": "n"}]},
               "messages[0].name")
    expect_400("/api/chat", {"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role")
    expect_400("/api/chat", {"messages": "hi"}, "messages")
    expect_400("/api/generate", {"prompt": "x", "suffix": "y"}, "suffix")
    expect_400("/api/generate", {"prompt": "x", "raw": True, "system": "s"}, "system")
    expect_400("/api/generate", {"prompt": "x", "context": [1, 2]}, "context")
    expect_400("/api/generate", {"prompt": 3}, "prompt")
    expect_400("/api/embed", {"input": "x", "options": {"num_ctx": 8}}, "options")
    expect_400("/api/embed", {"prompt": "x"}, "prompt")
    expect_400("/api/embeddings", {"input": "x"}, "input")
    expect_400("/api/show", {"model": "x", "system": "y"}, "system")
    st, r = s.request("POST", "/api/chat", raw="{\"messages\": [], \"messages\": []}",
                      headers=KEY)
    check(st == 400 and "twice" in r.get("error", ""), f"strict JSON: {st} {r}")
    st, r = s.request("GET", "/api/chat", headers=KEY)
    check(st == 405 and isinstance(r.get("error"), str), f"GET /api/chat: {st} {r}")
    st, r = s.request("POST", "/api/tags", body={}, headers=KEY)
    check(st == 405, f"POST /api/tags: {st} {r}")
finally:
    rc = s.stop()
check(rc == 0, f"the server exited with {rc}")
finish("test_serve_ollama_api")
