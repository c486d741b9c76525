/* gpt-oss (OpenAI gpt-oss-20b and -120b), as llama.cpp reads these files: RMSNorm, q, k and v
 * with biases, NeoX rope with the files' YaRN scaling, attention scaled by 1 / sqrt(n_rot) whose
 * softmax takes a learned logit per head beside the positions' (attn_sinks), sliding-window
 * attention (attention.sliding_window, 128) on the even layers and every position on the odd
 * ones (sliding_window_pattern 2 unless the file says otherwise), the output projection's bias;
 * then a mixture of experts after the norm its files call post_attention_norm: a router with a
 * bias, the gates a softmax over the chosen experts' logits only (llama.cpp's
 * softmax_weight, whatever expert_gating_func says), experts with biases on their gate, up and
 * down rows and the clamped SwiGLU (SWIGLU_OAI). Its experts come as MXFP4. */
#include <math.h>
#include <stdio.h>

#include "arch.h"
#include "error.h"

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    const char *a = "gpt-oss";
    hp->rope_neox = true;
    CHECK(arch_read_rms_rope(f, a, hp));
    CHECK(arch_key_u32(f, a, "attention.sliding_window", false, &hp->swa_window));
    if (hp->swa_window == 0) /* llama.cpp requires it */
        CHECK(err_fail(CLINFER_ERR_FORMAT,
                       "%s.attention.sliding_window is missing or 0: gpt-oss's even layers "
                       "attend over a window",
                       a));
    CHECK(arch_read_swa(f, a, 2, hp->rope_freq_base, hp));
    hp->rope_freq_scale_swa = hp->rope_freq_scale; /* YaRN's scale on every layer */
    if (hp->n_rot == 0)
        CHECK(err_fail(CLINFER_ERR_FORMAT, "%s.rope.dimension_count is 0: gpt-oss rotates", a));
    hp->attn_scale = 1.0f / sqrtf((float)hp->n_rot);
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

/* q, k and v with their biases (optional, as llama.cpp takes them), and the heads' sinks. */
static clinfer_status load_qkv(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = arch_load_qkv(ld, il, false);
    if (st != CLINFER_OK) return st;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.attn_sinks.weight", il);
    return model_load_vector(ld, name, ld->m->hp.n_head, true, &ld->m->layers[il].attn_sinks);
}

static void layer(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    exec_attention_block(b, m, s, il, n);
    exec_ffn(b, m, s, il, n, CLINFER_OP_SWIGLU_OAI);
}

const clinfer_arch arch_desc_gptoss = {.name = "gpt-oss",
                                       .gated_ffn = true,
                                       .experts = ARCH_MOE,
                                       .moe_softmax_chosen = true,
                                       .ffn_norm = "post_attention_norm",
                                       .read_hparams = read_hparams,
                                       .load_qkv = load_qkv,
                                       .embed = exec_token_embed,
                                       .layer = layer};
