/* The mixture-of-experts families of their own (src/moe.c has their feed-forward; mixtral's
 * files are llama's, arch_llama.c): qwen3moe (qwen3's attention, each head's q and k RMS-normed
 * before NeoX rope; 128 experts, 8 used, their gates renormalised) and olmoe (q and k
 * RMS-normed over each token's whole row before NeoX rope; 64 experts, 8 used, the softmax's
 * gates as they are). As llama.cpp reads these files. */
#include "arch.h"
#include "error.h"

static clinfer_status qwen3moe_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return arch_read_rms_rope(f, "qwen3moe", hp);
}

static clinfer_status olmoe_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    hp->qk_norm_rows = true;
    return arch_read_rms_rope(f, "olmoe", hp);
}

static void layer(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    exec_attention_block(b, m, s, il, n);
    exec_ffn(b, m, s, il, n, CLINFER_OP_SWIGLU);
}

const clinfer_arch arch_desc_qwen3moe = {.name = "qwen3moe",
                                         .gated_ffn = true,
                                         .experts = ARCH_MOE,
                                         .moe_norm = true,
                                         .read_hparams = qwen3moe_hparams,
                                         .load_qkv = arch_load_qkv_normed,
                                         .load_ffn = moe_load_ffn,
                                         .embed = exec_token_embed,
                                         .layer = layer};

const clinfer_arch arch_desc_olmoe = {.name = "olmoe",
                                      .gated_ffn = true,
                                      .experts = ARCH_MOE,
                                      .read_hparams = olmoe_hparams,
                                      .load_qkv = arch_load_qkv_normed,
                                      .load_ffn = moe_load_ffn,
                                      .embed = exec_token_embed,
                                      .layer = layer};
