/* The llama family: llama, mistral (with its sliding window), tinyllama, smollm2 (RMSNorm,
 * RoPE, SwiGLU), qwen2 (the same plus q/k/v biases and NeoX rope), qwen3 (qwen2 without the
 * biases, with an RMS norm of each query and key head before rope) and phi3 (llama with NeoX
 * rope, q/k/v fused into one attn_qkv matrix and gate and up into one ffn_up, split at load into
 * the layer's matrices; its attention.sliding_window is ignored, as llama.cpp ignores it, whose
 * converter writes it wrongly for phi3 files). */
#include <stdio.h>

#include "arch.h"
#include "error.h"

clinfer_status arch_read_rms_rope(const gguf_file *f, const char *name, clinfer_hparams *hp) {
    clinfer_status st =
        arch_key_f32(f, name, "attention.layer_norm_rms_epsilon", true, &hp->norm_eps);
    if (st != CLINFER_OK) {
        err_prefix("model");
        return st;
    }
    return arch_read_rope(f, name, hp);
}

/* A llama file may carry attention.sliding_window (Mistral 7B v0.1 was trained with 4096): it
 * applies to every layer. llama.cpp ignores the key for llama; clinfer attends as the model was
 * trained. */
static clinfer_status llama_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = arch_read_rms_rope(f, "llama", hp);
    if (st == CLINFER_OK)
        st = arch_key_u32(f, "llama", "attention.sliding_window", false, &hp->swa_window);
    if (st != CLINFER_OK) err_prefix("model");
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    return st;
}

static clinfer_status qwen2_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return arch_read_rms_rope(f, "qwen2", hp);
}

static clinfer_status phi3_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return arch_read_rms_rope(f, "phi3", hp);
}

static clinfer_status qwen3_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return arch_read_rms_rope(f, "qwen3", hp);
}

static clinfer_status qwen2_qkv(clinfer_loader *ld, uint32_t il) {
    return arch_load_qkv(ld, il, true);
}

/* phi3's fused matrices: [q; k; v] in attn_qkv (separate ones are taken too), [gate; up] in
 * ffn_up. Each is uploaded once and its rows given to the layer's matrices, which the executor
 * then runs as the stacked weight they are. */
static clinfer_status phi3_qkv(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", il);
    const gguf_tensor *t =
        model_find_shaped(ld->m, name, hp->n_embd, q_dim + 2 * kv_dim, false, &st);
    if (st != CLINFER_OK) return st;
    if (!t) return arch_load_qkv(ld, il, false);
    clinfer_matrix qkv = {0};
    CHECK(model_upload_rows(ld, t, name, 0, (int)(q_dim + 2 * kv_dim), &qkv));
    l->wq = matrix_rows_of(&qkv, 0, (int)q_dim);
    l->wk = matrix_rows_of(&qkv, (int)q_dim, (int)kv_dim);
    l->wv = matrix_rows_of(&qkv, (int)(q_dim + kv_dim), (int)kv_dim);
cleanup:
    return st;
}

static clinfer_status phi3_ffn(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_up.weight", il);
    const gguf_tensor *t = model_find_shaped(ld->m, name, hp->n_embd, 2 * hp->n_ff, true, &st);
    if (!t) return st;
    clinfer_matrix gate_up = {0};
    CHECK(model_upload_rows(ld, t, name, 0, (int)(2 * hp->n_ff), &gate_up));
    l->ffn_gate = matrix_rows_of(&gate_up, 0, (int)hp->n_ff);
    l->ffn_up = matrix_rows_of(&gate_up, (int)hp->n_ff, (int)hp->n_ff);
cleanup:
    return st;
}

/* Attention, then y = down(silu(gate(x)) * up(x)) added to the residual stream. */
void arch_layer_swiglu(exec_builder *b, const clinfer_model *m, const exec_state *s, int il,
                       int n) {
    exec_attention_block(b, m, s, il, n);
    exec_ffn(b, m, s, il, n, CLINFER_OP_SWIGLU); /* mixtral: experts */
}

const clinfer_arch arch_desc_llama = {.name = "llama",
                                      .gated_ffn = true,
                                      .experts = ARCH_MOE_OPTIONAL, /* mixtral */
                                      .moe_norm = true,
                                      .read_hparams = llama_hparams,
                                      .load_qkv = arch_load_qkv_plain,
                                      .load_ffn = arch_load_gate_up,
                                      .embed = exec_token_embed,
                                      .layer = arch_layer_swiglu};

const clinfer_arch arch_desc_qwen2 = {.name = "qwen2",
                                      .gated_ffn = true,
                                      .read_hparams = qwen2_hparams,
                                      .load_qkv = qwen2_qkv,
                                      .load_ffn = arch_load_gate_up,
                                      .embed = exec_token_embed,
                                      .layer = arch_layer_swiglu};

const clinfer_arch arch_desc_qwen3 = {.name = "qwen3",
                                      .gated_ffn = true,
                                      .read_hparams = qwen3_hparams,
                                      .load_qkv = arch_load_qkv_normed,
                                      .load_ffn = arch_load_gate_up,
                                      .embed = exec_token_embed,
                                      .layer = arch_layer_swiglu};

const clinfer_arch arch_desc_phi3 = {.name = "phi3",
                                     .gated_ffn = true,
                                     .read_hparams = phi3_hparams,
                                     .load_qkv = phi3_qkv,
                                     .load_ffn = phi3_ffn,
                                     .embed = exec_token_embed,
                                     .layer = arch_layer_swiglu};
