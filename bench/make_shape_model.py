#!/usr/bin/env python3
"""Writes a Llama-family GGUF file (--arch llama, qwen2: q/k/v biases, qwen3: per-head q/k
norms, phi3: fused attn_qkv and ffn_up, gemma3: qwen3's norms plus post-attention and post-FFN
norms, a sliding window of --window positions on all but every --swa-pattern'th layer; gemma2:
gemma3 without the head norms, with --softcaps; smollm3: llama's tensors; granite: llama's
tensors and --granite-scales; olmo2: no pre-norms, q/k norms over whole rows, post-norms, an
output.weight of its own, and with --swa gemma3's window keys; qwen3moe: qwen3's attention,
olmoe: olmo2's q/k norms with the pre-norms, each with --experts N,K in place of one
feed-forward, as llama is with it: Mixtral's files; gpt-oss: q/k/v and output biases, attention
sinks, a sliding window of --window on the even layers, --experts with biases on the router and
on each expert's rows, the experts stored as --expert-type, an output.weight of its own), or a
GPT-2 one (--arch gpt2: layer norms with biases, learned positions of --ctx rows, fused attn_qkv,
a GELU FFN, biases on every matmul but the head, as many KV heads as heads) of a
given layer shape with random weights, for benchmarks of a model size we have no real file of, and for comparing an architecture's forward pass with llama.cpp's
(bench/crosscheck_archs.sh). Speed does not depend on the weights'
values, so the file measures what a real model of that shape would (prefill, decode, memory);
its text is noise.

The tokenizer (every tokenizer.* key) is copied from a real GGUF file, --tokenizer-from, by
default clinfer's default model: clinfer and llama.cpp refuse a model without one. The
vocabulary, and so the embedding and output rows, is that tokenizer's. The output matrix is tied
to the embedding (no output.weight), as in Llama 3.2 1B and SmolLM2 (olmo2 has its own).

Every matrix, the embedding included, is stored in --type (as `llama-quantize --pure` does), the
experts' in --expert-type where given (gpt-oss's files: MXFP4); norms, biases and sinks are F32. F32, F16 and BF16 are written directly, the quantized types through the gguf
package's numpy quantizers (Q8_0, Q4_0, Q4_1 and others it implements). Tensors are written one
at a time, so memory stays near the size of the largest one.

GPT-2 124M's shape: --arch gpt2 --dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn 3072
--ctx 1024 (its vocabulary is the tokenizer's: 49152 rows with the default one, GPT-2 has 50257).
gpt-oss-20b's: --arch gpt-oss --dim 2880 --layers 24 --heads 64 --kv-heads 8 --head-dim 64
--ffn 2880 --experts 32,4 --window 128 --rope-base 150000 --rope-yarn 32,4096 --expert-type MXFP4.

Defaults are Llama-3.2-1B's shape: dim 2048, 16 layers, 32 query and 8 KV heads of 64, FFN 8192,
rope base 500000.

Needs the PyPI packages gguf and numpy (tools/gpu_check.sh makes a venv with them).

usage: bench/make_shape_model.py OUT.gguf [--type F16|Q8_0|Q4_0|...] [--tokenizer-from GGUF]
           [--dim 2048] [--layers 16] [--heads 32] [--kv-heads 8] [--head-dim D] [--ffn 8192]
           [--ctx 8192] [--seed 0] [--name NAME] [--arch llama|qwen2|qwen3|phi3|gemma3|gpt2|
           gemma2|smollm3|granite|olmo2|qwen3moe|olmoe|gpt-oss] [--experts N,K]
           [--expert-type TYPE] [--std 0.02] [--window 512]
           [--swa-pattern 6] [--swa]
           [--softcaps ATTN,FINAL] [--granite-scales L,R,E,A] [--rope-llama3 F,LOW,HIGH,CTX]
           [--rope-yarn F,CTX] [--rope-longrope CTX]
"""
import argparse
import os
import sys
import time

import numpy as np
import gguf

ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma3", "gpt2", "gemma2", "smollm3", "granite",
         "olmo2", "qwen3moe", "olmoe", "gpt-oss")


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
    p.add_argument("--head-dim", type=int,
                   help="each head's size (default dim / heads; gpt-oss's 64 heads of 64 make "
                        "4096 of its 2880)")
    p.add_argument("--ffn", type=int, default=8192, help="feed-forward length (8192)")
    p.add_argument("--ctx", type=int, default=8192,
                   help="context_length written to the file (8192; Llama 3.2 says 131072, "
                        "which only sizes a default KV cache)")
    p.add_argument("--rope-base", type=float, default=500000.0, help="rope.freq_base (500000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (0)")
    p.add_argument("--name", help="general.name (default: from the shape)")
    p.add_argument("--arch", default="llama", choices=ARCHS, help="architecture (llama)")
    p.add_argument("--window", type=int, default=512,
                   help="gemma3, gemma2, olmo2 with --swa: attention.sliding_window of the "
                        "local layers (512)")
    p.add_argument("--swa-pattern", type=int, default=6,
                   help="gemma3, olmo2 with --swa: attention.sliding_window_pattern, one global "
                        "layer in that many (6)")
    p.add_argument("--swa", action="store_true",
                   help="olmo2: write --window and --swa-pattern (OLMo 3's files)")
    p.add_argument("--softcaps", metavar="ATTN,FINAL", default="50,30",
                   help="gemma2: attn_logit_softcapping and final_logit_softcapping (50,30)")
    p.add_argument("--granite-scales", metavar="L,R,E,A", default="16,0.22,12,0.0078125",
                   help="granite: logit_scale, residual_scale, embedding_scale and "
                        "attention.scale (Granite 3.x 8B's: 16,0.22,12,0.0078125)")
    p.add_argument("--rope-llama3", metavar="F,LOW,HIGH,CTX",
                   help="Llama 3.1-3.3's rotation: a rope_freqs.weight tensor of the factors "
                        "llama.cpp's converter computes from rope_scaling factor F, "
                        "low_freq_factor LOW, high_freq_factor HIGH and "
                        "original_max_position_embeddings CTX (Llama 3.2: 32,1,4,8192)")
    p.add_argument("--rope-yarn", metavar="F,CTX",
                   help="YaRN (Qwen2.5's long-context files): rope.scaling.type yarn, factor F, "
                        "original_context_length CTX")
    p.add_argument("--rope-longrope", metavar="CTX", type=int,
                   help="phi3 128k's longrope: rope_factors_long/short.weight (fixed smooth "
                        "curves, 1 .. 8 and 1 .. 1.5), original_context_length CTX and the "
                        "attn_factor the converter computes, sqrt(1 + ln(ctx / CTX) / ln CTX)")
    p.add_argument("--experts", metavar="N,K",
                   help="a mixture of N experts of --ffn rows, K of them per token, instead of "
                        "one feed-forward (qwen3moe and olmoe need it; llama with it: Mixtral's "
                        "files; OLMoE-1B-7B: 64,8 with --ffn 1024)")
    p.add_argument("--expert-type",
                   help="weight type of the experts' matrices (default --type; gpt-oss: MXFP4)")
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
    hd = head_dim(a)
    gptoss = a.arch == "gpt-oss"
    plan = [("token_embd.weight", (n_vocab, a.dim))]
    if a.rope_llama3:
        plan.append(("rope_freqs.weight", (hd // 2,)))
    if a.rope_longrope:
        plan += [("rope_factors_long.weight", (hd // 2,)), ("rope_factors_short.weight", (hd // 2,))]
    post_norms = a.arch in ("gemma3", "gemma2", "olmo2")
    for i in range(a.layers):
        b = "blk.%d." % i
        if a.arch != "olmo2":
            plan.append((b + "attn_norm.weight", (a.dim,)))
        if a.arch == "phi3":
            plan.append((b + "attn_qkv.weight", ((a.heads + 2 * a.kv_heads) * hd, a.dim)))
        else:
            plan += [(b + "attn_q.weight", (a.heads * hd, a.dim)),
                     (b + "attn_k.weight", (a.kv_heads * hd, a.dim)),
                     (b + "attn_v.weight", (a.kv_heads * hd, a.dim))]
        if a.arch in ("qwen2", "gpt-oss"):
            plan += [(b + "attn_q.bias", (a.heads * hd,)), (b + "attn_k.bias", (a.kv_heads * hd,)),
                     (b + "attn_v.bias", (a.kv_heads * hd,))]
        if a.arch in ("qwen3", "gemma3", "qwen3moe"):
            plan += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        if a.arch in ("olmo2", "olmoe"):  # over each token's whole q and k rows
            plan += [(b + "attn_q_norm.weight", (a.heads * hd,)),
                     (b + "attn_k_norm.weight", (a.kv_heads * hd,))]
        plan.append((b + "attn_output.weight", (a.dim, a.heads * hd)))
        if gptoss:  # its feed-forward's norm is called post_attention_norm
            plan += [(b + "attn_output.bias", (a.dim,)), (b + "attn_sinks.weight", (a.heads,)),
                     (b + "post_attention_norm.weight", (a.dim,))]
        if post_norms:
            plan.append((b + "post_attention_norm.weight", (a.dim,)))
        if a.arch not in ("olmo2", "gpt-oss"):
            plan.append((b + "ffn_norm.weight", (a.dim,)))
        if a.experts:  # the router, then each of the n experts' matrices as one tensor
            n = int(a.experts.split(",")[0])
            plan += [(b + "ffn_gate_inp.weight", (n, a.dim)),
                     (b + "ffn_gate_exps.weight", (n, a.ffn, a.dim)),
                     (b + "ffn_up_exps.weight", (n, a.ffn, a.dim)),
                     (b + "ffn_down_exps.weight", (n, a.dim, a.ffn))]
            if gptoss:  # the router's bias, each expert's bias rows
                plan += [(b + "ffn_gate_inp.bias", (n,)), (b + "ffn_gate_exps.bias", (n, a.ffn)),
                         (b + "ffn_up_exps.bias", (n, a.ffn)),
                         (b + "ffn_down_exps.bias", (n, a.dim))]
        elif a.arch == "phi3":  # gate rows, then up rows
            plan.append((b + "ffn_up.weight", (2 * a.ffn, a.dim)))
        else:
            plan += [(b + "ffn_gate.weight", (a.ffn, a.dim)), (b + "ffn_up.weight", (a.ffn, a.dim))]
        if not a.experts:
            plan.append((b + "ffn_down.weight", (a.dim, a.ffn)))
        if post_norms:
            plan.append((b + "post_ffw_norm.weight", (a.dim,)))
    plan.append(("output_norm.weight", (a.dim,)))
    if a.arch in ("olmo2", "olmoe", "gpt-oss"):  # llama.cpp requires it
        plan.append(("output.weight", (n_vocab, a.dim)))
    return plan


def llama3_rope_factors(a):
    """rope_freqs.weight as convert_hf_to_gguf.py writes it for rope_type llama3 (float32)."""
    factor, low, high, ctx = (float(v) for v in a.rope_llama3.split(","))
    hd = head_dim(a)
    freqs = 1.0 / (np.float32(a.rope_base) ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    low_wavelen, high_wavelen = ctx / low, ctx / high
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = np.float32(2 * np.pi) / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (np.float32(ctx) / wavelen - np.float32(low)) / np.float32(high - low)
            out.append(1 / ((1 - smooth) / np.float32(factor) + smooth))
    return np.array(out, dtype=np.float32)


def longrope_factors(a, name):
    """rope_factors_long (1 .. 8) or rope_factors_short (1 .. 1.5): smooth in the pair."""
    j = np.arange(head_dim(a) // 2, dtype=np.float32) / (head_dim(a) // 2)
    return (1 + 7 * j * j if "long" in name else 1 + 0.5 * j).astype(np.float32)


def head_dim(a):
    return a.head_dim or a.dim // a.heads


def is_vector(name, shape):
    """Norms, sinks and biases (gpt-oss's experts' are 2-D): F32, around 1 or 0."""
    return len(shape) == 1 or name.endswith(".bias")


def stored_type(name, shape, qtype, etype):
    """Vectors stay F32; the experts' matrices take etype, other matrices qtype."""
    if is_vector(name, shape):
        return gguf.GGMLQuantizationType.F32
    return etype if "_exps." in name else qtype


def nbytes(shape, qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if shape[-1] % block:
        sys.exit("make_shape_model: rows of %d do not split into %s blocks of %d"
                 % (shape[-1], qtype.name, block))
    return int(np.prod(shape[:-1])) * shape[-1] // block * size


def tensor_data(rng, name, shape, qtype, std):
    """Random weights (uniform, of std), norms around 1 and biases around 0 (a tenth of it),
    attention sinks in [-2, 2) (about the size of these scores), stored as qtype."""
    if name.endswith("attn_sinks.weight"):
        return (4 * rng.random(shape, dtype=np.float32) - 2).astype(np.float32)
    if is_vector(name, shape):
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
        etype = gguf.GGMLQuantizationType[(a.expert_type or a.type).upper()]
    except KeyError:
        sys.exit("make_shape_model: unknown type %r or %r" % (a.type, a.expert_type))
    if (not a.head_dim and a.dim % a.heads) or a.heads % a.kv_heads:
        sys.exit("make_shape_model: dim must split into heads (or --head-dim), heads into "
                 "kv-heads")
    t0 = time.monotonic()
    tok_path = a.tokenizer_from or default_tokenizer_model()
    tmp = a.out + ".part"
    w = gguf.GGUFWriter(tmp, a.arch)
    hd = head_dim(a)
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
    if a.rope_yarn:
        factor, orig = a.rope_yarn.split(",")
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(factor))
        w.add_rope_scaling_orig_ctx_len(int(orig))
    if a.rope_longrope:  # as the phi3 converter writes it: no rope.scaling.type
        import math
        scale = a.ctx / a.rope_longrope
        w.add_rope_scaling_orig_ctx_len(a.rope_longrope)
        w.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(a.rope_longrope)) if scale > 1 else 1.0)
    if a.arch == "gemma3" or (a.arch == "olmo2" and a.swa):
        w.add_uint32(a.arch + ".attention.sliding_window", a.window)
        w.add_uint32(a.arch + ".attention.sliding_window_pattern", a.swa_pattern)
    if a.arch == "gemma2":  # as its converter writes them: the window, not the pattern
        attn, final = (float(v) for v in a.softcaps.split(","))
        w.add_uint32("gemma2.attention.sliding_window", a.window)
        w.add_float32("gemma2.attn_logit_softcapping", attn)
        w.add_float32("gemma2.final_logit_softcapping", final)
    if a.arch == "granite":
        for key, v in zip(("logit_scale", "residual_scale", "embedding_scale", "attention.scale"),
                          a.granite_scales.split(",")):
            w.add_float32("granite." + key, float(v))
    if a.arch in ("qwen3moe", "olmoe", "gpt-oss") and not a.experts:
        sys.exit("make_shape_model: %s needs --experts" % a.arch)
    if a.arch == "gpt-oss":  # as its converter writes it: the window, not the pattern
        w.add_sliding_window(a.window)
    if a.experts:
        n, k = (int(v) for v in a.experts.split(","))
        w.add_expert_count(n)
        w.add_expert_used_count(k)
        if a.arch in ("qwen3moe", "gpt-oss"):
            w.add_expert_feed_forward_length(a.ffn)
    n_vocab = copy_tokenizer(w, tok_path)
    w.add_vocab_size(n_vocab)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    plan = tensor_plan(a, n_vocab)
    total = 0
    for tname, shape in plan:
        t = stored_type(tname, shape, qtype, etype)
        size = nbytes(shape, t)
        total += size
        w.add_tensor_info(tname, shape, np.dtype(np.float32), size, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    for tname, shape in plan:
        if tname == "rope_freqs.weight":
            w.write_tensor_data(llama3_rope_factors(a))
            continue
        if tname.startswith("rope_factors_"):
            w.write_tensor_data(longrope_factors(a, tname))
            continue
        w.write_tensor_data(tensor_data(rng, tname, shape, stored_type(tname, shape, qtype, etype),
                                        a.std))
    w.close()
    os.replace(tmp, a.out)
    params = sum(int(np.prod(s)) for _, s in plan)
    print("make_shape_model: wrote %s: %s, %.3f B parameters, %d-token vocabulary from %s, "
          "%.2f GiB, %.0f s" % (a.out, qtype.name, params / 1e9, n_vocab,
                                 os.path.basename(tok_path), total / 2**30,
                                 time.monotonic() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
