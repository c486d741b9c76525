/* The reference backend object: host buffers, weights kept as raw GGUF rows, and op dispatch.
 * Every op is validated here (operands present, dimensions positive, every operand's extent
 * inside its buffer, ids inside the table) so that reference_ops.c can stay plain arithmetic and
 * a bad op record yields CLINFER_ERR_INVALID_ARGUMENT with a message instead of a crash. */
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
    if (!p) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: scratch of %zu floats", n);
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
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference: buffer_alloc of %zu bytes (out %p)", bytes, (void *)out);
    clinfer_buffer *b = calloc(1, sizeof *b);
    void *data = calloc(1, bytes); /* zeroed: a fresh KV cache or output reads as 0 */
    if (!b || !data) {
        free(b);
        free(data);
        return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: buffer of %zu bytes", bytes);
    }
    b->data = data;
    b->bytes = bytes;
    *out = b;
    return CLINFER_OK;
}

static void ref_buffer_free(void *ctx, clinfer_buffer *buf) {
    (void)ctx;
    if (!buf) return;
    free(buf->data);
    free(buf);
}

/* A byte range [offset, offset + bytes) of buf, checked without overflow. */
static clinfer_status byte_range(const char *what, const clinfer_buffer *buf, size_t offset,
                                 size_t bytes, const void *host) {
    if (!buf)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: %s: buffer is NULL", what);
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference: %s: offset %zu + %zu bytes is past the end of the buffer "
                            "(%zu bytes)",
                            what, offset, bytes, buf->bytes);
    if (bytes && !host)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: %s: host pointer is NULL",
                            what);
    return CLINFER_OK;
}

static clinfer_status ref_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                       const void *src) {
    (void)ctx;
    clinfer_status st = byte_range("buffer_write", buf, offset, bytes, src);
    if (st == CLINFER_OK && bytes) memcpy((char *)buf->data + offset, src, bytes);
    return st;
}

static clinfer_status ref_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      void *dst) {
    (void)ctx;
    clinfer_status st = byte_range("buffer_read", buf, offset, bytes, dst);
    if (st == CLINFER_OK && bytes) memcpy(dst, (const char *)buf->data + offset, bytes);
    return st;
}

static clinfer_status ref_weight_create(void *ctx, clinfer_dtype type, int m, int k,
                                        const void *data, clinfer_buffer **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_buffer *b = NULL;
    if (!clinfer_dtype_valid((uint32_t)type) || m <= 0 || k <= 0 || !data || !out ||
        (size_t)k % clinfer_dtype_block_elems(type) != 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference: weight_create type %d (%s), %d x %d: need a known type, "
                            "positive sizes, k a multiple of %zu, data and out",
                            (int)type, clinfer_dtype_name(type), m, k,
                            clinfer_dtype_block_elems(type));
    size_t row_bytes = clinfer_dtype_row_bytes(type, (size_t)k);
    if ((size_t)m > SIZE_MAX / row_bytes)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference: weight %d x %zu bytes overflows", m, row_bytes);
    CHECK(ref_buffer_alloc(ctx, (size_t)m * row_bytes, &b));
    memcpy(b->data, data, b->bytes);
    b->is_weight = true;
    b->type = type;
    b->m = m;
    b->k = k;
    b->row_bytes = row_bytes;
    *out = b;
    b = NULL;
cleanup:
    ref_buffer_free(ctx, b);
    return st;
}

/* ---- op validation ----------------------------------------------------------------------- */

/* The host address of operand r, which must hold count elements of elem bytes. An absent
 * optional operand gives NULL. */
static clinfer_status operand(const char *op, const char *what, clinfer_ref r, size_t count,
                              size_t elem, bool optional, void **out) {
    *out = NULL;
    if (!r.buf) {
        if (optional) return CLINFER_OK;
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference %s: operand %s is NULL", op,
                            what);
    }
    if (r.buf->is_weight)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: operand %s is a weight buffer, not an activation", op,
                            what);
    size_t cap = r.buf->bytes / elem;
    if (r.offset > cap || count > cap - r.offset)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: operand %s: offset %zu + %zu elements is past the end "
                            "of its buffer (%zu elements)",
                            op, what, r.offset, count, cap);
    *out = (char *)r.buf->data + r.offset * elem;
    return CLINFER_OK;
}

/* *out = a * b * c for positive a, b, c, failing on a non-positive factor or overflow. */
static clinfer_status extent(const char *op, size_t *out, long long a, long long b, long long c) {
    *out = 0; /* defined on failure too: gcc -O3 cannot tell that clinfer_fail returns non-zero */
    if (a <= 0 || b <= 0 || c <= 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: dimensions %lld x %lld x %lld must be positive", op, a,
                            b, c);
    size_t ab = (size_t)a * (size_t)b;
    if ((size_t)a > SIZE_MAX / (size_t)b || ab > SIZE_MAX / (size_t)c)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: dimensions %lld x %lld x %lld overflow", op, a, b, c);
    *out = ab * (size_t)c;
    return CLINFER_OK;
}

/* Input and output f32 ranges of an op that reads all of its input while writing. */
static clinfer_status disjoint(const char *op, clinfer_ref a, size_t a_count, clinfer_ref b,
                               size_t b_count) {
    if (a.buf == b.buf && a.offset < b.offset + b_count && b.offset < a.offset + a_count)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: input (offset %zu, %zu elements) and output (offset "
                            "%zu, %zu elements) overlap",
                            op, a.offset, a_count, b.offset, b_count);
    return CLINFER_OK;
}

/* w's rows [row0, row0 + m) of k elements; whole: they must be all its rows. */
static clinfer_status weight_operand(const char *op, const clinfer_buffer *w, int row0, int m,
                                     int k, bool whole) {
    if (!w || !w->is_weight)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: w is %s, not a buffer from weight_create", op,
                            w ? "a plain buffer" : "NULL");
    if (row0 < 0 || m < 0 || row0 > w->m - m || w->k != k || (whole && m != w->m))
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: op says rows %d .. %d of %d elements but the weight is "
                            "%d x %d",
                            op, row0, row0 + m, k, w->m, w->k);
    return CLINFER_OK;
}

static clinfer_status op_matmul(ref_ctx *c, const clinfer_op *o) {
    const char *op = "matmul";
    clinfer_status st;
    size_t nx, ny, nb;
    void *x, *y, *bias;
    CHECK(weight_operand(op, o->matmul.w, o->matmul.row0, o->matmul.m, o->matmul.k, false));
    CHECK(extent(op, &nx, o->matmul.n, o->matmul.k, 1));
    CHECK(extent(op, &ny, o->matmul.n, o->matmul.m, 1));
    CHECK(extent(op, &nb, o->matmul.m, 1, 1));
    CHECK(operand(op, "x", o->matmul.x, nx, sizeof(float), false, &x));
    CHECK(operand(op, "y", o->matmul.y, ny, sizeof(float), false, &y));
    CHECK(operand(op, "bias", o->matmul.bias, nb, sizeof(float), true, &bias));
    CHECK(disjoint(op, o->matmul.x, nx, o->matmul.y, ny));
    if (o->matmul.x_q8 && o->matmul.k % CLINFER_Q8_ACT_BLOCK != 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference matmul: x_q8 needs k a multiple of %d, k is %d",
                            CLINFER_Q8_ACT_BLOCK, o->matmul.k);
    /* scratch: a weight row of k floats, then with x_q8 the rounded copy of x */
    CHECK(scratch_reserve(c, (size_t)o->matmul.k + (o->matmul.x_q8 ? nx : 0)));
    if (o->matmul.x_q8) {
        ref_round_q8(x, c->scratch + o->matmul.k, nx);
        x = c->scratch + o->matmul.k;
    }
    ref_matmul(o->matmul.w, o->matmul.row0, o->matmul.m, x, y, bias, o->matmul.n,
               o->matmul.accumulate, c->scratch);
cleanup:
    return st;
}

static clinfer_status check_ids(const int32_t *ids, int n, int m) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m)
            return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "reference embed: ids[%d] = %d is outside 0 .. %d", i, (int)ids[i],
                                m - 1);
    return CLINFER_OK;
}

static clinfer_status op_embed(const clinfer_op *o) {
    const char *op = "embed";
    clinfer_status st;
    size_t ny;
    void *ids, *y;
    CHECK(weight_operand(op, o->embed.w, 0, o->embed.m, o->embed.k, true));
    CHECK(extent(op, &ny, o->embed.n, o->embed.k, 1));
    CHECK(operand(op, "ids", o->embed.ids, (size_t)o->embed.n, sizeof(int32_t), false, &ids));
    CHECK(operand(op, "y", o->embed.y, ny, sizeof(float), false, &y));
    CHECK(check_ids(ids, o->embed.n, o->embed.m));
    ref_embed(o->embed.w, ids, y, o->embed.n);
cleanup:
    return st;
}

static clinfer_status op_norm(const clinfer_op *o) {
    bool layer = o->kind == CLINFER_OP_LAYERNORM;
    const char *op = layer ? "layernorm" : "rmsnorm";
    clinfer_status st;
    size_t nx;
    void *x, *w, *b, *y;
    CHECK(extent(op, &nx, o->norm.n, o->norm.d, 1));
    CHECK(operand(op, "x", o->norm.x, nx, sizeof(float), false, &x));
    CHECK(operand(op, "w", o->norm.w, (size_t)o->norm.d, sizeof(float), false, &w));
    CHECK(operand(op, "y", o->norm.y, nx, sizeof(float), false, &y));
    if (layer) { /* the bias is optional */
        CHECK(operand(op, "b", o->norm.b, (size_t)o->norm.d, sizeof(float), true, &b));
        ref_layernorm(x, w, b, y, o->norm.n, o->norm.d, o->norm.eps);
    } else {
        ref_rmsnorm(x, w, y, o->norm.n, o->norm.d, o->norm.eps);
    }
cleanup:
    return st;
}

/* Caches hold f32 or f16; *elem receives the element size. */
static clinfer_status cache_type(const char *op, clinfer_dtype type, size_t *elem) {
    if (type != CLINFER_DT_F32 && type != CLINFER_DT_F16)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference %s: cache type %s (%d) is not F32 or F16", op,
                            clinfer_dtype_name(type), (int)type);
    *elem = clinfer_dtype_block_bytes(type);
    return CLINFER_OK;
}

static clinfer_status check_rope(const clinfer_op *o) {
    if (o->rope.n_rot <= 0 || o->rope.n_rot % 2 || o->rope.n_rot > o->rope.head_dim ||
        o->rope.pos0 < 0 || !(o->rope.freq_base > 0.0f))
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference rope: n_rot %d (head_dim %d), pos0 %d, freq_base %g: need "
                            "an even n_rot <= head_dim, pos0 >= 0, freq_base > 0",
                            o->rope.n_rot, o->rope.head_dim, o->rope.pos0,
                            (double)o->rope.freq_base);
    return CLINFER_OK;
}

/* The cache write's key heads and buffers; sizes are checked by operand(). */
static clinfer_status check_rope_kv(const clinfer_op *o) {
    const clinfer_buffer *k = o->rope.k_dst.buf, *v = o->rope.v_dst.buf;
    if (o->rope.kv_heads <= 0 || o->rope.kv_heads > o->rope.n_heads)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference rope: kv_heads %d must be in 1 .. n_heads %d",
                            o->rope.kv_heads, o->rope.n_heads);
    if (k == o->rope.x.buf || k == o->rope.v_src.buf || v == o->rope.x.buf ||
        v == o->rope.v_src.buf || k == v)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference rope: k_dst and v_dst must be buffers of their own, apart "
                            "from x, v_src and each other");
    return CLINFER_OK;
}

static clinfer_status op_rope(const clinfer_op *o) {
    const char *op = "rope";
    clinfer_status st;
    size_t nx = 0, nkv = 0, elem = 0;
    void *x, *k = NULL, *v_src = NULL, *v_dst = NULL;
    CHECK(extent(op, &nx, o->rope.n, o->rope.n_heads, o->rope.head_dim));
    CHECK(check_rope(o));
    CHECK(operand(op, "x", o->rope.x, nx, sizeof(float), false, &x));
    if (o->rope.k_dst.buf) {
        CHECK(cache_type(op, o->rope.kv_type, &elem));
        CHECK(check_rope_kv(o));
        CHECK(extent(op, &nkv, o->rope.n, o->rope.kv_heads, o->rope.head_dim));
        CHECK(operand(op, "k_dst", o->rope.k_dst, nkv, elem, false, &k));
        CHECK(operand(op, "v_src", o->rope.v_src, nkv, sizeof(float), false, &v_src));
        CHECK(operand(op, "v_dst", o->rope.v_dst, nkv, elem, false, &v_dst));
        CHECK(disjoint(op, o->rope.v_src, nkv, o->rope.x, nx));
    }
    ref_rope(x, o->rope.n, o->rope.n_heads, o->rope.head_dim, o->rope.n_rot, o->rope.pos0,
             o->rope.freq_base, o->rope.freq_scale, o->rope.neox);
    if (k) {
        /* a token's keys are the tail of its row of x; the values are one contiguous run */
        size_t row = nx / (size_t)o->rope.n, kv_dim = nkv / (size_t)o->rope.n;
        for (size_t t = 0; t < (size_t)o->rope.n; t++)
            ref_store((const float *)x + t * row + row - kv_dim, (char *)k + t * kv_dim * elem,
                      o->rope.kv_type, kv_dim);
        ref_store(v_src, v_dst, o->rope.kv_type, nkv);
    }
cleanup:
    return st;
}

static clinfer_status op_store(const clinfer_op *o) {
    const char *op = "store";
    clinfer_status st;
    size_t elem = 0, n = o->store.count;
    void *src, *dst;
    CHECK(cache_type(op, o->store.dst_type, &elem));
    CHECK(operand(op, "src", o->store.src, n, sizeof(float), false, &src));
    CHECK(operand(op, "dst", o->store.dst, n, elem, false, &dst));
    ref_store(src, dst, o->store.dst_type, n);
cleanup:
    return st;
}

static clinfer_status check_heads(const clinfer_op *o) {
    if (o->attention.n_kv_head <= 0 || o->attention.n_head % o->attention.n_kv_head != 0 ||
        o->attention.pos0 < 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference attention: n_head %d, n_kv_head %d, pos0 %d: need n_head a "
                            "multiple of n_kv_head > 0 and pos0 >= 0",
                            o->attention.n_head, o->attention.n_kv_head, o->attention.pos0);
    return CLINFER_OK;
}

/* An attention op's rotation and cache write (backend.h), run as the two ROPE ops it stands
 * for: the queries, then the keys with the cache write. nq and nkv count the elements of q and
 * of k_src. Everything is checked before the first rotation, so a rejected op changes nothing. */
static clinfer_status attention_rope(const clinfer_op *o, size_t nq, size_t nkv) {
    const char *op = "attention";
    clinfer_status st;
    void *unused;
    clinfer_ref q = o->attention.q, k_src = o->attention.rope.k_src,
                v_src = o->attention.rope.v_src;
    const clinfer_buffer *k = o->attention.k.buf, *v = o->attention.v.buf;
    CHECK(operand(op, "rope.k_src", k_src, nkv, sizeof(float), false, &unused));
    CHECK(operand(op, "rope.v_src", v_src, nkv, sizeof(float), false, &unused));
    CHECK(disjoint(op, k_src, nkv, q, nq));
    CHECK(disjoint(op, v_src, nkv, q, nq));
    CHECK(disjoint(op, v_src, nkv, k_src, nkv));
    if (k == v || q.buf == k || q.buf == v || k_src.buf == k || k_src.buf == v || v_src.buf == k ||
        v_src.buf == v)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "reference attention: with rope, the caches must be buffers of their "
                            "own, apart from q, rope.k_src, rope.v_src and each other");
    clinfer_op keys = clinfer_attention_keys_rope(o), queries = keys;
    queries.rope.x = q;
    queries.rope.n_heads = o->attention.n_head;
    queries.rope.k_dst = (clinfer_ref){0};
    CHECK(op_rope(&queries));
    CHECK(op_rope(&keys));
cleanup:
    return st;
}

static clinfer_status op_attention(ref_ctx *c, const clinfer_op *o) {
    const char *op = "attention";
    clinfer_status st;
    size_t elem = 0, nq, nkv;
    void *q, *k, *v, *out;
    CHECK(cache_type(op, o->attention.kv_type, &elem));
    CHECK(check_heads(o));
    CHECK(extent(op, &nq, o->attention.n, o->attention.n_head, o->attention.head_dim));
    long long n_pos = (long long)o->attention.pos0 + o->attention.n;
    CHECK(extent(op, &nkv, n_pos, o->attention.n_kv_head, o->attention.head_dim));
    CHECK(operand(op, "q", o->attention.q, nq, sizeof(float), false, &q));
    CHECK(operand(op, "k", o->attention.k, nkv, elem, false, &k));
    CHECK(operand(op, "v", o->attention.v, nkv, elem, false, &v));
    CHECK(operand(op, "out", o->attention.out, nq, sizeof(float), false, &out));
    if (o->attention.out.buf == o->attention.k.buf || o->attention.out.buf == o->attention.v.buf)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "reference attention: out must not lie in a cache's buffer"));
    CHECK(scratch_reserve(c, (size_t)n_pos + 2 * (size_t)o->attention.head_dim));
    if (o->attention.rope.n_rot)
        CHECK(attention_rope(o, nq, nq / (size_t)o->attention.n_head * o->attention.n_kv_head));
    ref_attention(q, k, v, out, o->attention.kv_type, o->attention.n, o->attention.n_head,
                  o->attention.n_kv_head, o->attention.head_dim, o->attention.pos0,
                  o->attention.scale, c->scratch);
cleanup:
    return st;
}

static clinfer_status op_softmax(const clinfer_op *o) {
    const char *op = "softmax";
    clinfer_status st;
    size_t nx;
    void *x, *y;
    CHECK(extent(op, &nx, o->softmax.rows, o->softmax.cols, 1));
    CHECK(operand(op, "x", o->softmax.x, nx, sizeof(float), false, &x));
    CHECK(operand(op, "y", o->softmax.y, nx, sizeof(float), false, &y));
    ref_softmax(x, y, o->softmax.rows, o->softmax.cols, o->softmax.scale, o->softmax.mask_offset);
cleanup:
    return st;
}

static clinfer_status op_eltwise(const clinfer_op *o) {
    static const char *names[] = {[CLINFER_OP_ADD] = "add",      [CLINFER_OP_MUL] = "mul",
                                  [CLINFER_OP_SCALE] = "scale",  [CLINFER_OP_SILU] = "silu",
                                  [CLINFER_OP_GELU] = "gelu",    [CLINFER_OP_GELU_ERF] = "gelu_erf",
                                  [CLINFER_OP_SWIGLU] = "swiglu"};
    const char *op = names[o->kind];
    clinfer_status st;
    size_t n = o->eltwise.count, b_count = 0;
    void *a, *b = NULL, *y;
    CHECK(operand(op, "a", o->eltwise.a, n, sizeof(float), false, &a));
    CHECK(operand(op, "y", o->eltwise.y, n, sizeof(float), false, &y));
    if (o->kind == CLINFER_OP_ADD || o->kind == CLINFER_OP_MUL) {
        /* b repeats every b_count elements: a bias row added to every row, say */
        b_count = o->eltwise.b_count;
        CHECK(extent(op, &b_count, (long long)b_count, 1, 1));
        CHECK(operand(op, "b", o->eltwise.b, b_count, sizeof(float), false, &b));
    } else if (o->kind == CLINFER_OP_SWIGLU) {
        CHECK(operand(op, "b", o->eltwise.b, n, sizeof(float), false, &b));
    }
    ref_eltwise(o->kind, a, b, y, n, b_count, o->eltwise.scale);
cleanup:
    return st;
}

static clinfer_status op_argmax(const clinfer_op *o) {
    const char *op = "argmax";
    clinfer_status st;
    size_t nx;
    void *x, *ids;
    CHECK(extent(op, &nx, o->argmax.n, o->argmax.d, 1));
    CHECK(operand(op, "x", o->argmax.x, nx, sizeof(float), false, &x));
    CHECK(operand(op, "ids", o->argmax.ids, (size_t)o->argmax.n, sizeof(int32_t), false, &ids));
    ref_argmax(x, ids, o->argmax.n, o->argmax.d);
cleanup:
    return st;
}

static clinfer_status ref_op(void *ctx, const clinfer_op *o) {
    if (!o) return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: op is NULL");
    switch (o->kind) {
    case CLINFER_OP_MATMUL:
        return op_matmul(ctx, o);
    case CLINFER_OP_EMBED:
        return op_embed(o);
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        return op_norm(o);
    case CLINFER_OP_ROPE:
        return op_rope(o);
    case CLINFER_OP_STORE:
        return op_store(o);
    case CLINFER_OP_ATTENTION:
        return op_attention(ctx, o);
    case CLINFER_OP_SOFTMAX:
        return op_softmax(o);
    case CLINFER_OP_ADD:
    case CLINFER_OP_MUL:
    case CLINFER_OP_SCALE:
    case CLINFER_OP_SILU:
    case CLINFER_OP_GELU:
    case CLINFER_OP_GELU_ERF:
    case CLINFER_OP_SWIGLU:
        return op_eltwise(o);
    case CLINFER_OP_ARGMAX:
        return op_argmax(o);
    case CLINFER_OP_COUNT:
        break;
    }
    return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: unknown op kind %d",
                        (int)o->kind);
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

static const clinfer_backend_i reference_interface = {
    .api_version = CLINFER_BACKEND_API,
    .name = ref_name,
    .describe = ref_describe,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_free = ref_buffer_free,
    .buffer_write = ref_buffer_write,
    .buffer_read = ref_buffer_read,
    .weight_create = ref_weight_create,
    .op = ref_op,
    .sync = ref_sync,
    .destroy = ref_destroy,
};

clinfer_status clinfer_backend_reference_create(clinfer_backend **out) {
    if (!out) return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "reference: create: out is NULL");
    clinfer_backend *b = calloc(1, sizeof *b);
    ref_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "reference: create");
    }
    b->i = &reference_interface;
    b->ctx = c;
    *out = b;
    return CLINFER_OK;
}
