#!/usr/bin/env python3
"""clinfer's chat formats against the families' own Jinja templates.

Each template of llama.cpp's models/templates (from the llama-cpp-python source distribution
that tools/fetch_llamacpp_sdist.sh fetches; not in this repository) is rendered by Jinja2 as
Hugging Face's apply_chat_template renders it, on the same conversations that clinfer renders
in C: tests/chat_render_stdin.c writes a vocabulary-only GGUF carrying the template as
tokenizer.chat_template and renders with clinfer_chat_apply_template, the format recognised from
the template's text. The texts must be identical. The beginning-of-sequence token a template writes first is left out of
Jinja's text, as clinfer leaves it to the tokenizer. Conversations a template refuses
(raise_exception) are skipped. Exit 77 (skipped) without the sdist or Jinja2.

usage: test_chat_jinja.py CHAT_RENDER_STDIN
"""
import datetime
import os
import re
import subprocess
import sys
import tarfile
import tempfile

try:
    import jinja2
    import jinja2.sandbox
except ImportError:
    print("test_chat_jinja: skipped: no Jinja2 (apt-get install python3-jinja2)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chat(*turns):
    """A conversation from (role, content) pairs."""
    return [{"role": role, "content": content} for role, content in turns]


SYS = ("system", "You are terse.")
HI, HELLO = ("user", "Hi!"), ("assistant", "Hello.")
CONVERSATIONS = {
    "system+user": chat(SYS, HI),
    "multi-turn": chat(HI, HELLO, ("user", " Capital of France?\n")),
    "system+multi-turn": chat(SYS, HI, ("assistant", "Hello. "), ("user", "Capital of France?")),
    "ends with an answer": chat(SYS, HI, HELLO),
    "user only": chat(HI),
    "empty system, padded turns": chat(("system", ""), ("user", "\n Hi! "), ("assistant", " Hello.\n"),
                                       ("user", "Bye.")),
}
THINKING = {  # answers with reasoning blocks (Qwen3)
    "past reasoning": chat(HI, ("assistant", "<think>\nA greeting.\n</think>\n\nHello."),
                           ("user", "Capital of France?")),
    "reasoning after the last question": chat(
        SYS, ("user", "Capital of France?"),
        ("assistant", "<think>\n\nEasy.\n\n</think>\n\n\nParis.")),
    "last answer without reasoning": chat(HI, HELLO),
}

# Phi-4's and Phi-4-mini's templates (as the models' tokenizer_config.json has them; llama.cpp's
# sdist does not carry them).
PHI4 = ("{% for message in messages %}{% if (message['role'] == 'system') %}"
        "{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}"
        "{% elif (message['role'] == 'user') %}"
        "{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}"
        "{% elif (message['role'] == 'assistant') %}"
        "{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}")
PHI4_MINI = ("{% for message in messages %}{% if message['role'] == 'system' and 'tools' in "
             "message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + "
             "message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}"
             "{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
             "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}"
             "{% else %}{{ eos_token }}{% endif %}")

# (family, template file or inline text, bos, eos, extra conversations)
FAMILIES = [
    ("Llama 3.1", "meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", {}),
    ("Llama 3.2", "meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", {}),
    ("Llama 3.3", "meta-llama-Llama-3.3-70B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>",
     {}),
    ("Phi-3.5", "microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", {}),
    ("Phi-4", ("inline", PHI4), "<|endoftext|>", "<|im_end|>", {}),
    ("Phi-4-mini", ("inline", PHI4_MINI), "<|endoftext|>", "<|endoftext|>", {}),
    ("Mistral Nemo (Tekken)", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", {}),
    ("Mistral Small 3.2 (v7 Tekken)", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>",
     {}),
    ("Devstral Small 2507 (v7 Tekken)", "unsloth-mistral-Devstral-Small-2507.jinja", "<s>", "</s>",
     {}),
    ("Ministral 3 14B Reasoning (v7 Tekken)", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", "<s>",
     "</s>", {}),
    ("Qwen3", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", THINKING),
    ("gpt-oss", "openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>", {}),
    ("Gemma 2", "google-gemma-2-2b-it.jinja", "<bos>", "<eos>", {}),
]


def templates_source():
    """A function reading a template by name from the sdist, or None without it."""
    script = open(os.path.join(ROOT, "tools", "fetch_llamacpp_sdist.sh")).read()
    version = re.search(r"^VERSION=(\S+)", script, re.M).group(1)
    cache = os.environ.get("CLINFER_BENCH_CACHE") or os.path.expanduser("~/.cache/clinfer/llama.cpp")
    inner = f"llama_cpp_python-{version}/vendor/llama.cpp/models/templates"
    if os.path.isdir(os.path.join(cache, inner)):
        return lambda name: open(os.path.join(cache, inner, name), encoding="utf-8").read()
    tarball = os.path.join(cache, f"llama_cpp_python-{version}.tar.gz")
    if not os.path.exists(tarball):
        return None
    with tarfile.open(tarball) as tar:
        texts = {os.path.basename(m.name): tar.extractfile(m).read().decode()
                 for m in tar.getmembers() if m.isfile() and os.path.dirname(m.name) == inner}
    return texts.__getitem__


class Refused(Exception):
    pass


def raise_exception(message):
    raise Refused(message)


def jinja_render(text, messages, add_generation_prompt, bos, eos):
    # As transformers' apply_chat_template: a sandbox with trim_blocks and lstrip_blocks, the
    # loop controls extension, raise_exception and strftime_now. No date_string is passed, so
    # Llama 3.x templates write their own default date; strftime_now is the UTC date.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now(datetime.timezone.utc).strftime(fmt)
    out = env.from_string(text).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token=bos, eos_token=eos)
    return out[len(bos):] if bos and out.startswith(bos) else out


def clinfer_render(driver, model, text, messages, add_generation_prompt):
    fields = [text, "", "1" if add_generation_prompt else "0"]
    for m in messages:
        fields += [m["role"], m["content"]]
    r = subprocess.run([driver, model], input="\0".join(fields).encode(), capture_output=True)
    if r.returncode:
        return None, r.stderr.decode().strip()
    return r.stdout.decode(), None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    read = templates_source()
    if read is None:
        print("test_chat_jinja: skipped: no llama-cpp-python sdist (bash tools/fetch_llamacpp_sdist.sh)")
        sys.exit(77)
    failures = compared = refused = 0
    tmp = tempfile.TemporaryDirectory(prefix="test_chat_jinja.")
    model = os.path.join(tmp.name, "chat.gguf")
    for family, source, bos, eos, extra in FAMILIES:
        text = source[1] if isinstance(source, tuple) else read(source)
        matched = 0
        for name, messages in {**CONVERSATIONS, **extra}.items():
            for gen in (True, False):
                case = f"{family}: {name}, add_generation_prompt={gen}"
                try:
                    want = jinja_render(text, messages, gen, bos, eos)
                except Refused as e:
                    refused += 1
                    print(f"  (Jinja refuses {case}: {e})")
                    continue
                got, err = clinfer_render(sys.argv[1], model, text, messages, gen)
                compared += 1
                if got == want:
                    matched += 1
                    continue
                failures += 1
                print(f"FAIL {case}\n  jinja:   {want!r}\n  clinfer: {got!r}" +
                      (f" ({err})" if err else ""))
        print(f"{family}: {matched} renderings identical to Jinja's")
    print(f"test_chat_jinja: {compared - failures} of {compared} identical, {failures} differ, "
          f"{refused} refused by the template")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
