/* The Gemma family, as llama.cpp reads its files. Both generations: the token embeddings scaled
 * by sqrt(n_embd), RMSNorm (the converter folds Gemma's 1 + w into the norm weights), NeoX rope,
 * the attention's and the feed-forward's outputs RMS-normed again before they join the residual
 * stream, a GELU-gated feed-forward, sliding-window attention, the output tied to token_embd
 * where output.weight is absent.
 * gemma3: each q and k head RMS-normed before rope; of every sliding_window_pattern (6) layers
 * the last attends to every position with rope.freq_base, the others only to the last
 * attention.sliding_window positions with rope.freq_base_swa (10000).
 * gemma2: no head norms; soft-capping: every attention score s becomes c * tanh(s / c) with
 * c = attn_logit_softcapping (50 by default), the logits the same with final_logit_softcapping
 * (30); of every two layers the first attends only to the last attention.sliding_window
 * positions (4096 by default), the second to all, both rotating alike. */
#include <math.h>

#include "arch.h"
#include "error.h"

/* What both generations read alike. The attention scale is 1 / sqrt(query_pre_attn_scalar):
 * head_dim, but n_embd / n_head for the 27B model, which llama.cpp tells by its layer count
 * (layers_27b). */
static clinfer_status gemma_hparams(const gguf_file *f, const char *a, uint32_t layers_27b,
                                    clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    CHECK(arch_key_f32(f, a, "attention.layer_norm_rms_epsilon", true, &hp->norm_eps));
    CHECK(arch_read_rope(f, a, hp));
    hp->rope_neox = true;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_scale =
        1.0f / sqrtf((float)(hp->n_layer == layers_27b ? hp->n_embd / hp->n_head : hp->head_dim));
cleanup:
    return st;
}

/* The optional "<a>.<suffix>" soft-cap into *cap (its default kept without it): positive and
 * finite, as a divisor must be. */
static clinfer_status read_cap(const gguf_file *f, const char *a, const char *suffix, float *cap) {
    clinfer_status st = arch_key_f32(f, a, suffix, false, cap);
    if (st == CLINFER_OK && !(*cap > 0.0f && isfinite(*cap)))
        st = err_fail(CLINFER_ERR_FORMAT, "%s.%s %g: a soft-cap must be positive and finite", a,
                      suffix, (double)*cap);
    return st;
}

static clinfer_status gemma2_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    const char *a = "gemma2";
    CHECK(gemma_hparams(f, a, 46, hp));
    hp->attn_softcap = 50.0f;
    hp->final_softcap = 30.0f;
    CHECK(read_cap(f, a, "attn_logit_softcapping", &hp->attn_softcap));
    CHECK(read_cap(f, a, "final_logit_softcapping", &hp->final_softcap));
    hp->swa_window = 4096;
    CHECK(arch_read_swa(f, a, 2, hp->rope_freq_base, hp));
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

static clinfer_status gemma3_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    const char *a = "gemma3";
    float softcap = 0.0f;
    CHECK(gemma_hparams(f, a, 62, hp));
    CHECK(arch_key_f32(f, a, "final_logit_softcapping", false, &softcap));
    if (softcap != 0.0f)
        CHECK(err_fail(CLINFER_ERR_UNSUPPORTED,
                       "%s.final_logit_softcapping %g: capped logits are not supported", a,
                       (double)softcap));
    CHECK(arch_read_swa(f, a, 6, 10000.0f, hp));
    hp->rope_freq_scale_swa = 1.0f; /* linear scaling stretches the global layers only */
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

static clinfer_status gemma2_qkv(clinfer_loader *ld, uint32_t il) {
    return arch_load_qkv_post(ld, il, false);
}

void arch_layer_geglu(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    exec_attention_block(b, m, s, il, n);
    exec_gated_ffn(b, m, s, il, n, CLINFER_OP_GEGLU);
}

/* The descriptor of a generation: only its name and readers differ. */
#define GEMMA_ARCH(arch_name, hparams, qkv)                                                        \
    {                                                                                              \
        .name = arch_name, .gated_ffn = true, .chat_format = "gemma", .read_hparams = hparams,     \
        .load_qkv = qkv, .load_ffn = arch_load_gate_up, .embed = exec_token_embed,                 \
        .layer = arch_layer_geglu                                                                  \
    }

const clinfer_arch arch_desc_gemma2 = GEMMA_ARCH("gemma2", gemma2_hparams, gemma2_qkv);
const clinfer_arch arch_desc_gemma3 =
    GEMMA_ARCH("gemma3", gemma3_hparams, arch_load_qkv_post_normed);
