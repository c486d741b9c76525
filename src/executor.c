/* The forward pass as a plan of backend ops, built from the architectures' building blocks (run by
 * src/plan_run.c); see executor.h. */
#include "executor.h"

#include <math.h>
#include <stdlib.h>

#include "arch.h"
#include "error.h"
#include "plan.h"

void exec_buffer_sizes(const clinfer_hparams *hp, uint32_t n_ctx, uint32_t n_batch,
                       size_t logit_rows, bool q8, size_t bytes[EXEC_COUNT]) {
    size_t n = n_batch, f = sizeof(float);
    size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    bool positions = hp->arch->learned_positions;
    bytes[EXEC_X] = n * hp->n_embd * f;
    bytes[EXEC_XN] = n * hp->n_embd * f;
    bytes[EXEC_POS] = positions ? n * hp->n_embd * f : 0;
    bytes[EXEC_QKV] = n * (q_dim + 2 * kv_dim) * f;
    bytes[EXEC_ATT] = n * q_dim * f;
    bytes[EXEC_FF_A] = (hp->arch->gated_ffn ? 2 : 1) * n * hp->n_ff * f;
    bytes[EXEC_LOGITS] = logit_rows * hp->n_vocab * f;
    bytes[EXEC_IDS] = (size_t)n_ctx * sizeof(int32_t);
    bytes[EXEC_POS_IDS] = positions ? (size_t)n_ctx * sizeof(int32_t) : 0;
    bytes[EXEC_XQ] = q8 ? bytes[EXEC_XN] : 0;
    bytes[EXEC_ATT_Q] = q8 ? bytes[EXEC_ATT] : 0;
    bytes[EXEC_FF_Q] = q8 ? n * hp->n_ff * f : 0;
    const moe_hparams *moe = &hp->moe;
    size_t slots = n * moe->n_used;
    bytes[EXEC_MOE_LOGITS] = n * moe->n_expert * f;
    bytes[EXEC_MOE_IDS] = slots * sizeof(int32_t);
    bytes[EXEC_MOE_W] = slots * f;
    bytes[EXEC_MOE_OUT] = slots * hp->n_embd * f;
    if (moe->n_expert) {
        bytes[EXEC_FF_A] = 2 * slots * moe->n_ff * f;
        bytes[EXEC_FF_Q] = q8 ? slots * moe->n_ff * f : 0;
    }
}

/* Builds in two passes: with steps == NULL only counting, then filling the array. Merging
 * looks at the step before, so it happens in the second pass only, which may therefore use
 * fewer steps than counted. */
typedef struct exec_builder {
    plan_step *steps;
    clinfer_dtype *w_type; /* beside steps */
    size_t count;
    clinfer_activations activations; /* exec_state's */
    bool f32_now;                    /* the ops being pushed take f32 x (f32_here) */
    int layer;                       /* of the ops pushed now (-1: embedding, n_layer: head) */
    const exec_layout *layout;       /* NULL: one sequence, positions bound at run */
    const exec_state *state;
    /* The last ROUND_Q8 pushed, while nothing has written its x or y since: matmuls over the
     * same x (q, k and v; gate and up) read its y. */
    struct {
        bool valid;
        clinfer_ref x, y;
        size_t count;
        int block;
    } rounded;
} builder;

void exec_push(builder *b, clinfer_op op, size_t pos_stride) {
    if (b->layout) pos_stride = 0; /* bound already */
    if (b->steps)
        b->steps[b->count] = (plan_step){.op = op, .pos_stride = pos_stride, .layer = b->layer};
    b->count++;
    clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS];
    for (size_t i = 0, n = op.kind == CLINFER_OP_ROUND_Q8 ? 0 : op_outputs(&op, out); i < n; i++)
        if (refs_overlap(out[i].ref, out[i].count, b->rounded.x, b->rounded.count) ||
            refs_overlap(out[i].ref, out[i].count, b->rounded.y, b->rounded.count))
            b->rounded.valid = false;
}

/* The weight type of the step pushed last. */
static void set_w_type(builder *b, clinfer_dtype type) {
    if (b->steps) b->w_type[b->count - 1] = type;
}

clinfer_ref exec_at(clinfer_buffer *buf, size_t offset) {
    return (clinfer_ref){buf, offset};
}

static bool same_ref(clinfer_ref a, clinfer_ref b) {
    return a.buf == b.buf && a.offset == b.offset;
}

/* Whether op can take on `next` (both matmuls) as more rows: the next rows of the same weight
 * over the same x into the next outputs, as for one token's q, k and v or gate and up. */
static bool extends(const clinfer_op *op, const clinfer_op *next) {
    if (op->kind != CLINFER_OP_MATMUL || op->matmul.n != 1 || next->matmul.n != 1) return false;
    clinfer_ref y = op->matmul.y, bias = op->matmul.bias;
    bool bias_next =
        bias.buf ? same_ref(next->matmul.bias, exec_at(bias.buf, bias.offset + op->matmul.m))
                 : !next->matmul.bias.buf;
    return op->matmul.w == next->matmul.w && op->matmul.row0 + op->matmul.m == next->matmul.row0 &&
           same_ref(op->matmul.x, next->matmul.x) &&
           same_ref(next->matmul.y, exec_at(y.buf, y.offset + op->matmul.m)) && bias_next &&
           op->matmul.accumulate == next->matmul.accumulate && op->matmul.x_q8 == next->matmul.x_q8;
}

/* Where x_q8 matmuls over x find it rounded: a ROUND_Q8's y, pushed now unless the last one
 * still holds x so. Each source buffer rounds into one of its own, from its first element. */
static clinfer_ref rounded_x(builder *b, clinfer_ref x, int n, int k, int block) {
    size_t count = (size_t)n * (size_t)k;
    if (b->rounded.valid && same_ref(b->rounded.x, x) && b->rounded.count == count &&
        b->rounded.block == block)
        return b->rounded.y;
    clinfer_buffer *const *buf = b->state->buf;
    exec_buffer_id into = x.buf == buf[EXEC_ATT]    ? EXEC_ATT_Q
                          : x.buf == buf[EXEC_FF_A] ? EXEC_FF_Q
                                                    : EXEC_XQ;
    clinfer_ref y = exec_at(buf[into], 0);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_ROUND_Q8,
                           .round_q8 = {.x = x, .y = y, .n = n, .k = k, .block = block}},
              0);
    b->rounded.valid = true;
    b->rounded.x = x;
    b->rounded.y = y;
    b->rounded.count = count;
    b->rounded.block = block;
    return y;
}

clinfer_ref exec_matmul_x(builder *b, clinfer_dtype type, int k, clinfer_ref x, int n, bool *x_q8) {
    size_t q8_block = dtype_q8_act_block(type);
    *x_q8 = !b->f32_now && dtype_takes_q8_act(type) && k % q8_block == 0;
    return *x_q8 ? rounded_x(b, x, n, k, (int)q8_block) : x;
}

void exec_matmul(builder *b, const clinfer_matrix *w, clinfer_ref x, clinfer_ref y,
                 clinfer_ref bias, int n, bool accumulate) {
    bool x_q8;
    x = exec_matmul_x(b, w->type, w->k, x, n, &x_q8);
    clinfer_op op = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = w->w,
                                .x = x,
                                .y = y,
                                .bias = bias,
                                .m = w->m,
                                .k = w->k,
                                .n = n,
                                .row0 = w->row0,
                                .accumulate = accumulate,
                                .x_q8 = x_q8}};
    if (b->steps && b->count > 0 && extends(&b->steps[b->count - 1].op, &op)) {
        b->steps[b->count - 1].op.matmul.m += w->m; /* one launch instead of two */
        return;
    }
    exec_push(b, op, 0);
    set_w_type(b, w->type);
}

void exec_norm(builder *b, const clinfer_hparams *hp, clinfer_ref x, clinfer_ref w,
               clinfer_ref bias, clinfer_ref y, int n) {
    bool ln = hp->arch->layer_norm;
    exec_push(b,
              (clinfer_op){.kind = ln ? CLINFER_OP_LAYERNORM : CLINFER_OP_RMSNORM,
                           .norm = {.x = x,
                                    .w = w,
                                    .b = bias,
                                    .y = y,
                                    .n = n,
                                    .d = (int)hp->n_embd,
                                    .eps = hp->norm_eps}},
              0);
}

/* How layer il attends: its window (0: all positions) and rotation (n_rot 0: none). */
typedef struct {
    int window;
    float freq_base, freq_scale;
    clinfer_ref factors; /* the model's for the context (src/rope.c), every layer alike */
    float mscale;
    int n_rot;
} layer_attention;

static layer_attention attention_of(const clinfer_hparams *hp, int il) {
    uint32_t p = hp->swa_period, step = hp->no_rope_step;
    bool local = hp->swa_window > 0 && (p == 0 || (uint32_t)il % p != p - 1);
    int n_rot = step && ((uint32_t)il + 1) % step == 0 ? 0 : (int)hp->n_rot;
    if (!local)
        return (layer_attention){0, hp->rope_freq_base, hp->rope_freq_scale, {0}, 0.0f, n_rot};
    return (layer_attention){
        (int)hp->swa_window, hp->rope_freq_base_swa, hp->rope_freq_scale_swa, {0}, 0.0f, n_rot};
}

static clinfer_op rope_op(const clinfer_hparams *hp, const layer_attention *la, clinfer_ref x,
                          int n, int n_heads) {
    return (clinfer_op){.kind = CLINFER_OP_ROPE,
                        .rope = {.x = x,
                                 .n = n,
                                 .n_heads = n_heads,
                                 .head_dim = (int)hp->head_dim,
                                 .n_rot = la->n_rot,
                                 .freq_base = la->freq_base,
                                 .freq_scale = la->freq_scale,
                                 .neox = hp->rope_neox,
                                 .factors = la->factors,
                                 .mscale = la->mscale}};
}

void exec_embed(builder *b, const clinfer_matrix *w, clinfer_ref ids, clinfer_ref y, int n,
                float scale) {
    exec_push(
        b,
        (clinfer_op){
            .kind = CLINFER_OP_EMBED,
            .embed = {.w = w->w, .ids = ids, .y = y, .m = w->m, .k = w->k, .n = n, .scale = scale}},
        1);
    set_w_type(b, w->type);
}

void exec_token_embed(builder *b, const clinfer_model *m, const exec_state *s, int n) {
    exec_embed(b, &m->tok_embd, exec_at(s->buf[EXEC_IDS], 0), exec_at(s->buf[EXEC_X], 0), n,
               m->hp.embd_scale);
}

/* y[0 .. count) = y * scale, capped by cap where cap > 0 (the SCALE op). */
static void exec_scale(builder *b, clinfer_ref y, size_t count, float scale, float cap) {
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_SCALE,
                           .eltwise = {.a = y, .y = y, .count = count, .scale = scale, .cap = cap}},
              0);
}

/* y normed in place by w (where given), scaled by hp.residual_scale (where not 0), then added
 * to the residual stream. */
static void post_norm_add(builder *b, const clinfer_model *m, const exec_state *s, clinfer_ref w,
                          clinfer_ref y, int n) {
    clinfer_ref x = exec_at(s->buf[EXEC_X], 0);
    size_t count = (size_t)n * m->hp.n_embd;
    if (w.buf) exec_norm(b, &m->hp, y, w, (clinfer_ref){0}, y, n);
    if (m->hp.residual_scale != 0.0f) exec_scale(b, y, count, m->hp.residual_scale, 0.0f);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_ADD,
                           .eltwise = {.a = x, .b = y, .y = x, .count = count, .b_count = count}},
              0);
}

/* The sub-layer output projection w of x: added to the residual stream by the matmul itself,
 * or where post_norm is given or a residual scale, into EXEC_XN, normed, scaled, then added. */
static void output_projection(builder *b, const clinfer_model *m, const exec_state *s,
                              const clinfer_matrix *w, clinfer_ref x, clinfer_ref bias,
                              clinfer_ref post_norm, int n) {
    if (!post_norm.buf && m->hp.residual_scale == 0.0f) {
        exec_matmul(b, w, x, exec_at(s->buf[EXEC_X], 0), bias, n, true);
        return;
    }
    clinfer_ref y = exec_at(s->buf[EXEC_XN], 0);
    exec_matmul(b, w, x, y, bias, n, false);
    post_norm_add(b, m, s, post_norm, y, n);
}

void exec_gated_ffn(builder *b, const clinfer_model *m, const exec_state *s, int il, int n,
                    clinfer_op_kind glu) {
    const clinfer_layer *l = &m->layers[il];
    clinfer_buffer *const *buf = s->buf;
    clinfer_ref x = exec_at(buf[EXEC_X], 0), xn = exec_at(buf[EXEC_XN], 0);
    size_t count = (size_t)n * m->hp.n_ff;
    clinfer_ref gate = exec_at(buf[EXEC_FF_A], 0), up = exec_at(buf[EXEC_FF_A], count);

    if (l->ffn_norm.buf)
        exec_norm(b, &m->hp, x, l->ffn_norm, l->ffn_norm_b, xn, n);
    else /* olmo2: the residual stream as it is */
        xn = x;
    exec_matmul(b, &l->ffn_gate, xn, gate, (clinfer_ref){0}, n, false);
    exec_matmul(b, &l->ffn_up, xn, up, l->ffn_up_b, n, false);
    exec_push(
        b,
        (clinfer_op){.kind = glu,
                     .eltwise = {.a = gate, .b = up, .y = gate, .count = count, .b_count = count}},
        0);
    output_projection(b, m, s, &l->ffn_down, gate, l->ffn_down_b, l->ffn_post_norm, n);
}

/* Rotation, cache writes and attention of one run of tokens: batch rows [row, row + n) at
 * positions pos0 .. (bound at run where pos_stride is not 0), whose cache rows start at
 * cache_row0. */
typedef struct {
    int row, n, pos0;
    size_t cache_row0;
} attend_run;

static void attend(builder *b, const clinfer_model *m, const exec_state *s, int il, int n_batch,
                   const attend_run *r) {
    const clinfer_hparams *hp = &m->hp;
    clinfer_buffer *const *buf = s->buf;
    size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t q_count = (size_t)n_batch * q_dim, kv_count = (size_t)n_batch * kv_dim;
    clinfer_ref q = exec_at(buf[EXEC_QKV], (size_t)r->row * q_dim),
                k = exec_at(buf[EXEC_QKV], q_count + (size_t)r->row * kv_dim),
                v = exec_at(buf[EXEC_QKV], q_count + kv_count + (size_t)r->row * kv_dim);
    clinfer_ref kc = s->k_cache[il], vc = s->v_cache[il];
    kc.offset += r->cache_row0 * kv_dim;
    vc.offset += r->cache_row0 * kv_dim;
    /* where the run's keys and values go */
    clinfer_ref kw = {kc.buf, kc.offset + (size_t)r->pos0 * kv_dim},
                vw = {vc.buf, vc.offset + (size_t)r->pos0 * kv_dim};
    layer_attention la = attention_of(hp, il);
    la.factors = rope_factors_for(m, s->n_ctx);
    if (la.factors.buf && s->vectors) la.factors.buf = s->vectors; /* this device's copy */
    la.mscale = hp->rope_mscale;
    float scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim);

    clinfer_op attention = {.kind = CLINFER_OP_ATTENTION,
                            .attention = {.q = q,
                                          .k = kc,
                                          .v = vc,
                                          .out = exec_at(buf[EXEC_ATT], (size_t)r->row * q_dim),
                                          .kv_type = s->kv_type,
                                          .n = r->n,
                                          .n_head = (int)hp->n_head,
                                          .n_kv_head = (int)hp->n_head_kv,
                                          .head_dim = (int)hp->head_dim,
                                          .pos0 = r->pos0,
                                          .window = la.window,
                                          .scale = scale,
                                          .softcap = hp->attn_softcap,
                                          .sinks = m->layers[il].attn_sinks}};
    if (!la.n_rot) { /* no rotation to fuse the cache writes into */
        clinfer_ref caches[2] = {kw, vw};
        clinfer_ref fresh[2] = {k, v};
        for (int i = 0; i < 2; i++)
            exec_push(b,
                      (clinfer_op){.kind = CLINFER_OP_STORE,
                                   .store = {.src = fresh[i],
                                             .dst = caches[i],
                                             .dst_type = s->kv_type,
                                             .count = (size_t)r->n * kv_dim}},
                      kv_dim);
    } else if (r->n == 1) {
        /* Decode: the attention launch rotates the token's q and k and fills the caches
         * itself, one launch less than a separate rope. */
        attention.attention.rope.n_rot = la.n_rot;
        attention.attention.rope.freq_base = la.freq_base;
        attention.attention.rope.freq_scale = la.freq_scale;
        attention.attention.rope.factors = la.factors;
        attention.attention.rope.mscale = la.mscale;
        attention.attention.rope.neox = hp->rope_neox;
        attention.attention.rope.k_src = k;
        attention.attention.rope.v_src = v;
    } else {
        /* The launch that rotates the keys also writes them and v into the caches, saving two
         * store launches. */
        clinfer_op queries = rope_op(hp, &la, q, r->n, (int)hp->n_head);
        queries.rope.pos0 = r->pos0;
        exec_push(b, queries, 0);
        clinfer_op keys = rope_op(hp, &la, k, r->n, (int)hp->n_head_kv);
        keys.rope.pos0 = r->pos0;
        keys.rope.k_dst = kw;
        keys.rope.v_src = v;
        keys.rope.v_dst = vw;
        keys.rope.kv_heads = (int)hp->n_head_kv;
        keys.rope.kv_type = s->kv_type;
        exec_push(b, keys, kv_dim);
    }
    exec_push(b, attention, 0);
}

void exec_attention_block(builder *b, const clinfer_model *m, const exec_state *s, int il, int n) {
    const clinfer_hparams *hp = &m->hp;
    const clinfer_layer *l = &m->layers[il];
    clinfer_buffer *const *buf = s->buf;
    size_t q_count = (size_t)n * hp->n_head * hp->head_dim,
           kv_count = (size_t)n * hp->n_head_kv * hp->head_dim;
    clinfer_ref x = exec_at(buf[EXEC_X], 0), xn = exec_at(buf[EXEC_XN], 0);
    clinfer_ref q = exec_at(buf[EXEC_QKV], 0), k = exec_at(buf[EXEC_QKV], q_count),
                v = exec_at(buf[EXEC_QKV], q_count + kv_count);

    if (l->attn_norm.buf)
        exec_norm(b, hp, x, l->attn_norm, l->attn_norm_b, xn, n);
    else /* olmo2: the residual stream as it is */
        xn = x;
    exec_matmul(b, &l->wq, xn, q, l->bq, n, false);
    exec_matmul(b, &l->wk, xn, k, l->bk, n, false);
    exec_matmul(b, &l->wv, xn, v, l->bv, n, false);
    clinfer_ref norms[2] = {l->q_norm, l->k_norm}, heads[2] = {q, k};
    int n_heads[2] = {(int)hp->n_head, (int)hp->n_head_kv};
    /* in place, over a token's whole row (olmo2) or each head */
    int per_row = hp->qk_norm_rows ? 1 : 0;
    for (int i = 0; i < 2; i++)
        if (norms[i].buf)
            exec_push(b,
                      (clinfer_op){.kind = CLINFER_OP_RMSNORM,
                                   .norm = {.x = heads[i],
                                            .w = norms[i],
                                            .y = heads[i],
                                            .n = per_row ? n : n * n_heads[i],
                                            .d = (int)hp->head_dim * (per_row ? n_heads[i] : 1),
                                            .eps = hp->norm_eps}},
                      0);
    if (!b->layout) {
        attend(b, m, s, il, n, &(attend_run){0, n, 0, 0});
    } else {
        for (int i = 0; i < b->layout->n_runs; i++) {
            const exec_run *r = &b->layout->runs[i];
            attend(b, m, s, il, n, &(attend_run){r->row, r->n, r->pos0, r->cache_row0});
        }
    }
    output_projection(b, m, s, &l->wo, exec_at(buf[EXEC_ATT], 0), l->bo, l->attn_post_norm, n);
}

void exec_position_embed(builder *b, const clinfer_model *m, const exec_state *s, int n) {
    clinfer_ref ids = exec_at(s->buf[EXEC_POS_IDS], 0);
    clinfer_ref y = exec_at(s->buf[EXEC_POS], 0);
    if (!b->layout) {
        exec_embed(b, &m->pos_embd, ids, y, n, 0.0f);
        return;
    }
    for (int i = 0; i < b->layout->n_runs; i++) {
        const exec_run *r = &b->layout->runs[i];
        exec_embed(b, &m->pos_embd, exec_at(ids.buf, (size_t)r->pos0),
                   exec_at(y.buf, (size_t)r->row * m->hp.n_embd), r->n, 0.0f);
    }
}

/* The first rows of logits capped (gemma2) or scaled (granite) as the architecture does. */
static void finish_logits(builder *b, const clinfer_model *m, const exec_state *s, int rows) {
    const clinfer_hparams *hp = &m->hp;
    if (hp->final_softcap == 0.0f && hp->logit_scale == 0.0f) return;
    exec_scale(b, exec_at(s->buf[EXEC_LOGITS], 0), (size_t)rows * hp->n_vocab,
               hp->logit_scale != 0.0f ? 1.0f / hp->logit_scale : 1.0f, hp->final_softcap);
}

/* A layout plan's head: the output norm of each run of consecutive out_rows into the next rows
 * of EXEC_XN, then the LM head over those n_out rows. With embeddings the norm runs over every
 * row instead (EXEC_XN keeps all n hidden states), and the LM head over each run of out_rows
 * where it lies there. */
static void layout_head(builder *b, const clinfer_model *m, const exec_state *s, int n) {
    const exec_layout *l = b->layout;
    size_t d = m->hp.n_embd;
    if (s->embeddings)
        exec_norm(b, &m->hp, exec_at(s->buf[EXEC_X], 0), m->output_norm, m->output_norm_b,
                  exec_at(s->buf[EXEC_XN], 0), n);
    for (int j = 0; j < l->n_out;) {
        int len = 1;
        while (j + len < l->n_out && l->out_rows[j + len] == l->out_rows[j] + len)
            len++;
        if (s->embeddings)
            exec_matmul(b, &m->output, exec_at(s->buf[EXEC_XN], (size_t)l->out_rows[j] * d),
                        exec_at(s->buf[EXEC_LOGITS], (size_t)j * m->hp.n_vocab), (clinfer_ref){0},
                        len, false);
        else
            exec_norm(b, &m->hp, exec_at(s->buf[EXEC_X], (size_t)l->out_rows[j] * d),
                      m->output_norm, m->output_norm_b, exec_at(s->buf[EXEC_XN], (size_t)j * d),
                      len);
        j += len;
    }
    if (l->n_out && !s->embeddings)
        exec_matmul(b, &m->output, exec_at(s->buf[EXEC_XN], 0), exec_at(s->buf[EXEC_LOGITS], 0),
                    (clinfer_ref){0}, l->n_out, false);
    if (l->n_out) finish_logits(b, m, s, l->n_out);
}

/* Output norm and LM head over the last token's row, or every row with logits_all; the norm
 * over every row with embeddings (the head then reads the last normed row). */
static void head(builder *b, const clinfer_model *m, const exec_state *s, int n) {
    if (b->layout) {
        layout_head(b, m, s, n);
        return;
    }
    int rows = s->logits_all ? n : 1, normed = s->logits_all || s->embeddings ? n : 1;
    size_t d = m->hp.n_embd;
    exec_norm(b, &m->hp, exec_at(s->buf[EXEC_X], (size_t)(n - normed) * d), m->output_norm,
              m->output_norm_b, exec_at(s->buf[EXEC_XN], 0), normed);
    exec_matmul(b, &m->output, exec_at(s->buf[EXEC_XN], (size_t)(normed - rows) * d),
                exec_at(s->buf[EXEC_LOGITS], 0), (clinfer_ref){0}, rows, false);
    finish_logits(b, m, s, rows);
}

/* Whether layer il (n_layer: the head) takes f32 activations under policy a. */
static bool f32_here(clinfer_activations a, int il, int n_layer) {
    switch (a) {
    case CLINFER_ACT_F32:
        return true;
    case CLINFER_ACT_F32_ENDS:
        return il == 0 || il >= n_layer - 1;
    case CLINFER_ACT_F32_HEAD:
        return il == n_layer;
    default:
        return false;
    }
}

/* The parts [first, end) of the forward pass: -1 the embeddings, il layer il, n_layer the head. */
static size_t build(builder *b, const clinfer_model *m, const exec_state *s, int n, int first,
                    int end) {
    int n_layer = (int)m->hp.n_layer;
    b->layer = -1;
    if (first < 0) m->hp.arch->embed(b, m, s, n);
    for (b->layer = first < 0 ? 0 : first; b->layer < n_layer && b->layer < end; b->layer++) {
        b->f32_now = f32_here(b->activations, b->layer, n_layer);
        m->hp.arch->layer(b, m, s, b->layer, n);
    }
    size_t n_body = b->count;
    b->f32_now = f32_here(b->activations, n_layer, n_layer);
    if (end > n_layer) head(b, m, s, n);
    return n_body;
}

clinfer_status exec_plan_build(const clinfer_model *m, const exec_state *s, int n,
                               exec_plan **out) {
    return exec_plan_build_layout(m, s, n, NULL, out);
}

clinfer_status exec_plan_build_layout(const clinfer_model *m, const exec_state *s, int n,
                                      const exec_layout *layout, exec_plan **out) {
    return exec_plan_build_parts(m, s, n, layout, -1, (int)m->hp.n_layer + 1, out);
}

clinfer_status exec_plan_build_parts(const clinfer_model *m, const exec_state *s, int n,
                                     const exec_layout *layout, int first, int end,
                                     exec_plan **out) {
    builder counter = {.activations = s->activations, .layout = layout, .state = s};
    build(&counter, m, s, n, first, end);
    /* + 1: a head over no rows is a plan of no ops */
    exec_plan *p = calloc(1, sizeof *p + counter.count * sizeof(plan_step));
    if (p) p->walk = malloc((counter.count + 1) * sizeof *p->walk);
    if (p) p->w_type = calloc(counter.count + 1, sizeof *p->w_type);
    if (!p || !p->walk || !p->w_type) {
        exec_plan_free(p);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "executor: no memory for a plan of %zu ops",
                        counter.count);
    }
    builder filler = {.steps = p->steps,
                      .w_type = p->w_type,
                      .activations = s->activations,
                      .layout = layout,
                      .state = s};
    p->n = n;
    p->bound = layout != NULL;
    p->n_body = build(&filler, m, s, n, first, end);
    p->n_steps = filler.count;
    *out = p;
    return CLINFER_OK;
}

void exec_plan_free(exec_plan *plan) {
    if (plan) {
        for (int i = 0; i < 2; i++)
            if (plan->native[i]) plan->be->i->plan_free(plan->be->ctx, plan->native[i]);
        free(plan->walk);
        free(plan->w_type);
    }
    free(plan);
}
