/* The llama family: llama, mistral, tinyllama, smollm2 (RMSNorm, RoPE, SwiGLU), qwen2 (the
 * same plus q/k/v biases and NeoX rope), qwen3 (qwen2 without the biases, with an RMS norm
 * of each query and key head before rope) and phi3 (llama with NeoX rope, q/k/v fused into one
 * attn_qkv matrix and gate and up into one ffn_up, split at load into the layer's matrices). */
#include <stdio.h>

#include "arch.h"
#include "error.h"

static clinfer_status read_hparams(const gguf_file *f, const char *name, clinfer_hparams *hp) {
    clinfer_status st =
        clinfer_arch_f32(f, name, "attention.layer_norm_rms_epsilon", true, &hp->norm_eps);
    if (st != CLINFER_OK) {
        clinfer_error_prefix("model");
        return st;
    }
    return clinfer_read_rope(f, name, hp);
}

static clinfer_status llama_hparams(const gguf_file *f, clinfer_hparams *hp) {
    return read_hparams(f, "llama", hp);
}

static clinfer_status qwen2_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return read_hparams(f, "qwen2", hp);
}

static clinfer_status phi3_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return read_hparams(f, "phi3", hp);
}

static clinfer_status qwen3_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->rope_neox = true;
    return read_hparams(f, "qwen3", hp);
}

/* q, k and v stacked into one weight, with biases where qkv_bias, else optional ones. */
static clinfer_status load_qkv(clinfer_loader *ld, uint32_t il, bool qkv_bias) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char names[3][96];
    const char *const suffix[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        snprintf(names[i], sizeof names[i], "blk.%u.attn_%s.weight", il, suffix[i]);
    const char *const qkv_names[] = {names[0], names[1], names[2]};
    const uint32_t rows[] = {q_dim, kv_dim, kv_dim};
    clinfer_matrix *const outs[] = {&l->wq, &l->wk, &l->wv};
    CHECK(clinfer_load_stacked(ld, qkv_names, rows, 3, hp->n_embd, outs));
    clinfer_ref *const biases[] = {&l->bq, &l->bk, &l->bv};
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "blk.%u.attn_%s.bias", il, suffix[i]);
        CHECK(clinfer_load_vector(ld, names[i], rows[i], qkv_bias, biases[i]));
    }
cleanup:
    return st;
}

static clinfer_status llama_qkv(clinfer_loader *ld, uint32_t il) {
    return load_qkv(ld, il, false);
}

static clinfer_status qwen2_qkv(clinfer_loader *ld, uint32_t il) {
    return load_qkv(ld, il, true);
}

static clinfer_status qwen3_qkv(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    clinfer_layer *l = &ld->m->layers[il];
    char q_norm[96], k_norm[96];
    snprintf(q_norm, sizeof q_norm, "blk.%u.attn_q_norm.weight", il);
    snprintf(k_norm, sizeof k_norm, "blk.%u.attn_k_norm.weight", il);
    CHECK(load_qkv(ld, il, false));
    CHECK(clinfer_load_vector(ld, q_norm, ld->m->hp.head_dim, true, &l->q_norm));
    CHECK(clinfer_load_vector(ld, k_norm, ld->m->hp.head_dim, true, &l->k_norm));
cleanup:
    return st;
}

/* gate and up stacked into one weight. */
static clinfer_status load_ffn(clinfer_loader *ld, uint32_t il) {
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    char gate[96], up[96];
    snprintf(gate, sizeof gate, "blk.%u.ffn_gate.weight", il);
    snprintf(up, sizeof up, "blk.%u.ffn_up.weight", il);
    const char *const names[] = {gate, up};
    const uint32_t rows[] = {hp->n_ff, hp->n_ff};
    clinfer_matrix *const outs[] = {&l->ffn_gate, &l->ffn_up};
    return clinfer_load_stacked(ld, names, rows, 2, hp->n_embd, outs);
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
        clinfer_find_shaped(ld->m, name, hp->n_embd, q_dim + 2 * kv_dim, false, &st);
    if (st != CLINFER_OK) return st;
    if (!t) return load_qkv(ld, il, false);
    clinfer_matrix qkv = {0};
    CHECK(clinfer_upload_rows(ld, t, name, 0, (int)(q_dim + 2 * kv_dim), &qkv));
    l->wq = clinfer_rows_of(&qkv, 0, (int)q_dim);
    l->wk = clinfer_rows_of(&qkv, (int)q_dim, (int)kv_dim);
    l->wv = clinfer_rows_of(&qkv, (int)(q_dim + kv_dim), (int)kv_dim);
cleanup:
    return st;
}

static clinfer_status phi3_ffn(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_up.weight", il);
    const gguf_tensor *t = clinfer_find_shaped(ld->m, name, hp->n_embd, 2 * hp->n_ff, true, &st);
    if (!t) return st;
    clinfer_matrix gate_up = {0};
    CHECK(clinfer_upload_rows(ld, t, name, 0, (int)(2 * hp->n_ff), &gate_up));
    l->ffn_gate = clinfer_rows_of(&gate_up, 0, (int)hp->n_ff);
    l->ffn_up = clinfer_rows_of(&gate_up, (int)hp->n_ff, (int)hp->n_ff);
cleanup:
    return st;
}

static void embed(exec_builder *b, const clinfer_model *m, const exec_state *s, int n) {
    exec_embed(b, &m->tok_embd, exec_at(s->buf[EXEC_IDS], 0), exec_at(s->buf[EXEC_X], 0), n);
}

/* Attention, then y = down(silu(gate(x)) * up(x)) added to the residual stream. */
static void layer(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    const clinfer_layer *l = &m->layers[il];
    clinfer_buffer *const *buf = s->buf;
    clinfer_ref x = exec_at(buf[EXEC_X], 0), xn = exec_at(buf[EXEC_XN], 0);
    size_t count = (size_t)n * m->hp.n_ff;
    clinfer_ref gate = exec_at(buf[EXEC_FF_A], 0), up = exec_at(buf[EXEC_FF_A], count),
                act = exec_at(buf[EXEC_FF_C], 0);

    exec_attention_block(b, m, s, il, n);
    exec_norm(b, &m->hp, x, l->ffn_norm, l->ffn_norm_b, xn, n);
    exec_matmul(b, &l->ffn_gate, xn, gate, (clinfer_ref){0}, n, false);
    exec_matmul(b, &l->ffn_up, xn, up, l->ffn_up_b, n, false);
    exec_push(
        b,
        (clinfer_op){.kind = CLINFER_OP_SWIGLU,
                     .eltwise = {.a = gate, .b = up, .y = act, .count = count, .b_count = count}},
        0);
    exec_matmul(b, &l->ffn_down, act, x, l->ffn_down_b, n, true);
}

const clinfer_arch clinfer_arch_llama = {.name = "llama",
                                         .gated_ffn = true,
                                         .read_hparams = llama_hparams,
                                         .load_qkv = llama_qkv,
                                         .load_ffn = load_ffn,
                                         .embed = embed,
                                         .layer = layer};

const clinfer_arch clinfer_arch_qwen2 = {.name = "qwen2",
                                         .gated_ffn = true,
                                         .read_hparams = qwen2_hparams,
                                         .load_qkv = qwen2_qkv,
                                         .load_ffn = load_ffn,
                                         .embed = embed,
                                         .layer = layer};

const clinfer_arch clinfer_arch_qwen3 = {.name = "qwen3",
                                         .gated_ffn = true,
                                         .read_hparams = qwen3_hparams,
                                         .load_qkv = qwen3_qkv,
                                         .load_ffn = load_ffn,
                                         .embed = embed,
                                         .layer = layer};

const clinfer_arch clinfer_arch_phi3 = {.name = "phi3",
                                        .gated_ffn = true,
                                        .read_hparams = phi3_hparams,
                                        .load_qkv = phi3_qkv,
                                        .load_ffn = phi3_ffn,
                                        .embed = embed,
                                        .layer = layer};
