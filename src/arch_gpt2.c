/* gpt2: LayerNorm, learned positions, fused QKV, GELU, biases everywhere, no rope. */
#include <stdio.h>

#include "arch.h"
#include "error.h"

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st =
        arch_key_f32(f, "gpt2", "attention.layer_norm_epsilon", true, &hp->norm_eps);
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

static clinfer_status load_globals(clinfer_loader *ld) {
    clinfer_model *m = ld->m;
    return model_load_matrix(ld, "position_embd.weight", m->hp.n_embd, m->hp.n_ctx_train, true,
                             &m->pos_embd);
}

/* The fused [q; k; v] rows are split so that every architecture attends alike. */
static clinfer_status load_qkv(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t E = hp->n_embd;
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    const gguf_tensor *t =
        model_find_shaped(ld->m, NAME("attn_qkv.weight"), E, q_dim + 2 * kv_dim, true, &st);
    if (!t) goto cleanup;
    clinfer_matrix qkv = {0};
    CHECK(model_upload_rows(ld, t, name, 0, (int)(q_dim + 2 * kv_dim), &qkv));
    l->wq = matrix_rows_of(&qkv, 0, (int)q_dim);
    l->wk = matrix_rows_of(&qkv, (int)q_dim, (int)kv_dim);
    l->wv = matrix_rows_of(&qkv, (int)(q_dim + kv_dim), (int)kv_dim);
    CHECK(model_load_vector(ld, NAME("attn_qkv.bias"), q_dim + 2 * kv_dim, true, &l->bq));
    l->bk = (clinfer_ref){l->bq.buf, l->bq.offset + q_dim};
    l->bv = (clinfer_ref){l->bq.buf, l->bq.offset + q_dim + kv_dim};
#undef NAME
cleanup:
    return st;
}

static clinfer_status load_ffn(clinfer_loader *ld, uint32_t il) {
    const clinfer_hparams *hp = &ld->m->hp;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_up.weight", il);
    return model_load_matrix(ld, name, hp->n_embd, hp->n_ff, true, &ld->m->layers[il].ffn_up);
}

/* Token rows plus position rows. */
static void embed(exec_builder *b, const clinfer_model *m, const exec_state *s, int n) {
    clinfer_buffer *const *buf = s->buf;
    clinfer_ref tokens = exec_at(buf[EXEC_XN], 0), positions = exec_at(buf[EXEC_POS], 0);
    size_t count = (size_t)n * m->hp.n_embd;
    exec_embed(b, &m->tok_embd, exec_at(buf[EXEC_IDS], 0), tokens, n, 0.0f);
    exec_position_embed(b, m, s, n);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_ADD,
                           .eltwise = {.a = tokens,
                                       .b = positions,
                                       .y = exec_at(buf[EXEC_X], 0),
                                       .count = count,
                                       .b_count = count}},
              0);
}

/* Attention, then y = down(gelu(up(x))) added to the residual stream. */
static void layer(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    const clinfer_layer *l = &m->layers[il];
    clinfer_buffer *const *buf = s->buf;
    clinfer_ref x = exec_at(buf[EXEC_X], 0), xn = exec_at(buf[EXEC_XN], 0);
    clinfer_ref up = exec_at(buf[EXEC_FF_A], 0);

    exec_attention_block(b, m, s, il, n);
    exec_norm(b, &m->hp, x, l->ffn_norm, l->ffn_norm_b, xn, n);
    exec_matmul(b, &l->ffn_up, xn, up, l->ffn_up_b, n, false);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_GELU,
                           .eltwise = {.a = up, .y = up, .count = (size_t)n * m->hp.n_ff}},
              0);
    exec_matmul(b, &l->ffn_down, up, x, l->ffn_down_b, n, true);
}

const clinfer_arch arch_desc_gpt2 = {.name = "gpt2",
                                     .layer_norm = true,
                                     .learned_positions = true,
                                     .read_hparams = read_hparams,
                                     .load_globals = load_globals,
                                     .load_qkv = load_qkv,
                                     .load_ffn = load_ffn,
                                     .embed = embed,
                                     .layer = layer};
