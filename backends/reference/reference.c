/* The reference backend object: host buffers, weights kept as raw GGUF rows, and op dispatch.
 * op_check_operands validates each op record first, so that reference_ops.c can stay plain
 * arithmetic and a bad record yields CLINFER_ERR_INVALID_ARGUMENT instead of a crash. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "reference.h"

typedef struct {
    float *scratch; /* dequantized weight rows, attention scores; grows on demand */
    size_t scratch_floats;
} ref_ctx;

static clinfer_status scratch_reserve(ref_ctx *c, size_t n) {
    if (n <= c->scratch_floats) return CLINFER_OK;
    float *p = realloc(c->scratch, n * sizeof *p);
    if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: scratch of %zu floats", n);
    c->scratch = p;
    c->scratch_floats = n;
    return CLINFER_OK;
}

static const char *ref_name(void *ctx) {
    (void)ctx;
    return "reference";
}

static const char *ref_describe(void *ctx) {
    (void)ctx;
    return "reference: plain C on the host, one thread";
}

/* ---- buffers and weights ----------------------------------------------------------------- */

static clinfer_status ref_buffer_alloc(void *ctx, size_t bytes, clinfer_buffer **out) {
    (void)ctx;
    if (!out || bytes == 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "reference: buffer_alloc of %zu bytes (out %p)", bytes, (void *)out);
    clinfer_buffer *b = calloc(1, sizeof *b);
    void *data = calloc(1, bytes); /* zeroed: a fresh KV cache or output reads as 0 */
    if (!b || !data) {
        free(b);
        free(data);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: buffer of %zu bytes", bytes);
    }
    b->data = data;
    b->head.bytes = bytes;
    *out = b;
    return CLINFER_OK;
}

static void ref_buffer_free(void *ctx, clinfer_buffer *buf) {
    (void)ctx;
    if (!buf) return;
    free(buf->data);
    free(buf);
}

static clinfer_status ref_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                       const void *src) {
    (void)ctx;
    clinfer_status st = op_check_transfer("reference buffer_write", buf, offset, bytes, src);
    if (st == CLINFER_OK && bytes) memcpy((char *)buf->data + offset, src, bytes);
    return st;
}

static clinfer_status ref_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      void *dst) {
    (void)ctx;
    clinfer_status st = op_check_transfer("reference buffer_read", buf, offset, bytes, dst);
    if (st == CLINFER_OK && bytes) memcpy(dst, (const char *)buf->data + offset, bytes);
    return st;
}

static clinfer_status ref_buffer_copy(void *ctx, clinfer_buffer *src, size_t src_offset,
                                      clinfer_buffer *dst, size_t dst_offset, size_t bytes) {
    (void)ctx;
    clinfer_status st =
        op_check_copy("reference buffer_copy", src, src_offset, dst, dst_offset, bytes);
    if (st == CLINFER_OK && bytes)
        memcpy((char *)dst->data + dst_offset, (const char *)src->data + src_offset, bytes);
    return st;
}

static clinfer_status ref_weight_create(void *ctx, clinfer_dtype type, int m, int k,
                                        const void *data, clinfer_buffer **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_buffer *b = NULL;
    if (!dtype_is_weight(type) || m <= 0 || k <= 0 || !data || !out ||
        (size_t)k % dtype_block_elems(type) != 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "reference: weight_create type %d (%s), %d x %d: need a weight type, "
                        "positive sizes, k a multiple of %zu, data and out",
                        (int)type, dtype_name(type), m, k, dtype_block_elems(type));
    size_t row_bytes = dtype_row_bytes(type, (size_t)k);
    if ((size_t)m > SIZE_MAX / row_bytes)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: weight %d x %zu bytes overflows",
                        m, row_bytes);
    CHECK(ref_buffer_alloc(ctx, (size_t)m * row_bytes, &b));
    memcpy(b->data, data, b->head.bytes);
    b->head.weight = true;
    b->head.m = m;
    b->head.k = k;
    b->type = type;
    b->row_bytes = row_bytes;
    *out = b;
    b = NULL;
cleanup:
    ref_buffer_free(ctx, b);
    return st;
}

/* ---- ops: op_check_operands has validated each record before it gets here ------------------- */

/* The host address of operand r (NULL where an optional operand is absent). */
static void *at(clinfer_ref r, size_t elem) {
    return r.buf ? (char *)r.buf->data + r.offset * elem : NULL;
}

static float *f32(clinfer_ref r) {
    return at(r, sizeof(float));
}

/* With x_q8, x is a ROUND_Q8's y already (backend.h): its f32 values are the 8-bit ones. */
static clinfer_status op_matmul(ref_ctx *c, const clinfer_op *o) {
    clinfer_status st = scratch_reserve(c, (size_t)o->matmul.k); /* a weight row */
    if (st != CLINFER_OK) return st;
    ref_matmul(o->matmul.w, o->matmul.row0, o->matmul.m, f32(o->matmul.x), f32(o->matmul.y),
               f32(o->matmul.bias), o->matmul.n, o->matmul.accumulate, c->scratch);
    return CLINFER_OK;
}

/* Ids are data, not part of the record: the one check op_check_operands cannot make. */
static clinfer_status op_embed(const clinfer_op *o) {
    const int32_t *ids = at(o->embed.ids, sizeof(int32_t));
    for (int i = 0; i < o->embed.n; i++)
        if (ids[i] < 0 || ids[i] >= o->embed.m)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference embed: ids[%d] = %d is outside 0 .. %d", i, (int)ids[i],
                            o->embed.m - 1);
    ref_embed(o->embed.w, ids, f32(o->embed.y), o->embed.n, o->embed.scale);
    return CLINFER_OK;
}

static void op_rope(const clinfer_op *o) {
    float *x = f32(o->rope.x);
    ref_rope(x, o->rope.n, o->rope.n_heads, o->rope.head_dim, o->rope.n_rot, o->rope.pos0,
             o->rope.freq_base, o->rope.freq_scale, o->rope.neox,
             o->rope.factors.buf ? f32(o->rope.factors) : NULL, o->rope.mscale);
    if (!o->rope.k_dst.buf) return;
    /* a token's keys are the tail of its row of x; the values are one contiguous run */
    size_t elem = dtype_block_bytes(o->rope.kv_type);
    size_t row = (size_t)o->rope.n_heads * (size_t)o->rope.head_dim;
    size_t kv_dim = (size_t)o->rope.kv_heads * (size_t)o->rope.head_dim;
    char *k = at(o->rope.k_dst, elem);
    for (size_t t = 0; t < (size_t)o->rope.n; t++)
        ref_store(x + t * row + row - kv_dim, k + t * kv_dim * elem, o->rope.kv_type, kv_dim);
    ref_store(f32(o->rope.v_src), at(o->rope.v_dst, elem), o->rope.kv_type,
              kv_dim * (size_t)o->rope.n);
}

static clinfer_status op_attention(ref_ctx *c, const clinfer_op *o) {
    size_t elem = dtype_block_bytes(o->attention.kv_type);
    size_t n_pos = (size_t)o->attention.pos0 + (size_t)o->attention.n;
    clinfer_status st = scratch_reserve(c, n_pos + 2 * (size_t)o->attention.head_dim);
    if (st != CLINFER_OK) return st;
    if (o->attention.rope.n_rot) { /* the two ROPE ops it stands for: queries, then keys */
        clinfer_op keys = attention_keys_rope(o), queries = keys;
        queries.rope.x = o->attention.q;
        queries.rope.n_heads = o->attention.n_head;
        queries.rope.k_dst = (clinfer_ref){0};
        op_rope(&queries);
        op_rope(&keys);
    }
    ref_attention(f32(o->attention.q), at(o->attention.k, elem), at(o->attention.v, elem),
                  f32(o->attention.out), o->attention.kv_type, o->attention.n, o->attention.n_head,
                  o->attention.n_kv_head, o->attention.head_dim, o->attention.pos0,
                  o->attention.window, o->attention.scale, o->attention.softcap,
                  f32(o->attention.sinks), c->scratch);
    return CLINFER_OK;
}

static clinfer_status ref_op(void *ctx, const clinfer_op *o) {
    clinfer_status st = op_check_operands(o);
    if (st != CLINFER_OK) return st;
    switch (o->kind) {
    case CLINFER_OP_MATMUL:
        return op_matmul(ctx, o);
    case CLINFER_OP_EMBED:
        return op_embed(o);
    case CLINFER_OP_RMSNORM:
        ref_rmsnorm(f32(o->norm.x), f32(o->norm.w), f32(o->norm.y), o->norm.n, o->norm.d,
                    o->norm.eps);
        break;
    case CLINFER_OP_LAYERNORM:
        ref_layernorm(f32(o->norm.x), f32(o->norm.w), f32(o->norm.b), f32(o->norm.y), o->norm.n,
                      o->norm.d, o->norm.eps);
        break;
    case CLINFER_OP_ROPE:
        op_rope(o);
        break;
    case CLINFER_OP_STORE:
        ref_store(f32(o->store.src), at(o->store.dst, dtype_block_bytes(o->store.dst_type)),
                  o->store.dst_type, o->store.count);
        break;
    case CLINFER_OP_ATTENTION:
        return op_attention(ctx, o);
    case CLINFER_OP_MOE_ROUTE:
        ref_moe_route(f32(o->moe_route.logits), at(o->moe_route.ids, sizeof(int32_t)),
                      f32(o->moe_route.weights), o->moe_route.n, o->moe_route.n_expert,
                      o->moe_route.n_used, o->moe_route.gating, o->moe_route.norm,
                      o->moe_route.scale);
        break;
    case CLINFER_OP_MATMUL_ID:
        st = scratch_reserve(ctx, (size_t)o->matmul_id.k);
        if (st != CLINFER_OK) return st;
        ref_matmul_id(o->matmul_id.w, f32(o->matmul_id.x), at(o->matmul_id.ids, sizeof(int32_t)),
                      f32(o->matmul_id.bias), f32(o->matmul_id.y), o->matmul_id.m, o->matmul_id.n,
                      o->matmul_id.n_used, o->matmul_id.n_expert, o->matmul_id.x_rows,
                      ((ref_ctx *)ctx)->scratch);
        break;
    case CLINFER_OP_MOE_SUM:
        ref_moe_sum(f32(o->moe_sum.x), f32(o->moe_sum.weights), f32(o->moe_sum.y), o->moe_sum.n,
                    o->moe_sum.n_used, o->moe_sum.d, o->moe_sum.accumulate);
        break;
    case CLINFER_OP_ROUND_Q8:
        ref_round_q8(f32(o->round_q8.x), f32(o->round_q8.y),
                     (size_t)o->round_q8.n * (size_t)o->round_q8.k, (size_t)o->round_q8.block);
        break;
    case CLINFER_OP_SCALE:
        ref_scale(f32(o->eltwise.a), f32(o->eltwise.y), o->eltwise.count, o->eltwise.scale,
                  o->eltwise.cap);
        break;
    default: /* the element-wise ops */
        ref_eltwise(o->kind, f32(o->eltwise.a), f32(o->eltwise.b), f32(o->eltwise.y),
                    o->eltwise.count, o->eltwise.b_count);
    }
    return CLINFER_OK;
}

/* Ops run synchronously: nothing is ever pending. */
static clinfer_status ref_sync(void *ctx) {
    (void)ctx;
    return CLINFER_OK;
}

static void ref_destroy(void *ctx) {
    ref_ctx *c = ctx;
    if (!c) return;
    free(c->scratch);
    free(c);
}

/* Ops share nothing but the weights and buffers they name: another instance is a new backend. */
static clinfer_status ref_instance(void *ctx, clinfer_backend **out) {
    (void)ctx;
    return ref_backend_create(out);
}

static const clinfer_backend_i reference_interface = {
    .api_version = CLINFER_BACKEND_API,
    .name = ref_name,
    .describe = ref_describe,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_free = ref_buffer_free,
    .buffer_write = ref_buffer_write,
    .buffer_read = ref_buffer_read,
    .buffer_copy = ref_buffer_copy,
    .weight_create = ref_weight_create,
    .op = ref_op,
    .sync = ref_sync,
    .destroy = ref_destroy,
    .instance = ref_instance,
};

clinfer_status ref_backend_create(clinfer_backend **out) {
    if (!out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: create: out is NULL");
    clinfer_backend *b = calloc(1, sizeof *b);
    ref_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: create");
    }
    b->i = &reference_interface;
    b->ctx = c;
    *out = b;
    return CLINFER_OK;
}
