#!/usr/bin/env python3
"""Writes a Llama-family GGUF file (--arch llama, qwen2: q/k/v biases, qwen3: per-head q/k
norms, phi3: fused attn_qkv and ffn_up, gemma3: qwen3's norms plus post-attention and post-FFN
norms, a sliding window of --window positions on all but every --swa-pattern'th layer), or a
GPT-2 one (--arch gpt2: layer norms with biases, learned positions of --ctx rows, fused attn_qkv,
a GELU FFN, biases on every matmul but the head, as many KV heads as heads) of a
given layer shape with random weights, for benchmarks of a model size we have no real file of, and for comparing an architecture's forward pass with llama.cpp's
(bench/crosscheck_archs.sh). Speed does not depend on the weights'
values, so the file measures what a real model of that shape would (prefill, decode, memory);
its text is noise.

The tokenizer (every tokenizer.* key) is copied from a real GGUF file, --tokenizer-from, by
default clinfer's default model: clinfer and llama.cpp refuse a model without one. The
vocabulary, and so the embedding and output rows, is that tokenizer's. The output matrix is tied
to the embedding (no output.weight), as in Llama 3.2 1B and SmolLM2.

Every matrix, the embedding included, is stored in --type (as `llama-quantize --pure` does);
norms are F32. F32, F16 and BF16 are written directly, the quantized types through the gguf
package's numpy quantizers (Q8_0, Q4_0, Q4_1 and others it implements). Tensors are written one
at a time, so memory stays near the size of the largest one.

GPT-2 124M's shape: --arch gpt2 --dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn 3072
--ctx 1024 (its vocabulary is the tokenizer's: 49152 rows with the default one, GPT-2 has 50257).

Defaults are Llama-3.2-1B's shape: dim 2048, 16 layers, 32 query and 8 KV heads of 64, FFN 8192,
rope base 500000.

Needs the PyPI packages gguf and numpy (tools/gpu_check.sh makes a venv with them).

usage: bench/make_shape_model.py OUT.gguf [--type F16|Q8_0|Q4_0|...] [--tokenizer-from GGUF]
           [--dim 2048] [--layers 16] [--heads 32] [--kv-heads 8] [--ffn 8192] [--ctx 8192]
           [--seed 0] [--name NAME] [--arch llama|qwen2|qwen3|phi3|gemma3|gpt2] [--std 0.02]
           [--window 512] [--swa-pattern 6]
"""
import argparse
import os
import sys
import time

import numpy as np
import gguf

ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma3", "gpt2")


def parse_args():
    p = argparse.ArgumentParser(
        description="Random-weight Llama GGUF of a given shape (see the module docstring).")
    p.add_argument("out", help="the GGUF file to write")
    p.add_argument("--type", default="F16",
                   help="weight type of every matrix: F32, F16, BF16, Q8_0, Q4_0, ... (F16)")
    p.add_argument("--tokenizer-from", metavar="GGUF",
                   help="copy the tokenizer from this file (default: tools/fetch_model.sh's)")
    p.add_argument("--dim", type=int, default=2048, help="embedding length (2048)")
    p.add_argument("--layers", type=int, default=16, help="blocks (16)")
    p.add_argument("--heads", type=int, default=32, help="query heads (32)")
    p.add_argument("--kv-heads", type=int, default=8, help="key/value heads (8)")
    p.add_argument("--ffn", type=int, default=8192, help="feed-forward length (8192)")
    p.add_argument("--ctx", type=int, default=8192,
                   help="context_length written to the file (8192; Llama 3.2 says 131072, "
                        "which only sizes a default KV cache)")
    p.add_argument("--rope-base", type=float, default=500000.0, help="rope.freq_base (500000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--name", help="general.name (default: from the shape)")
    p.add_argument("--arch", default="llama", choices=ARCHS, help="architecture (llama)")
    p.add_argument("--window", type=int, default=512,
                   help="gemma3: attention.sliding_window of its local layers (512)")
    p.add_argument("--swa-pattern", type=int, default=6,
                   help="gemma3: attention.sliding_window_pattern, one global layer in that many "
                        "(6)")
    p.add_argument("--std", type=float, default=0.02,
                   help="standard deviation of the weights (0.02); norms and biases get a tenth "
                        "of it around 1 and 0")
    return p.parse_args()


def default_tokenizer_model():
    """The default model's path, as tools/fetch_model.sh prints it (fetching it if needed)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(["bash", os.path.join(root, "tools", "fetch_model.sh")],
                          check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def copy_tokenizer(writer, path):
    """Copies every tokenizer.* key of the GGUF file at path; returns the vocabulary size."""
    reader = gguf.GGUFReader(path)
    n_vocab = None
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub_type)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(field.data)
    if n_vocab is None:
        sys.exit("make_shape_model: %s has no tokenizer.ggml.tokens" % path)
    return n_vocab


def gpt2_plan(a, n_vocab):
    """tensor_plan's list for --arch gpt2 (the output tied to the embedding)."""
    plan = [("token_embd.weight", (n_vocab, a.dim)), ("position_embd.weight", (a.ctx, a.dim))]
    qkv = a.dim + 2 * a.kv_heads * (a.dim // a.heads)
    for i in range(a.layers):
        b = "blk.%d." % i
        for name, rows, cols in (("attn_norm", a.dim, 0), ("attn_qkv", qkv, a.dim),
                                 ("attn_output", a.dim, a.dim), ("ffn_norm", a.dim, 0),
                                 ("ffn_up", a.ffn, a.dim), ("ffn_down", a.dim, a.ffn)):
            plan.append((b + name + ".weight", (rows, cols) if cols else (rows,)))
            plan.append((b + name + ".bias", (rows,)))
    return plan + [("output_norm.weight", (a.dim,)), ("output_norm.bias", (a.dim,))]


def tensor_plan(a, n_vocab):
    """(name, numpy shape (rows, columns)) of every tensor, in file order."""
    if a.arch == "gpt2":
        return gpt2_plan(a, n_vocab)
    hd = a.dim // a.heads
    plan = [("token_embd.weight", (n_vocab, a.dim))]
    for i in range(a.layers):
        b = "blk.%d." % i
        plan.append((b + "attn_norm.weight", (a.dim,)))
        if a.arch == "phi3":
            plan.append((b + "attn_qkv.weight", ((a.heads + 2 * a.kv_heads) * hd, a.dim)))
        else:
            plan += [(b + "attn_q.weight", (a.heads * hd, a.dim)),
                     (b + "attn_k.weight", (a.kv_heads * hd, a.dim)),
                     (b + "attn_v.weight", (a.kv_heads * hd, a.dim))]
        if a.arch == "qwen2":
            plan += [(b + "attn_q.bias", (a.heads * hd,)), (b + "attn_k.bias", (a.kv_heads * hd,)),
                     (b + "attn_v.bias", (a.kv_heads * hd,))]
        if a.arch in ("qwen3", "gemma3"):
            plan += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        plan.append((b + "attn_output.weight", (a.dim, a.heads * hd)))
        if a.arch == "gemma3":
            plan.append((b + "post_attention_norm.weight", (a.dim,)))
        plan.append((b + "ffn_norm.weight", (a.dim,)))
        if a.arch == "phi3":  # gate rows, then up rows
            plan.append((b + "ffn_up.weight", (2 * a.ffn, a.dim)))
        else:
            plan += [(b + "ffn_gate.weight", (a.ffn, a.dim)), (b + "ffn_up.weight", (a.ffn, a.dim))]
        plan.append((b + "ffn_down.weight", (a.dim, a.ffn)))
        if a.arch == "gemma3":
            plan.append((b + "post_ffw_norm.weight", (a.dim,)))
    plan.append(("output_norm.weight", (a.dim,)))
    return plan


def stored_type(shape, qtype):
    """Norms (1-D) stay F32; matrices take the requested type."""
    return gguf.GGMLQuantizationType.F32 if len(shape) == 1 else qtype


def nbytes(shape, qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if shape[-1] % block:
        sys.exit("make_shape_model: rows of %d do not split into %s blocks of %d"
                 % (shape[-1], qtype.name, block))
    return int(np.prod(shape[:-1])) * shape[-1] // block * size


def tensor_data(rng, name, shape, qtype, std):
    """Random weights (uniform, of std), norms around 1 and biases around 0 (a tenth of it),
    stored as qtype."""
    if len(shape) == 1:
        centre = 0.0 if name.endswith(".bias") else 1.0
        half = np.float32(std * 0.1 * np.sqrt(3.0))
        return (centre + (2 * rng.random(shape, dtype=np.float32) - 1) * half).astype(np.float32)
    a = np.float32(std * np.sqrt(3.0))
    x = rng.random(shape, dtype=np.float32)
    x *= 2 * a
    x -= a
    if qtype == gguf.GGMLQuantizationType.F32:
        return x
    if qtype == gguf.GGMLQuantizationType.F16:
        return x.astype(np.float16)
    return gguf.quants.quantize(x, qtype)


def main():
    a = parse_args()
    try:
        qtype = gguf.GGMLQuantizationType[a.type.upper()]
    except KeyError:
        sys.exit("make_shape_model: unknown type %r" % a.type)
    if a.dim % a.heads or a.heads % a.kv_heads:
        sys.exit("make_shape_model: dim must split into heads, heads into kv-heads")
    t0 = time.monotonic()
    tok_path = a.tokenizer_from or default_tokenizer_model()
    tmp = a.out + ".part"
    w = gguf.GGUFWriter(tmp, a.arch)
    hd = a.dim // a.heads
    name = a.name or "random %d x %d layers, %d/%d heads, ffn %d" % (
        a.dim, a.layers, a.heads, a.kv_heads, a.ffn)
    w.add_name(name)
    w.add_description("random weights from bench/make_shape_model.py (seed %d): for speed and "
                      "memory measurements only" % a.seed)
    w.add_block_count(a.layers)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.dim)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(hd)
    w.add_value_length(hd)
    if a.arch == "gpt2":  # no rotation: learned positions
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_rope_dimension_count(hd)
        w.add_rope_freq_base(a.rope_base)
        w.add_layer_norm_rms_eps(1e-5)
    if a.arch == "gemma3":
        w.add_uint32("gemma3.attention.sliding_window", a.window)
        w.add_uint32("gemma3.attention.sliding_window_pattern", a.swa_pattern)
    n_vocab = copy_tokenizer(w, tok_path)
    w.add_vocab_size(n_vocab)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    plan = tensor_plan(a, n_vocab)
    total = 0
    for tname, shape in plan:
        t = stored_type(shape, qtype)
        size = nbytes(shape, t)
        total += size
        w.add_tensor_info(tname, shape, np.dtype(np.float32), size, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    for tname, shape in plan:
        w.write_tensor_data(tensor_data(rng, tname, shape, stored_type(shape, qtype), a.std))
    w.close()
    os.replace(tmp, a.out)
    params = sum(int(np.prod(s)) for _, s in plan)
    print("make_shape_model: wrote %s: %s, %.3f B parameters, %d-token vocabulary from %s, "
          "%.2f GiB, %.0f s" % (a.out, qtype.name, params / 1e9, n_vocab,
                                 os.path.basename(tok_path), total / 2**30,
                                 time.monotonic() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
