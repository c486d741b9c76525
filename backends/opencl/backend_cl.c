/* The OpenCL backend: context and queue, buffers, op dispatch and the non-matmul ops
 * (cl/norm.cl, rope.cl, attention.cl, softmax.cl, elementwise.cl, argmax.cl). Matmul, embedding
 * and weights live in matmul_cl.c.
 *
 * Every op is validated against its buffers' sizes before it is enqueued, so a bad op record is
 * an error status and never an out-of-bounds kernel. Kernels are enqueued on one in-order queue
 * without waiting; sync is the only clFinish. OpenCL errors pass through as the status; after
 * CL_OUT_OF_RESOURCES or CL_INVALID_COMMAND_QUEUE the context is marked lost and every later call
 * returns CLINFER_ERR_DEVICE_LOST. */
#include "cl_backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "opencl/device.h"
#include "opencl/fault.h"
#include "options.h"
#include "opencl/program.h"

/* Elementwise kernels run in fixed work-groups of this size: PoCL compiles one work-group
 * function per local size, so a fixed size compiles once. Each work-item handles ELT_VEC
 * elements (VEC in cl/elementwise.cl). */
#define ELT_LOCAL 64
#define ELT_VEC 8
/* Attention keeps a head's query and accumulators in private (cpu-rows) or local memory. */
#define MAX_HEAD_DIM 256

typedef enum {
    PROG_NORM,
    PROG_ROPE,
    PROG_ATTN_F32,
    PROG_ATTN_F16,
    PROG_SOFTMAX,
    PROG_ELTWISE,
    PROG_ARGMAX,
    PROG_COUNT
} prog_id;

/* Attention rounds its output as quantize.cl does (round_q8.clh), rotates as rope.cl does
 * (rope.clh), and rmsnorm_rows is round_q8.clh's norm: all need the same correctly rounded
 * division and square root to give the same bits. */
#define EXACT_DIV " -cl-fp32-correctly-rounded-divide-sqrt"

static const struct {
    const char *file;
    const char *options; /* beyond the shared ones */
} programs[PROG_COUNT] = {
    [PROG_NORM] = {"norm.cl", EXACT_DIV},
    [PROG_ROPE] = {"rope.cl", EXACT_DIV},
    [PROG_ATTN_F32] = {"attention.cl", EXACT_DIV},
    [PROG_ATTN_F16] = {"attention.cl", EXACT_DIV " -DKV_F16"},
    [PROG_SOFTMAX] = {"softmax.cl", ""},
    [PROG_ELTWISE] = {"elementwise.cl", ""},
    [PROG_ARGMAX] = {"argmax.cl", ""},
};

typedef enum {
    K_RMSNORM,
    K_LAYERNORM,
    K_ROPE,
    K_ATTN_F32,
    K_ATTN_F16,
    K_ATTN_MERGE,
    K_SOFTMAX,
    K_ADD,
    K_MUL,
    K_SCALE,
    K_SILU,
    K_GELU,
    K_GELU_ERF,
    K_SWIGLU,
    K_STORE_F32,
    K_STORE_F16,
    K_ARGMAX,
    K_COUNT
} kernel_id;

/* per_path: the name gets "_rows" (cpu-rows) or "_wg" (the GPU paths) appended. */
static const struct {
    prog_id prog;
    const char *name;
    bool per_path;
} kernels[K_COUNT] = {
    [K_RMSNORM] = {PROG_NORM, "rmsnorm", true},
    [K_LAYERNORM] = {PROG_NORM, "layernorm", true},
    [K_ROPE] = {PROG_ROPE, "rope", false},
    [K_ATTN_F32] = {PROG_ATTN_F32, "attention", true},
    [K_ATTN_F16] = {PROG_ATTN_F16, "attention", true},
    [K_ATTN_MERGE] = {PROG_ATTN_F32, "attention_merge", false},
    [K_SOFTMAX] = {PROG_SOFTMAX, "softmax", true},
    [K_ADD] = {PROG_ELTWISE, "add", false},
    [K_MUL] = {PROG_ELTWISE, "mul", false},
    [K_SCALE] = {PROG_ELTWISE, "scale", false},
    [K_SILU] = {PROG_ELTWISE, "silu", false},
    [K_GELU] = {PROG_ELTWISE, "gelu", false},
    [K_GELU_ERF] = {PROG_ELTWISE, "gelu_erf", false},
    [K_SWIGLU] = {PROG_ELTWISE, "swiglu", false},
    [K_STORE_F32] = {PROG_ELTWISE, "store_f32", false},
    [K_STORE_F16] = {PROG_ELTWISE, "store_f16", false},
    [K_ARGMAX] = {PROG_ARGMAX, "argmax", true},
};

struct cl_ops_state {
    cl_program programs[PROG_COUNT];
    cl_kernel kernels[K_COUNT];
    char kernel_names[K_COUNT][32];
    bool work_group_per_row; /* the GPU paths: one work-group of wg items per row */
    size_t wg;
    cl_mem scratch; /* attention's per-chunk partial results */
    size_t scratch_bytes;
};

/* ---- buffers --------------------------------------------------------------------------- */

static clinfer_status cl_buffer_alloc(void *ctx, size_t bytes, clinfer_buffer **out) {
    cl_backend_ctx *b = ctx;
    clinfer_buffer *buf = NULL;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    *out = NULL;
    if (bytes == 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: buffer of 0 bytes requested");
    if (bytes > b->info.max_alloc)
        return clinfer_fail(CL_INVALID_BUFFER_SIZE,
                            "OpenCL: buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                            "(%llu bytes) of %s",
                            bytes, (unsigned long long)b->info.max_alloc, b->info.name);
    buf = calloc(1, sizeof *buf);
    if (!buf) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: buffer record");
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS)
        buf->mem = clCreateBuffer(b->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CHECK(cl_check(b, err, "clCreateBuffer(%zu bytes)", bytes));
    buf->bytes = bytes;
    *out = buf;
    buf = NULL;
cleanup:
    free(buf);
    return st;
}

static void cl_buffer_free(void *ctx, clinfer_buffer *buf) {
    if (!buf) return;
    cl_matmul_forget(ctx); /* a new buffer may reuse the handle */
    if (buf->weight) cl_weight_free(buf->weight);
    if (buf->mem) clReleaseMemObject(buf->mem);
    free(buf);
}

/* A host transfer of bytes at offset must stay inside a plain (non-weight) buffer. */
static clinfer_status check_transfer(const char *what, const clinfer_buffer *buf, size_t offset,
                                     size_t bytes, const void *host) {
    if (!buf || !buf->mem || buf->weight || !host)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL: %s needs a plain buffer and a host pointer", what);
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL: %s of %zu bytes at offset %zu is past the end of a buffer of "
                            "%zu bytes",
                            what, bytes, offset, buf->bytes);
    return CLINFER_OK;
}

static clinfer_status cl_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      const void *src) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = check_transfer("buffer write", buf, offset, bytes, src);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_matmul_forget(b);
    return cl_check(
        b, clEnqueueWriteBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL),
        "clEnqueueWriteBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                     void *dst) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = check_transfer("buffer read", buf, offset, bytes, dst);
    if (st != CLINFER_OK || bytes == 0) return st;
    return cl_check(
        b, clEnqueueReadBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL),
        "clEnqueueReadBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_weight_create_i(void *ctx, clinfer_dtype type, int m, int k,
                                         const void *data, clinfer_buffer **out) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    st = cl_weight_create(b, type, m, k, data, out);
    cl_note_lost(b, st);
    return st;
}

/* ---- argument checks ------------------------------------------------------------------- */

/* An operand of an op: count elements of elem bytes from ref.offset must lie inside a plain
 * buffer. */
clinfer_status cl_check_ref(const char *op, const char *name, clinfer_ref ref, size_t count,
                            size_t elem) {
    if (!ref.buf)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL %s: operand %s is missing", op,
                            name);
    if (!ref.buf->mem || ref.buf->weight)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL %s: operand %s is a weight, not an activation buffer", op,
                            name);
    size_t capacity = ref.buf->bytes / elem;
    if (ref.offset > capacity || count > capacity - ref.offset)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL %s: operand %s needs elements [%zu, %zu + %zu) but its buffer "
                            "holds %zu",
                            op, name, ref.offset, ref.offset, count, capacity);
    return CLINFER_OK;
}

static clinfer_status check_optional_ref(const char *op, const char *name, clinfer_ref ref,
                                         size_t count, size_t elem) {
    return ref.buf ? cl_check_ref(op, name, ref, count, elem) : CLINFER_OK;
}

/* Shape dimensions are positive; their product must fit size_t. */
static clinfer_status check_dims(const char *op, size_t *product, int n_dims, ...) {
    va_list ap;
    va_start(ap, n_dims);
    size_t p = 1;
    clinfer_status st = CLINFER_OK;
    for (int i = 0; i < n_dims && st == CLINFER_OK; i++) {
        int d = va_arg(ap, int);
        if (d <= 0 || __builtin_mul_overflow(p, (size_t)d, &p))
            st = clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                              "OpenCL %s: dimension %d is %d (must be positive, product must fit)",
                              op, i, d);
    }
    va_end(ap);
    *product = p;
    return st;
}

/* ---- launches -------------------------------------------------------------------------- */

static clinfer_status launch(cl_backend_ctx *b, kernel_id id, size_t n_args, const cl_arg *args,
                             cl_uint dims, const size_t *global, const size_t *local) {
    return cl_launch(b, b->ops->kernels[id], b->ops->kernel_names[id], args, n_args, dims, global,
                     local);
}

static size_t round_up(size_t x, size_t to) {
    return (x + to - 1) / to * to;
}

/* Global size of the element-wise kernels: one work-item per ELT_VEC elements (cl/elementwise.cl),
 * rounded up to the fixed local size. */
static size_t elementwise_global(size_t count) {
    return round_up((count + ELT_VEC - 1) / ELT_VEC, ELT_LOCAL);
}

/* One row per work-item (cpu-rows) or per work-group of wg items (GPU paths). */
static clinfer_status launch_rows(cl_backend_ctx *b, kernel_id id, size_t n_args,
                                  const cl_arg *args, size_t rows) {
    size_t local = b->ops->work_group_per_row ? b->ops->wg : 1;
    size_t global = rows * local;
    if (!b->ops->work_group_per_row) { /* several rows per work-group where there are many */
        local = rows >= 4 * b->info.compute_units ? 4 : 1;
        global = round_up(rows, local);
    }
    return launch(b, id, n_args, args, 1, &global, &local);
}

/* ---- ops ------------------------------------------------------------------------------- */

clinfer_status cl_check_norm(const clinfer_op *op) {
    bool layer = op->kind == CLINFER_OP_LAYERNORM;
    const char *name = layer ? "layernorm" : "rmsnorm";
    size_t total;
    clinfer_status st;
    CHECK(check_dims(name, &total, 2, op->norm.n, op->norm.d));
    CHECK(cl_check_ref(name, "x", op->norm.x, total, sizeof(float)));
    CHECK(cl_check_ref(name, "y", op->norm.y, total, sizeof(float)));
    CHECK(check_optional_ref(name, "w", op->norm.w, (size_t)op->norm.d, sizeof(float)));
    if (layer) CHECK(check_optional_ref(name, "b", op->norm.b, (size_t)op->norm.d, sizeof(float)));
cleanup:
    return st;
}

static clinfer_status op_norm(cl_backend_ctx *b, const clinfer_op *op) {
    bool layer = op->kind == CLINFER_OP_LAYERNORM;
    clinfer_status st;
    CHECK(cl_check_norm(op));
    /* An absent operand binds x's buffer, which the kernel then never reads. */
    cl_mem w = op->norm.w.buf ? op->norm.w.buf->mem : op->norm.x.buf->mem;
    cl_mem bias = layer && op->norm.b.buf ? op->norm.b.buf->mem : op->norm.x.buf->mem;
    cl_ulong x_off = op->norm.x.offset, w_off = op->norm.w.offset, b_off = op->norm.b.offset,
             y_off = op->norm.y.offset;
    cl_int has_w = op->norm.w.buf != NULL, has_b = op->norm.b.buf != NULL;
    if (cl_round_output(op)) {
        CHECK(cl_rounding_op(b, op));
    } else if (layer) {
        cl_arg args[] = {CL_ARG(op->norm.x.buf->mem),
                         CL_ARG(x_off),
                         CL_ARG(w),
                         CL_ARG(w_off),
                         CL_ARG(has_w),
                         CL_ARG(bias),
                         CL_ARG(b_off),
                         CL_ARG(has_b),
                         CL_ARG(op->norm.y.buf->mem),
                         CL_ARG(y_off),
                         CL_ARG(op->norm.n),
                         CL_ARG(op->norm.d),
                         CL_ARG(op->norm.eps)};
        CHECK(launch_rows(b, K_LAYERNORM, sizeof args / sizeof *args, args, (size_t)op->norm.n));
    } else {
        cl_arg args[] = {CL_ARG(op->norm.x.buf->mem),
                         CL_ARG(x_off),
                         CL_ARG(w),
                         CL_ARG(w_off),
                         CL_ARG(has_w),
                         CL_ARG(op->norm.y.buf->mem),
                         CL_ARG(y_off),
                         CL_ARG(op->norm.n),
                         CL_ARG(op->norm.d),
                         CL_ARG(op->norm.eps)};
        CHECK(launch_rows(b, K_RMSNORM, sizeof args / sizeof *args, args, (size_t)op->norm.n));
    }
cleanup:
    return st;
}

/* The optional cache write of a rope (backend.h): key heads, cache type, buffers apart, sizes. */
static clinfer_status check_rope_kv(const clinfer_op *op, size_t x_total) {
    const clinfer_buffer *k = op->rope.k_dst.buf, *v = op->rope.v_dst.buf;
    clinfer_ref x = op->rope.x, v_src = op->rope.v_src;
    bool f16 = op->rope.kv_type == CLINFER_DT_F16;
    size_t kv_total, elem = f16 ? sizeof(uint16_t) : sizeof(float);
    clinfer_status st = CLINFER_OK;
    if (!f16 && op->rope.kv_type != CLINFER_DT_F32)
        CHECK(clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                           "OpenCL rope: KV cache type %s (want f32 or f16)",
                           clinfer_dtype_name(op->rope.kv_type)));
    if (op->rope.kv_heads > op->rope.n_heads)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL rope: kv_heads %d is more than n_heads %d", op->rope.kv_heads,
                           op->rope.n_heads));
    CHECK(check_dims("rope", &kv_total, 3, op->rope.n, op->rope.kv_heads, op->rope.head_dim));
    CHECK(cl_check_ref("rope", "k_dst", op->rope.k_dst, kv_total, elem));
    CHECK(cl_check_ref("rope", "v_src", v_src, kv_total, sizeof(float)));
    CHECK(cl_check_ref("rope", "v_dst", op->rope.v_dst, kv_total, elem));
    /* Work-items write the caches while others still read x and v_src. */
    if (k == x.buf || k == v_src.buf || v == x.buf || v == v_src.buf || k == v)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL rope: k_dst and v_dst must be buffers of their own, apart from "
                           "x, v_src and each other"));
    if (v_src.buf == x.buf && v_src.offset < x.offset + x_total &&
        x.offset < v_src.offset + kv_total)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL rope: v_src [%zu, +%zu) overlaps x [%zu, +%zu)", v_src.offset,
                           kv_total, x.offset, x_total));
cleanup:
    return st;
}

static clinfer_status op_rope(cl_backend_ctx *b, const clinfer_op *op) {
    size_t total;
    clinfer_status st;
    bool kv = op->rope.k_dst.buf != NULL;
    CHECK(check_dims("rope", &total, 3, op->rope.n, op->rope.n_heads, op->rope.head_dim));
    CHECK(cl_check_ref("rope", "x", op->rope.x, total, sizeof(float)));
    if (op->rope.n_rot <= 0 || op->rope.n_rot % 2 || op->rope.n_rot > op->rope.head_dim ||
        op->rope.pos0 < 0 || op->rope.pos0 > INT32_MAX - op->rope.n)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL rope: n_rot %d must be even and in (0, head_dim %d], pos0 %d "
                           "must be >= 0",
                           op->rope.n_rot, op->rope.head_dim, op->rope.pos0));
    if (kv) CHECK(check_rope_kv(op, total));
    /* Without a cache write kv_heads 0 makes the kernel skip it; x's buffer fills the slots. */
    cl_mem x = op->rope.x.buf->mem;
    cl_mem k_dst = kv ? op->rope.k_dst.buf->mem : x, v_src = kv ? op->rope.v_src.buf->mem : x,
           v_dst = kv ? op->rope.v_dst.buf->mem : x;
    cl_ulong x_off = op->rope.x.offset, k_off = op->rope.k_dst.offset,
             v_src_off = op->rope.v_src.offset, v_dst_off = op->rope.v_dst.offset;
    cl_int neox = op->rope.neox, kv_heads = kv ? op->rope.kv_heads : 0,
           kv_f16 = op->rope.kv_type == CLINFER_DT_F16;
    cl_arg args[] = {CL_ARG(x),
                     CL_ARG(x_off),
                     CL_ARG(op->rope.n),
                     CL_ARG(op->rope.n_heads),
                     CL_ARG(op->rope.head_dim),
                     CL_ARG(op->rope.n_rot),
                     CL_ARG(op->rope.pos0),
                     CL_ARG(op->rope.freq_base),
                     CL_ARG(op->rope.freq_scale),
                     CL_ARG(neox),
                     CL_ARG(k_dst),
                     CL_ARG(k_off),
                     CL_ARG(v_src),
                     CL_ARG(v_src_off),
                     CL_ARG(v_dst),
                     CL_ARG(v_dst_off),
                     CL_ARG(kv_heads),
                     CL_ARG(kv_f16)};
    size_t local = ELT_LOCAL;
    size_t global = round_up((size_t)op->rope.n * (size_t)(op->rope.n_rot / 2), local);
    CHECK(launch(b, K_ROPE, sizeof args / sizeof *args, args, 1, &global, &local));
cleanup:
    return st;
}

static clinfer_status op_store(cl_backend_ctx *b, const clinfer_op *op) {
    size_t count = op->store.count;
    clinfer_status st = CLINFER_OK;
    bool f16 = op->store.dst_type == CLINFER_DT_F16;
    if (!f16 && op->store.dst_type != CLINFER_DT_F32)
        CHECK(clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                           "OpenCL store: destination type %s (want f32 or f16)",
                           clinfer_dtype_name(op->store.dst_type)));
    CHECK(cl_check_ref("store", "src", op->store.src, count, sizeof(float)));
    CHECK(
        cl_check_ref("store", "dst", op->store.dst, count, f16 ? sizeof(uint16_t) : sizeof(float)));
    if (count == 0) goto cleanup;
    cl_ulong src_off = op->store.src.offset, dst_off = op->store.dst.offset, n = count;
    cl_arg args[] = {CL_ARG(op->store.src.buf->mem), CL_ARG(src_off),
                     CL_ARG(op->store.dst.buf->mem), CL_ARG(dst_off), CL_ARG(n)};
    size_t local = ELT_LOCAL, global = elementwise_global(count);
    CHECK(launch(b, f16 ? K_STORE_F16 : K_STORE_F32, 5, args, 1, &global, &local));
cleanup:
    return st;
}

/* Grows the scratch buffer to at least bytes. Kernels still queued on the old one keep it
 * alive: OpenCL frees a released buffer only after the commands using it. */
static clinfer_status ensure_scratch(cl_backend_ctx *b, size_t bytes) {
    struct cl_ops_state *ops = b->ops;
    if (ops->scratch_bytes >= bytes) return CLINFER_OK;
    if (ops->scratch) clReleaseMemObject(ops->scratch);
    ops->scratch = NULL;
    ops->scratch_bytes = 0;
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS)
        ops->scratch = clCreateBuffer(b->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS) ops->scratch_bytes = bytes;
    return cl_check(b, err, "clCreateBuffer(attention scratch, %zu bytes)", bytes);
}

clinfer_status cl_attention_scratch(cl_backend_ctx *b, size_t bytes, cl_mem *part) {
    clinfer_status st = ensure_scratch(b, bytes);
    *part = b->ops->scratch;
    return st;
}

/* Attention splits the positions into chunks so that decode (n_head x 1 rows) still gives every
 * compute unit several work-items (cpu-rows) or work-groups (GPU paths); attention_merge then
 * combines the chunks' partial results. */
void cl_attention_chunks(const cl_backend_ctx *b, const clinfer_op *op, size_t *chunk,
                         size_t *n_chunks) {
    bool groups = b->ops->work_group_per_row;
    size_t rows = (size_t)op->attention.n_head * (size_t)op->attention.n;
    size_t positions = (size_t)op->attention.pos0 + (size_t)op->attention.n;
    size_t units = b->info.compute_units ? b->info.compute_units : 1;
    size_t target = units * (groups ? 4 : 16), min_chunk = groups ? b->ops->wg : 64;
    size_t want = rows >= target ? 1 : (target + rows - 1) / rows;
    *chunk = (positions + want - 1) / want;
    if (*chunk < min_chunk) *chunk = min_chunk;
    *n_chunks = (positions + *chunk - 1) / *chunk;
}

/* The attention kernel takes args, then chunk and part, then tail; the merge takes the rounding
 * arguments q8 (xq, xd, xf, want_f, round_q8). */
static clinfer_status attention_launch(cl_backend_ctx *b, kernel_id kernel, const cl_arg *args,
                                       size_t n_args, const cl_arg *tail, size_t n_tail,
                                       const cl_arg q8[5], const clinfer_op *op) {
    bool groups = b->ops->work_group_per_row;
    int n = op->attention.n, n_head = op->attention.n_head, head_dim = op->attention.head_dim;
    size_t rows = (size_t)n_head * (size_t)n, chunk, n_chunks;
    cl_attention_chunks(b, op, &chunk, &n_chunks);
    clinfer_status st = CLINFER_OK;
    cl_int chunk_arg = (cl_int)chunk;
    cl_mem part = op->attention.out.buf->mem; /* not read when there is one chunk */
    if (n_chunks > 1)
        CHECK(cl_attention_scratch(b, rows * n_chunks * ((size_t)head_dim + 2) * sizeof(float),
                                   &part));
    cl_arg all[32];
    memcpy(all, args, n_args * sizeof *args);
    all[n_args] = CL_ARG(chunk_arg);
    all[n_args + 1] = CL_ARG(part);
    memcpy(all + n_args + 2, tail, n_tail * sizeof *tail);
    size_t local[3] = {groups ? b->ops->wg : 1, 1, 1};
    size_t global[3] = {(size_t)n_head * local[0], (size_t)n, n_chunks};
    CHECK(launch(b, kernel, n_args + 2 + n_tail, all, 3, global, local));
    if (n_chunks > 1) {
        cl_int chunks_arg = (cl_int)n_chunks;
        cl_ulong o_off = op->attention.out.offset;
        cl_arg merge[] = {CL_ARG(part),
                          CL_ARG(chunks_arg),
                          CL_ARG(op->attention.out.buf->mem),
                          CL_ARG(o_off),
                          CL_ARG(op->attention.n),
                          CL_ARG(op->attention.n_head),
                          CL_ARG(op->attention.head_dim),
                          q8[0],
                          q8[1],
                          q8[2],
                          q8[3],
                          q8[4]};
        size_t merge_local[2] = {1, 1}, merge_global[2] = {(size_t)n_head, (size_t)n};
        CHECK(launch(b, K_ATTN_MERGE, sizeof merge / sizeof *merge, merge, 2, merge_global,
                     merge_local));
    }
cleanup:
    return st;
}

static bool overlap(clinfer_ref a, size_t a_count, clinfer_ref b, size_t b_count) {
    return a.buf == b.buf && a.offset < b.offset + b_count && b.offset < a.offset + a_count;
}

/* The rotation and cache write of an attention op (backend.h): rotation sizes, the sources'
 * extents, and buffers apart as the kernels need them (items read q, k_src and v_src while one
 * writes the caches). */
static clinfer_status check_attention_rope(const clinfer_op *op, size_t q_total) {
    const char *name = "attention";
    int n_rot = op->attention.rope.n_rot;
    clinfer_ref q = op->attention.q, k_src = op->attention.rope.k_src,
                v_src = op->attention.rope.v_src;
    const clinfer_buffer *k = op->attention.k.buf, *v = op->attention.v.buf;
    size_t kv_total = q_total / (size_t)op->attention.n_head * (size_t)op->attention.n_kv_head;
    clinfer_status st = CLINFER_OK;
    if (n_rot <= 0 || n_rot % 2 || n_rot > op->attention.head_dim)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL attention: rope.n_rot %d must be even and in (0, head_dim %d]",
                           n_rot, op->attention.head_dim));
    CHECK(cl_check_ref(name, "rope.k_src", k_src, kv_total, sizeof(float)));
    CHECK(cl_check_ref(name, "rope.v_src", v_src, kv_total, sizeof(float)));
    if (overlap(k_src, kv_total, q, q_total) || overlap(v_src, kv_total, q, q_total) ||
        overlap(v_src, kv_total, k_src, kv_total))
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL attention: q, rope.k_src and rope.v_src must not overlap"));
    if (k == v || q.buf == k || q.buf == v || k_src.buf == k || k_src.buf == v || v_src.buf == k ||
        v_src.buf == v)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL attention: with rope, the caches must be buffers of their own, "
                           "apart from q, rope.k_src, rope.v_src and each other"));
cleanup:
    return st;
}

/* An attention op's rotation and cache write as the rope launches it stands for, where the
 * attention kernel does not do them itself: in place, then the caller attends over q. One launch
 * when the keys follow the queries of a single token, as the executor lays them out. */
static clinfer_status attention_rope_launches(cl_backend_ctx *b, const clinfer_op *op,
                                              size_t q_total) {
    clinfer_ref q = op->attention.q, k_src = op->attention.rope.k_src;
    clinfer_op keys = clinfer_attention_keys_rope(op);
    clinfer_op queries = keys;
    queries.rope.x = q;
    queries.rope.n_heads = op->attention.n_head;
    queries.rope.k_dst = (clinfer_ref){0};
    if (op->attention.n == 1 && k_src.buf == q.buf && k_src.offset == q.offset + q_total) {
        keys.rope.x = q;
        keys.rope.n_heads += op->attention.n_head;
        return op_rope(b, &keys);
    }
    clinfer_status st = op_rope(b, &queries);
    return st == CLINFER_OK ? op_rope(b, &keys) : st;
}

clinfer_status cl_check_attention(const clinfer_op *op, size_t *q_total) {
    const char *name = "attention";
    int n = op->attention.n, n_head = op->attention.n_head, n_kv = op->attention.n_kv_head;
    int head_dim = op->attention.head_dim, pos0 = op->attention.pos0;
    bool f16 = op->attention.kv_type == CLINFER_DT_F16;
    size_t kv_total;
    clinfer_status st = CLINFER_OK;
    if (!f16 && op->attention.kv_type != CLINFER_DT_F32)
        CHECK(clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                           "OpenCL attention: KV cache type %s (want f32 or f16)",
                           clinfer_dtype_name(op->attention.kv_type)));
    CHECK(check_dims(name, q_total, 3, n, n_head, head_dim));
    if (pos0 < 0 || pos0 > INT32_MAX - n || n_kv <= 0 || n_head % n_kv)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL attention: pos0 %d must be >= 0 and n_kv_head %d must divide "
                           "n_head %d",
                           pos0, n_kv, n_head));
    if (head_dim % 8 || head_dim > MAX_HEAD_DIM)
        CHECK(clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                           "OpenCL attention: head_dim %d must be a multiple of 8 and at most %d",
                           head_dim, MAX_HEAD_DIM));
    CHECK(check_dims(name, &kv_total, 3, pos0 + n, n_kv, head_dim));
    size_t kv_elem = f16 ? sizeof(uint16_t) : sizeof(float);
    CHECK(cl_check_ref(name, "q", op->attention.q, *q_total, sizeof(float)));
    CHECK(cl_check_ref(name, "k", op->attention.k, kv_total, kv_elem));
    CHECK(cl_check_ref(name, "v", op->attention.v, kv_total, kv_elem));
    CHECK(cl_check_ref(name, "out", op->attention.out, *q_total, sizeof(float)));
    if (op->attention.out.buf == op->attention.k.buf ||
        op->attention.out.buf == op->attention.v.buf)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL attention: out must not lie in a cache's buffer (the kernels "
                           "read the caches while writing out)"));
    if (op->attention.rope.n_rot != 0) CHECK(check_attention_rope(op, *q_total));
cleanup:
    return st;
}

static clinfer_status op_attention(cl_backend_ctx *b, const clinfer_op *op) {
    int n = op->attention.n, head_dim = op->attention.head_dim;
    bool f16 = op->attention.kv_type == CLINFER_DT_F16, rows = !b->ops->work_group_per_row;
    size_t q_total;
    clinfer_status st = CLINFER_OK;
    CHECK(cl_check_attention(op, &q_total));
    bool rope = op->attention.rope.n_rot != 0, rope_in_kernel = rope && rows && n == 1;
    if (rope && !rope_in_kernel) CHECK(attention_rope_launches(b, op, q_total));
    /* Unused operands bind out's buffer, which the kernels then never touch through them. */
    cl_mem out = op->attention.out.buf->mem;
    cl_ulong q_off = op->attention.q.offset, k_off = op->attention.k.offset,
             v_off = op->attention.v.offset, o_off = op->attention.out.offset;
    cl_arg args[] = {CL_ARG(op->attention.q.buf->mem),
                     CL_ARG(q_off),
                     CL_ARG(op->attention.k.buf->mem),
                     CL_ARG(k_off),
                     CL_ARG(op->attention.v.buf->mem),
                     CL_ARG(v_off),
                     CL_ARG(out),
                     CL_ARG(o_off),
                     CL_ARG(op->attention.n),
                     CL_ARG(op->attention.n_head),
                     CL_ARG(op->attention.n_kv_head),
                     CL_ARG(op->attention.head_dim),
                     CL_ARG(op->attention.pos0),
                     CL_ARG(op->attention.scale)};
    cl_mem k_src = rope_in_kernel ? op->attention.rope.k_src.buf->mem : out,
           v_src = rope_in_kernel ? op->attention.rope.v_src.buf->mem : out;
    cl_ulong k_src_off = rope_in_kernel ? op->attention.rope.k_src.offset : 0,
             v_src_off = rope_in_kernel ? op->attention.rope.v_src.offset : 0;
    cl_int n_rot = rope_in_kernel ? op->attention.rope.n_rot : 0, neox = op->attention.rope.neox;
    /* Rounding out for the next matmul needs whole blocks per head and is done where the
     * cpu-rows kernels write out; elsewhere that matmul rounds it itself. */
    cl_int round_q8 = rows && op->attention.out_q8 && head_dim % CLINFER_Q8_ACT_BLOCK == 0,
           want_f = 0;
    cl_mem q8_mem[3] = {out, out, out};
    if (round_q8) CHECK(cl_act_q8_buffers(b, q_total, q8_mem, &want_f));
    cl_arg tail[] = {CL_ARG(k_src),
                     CL_ARG(k_src_off),
                     CL_ARG(v_src),
                     CL_ARG(v_src_off),
                     CL_ARG(n_rot),
                     CL_ARG(op->attention.rope.freq_base),
                     CL_ARG(op->attention.rope.freq_scale),
                     CL_ARG(neox),
                     CL_ARG(q8_mem[0]),
                     CL_ARG(q8_mem[1]),
                     CL_ARG(q8_mem[2]),
                     CL_ARG(want_f),
                     CL_ARG(round_q8)};
    size_t n_tail = sizeof tail / sizeof *tail;
    CHECK(attention_launch(b, f16 ? K_ATTN_F16 : K_ATTN_F32, args, sizeof args / sizeof *args, tail,
                           rows ? n_tail : 0, tail + n_tail - 5, op));
    if (round_q8) cl_act_q8_made(b, op->attention.out, q_total, want_f);
cleanup:
    return st;
}

static clinfer_status op_softmax(cl_backend_ctx *b, const clinfer_op *op) {
    size_t total;
    clinfer_status st;
    CHECK(check_dims("softmax", &total, 2, op->softmax.rows, op->softmax.cols));
    CHECK(cl_check_ref("softmax", "x", op->softmax.x, total, sizeof(float)));
    CHECK(cl_check_ref("softmax", "y", op->softmax.y, total, sizeof(float)));
    cl_ulong x_off = op->softmax.x.offset, y_off = op->softmax.y.offset;
    cl_arg args[] = {CL_ARG(op->softmax.x.buf->mem), CL_ARG(x_off),
                     CL_ARG(op->softmax.y.buf->mem), CL_ARG(y_off),
                     CL_ARG(op->softmax.rows),       CL_ARG(op->softmax.cols),
                     CL_ARG(op->softmax.scale),      CL_ARG(op->softmax.mask_offset)};
    CHECK(launch_rows(b, K_SOFTMAX, sizeof args / sizeof *args, args, (size_t)op->softmax.rows));
cleanup:
    return st;
}

static clinfer_status op_argmax(cl_backend_ctx *b, const clinfer_op *op) {
    size_t total;
    clinfer_status st;
    CHECK(check_dims("argmax", &total, 2, op->argmax.n, op->argmax.d));
    CHECK(cl_check_ref("argmax", "x", op->argmax.x, total, sizeof(float)));
    CHECK(cl_check_ref("argmax", "ids", op->argmax.ids, (size_t)op->argmax.n, sizeof(int32_t)));
    cl_ulong x_off = op->argmax.x.offset, ids_off = op->argmax.ids.offset;
    cl_arg args[] = {CL_ARG(op->argmax.x.buf->mem),
                     CL_ARG(x_off),
                     CL_ARG(op->argmax.ids.buf->mem),
                     CL_ARG(ids_off),
                     CL_ARG(op->argmax.n),
                     CL_ARG(op->argmax.d)};
    CHECK(launch_rows(b, K_ARGMAX, sizeof args / sizeof *args, args, (size_t)op->argmax.n));
cleanup:
    return st;
}

/* add, mul, scale, silu, gelu, gelu_erf, swiglu: a and y hold count elements; b holds b_count
 * (add, mul: broadcast) or count (swiglu). */
static const struct {
    kernel_id kernel;
    const char *name;
    int operands; /* 1: a only, 2: a and b broadcast, 3: a and b of equal size */
} eltwise_table[] = {
    [CLINFER_OP_ADD] = {K_ADD, "add", 2},
    [CLINFER_OP_MUL] = {K_MUL, "mul", 2},
    [CLINFER_OP_SCALE] = {K_SCALE, "scale", 1},
    [CLINFER_OP_SILU] = {K_SILU, "silu", 1},
    [CLINFER_OP_GELU] = {K_GELU, "gelu", 1},
    [CLINFER_OP_GELU_ERF] = {K_GELU_ERF, "gelu_erf", 1},
    [CLINFER_OP_SWIGLU] = {K_SWIGLU, "swiglu", 3},
};

clinfer_status cl_check_eltwise(const clinfer_op *op) {
    const char *name = eltwise_table[op->kind].name;
    size_t count = op->eltwise.count;
    size_t b_count = eltwise_table[op->kind].operands == 3 ? count : op->eltwise.b_count;
    clinfer_status st = CLINFER_OK;
    CHECK(cl_check_ref(name, "a", op->eltwise.a, count, sizeof(float)));
    CHECK(cl_check_ref(name, "y", op->eltwise.y, count, sizeof(float)));
    if (eltwise_table[op->kind].operands > 1) {
        if (b_count == 0 && count > 0)
            CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL %s: b_count is 0", name));
        CHECK(cl_check_ref(name, "b", op->eltwise.b, b_count, sizeof(float)));
    }
cleanup:
    return st;
}

static clinfer_status op_eltwise(cl_backend_ctx *b, const clinfer_op *op) {
    size_t count = op->eltwise.count;
    size_t b_count = eltwise_table[op->kind].operands == 3 ? count : op->eltwise.b_count;
    clinfer_status st = CLINFER_OK;
    CHECK(cl_check_eltwise(op));
    if (count == 0) goto cleanup;
    if (cl_round_output(op)) return cl_rounding_op(b, op);
    cl_mem a = op->eltwise.a.buf->mem, y = op->eltwise.y.buf->mem;
    cl_ulong a_off = op->eltwise.a.offset, b_off = op->eltwise.b.offset,
             y_off = op->eltwise.y.offset, n = count, nb = b_count;
    size_t local = ELT_LOCAL, global = elementwise_global(count);
    kernel_id k = eltwise_table[op->kind].kernel;
    if (eltwise_table[op->kind].operands == 1) {
        /* Only scale reads the last argument. */
        cl_arg args[] = {CL_ARG(a),     CL_ARG(a_off), CL_ARG(y),
                         CL_ARG(y_off), CL_ARG(n),     CL_ARG(op->eltwise.scale)};
        CHECK(launch(b, k, 6, args, 1, &global, &local));
    } else if (eltwise_table[op->kind].operands == 2) {
        cl_arg args[] = {CL_ARG(a),     CL_ARG(a_off), CL_ARG(op->eltwise.b.buf->mem),
                         CL_ARG(b_off), CL_ARG(nb),    CL_ARG(y),
                         CL_ARG(y_off), CL_ARG(n)};
        CHECK(launch(b, k, 8, args, 1, &global, &local));
    } else {
        cl_arg args[] = {CL_ARG(a),     CL_ARG(a_off), CL_ARG(op->eltwise.b.buf->mem),
                         CL_ARG(b_off), CL_ARG(y),     CL_ARG(y_off),
                         CL_ARG(n)};
        CHECK(launch(b, k, 7, args, 1, &global, &local));
    }
cleanup:
    return st;
}

static clinfer_status cl_op(void *ctx, const clinfer_op *op) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    if (!op) return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: NULL op");
    if (op->kind != CLINFER_OP_MATMUL) cl_matmul_forget(b); /* it may write a matmul's x */
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        st = cl_matmul(b, op);
        break;
    case CLINFER_OP_EMBED:
        st = cl_embed(b, op);
        break;
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        st = op_norm(b, op);
        break;
    case CLINFER_OP_ROPE:
        st = op_rope(b, op);
        break;
    case CLINFER_OP_STORE:
        st = op_store(b, op);
        break;
    case CLINFER_OP_ATTENTION:
        st = op_attention(b, op);
        break;
    case CLINFER_OP_SOFTMAX:
        st = op_softmax(b, op);
        break;
    case CLINFER_OP_ADD:
    case CLINFER_OP_MUL:
    case CLINFER_OP_SCALE:
    case CLINFER_OP_SILU:
    case CLINFER_OP_GELU:
    case CLINFER_OP_GELU_ERF:
    case CLINFER_OP_SWIGLU:
        st = op_eltwise(b, op);
        break;
    case CLINFER_OP_ARGMAX:
        st = op_argmax(b, op);
        break;
    default:
        st =
            clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: unknown op kind %d", (int)op->kind);
    }
    cl_note_lost(b, st);
    return st;
}

/* A run of ops in one launch of graph.cl where the device can, else a matmul and the RMSNORM of
 * its output in one launch where the matmul's kernel can end with it. */
static clinfer_status cl_op_run(void *ctx, const clinfer_op *ops, size_t n, size_t *taken) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    *taken = 0;
    if (st == CLINFER_OK && ops) st = cl_graph_run(b, ops, n, taken);
    if (st == CLINFER_OK && *taken == 0 && n >= 2 && ops[0].kind == CLINFER_OP_MATMUL &&
        ops[1].kind == CLINFER_OP_RMSNORM && cl_check_norm(&ops[1]) == CLINFER_OK) {
        bool fused;
        st = cl_matmul_norm(b, &ops[0], &ops[1], &fused);
        *taken = fused ? 2 : 0;
    }
    cl_note_lost(b, st);
    return st;
}

/* ---- lifetime -------------------------------------------------------------------------- */

static void ops_release_kernels(struct cl_ops_state *ops) {
    for (int i = 0; i < K_COUNT; i++) {
        if (ops->kernels[i]) clReleaseKernel(ops->kernels[i]);
        ops->kernels[i] = NULL;
    }
    for (int i = 0; i < PROG_COUNT; i++) {
        if (ops->programs[i]) clReleaseProgram(ops->programs[i]);
        ops->programs[i] = NULL;
    }
}

static void ops_free(struct cl_ops_state *ops) {
    if (!ops) return;
    ops_release_kernels(ops);
    if (ops->scratch) clReleaseMemObject(ops->scratch);
    free(ops);
}

/* The largest power of two not above limit. */
static size_t floor_pow2(size_t limit) {
    size_t p = 1;
    while (p * 2 <= limit)
        p *= 2;
    return p;
}

/* Builds every program with the work-group size ops->wg and creates the path's kernels. */
static clinfer_status ops_build(cl_backend_ctx *b) {
    struct cl_ops_state *ops = b->ops;
    clinfer_status st = CLINFER_OK;
    for (int i = 0; i < PROG_COUNT; i++) {
        char options[128];
        snprintf(options, sizeof options, "-DOPS_WG=%zu -DMAX_HEAD_DIM=%d%s", ops->wg, MAX_HEAD_DIM,
                 programs[i].options);
        CHECK(cl_program_build(b->context, b->device, &b->info, b->cache_dir, programs[i].file,
                               options, &ops->programs[i]));
    }
    for (int i = 0; i < K_COUNT; i++) {
        snprintf(ops->kernel_names[i], sizeof ops->kernel_names[i], "%s%s", kernels[i].name,
                 !kernels[i].per_path      ? ""
                 : ops->work_group_per_row ? "_wg"
                                           : "_rows");
        cl_int err;
        ops->kernels[i] =
            clCreateKernel(ops->programs[kernels[i].prog], ops->kernel_names[i], &err);
        CHECK(cl_check(b, err, "clCreateKernel(%s)", ops->kernel_names[i]));
    }
cleanup:
    return st;
}

/* The smallest work-group size the device accepts for the work-group-per-row kernels (register
 * use can push it below CL_DEVICE_MAX_WORK_GROUP_SIZE on GPUs). */
static clinfer_status ops_kernel_limit(cl_backend_ctx *b, size_t *limit) {
    clinfer_status st = CLINFER_OK;
    *limit = b->ops->wg;
    for (int i = 0; i < K_COUNT; i++) {
        if (!kernels[i].per_path) continue;
        size_t max_wg = 0;
        CHECK(cl_check(b,
                       clGetKernelWorkGroupInfo(b->ops->kernels[i], b->device,
                                                CL_KERNEL_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                                                NULL),
                       "clGetKernelWorkGroupInfo(%s)", b->ops->kernel_names[i]));
        if (max_wg < *limit) *limit = max_wg;
    }
cleanup:
    return st;
}

static clinfer_status ops_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    struct cl_ops_state *ops = calloc(1, sizeof *ops);
    if (!ops) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: op state");
    b->ops = ops;
    if (strcmp(b->info.kernel_path, "cpu-rows") == 0)
        ops->work_group_per_row = false;
    else if (strcmp(b->info.kernel_path, "gpu-local-reduce") == 0 ||
             strcmp(b->info.kernel_path, "gpu-subgroup") == 0)
        ops->work_group_per_row = true; /* these ops have no subgroup variant: local memory */
    else
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: unknown kernel path '%s'",
                            b->info.kernel_path);
    /* A power of two for the tree reductions: at most 256 on GPUs and 64 elsewhere (PoCL runs
     * the GPU paths only when they are forced, for tests). */
    size_t cap = b->info.type == CLINFER_DEVICE_GPU ? 256 : 64;
    ops->wg = floor_pow2(b->info.max_work_group_size < cap ? b->info.max_work_group_size : cap);
    CHECK(ops_build(b));
    if (ops->work_group_per_row) {
        size_t limit;
        CHECK(ops_kernel_limit(b, &limit));
        if (limit < ops->wg) { /* rebuild once with a size every kernel accepts */
            ops_release_kernels(ops);
            ops->wg = floor_pow2(limit);
            CHECK(ops_build(b));
        }
    }
cleanup:
    return st;
}

static const char *cl_name(void *ctx) {
    (void)ctx;
    return "opencl";
}

static const char *cl_describe(void *ctx) {
    cl_backend_ctx *b = ctx;
    return b->description;
}

static void cl_destroy(void *ctx) {
    cl_backend_ctx *b = ctx;
    if (!b) return;
    if (b->queue) clFinish(b->queue);
    for (size_t i = 0; i < b->timing.n; i++)
        clReleaseEvent(b->timing.launches[i].event);
    free(b->timing.launches);
    cl_graph_free(b);
    if (b->mm) cl_matmul_free(b);
    ops_free(b->ops);
    if (b->queue) clReleaseCommandQueue(b->queue);
    if (b->context) clReleaseContext(b->context);
    free(b);
}

static const clinfer_backend_i cl_interface = {
    .api_version = CLINFER_BACKEND_API,
    .name = cl_name,
    .describe = cl_describe,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .weight_create = cl_weight_create_i,
    .op = cl_op,
    .sync = cl_sync,
    .destroy = cl_destroy,
    .timing_mark = cl_timing_mark,
    .op_run = cl_op_run,
    .timing_collect = cl_timing_collect,
};

/* Profiling events need a queue created for them: done where the profiler is asked for
 * (src/profile.h) when the backend is created. */
clinfer_status clinfer_backend_opencl_create(size_t device_index,
                                             const clinfer_backend_options *options,
                                             clinfer_backend **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_backend *backend = NULL;
    cl_backend_ctx *b = NULL;
    cl_int err;
    if (!out) return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: NULL output handle");
    *out = NULL;
    backend = calloc(1, sizeof *backend);
    b = calloc(1, sizeof *b);
    if (!backend || !b) CHECK(clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: backend context"));
    CHECK(clinfer_options_resolve(options, &b->options));
    if (b->options.cache_dir) {
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s", b->options.cache_dir);
        b->options.cache_dir = b->cache_dir;
    }
    CHECK(cl_device_handles(device_index, &b->platform, &b->device));
    CHECK(cl_device_get_info(device_index, b->options.kernel_path, &b->info));
    b->context = clCreateContext(NULL, 1, &b->device, NULL, NULL, &err);
    CHECK(cl_check(b, err, "clCreateContext(%s)", b->info.name));
    clinfer_dev_options dev;
    clinfer_dev_options_get(&dev);
    b->timing.enabled = b->options.profile == CLINFER_ON || dev.trace;
    b->queue = clCreateCommandQueue(b->context, b->device,
                                    b->timing.enabled ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    CHECK(cl_check(b, err, "clCreateCommandQueue(%s)", b->info.name));
    snprintf(b->description, sizeof b->description, "OpenCL: %s (%s, %s)", b->info.name,
             b->info.vendor == CLINFER_VENDOR_POCL ? "PoCL" : b->info.platform,
             b->info.kernel_path);
    CHECK(ops_init(b));
    CHECK(cl_matmul_init(b));
    CHECK(cl_graph_init(b));
    backend->i = &cl_interface;
    backend->ctx = b;
    *out = backend;
    return CLINFER_OK;
cleanup:
    cl_destroy(b);
    free(backend);
    return st;
}
