/* op_check_operands (backend.h): what makes an op record well formed, checked in one place for
 * every backend, so that a bad record is CLINFER_ERR_INVALID_ARGUMENT with the same message
 * whichever backend it meets, and no kernel reads or writes out of bounds. */
#include <math.h>

#include "backend.h"
#include "error.h"

/* The common head every backend's buffer starts with (backend.h). */
static const clinfer_buffer_head *head(const clinfer_buffer *buf) {
    return (const clinfer_buffer_head *)buf;
}

/* *out = a * b * c for positive a, b, c, failing on a non-positive factor or overflow. */
static clinfer_status extent(const char *op, size_t *out, long long a, long long b, long long c) {
    *out = 0; /* defined on failure too: gcc -O3 cannot tell that err_fail returns non-zero */
    if (a <= 0 || b <= 0 || c <= 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: dimensions %lld x %lld x %lld must be positive", op, a, b, c);
    size_t ab = (size_t)a * (size_t)b;
    if ((size_t)a > SIZE_MAX / (size_t)b || ab > SIZE_MAX / (size_t)c)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: dimensions %lld x %lld x %lld overflow",
                        op, a, b, c);
    *out = ab * (size_t)c;
    return CLINFER_OK;
}

/* Operand r holds count elements of elem bytes in a plain (non-weight) buffer; an absent
 * optional operand passes. */
static clinfer_status operand(const char *op, const char *what, clinfer_ref r, size_t count,
                              size_t elem, bool optional) {
    if (!r.buf)
        return optional
                   ? CLINFER_OK
                   : err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: operand %s is missing", op, what);
    if (head(r.buf)->weight)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: operand %s is a weight, not an activation buffer", op, what);
    size_t cap = head(r.buf)->bytes / elem;
    if (r.offset > cap || count > cap - r.offset)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: %s (offset %zu, %zu elements) is past the end of a buffer of %zu "
                        "elements",
                        op, what, r.offset, count, cap);
    return CLINFER_OK;
}

/* An input that the kernels read while writing an output must not share elements with it. */
static clinfer_status disjoint(const char *op, const char *a_name, clinfer_ref a, size_t a_count,
                               const char *b_name, clinfer_ref b, size_t b_count) {
    if (refs_overlap(a, a_count, b, b_count))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: %s (offset %zu, %zu elements) and %s (offset %zu, %zu elements) "
                        "overlap",
                        op, a_name, a.offset, a_count, b_name, b.offset, b_count);
    return CLINFER_OK;
}

/* w's rows [row0, row0 + m) of k elements; whole: they must be all its rows. */
static clinfer_status weight_operand(const char *op, const clinfer_buffer *w, int row0, int m,
                                     int k, bool whole) {
    if (!w || !head(w)->weight)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: w is %s, not a buffer from weight_create", op,
                        w ? "a plain buffer" : "missing");
    const clinfer_buffer_head *h = head(w);
    if (row0 < 0 || m <= 0 || row0 > h->m - m || h->k != k || (whole && m != h->m))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: rows %d .. %d of %d elements against a weight of %d x %d", op, row0,
                        row0 + m, k, h->m, h->k);
    return CLINFER_OK;
}

/* KV caches hold f32 or f16; *elem receives the element size. */
static clinfer_status cache_type(const char *op, clinfer_dtype type, size_t *elem) {
    *elem = sizeof(float);
    if (type != CLINFER_DT_F32 && type != CLINFER_DT_F16)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: cache type %s (%d) is not F32 or F16",
                        op, dtype_name(type), (int)type);
    *elem = dtype_block_bytes(type);
    return CLINFER_OK;
}

/* Rotation of n tokens from pos0: positions must stay in int range for the kernels. */
static clinfer_status rotation(const char *op, int n_rot, int head_dim, int pos0, int n,
                               float freq_base) {
    if (n_rot <= 0 || n_rot % 2 || n_rot > head_dim || pos0 < 0 || pos0 > INT32_MAX - n ||
        !(freq_base > 0.0f))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: n_rot %d (head_dim %d), pos0 %d, freq_base %g: need an even "
                        "n_rot in (0, head_dim], 0 <= pos0 <= INT32_MAX - n, freq_base > 0",
                        op, n_rot, head_dim, pos0, (double)freq_base);
    return CLINFER_OK;
}

/* A rotation's optional pair factors (f32, n_rot / 2 of them, apart from what the op rotates in
 * place: x, or q and k_src) and magnitude. */
static clinfer_status rotation_factors(const char *op, clinfer_ref factors, int n_rot, float mscale,
                                       const char *x_name, clinfer_ref x, size_t nx, clinfer_ref x2,
                                       size_t nx2) {
    clinfer_status st;
    if (!(mscale >= 0.0f) || !isfinite(mscale))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: mscale %g must be finite and >= 0", op,
                        (double)mscale);
    if (!factors.buf) return CLINFER_OK;
    CHECK(operand(op, "factors", factors, (size_t)n_rot / 2, sizeof(float), false));
    CHECK(disjoint(op, "factors", factors, (size_t)n_rot / 2, x_name, x, nx));
    if (x2.buf) CHECK(disjoint(op, "factors", factors, (size_t)n_rot / 2, "rope.k_src", x2, nx2));
cleanup:
    return st;
}

static clinfer_status check_matmul(const clinfer_op *o) {
    const char *op = "matmul";
    clinfer_status st;
    size_t nx, ny;
    CHECK(weight_operand(op, o->matmul.w, o->matmul.row0, o->matmul.m, o->matmul.k, false));
    CHECK(extent(op, &nx, o->matmul.n, o->matmul.k, 1));
    CHECK(extent(op, &ny, o->matmul.n, o->matmul.m, 1));
    CHECK(operand(op, "x", o->matmul.x, nx, sizeof(float), false));
    CHECK(operand(op, "y", o->matmul.y, ny, sizeof(float), false));
    CHECK(operand(op, "bias", o->matmul.bias, (size_t)o->matmul.m, sizeof(float), true));
    CHECK(disjoint(op, "x", o->matmul.x, nx, "y", o->matmul.y, ny));
    if (o->matmul.x_q8 && o->matmul.k % CLINFER_Q8_ACT_BLOCK != 0)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "matmul: x_q8 needs k a multiple of %d, k is %d", CLINFER_Q8_ACT_BLOCK,
                       o->matmul.k));
cleanup:
    return st;
}

static clinfer_status check_embed(const clinfer_op *o) {
    const char *op = "embed";
    clinfer_status st;
    size_t ny;
    CHECK(weight_operand(op, o->embed.w, 0, o->embed.m, o->embed.k, true));
    CHECK(extent(op, &ny, o->embed.n, o->embed.k, 1));
    CHECK(operand(op, "ids", o->embed.ids, (size_t)o->embed.n, sizeof(int32_t), false));
    CHECK(operand(op, "y", o->embed.y, ny, sizeof(float), false));
    if (!isfinite(o->embed.scale))
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "embed: scale %g is not finite",
                       (double)o->embed.scale));
cleanup:
    return st;
}

static clinfer_status check_norm(const clinfer_op *o) {
    bool layer = o->kind == CLINFER_OP_LAYERNORM;
    const char *op = layer ? "layernorm" : "rmsnorm";
    clinfer_status st;
    size_t nx;
    CHECK(extent(op, &nx, o->norm.n, o->norm.d, 1));
    CHECK(operand(op, "x", o->norm.x, nx, sizeof(float), false));
    CHECK(operand(op, "y", o->norm.y, nx, sizeof(float), false));
    CHECK(operand(op, "w", o->norm.w, (size_t)o->norm.d, sizeof(float), true));
    if (layer) CHECK(operand(op, "b", o->norm.b, (size_t)o->norm.d, sizeof(float), true));
cleanup:
    return st;
}

/* The cache write of a rope: k_dst and v_dst are written while x and v_src are still read. */
static clinfer_status check_rope_kv(const clinfer_op *o, size_t nx) {
    const char *op = "rope";
    const clinfer_buffer *k = o->rope.k_dst.buf, *v = o->rope.v_dst.buf;
    clinfer_status st;
    size_t elem, nkv;
    CHECK(cache_type(op, o->rope.kv_type, &elem));
    if (o->rope.kv_heads <= 0 || o->rope.kv_heads > o->rope.n_heads)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "rope: kv_heads %d must be in 1 .. n_heads %d",
                       o->rope.kv_heads, o->rope.n_heads));
    CHECK(extent(op, &nkv, o->rope.n, o->rope.kv_heads, o->rope.head_dim));
    CHECK(operand(op, "k_dst", o->rope.k_dst, nkv, elem, false));
    CHECK(operand(op, "v_src", o->rope.v_src, nkv, sizeof(float), false));
    CHECK(operand(op, "v_dst", o->rope.v_dst, nkv, elem, false));
    if (k == o->rope.x.buf || k == o->rope.v_src.buf || v == o->rope.x.buf ||
        v == o->rope.v_src.buf || k == v)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "rope: k_dst and v_dst must be buffers of their own, apart from x, "
                       "v_src and each other"));
    CHECK(disjoint(op, "v_src", o->rope.v_src, nkv, "x", o->rope.x, nx));
cleanup:
    return st;
}

static clinfer_status check_rope(const clinfer_op *o) {
    const char *op = "rope";
    clinfer_status st;
    size_t nx;
    CHECK(extent(op, &nx, o->rope.n, o->rope.n_heads, o->rope.head_dim));
    CHECK(
        rotation(op, o->rope.n_rot, o->rope.head_dim, o->rope.pos0, o->rope.n, o->rope.freq_base));
    CHECK(operand(op, "x", o->rope.x, nx, sizeof(float), false));
    CHECK(rotation_factors(op, o->rope.factors, o->rope.n_rot, o->rope.mscale, "x", o->rope.x, nx,
                           (clinfer_ref){0}, 0));
    if (o->rope.k_dst.buf) CHECK(check_rope_kv(o, nx));
cleanup:
    return st;
}

static clinfer_status check_store(const clinfer_op *o) {
    const char *op = "store";
    clinfer_status st;
    size_t elem;
    CHECK(cache_type(op, o->store.dst_type, &elem));
    CHECK(operand(op, "src", o->store.src, o->store.count, sizeof(float), false));
    CHECK(operand(op, "dst", o->store.dst, o->store.count, elem, false));
cleanup:
    return st;
}

/* An attention op's rotation and cache write (backend.h): items read q, k_src and v_src while
 * others write the caches. nq and nkv count the elements of q and of k_src. */
static clinfer_status check_attention_rope(const clinfer_op *o, size_t nq, size_t nkv) {
    const char *op = "attention";
    clinfer_status st;
    clinfer_ref q = o->attention.q, k_src = o->attention.rope.k_src,
                v_src = o->attention.rope.v_src;
    const clinfer_buffer *k = o->attention.k.buf, *v = o->attention.v.buf;
    CHECK(rotation(op, o->attention.rope.n_rot, o->attention.head_dim, o->attention.pos0,
                   o->attention.n, o->attention.rope.freq_base));
    CHECK(operand(op, "rope.k_src", k_src, nkv, sizeof(float), false));
    CHECK(operand(op, "rope.v_src", v_src, nkv, sizeof(float), false));
    CHECK(rotation_factors(op, o->attention.rope.factors, o->attention.rope.n_rot,
                           o->attention.rope.mscale, "q", q, nq, k_src, nkv));
    CHECK(disjoint(op, "rope.k_src", k_src, nkv, "q", q, nq));
    CHECK(disjoint(op, "rope.v_src", v_src, nkv, "q", q, nq));
    CHECK(disjoint(op, "rope.v_src", v_src, nkv, "rope.k_src", k_src, nkv));
    if (k == v || q.buf == k || q.buf == v || k_src.buf == k || k_src.buf == v || v_src.buf == k ||
        v_src.buf == v)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "attention: with rope, the caches must be buffers of their own, apart "
                       "from q, rope.k_src, rope.v_src and each other"));
cleanup:
    return st;
}

static clinfer_status check_attention(const clinfer_op *o) {
    const char *op = "attention";
    clinfer_status st;
    size_t elem, nq, nkv;
    int n = o->attention.n, pos0 = o->attention.pos0;
    CHECK(cache_type(op, o->attention.kv_type, &elem));
    if (o->attention.n_kv_head <= 0 || o->attention.n_head % o->attention.n_kv_head != 0 ||
        pos0 < 0 || (n > 0 && pos0 > INT32_MAX - n))
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "attention: n_head %d, n_kv_head %d, pos0 %d: need n_head a multiple "
                       "of n_kv_head > 0 and 0 <= pos0 <= INT32_MAX - n",
                       o->attention.n_head, o->attention.n_kv_head, pos0));
    if (o->attention.window < 0)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "attention: window %d is negative (0: no window)", o->attention.window));
    if (!(o->attention.softcap >= 0.0f) || isinf(o->attention.softcap))
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "attention: softcap %g is not a finite value >= 0 (0: none)",
                       (double)o->attention.softcap));
    CHECK(extent(op, &nq, n, o->attention.n_head, o->attention.head_dim));
    CHECK(extent(op, &nkv, (long long)pos0 + n, o->attention.n_kv_head, o->attention.head_dim));
    CHECK(operand(op, "q", o->attention.q, nq, sizeof(float), false));
    CHECK(operand(op, "k", o->attention.k, nkv, elem, false));
    CHECK(operand(op, "v", o->attention.v, nkv, elem, false));
    CHECK(operand(op, "out", o->attention.out, nq, sizeof(float), false));
    if (o->attention.out.buf == o->attention.k.buf || o->attention.out.buf == o->attention.v.buf)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "attention: out must not lie in a cache's buffer (the caches are read "
                       "while out is written)"));
    CHECK(
        operand(op, "sinks", o->attention.sinks, (size_t)o->attention.n_head, sizeof(float), true));
    CHECK(disjoint(op, "sinks", o->attention.sinks, (size_t)o->attention.n_head, "out",
                   o->attention.out, nq));
    if (o->attention.rope.n_rot)
        CHECK(check_attention_rope(
            o, nq, nq / (size_t)o->attention.n_head * (size_t)o->attention.n_kv_head));
cleanup:
    return st;
}

static clinfer_status check_eltwise(const clinfer_op *o) {
    const char *op = op_kind_name(o->kind);
    clinfer_status st;
    size_t n = o->eltwise.count;
    CHECK(operand(op, "a", o->eltwise.a, n, sizeof(float), false));
    CHECK(operand(op, "y", o->eltwise.y, n, sizeof(float), false));
    if (o->kind == CLINFER_OP_ADD) {
        /* b repeats every b_count elements: a bias row added to every row, say */
        if (o->eltwise.b_count == 0)
            CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: b_count is 0", op));
        CHECK(operand(op, "b", o->eltwise.b, o->eltwise.b_count, sizeof(float), false));
    } else if (o->kind == CLINFER_OP_SWIGLU || o->kind == CLINFER_OP_GEGLU ||
               o->kind == CLINFER_OP_SWIGLU_OAI) {
        CHECK(operand(op, "b", o->eltwise.b, n, sizeof(float), false));
    } else if (o->kind == CLINFER_OP_SCALE &&
               (!isfinite(o->eltwise.scale) || !(o->eltwise.cap >= 0.0f) ||
                isinf(o->eltwise.cap))) {
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "%s: scale %g, cap %g: need a finite scale and a finite cap >= 0 (0: none)",
                       op, (double)o->eltwise.scale, (double)o->eltwise.cap));
    }
cleanup:
    return st;
}

static clinfer_status check_round_q8(const clinfer_op *o) {
    const char *op = "round_q8";
    clinfer_status st;
    size_t n;
    int block = o->round_q8.block;
    CHECK(extent(op, &n, o->round_q8.n, o->round_q8.k, 1));
    if (block != CLINFER_Q8_ACT_BLOCK && block != CLINFER_Q8_ACT_SUPER)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: block %d is neither %d nor %d", op, block,
                       CLINFER_Q8_ACT_BLOCK, CLINFER_Q8_ACT_SUPER));
    if (o->round_q8.k % block != 0)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: k %d is not a multiple of block %d", op,
                       o->round_q8.k, block));
    CHECK(operand(op, "x", o->round_q8.x, n, sizeof(float), false));
    CHECK(operand(op, "y", o->round_q8.y, n, sizeof(float), false));
    CHECK(disjoint(op, "x", o->round_q8.x, n, "y", o->round_q8.y, n));
cleanup:
    return st;
}

static clinfer_status check_moe_route(const clinfer_op *o) {
    const char *op = "moe_route";
    clinfer_status st;
    size_t nl, ns;
    int e = o->moe_route.n_expert, used = o->moe_route.n_used;
    if (e > CLINFER_MOE_MAX_EXPERTS || used > e ||
        (unsigned)o->moe_route.gating >= CLINFER_MOE_GATING_COUNT || !isfinite(o->moe_route.scale))
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "%s: %d of %d experts (at most %d), gating %d, scale %g", op, used, e,
                       CLINFER_MOE_MAX_EXPERTS, o->moe_route.gating, (double)o->moe_route.scale));
    CHECK(extent(op, &nl, o->moe_route.n, e, 1));
    CHECK(extent(op, &ns, o->moe_route.n, used, 1));
    CHECK(operand(op, "logits", o->moe_route.logits, nl, sizeof(float), false));
    CHECK(operand(op, "ids", o->moe_route.ids, ns, sizeof(int32_t), false));
    CHECK(operand(op, "weights", o->moe_route.weights, ns, sizeof(float), false));
    CHECK(disjoint(op, "logits", o->moe_route.logits, nl, "ids", o->moe_route.ids, ns));
    CHECK(disjoint(op, "logits", o->moe_route.logits, nl, "weights", o->moe_route.weights, ns));
    CHECK(disjoint(op, "ids", o->moe_route.ids, ns, "weights", o->moe_route.weights, ns));
cleanup:
    return st;
}

static clinfer_status check_matmul_id(const clinfer_op *o) {
    const char *op = "matmul_id";
    clinfer_status st;
    size_t nx, ny, ns, rows;
    int used = o->matmul_id.n_used, x_rows = o->matmul_id.x_rows;
    CHECK(extent(op, &rows, o->matmul_id.n_expert, o->matmul_id.m, 1));
    if (rows > INT32_MAX || used > o->matmul_id.n_expert || (x_rows != 1 && x_rows != used))
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                       "%s: %d experts of %d rows, %d used, x_rows %d (1 or n_used)", op,
                       o->matmul_id.n_expert, o->matmul_id.m, used, x_rows));
    CHECK(weight_operand(op, o->matmul_id.w, 0, (int)rows, o->matmul_id.k, false));
    CHECK(extent(op, &ns, o->matmul_id.n, used, 1));
    CHECK(extent(op, &nx, o->matmul_id.n, x_rows, o->matmul_id.k));
    CHECK(extent(op, &ny, ns, o->matmul_id.m, 1));
    CHECK(operand(op, "x", o->matmul_id.x, nx, sizeof(float), false));
    CHECK(operand(op, "ids", o->matmul_id.ids, ns, sizeof(int32_t), false));
    CHECK(operand(op, "y", o->matmul_id.y, ny, sizeof(float), false));
    CHECK(disjoint(op, "x", o->matmul_id.x, nx, "y", o->matmul_id.y, ny));
    CHECK(disjoint(op, "ids", o->matmul_id.ids, ns, "y", o->matmul_id.y, ny));
    CHECK(operand(op, "bias", o->matmul_id.bias, rows, sizeof(float), true));
    CHECK(disjoint(op, "bias", o->matmul_id.bias, rows, "y", o->matmul_id.y, ny));
    if (o->matmul_id.x_q8 && o->matmul_id.k % CLINFER_Q8_ACT_BLOCK != 0)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: x_q8 needs k a multiple of %d, k is %d",
                       op, CLINFER_Q8_ACT_BLOCK, o->matmul_id.k));
cleanup:
    return st;
}

static clinfer_status check_moe_sum(const clinfer_op *o) {
    const char *op = "moe_sum";
    clinfer_status st;
    size_t nx, ns, ny;
    CHECK(extent(op, &ns, o->moe_sum.n, o->moe_sum.n_used, 1));
    CHECK(extent(op, &nx, ns, o->moe_sum.d, 1));
    CHECK(extent(op, &ny, o->moe_sum.n, o->moe_sum.d, 1));
    CHECK(operand(op, "x", o->moe_sum.x, nx, sizeof(float), false));
    CHECK(operand(op, "weights", o->moe_sum.weights, ns, sizeof(float), false));
    CHECK(operand(op, "y", o->moe_sum.y, ny, sizeof(float), false));
    CHECK(disjoint(op, "x", o->moe_sum.x, nx, "y", o->moe_sum.y, ny));
    CHECK(disjoint(op, "weights", o->moe_sum.weights, ns, "y", o->moe_sum.y, ny));
cleanup:
    return st;
}

clinfer_status op_check_operands(const clinfer_op *o) {
    if (!o) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "op is NULL");
    switch (o->kind) {
    case CLINFER_OP_MATMUL:
        return check_matmul(o);
    case CLINFER_OP_EMBED:
        return check_embed(o);
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        return check_norm(o);
    case CLINFER_OP_ROPE:
        return check_rope(o);
    case CLINFER_OP_STORE:
        return check_store(o);
    case CLINFER_OP_ATTENTION:
        return check_attention(o);
    CLINFER_OP_ELTWISE_CASES:
        return check_eltwise(o);
    case CLINFER_OP_ROUND_Q8:
        return check_round_q8(o);
    case CLINFER_OP_MOE_ROUTE:
        return check_moe_route(o);
    case CLINFER_OP_MATMUL_ID:
        return check_matmul_id(o);
    case CLINFER_OP_MOE_SUM:
        return check_moe_sum(o);
    case CLINFER_OP_COUNT:
        break;
    }
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "unknown op kind %d", (int)o->kind);
}

/* bytes at offset inside the plain buffer buf, which the message calls side of what. */
static clinfer_status in_buffer(const char *what, const char *side, const clinfer_buffer *buf,
                                size_t offset, size_t bytes) {
    if (!buf || head(buf)->weight)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s needs a plain %sbuffer, not %s", what,
                        side, buf ? "a weight" : "NULL");
    if (offset > head(buf)->bytes || bytes > head(buf)->bytes - offset)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s of %zu bytes at %soffset %zu is past the end of a buffer of %zu "
                        "bytes",
                        what, bytes, side, offset, head(buf)->bytes);
    return CLINFER_OK;
}

clinfer_status op_check_transfer(const char *what, const clinfer_buffer *buf, size_t offset,
                                 size_t bytes, const void *host) {
    clinfer_status st = in_buffer(what, "", buf, offset, bytes);
    if (st == CLINFER_OK && bytes && !host)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
    return st;
}

clinfer_status op_check_copy(const char *what, const clinfer_buffer *src, size_t src_offset,
                             const clinfer_buffer *dst, size_t dst_offset, size_t bytes) {
    clinfer_status st = in_buffer(what, "source ", src, src_offset, bytes);
    if (st == CLINFER_OK) st = in_buffer(what, "destination ", dst, dst_offset, bytes);
    /* both ranges are inside one buffer here, so the sums cannot wrap */
    if (st == CLINFER_OK && src == dst && src_offset < dst_offset + bytes &&
        dst_offset < src_offset + bytes)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s of %zu bytes from offset %zu to %zu of one buffer: the ranges "
                        "overlap",
                        what, bytes, src_offset, dst_offset);
    return st;
}
