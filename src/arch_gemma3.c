/* gemma3: the token embeddings scaled by sqrt(n_embd), RMSNorm (the converter folds Gemma's
 * 1 + w into the norm weights), each q and k head RMS-normed before NeoX rope, the attention's
 * and the feed-forward's outputs RMS-normed again before they join the residual stream, a
 * GELU-gated feed-forward, and sliding-window attention: of every sliding_window_pattern (6)
 * layers the last attends to every position with rope.freq_base, the others only to the last
 * attention.sliding_window positions with rope.freq_base_swa (10000). Output tied to
 * token_embd where output.weight is absent. As llama.cpp reads these files. */
#include <math.h>
#include <stdio.h>

#include "arch.h"
#include "error.h"

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    const char *a = "gemma3";
    float softcap = 0.0f;
    CHECK(arch_key_f32(f, a, "attention.layer_norm_rms_epsilon", true, &hp->norm_eps));
    CHECK(arch_read_rope(f, a, hp));
    hp->rope_neox = true;
    CHECK(arch_key_f32(f, a, "final_logit_softcapping", false, &softcap));
    if (softcap != 0.0f)
        CHECK(err_fail(CLINFER_ERR_UNSUPPORTED,
                       "%s.final_logit_softcapping %g: capped logits are not supported", a,
                       (double)softcap));
    hp->embd_scale = sqrtf((float)hp->n_embd);
    /* 1 / sqrt(query_pre_attn_scalar): head_dim, but n_embd / n_head for the 27B model, which
     * llama.cpp tells by its 62 layers */
    hp->attn_scale =
        1.0f / sqrtf((float)(hp->n_layer == 62 ? hp->n_embd / hp->n_head : hp->head_dim));
    CHECK(arch_key_u32(f, a, "attention.sliding_window", false, &hp->swa_window));
    hp->swa_period = 6;
    /* as llama.cpp reads it: 0 makes every layer local, 1 every layer global */
    CHECK(arch_key_u32(f, a, "attention.sliding_window_pattern", false, &hp->swa_period));
    hp->rope_freq_base_swa = 10000.0f;
    CHECK(arch_key_f32(f, a, "rope.freq_base_swa", false, &hp->rope_freq_base_swa));
    if (!(hp->rope_freq_base_swa > 0.0f) || !isfinite(hp->rope_freq_base_swa))
        CHECK(err_fail(CLINFER_ERR_FORMAT, "%s.rope.freq_base_swa %g is not positive", a,
                       (double)hp->rope_freq_base_swa));
    hp->rope_freq_scale_swa = 1.0f; /* linear scaling stretches the global layers only */
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

/* q, k, v, their head norms and the attention's post-norm. */
static clinfer_status load_qkv(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.post_attention_norm.weight", il);
    CHECK(arch_load_qkv(ld, il, false));
    CHECK(arch_load_head_norms(ld, il));
    CHECK(model_load_vector(ld, name, ld->m->hp.n_embd, true, &ld->m->layers[il].attn_post_norm));
cleanup:
    return st;
}

/* gate, up and the feed-forward's post-norm. */
static clinfer_status load_ffn(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.post_ffw_norm.weight", il);
    CHECK(arch_load_gate_up(ld, il));
    CHECK(model_load_vector(ld, name, ld->m->hp.n_embd, true, &ld->m->layers[il].ffn_post_norm));
cleanup:
    return st;
}

static void layer(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    exec_attention_block(b, m, s, il, n);
    exec_gated_ffn(b, m, s, il, n, CLINFER_OP_GEGLU);
}

const clinfer_arch arch_desc_gemma3 = {.name = "gemma3",
                                       .gated_ffn = true,
                                       .chat_format = "gemma",
                                       .read_hparams = read_hparams,
                                       .load_qkv = load_qkv,
                                       .load_ffn = load_ffn,
                                       .embed = exec_token_embed,
                                       .layer = layer};
