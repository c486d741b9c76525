"""clinfer's greedy continuations against llama-server's, token by token, for
bench/crosscheck_archs.sh:
    greedy_compare.py LLAMA_SERVER TEACHER_FORCE CLINFER MODEL N_CTX N PATHS KV PROMPT...
(PATHS: kernel paths joined by commas, '' for the device's own; KV: the KV cache's type on both
sides, f16, or f32 with llama.cpp's flash attention off, whose CPU kernel keeps f16 sums). For each prompt llama-server
gives its greedy continuation of N tokens; clinfer takes it token by token (bench/teacher_force,
the decode path) on each kernel path, and at every step llama.cpp's token must be clinfer's best
or, at a tie, within TIE of it in log-probability. (The two tools' log-probabilities differ by up
to some 0.03 on these random-weight models, whose sums reach far beyond those of trained ones:
the rounding of the f16 KV cache, and of llama.cpp's attention, which keeps f16 sums on the CPU,
shows; a wrong op puts llama.cpp's token many units below.) clinfer run --temp 0 on each path must
print the same text up to the first tie, and all of it where there is none. Prints one line
"EQUAL TEXTS TIES" (texts that passed, texts, ties in them); the steps that differ, and the ties,
go to stderr; exit 1 when a text differs."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_server import post, serving  # noqa: E402

TIE = 0.1
server, force, clinfer, model, n_ctx, n = sys.argv[1:7]
paths, kv, prompts = sys.argv[7].split(","), sys.argv[8], sys.argv[9:]
act = ["--act", "f32", "-ctk", kv, "-ctv", kv]


def say(msg):
    print(f"crosscheck_archs: {msg}", file=sys.stderr)


def teacher(url, prompt):
    """The prompt's ids and the continuation's, from llama-server."""
    ids = post(url, "/tokenize", {"content": prompt, "add_special": True})["tokens"]
    out = post(url, "/completion", {"prompt": ids, "n_predict": int(n), "temperature": 0,
                                    "return_tokens": True, "cache_prompt": False})
    return ids, out["tokens"]


def text_of(url, tokens):
    # special tokens' text too, as clinfer run and llama-simple print it (llama-server's content
    # leaves it out); a cut inside a character ends in U+FFFD, which clinfer run holds back
    return post(url, "/detokenize", {"tokens": tokens})["content"].removesuffix("\ufffd")


def forced(ids, cont, path):
    env = dict(os.environ, CLINFER_KERNEL_PATH=path)
    stdin = " ".join(map(str, ids)) + "\n" + " ".join(map(str, cont)) + "\n"
    out = subprocess.run([force, model, n_ctx, "f32", kv], input=stdin, capture_output=True,
                         text=True, env=env, check=True).stdout.split("\n")
    return [line.split() for line in out if line]


def check(prompt, cont, rows, label):
    """The steps where llama.cpp's token is not clinfer's best but within TIE: None if one is
    further."""
    ties = []
    if len(rows) != len(cont):
        say(f"{label}: teacher_force gave {len(rows)} of {len(cont)} steps")
        return None
    for i, (t, row) in enumerate(zip(cont, rows)):
        best, lp_best, lp_teacher = int(row[1]), float(row[2]), float(row[3])
        if best == t:
            continue
        gap = lp_best - lp_teacher
        say(f"{label}: '{prompt}' {'ties' if gap <= TIE else 'differs'} at token {i}: llama.cpp "
            f"{t}, clinfer {best}, which it rates {gap:.4f} above llama.cpp's")
        if gap > TIE:
            return None
        ties.append(i)
    return ties


def run_text(prompt, path):
    env = dict(os.environ, CLINFER_KERNEL_PATH=path)
    cmd = [clinfer, "run", "-m", model, "-p", prompt, "-n", n, "--temp", "0", "-q"] + act
    if n_ctx != "0":
        cmd += ["-c", n_ctx]
    out = subprocess.run(cmd, capture_output=True, env=env).stdout.decode("utf-8", "replace")
    return out.removesuffix("\n")  # the line's end, which clinfer run adds


equal = texts = n_ties = 0
peer_kv = ["-ctk", "f32", "-ctv", "f32", "-fa", "off"] if kv == "f32" else []
with serving([server, "-m", model, "-c", n_ctx if n_ctx != "0" else "256", "-np", "1",
              "-t", "2"] + peer_kv) as url:
    taught = []  # (prompt, path, label, ties, the text clinfer run must print or start with)
    for prompt in prompts:
        ids, cont = teacher(url, prompt)
        for path in paths:
            label = os.path.basename(model).removesuffix(".gguf") + (f" ({path})" if path else "")
            ties = check(prompt, cont, forced(ids, cont, path), label)
            want = text_of(url, cont[:ties[0]] if ties else cont)
            taught.append((prompt, path, label, ties, want))
for prompt, path, label, ties, want in taught:
    texts += 1
    if ties is None:
        continue
    got = run_text(prompt, path)
    if not (got.startswith(want) if ties else got == want):
        say(f"{label}: clinfer run on '{prompt}' prints '{got}', llama.cpp '{want}'" +
            (" before a tie" if ties else ""))
        continue
    equal += 1
    n_ties += len(ties)
print(equal, texts, n_ties)
sys.exit(0 if equal == texts else 1)
