/* The ops other than matmul and embedding (cl/norm.cl, rope.cl, elementwise.cl; attention in
 * attention_cl.c): their programs, kernels and launches. Each op has passed op_check_operands
 * (backend_cl.c), so operands lie inside their buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_q8_cl.h"
#include "error.h"
#include "gpu_attention_cl.h"
#include "ops_cl.h"
#include "program.h"

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
    [PROG_ELTWISE] = {"elementwise.cl", ""},
};
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
    [K_ADD] = {PROG_ELTWISE, "add", false},
    [K_GELU] = {PROG_ELTWISE, "gelu", false},
    [K_SWIGLU] = {PROG_ELTWISE, "swiglu", false},
    [K_GEGLU] = {PROG_ELTWISE, "geglu", false},
    [K_SWIGLU_OAI] = {PROG_ELTWISE, "swiglu_oai", false},
    [K_SCALE] = {PROG_ELTWISE, "scale", false},
    [K_STORE_F32] = {PROG_ELTWISE, "store_f32", false},
    [K_STORE_F16] = {PROG_ELTWISE, "store_f16", false},
};
/* ---- launches -------------------------------------------------------------------------- */

clinfer_status cl_ops_launch(cl_backend_ctx *b, kernel_id id, size_t n_args, const cl_arg *args,
                             cl_uint dims, const size_t *global, const size_t *local) {
    return cl_launch(b, b->ops->kernels[id], b->ops->kernel_names[id], args, n_args, dims, global,
                     local);
}

/* Global size of the element-wise kernels: one work-item per ELT_VEC elements (cl/elementwise.cl),
 * rounded up to the fixed local size. */
static size_t elementwise_global(size_t count) {
    return cl_round_up((count + ELT_VEC - 1) / ELT_VEC, ELT_LOCAL);
}

/* One row per work-item (cpu-rows) or per work-group of wg items (GPU paths). */
static clinfer_status launch_rows(cl_backend_ctx *b, kernel_id id, size_t n_args,
                                  const cl_arg *args, size_t rows) {
    size_t local = b->ops->work_group_per_row ? b->ops->wg : 1;
    size_t global = rows * local;
    if (!b->ops->work_group_per_row) { /* several rows per work-group where there are many */
        local = rows >= 4 * b->info.compute_units ? 4 : 1;
        global = cl_round_up(rows, local);
    }
    return cl_ops_launch(b, id, n_args, args, 1, &global, &local);
}

/* ---- ops ------------------------------------------------------------------------------- */

clinfer_status cl_op_norm(cl_backend_ctx *b, const clinfer_op *op) {
    bool layer = op->kind == CLINFER_OP_LAYERNORM;
    /* An absent operand binds x's buffer, which the kernel then never reads. */
    cl_mem w = op->norm.w.buf ? op->norm.w.buf->mem : op->norm.x.buf->mem;
    cl_mem bias = layer && op->norm.b.buf ? op->norm.b.buf->mem : op->norm.x.buf->mem;
    cl_ulong x_off = op->norm.x.offset, w_off = op->norm.w.offset, b_off = op->norm.b.offset,
             y_off = op->norm.y.offset;
    cl_int has_w = op->norm.w.buf != NULL, has_b = op->norm.b.buf != NULL;
    /* The two kernels' arguments: LayerNorm's take its bias after the weight. */
    cl_arg args[13] = {CL_ARG(op->norm.x.buf->mem), CL_ARG(x_off), CL_ARG(w), CL_ARG(w_off),
                       CL_ARG(has_w)};
    size_t n_args = 5;
    if (layer) {
        args[n_args++] = CL_ARG(bias);
        args[n_args++] = CL_ARG(b_off);
        args[n_args++] = CL_ARG(has_b);
    }
    const cl_arg tail[] = {CL_ARG(op->norm.y.buf->mem), CL_ARG(y_off), CL_ARG(op->norm.n),
                           CL_ARG(op->norm.d), CL_ARG(op->norm.eps)};
    memcpy(args + n_args, tail, sizeof tail);
    n_args += sizeof tail / sizeof *tail;
    return launch_rows(b, layer ? K_LAYERNORM : K_RMSNORM, n_args, args, (size_t)op->norm.n);
}

clinfer_status cl_op_rope(cl_backend_ctx *b, const clinfer_op *op) {
    clinfer_status st;
    bool kv = op->rope.k_dst.buf != NULL;
    /* Without a cache write kv_heads 0 makes the kernel skip it; x's buffer fills the slots. */
    cl_mem x = op->rope.x.buf->mem;
    cl_mem k_dst = kv ? op->rope.k_dst.buf->mem : x, v_src = kv ? op->rope.v_src.buf->mem : x,
           v_dst = kv ? op->rope.v_dst.buf->mem : x;
    cl_ulong x_off = op->rope.x.offset, k_off = op->rope.k_dst.offset,
             v_src_off = op->rope.v_src.offset, v_dst_off = op->rope.v_dst.offset;
    cl_int neox = op->rope.neox, kv_heads = kv ? op->rope.kv_heads : 0,
           kv_f16 = op->rope.kv_type == CLINFER_DT_F16, has_factors = op->rope.factors.buf != NULL;
    cl_mem factors = has_factors ? op->rope.factors.buf->mem : x;
    cl_ulong factors_off = op->rope.factors.offset;
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
                     CL_ARG(factors),
                     CL_ARG(factors_off),
                     CL_ARG(has_factors),
                     CL_ARG(op->rope.mscale),
                     CL_ARG(k_dst),
                     CL_ARG(k_off),
                     CL_ARG(v_src),
                     CL_ARG(v_src_off),
                     CL_ARG(v_dst),
                     CL_ARG(v_dst_off),
                     CL_ARG(kv_heads),
                     CL_ARG(kv_f16)};
    size_t local = ELT_LOCAL;
    size_t global = cl_round_up((size_t)op->rope.n * (size_t)(op->rope.n_rot / 2), local);
    CHECK(cl_ops_launch(b, K_ROPE, sizeof args / sizeof *args, args, 1, &global, &local));
cleanup:
    return st;
}

clinfer_status cl_op_store(cl_backend_ctx *b, const clinfer_op *op) {
    size_t count = op->store.count;
    clinfer_status st = CLINFER_OK;
    bool f16 = op->store.dst_type == CLINFER_DT_F16;
    if (count == 0) goto cleanup;
    cl_ulong src_off = op->store.src.offset, dst_off = op->store.dst.offset, n = count;
    cl_arg args[] = {CL_ARG(op->store.src.buf->mem), CL_ARG(src_off),
                     CL_ARG(op->store.dst.buf->mem), CL_ARG(dst_off), CL_ARG(n)};
    size_t local = ELT_LOCAL, global = elementwise_global(count);
    CHECK(cl_ops_launch(b, f16 ? K_STORE_F16 : K_STORE_F32, 5, args, 1, &global, &local));
cleanup:
    return st;
}

/* add, gelu, swiglu, geglu, swiglu_oai: a and y hold count elements; b holds b_count (add:
 * broadcast) or count (the gated ones). */
static const struct {
    kernel_id kernel;
    int operands; /* 1: a only, 2: a and b broadcast, 3: a and b of equal size */
} eltwise_table[] = {
    [CLINFER_OP_ADD] = {K_ADD, 2},
    [CLINFER_OP_GELU] = {K_GELU, 1},
    [CLINFER_OP_SWIGLU] = {K_SWIGLU, 3},
    [CLINFER_OP_GEGLU] = {K_GEGLU, 3},
    [CLINFER_OP_SWIGLU_OAI] = {K_SWIGLU_OAI, 3},
};

clinfer_status cl_op_eltwise(cl_backend_ctx *b, const clinfer_op *op) {
    size_t count = op->eltwise.count;
    size_t b_count = eltwise_table[op->kind].operands == 3 ? count : op->eltwise.b_count;
    clinfer_status st = CLINFER_OK;
    if (count == 0) goto cleanup;
    cl_mem a = op->eltwise.a.buf->mem, y = op->eltwise.y.buf->mem;
    cl_ulong a_off = op->eltwise.a.offset, b_off = op->eltwise.b.offset,
             y_off = op->eltwise.y.offset, n = count, nb = b_count;
    size_t local = ELT_LOCAL, global = elementwise_global(count);
    kernel_id k = eltwise_table[op->kind].kernel;
    if (eltwise_table[op->kind].operands == 1) {
        cl_arg args[] = {CL_ARG(a), CL_ARG(a_off), CL_ARG(y), CL_ARG(y_off), CL_ARG(n)};
        CHECK(cl_ops_launch(b, k, 5, args, 1, &global, &local));
    } else if (eltwise_table[op->kind].operands == 2) {
        cl_arg args[] = {CL_ARG(a),     CL_ARG(a_off), CL_ARG(op->eltwise.b.buf->mem),
                         CL_ARG(b_off), CL_ARG(nb),    CL_ARG(y),
                         CL_ARG(y_off), CL_ARG(n)};
        CHECK(cl_ops_launch(b, k, 8, args, 1, &global, &local));
    } else {
        cl_arg args[] = {CL_ARG(a),     CL_ARG(a_off), CL_ARG(op->eltwise.b.buf->mem),
                         CL_ARG(b_off), CL_ARG(y),     CL_ARG(y_off),
                         CL_ARG(n)};
        CHECK(cl_ops_launch(b, k, 7, args, 1, &global, &local));
    }
cleanup:
    return st;
}

clinfer_status cl_scale(cl_backend_ctx *b, clinfer_ref a, clinfer_ref y, size_t count, float scale,
                        float cap) {
    cl_ulong a_off = a.offset, y_off = y.offset, n = count;
    size_t local = ELT_LOCAL, global = elementwise_global(count);
    cl_arg args[] = {CL_ARG(a.buf->mem), CL_ARG(a_off), CL_ARG(y.buf->mem), CL_ARG(y_off),
                     CL_ARG(n),          CL_ARG(scale), CL_ARG(cap)};
    return count ? cl_ops_launch(b, K_SCALE, 7, args, 1, &global, &local) : CLINFER_OK;
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

void cl_ops_free(struct cl_ops_state *ops) {
    if (!ops) return;
    ops_release_kernels(ops);
    if (ops->scratch) clReleaseMemObject(ops->scratch);
    cl_gpu_attn_free(ops->gpu_attn);
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
        CHECK(cl_build(b, programs[i].file, options, &ops->programs[i]));
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

clinfer_status cl_ops_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    struct cl_ops_state *ops = calloc(1, sizeof *ops);
    if (!ops) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: op state");
    b->ops = ops;
    /* the GPU path: tree reductions in local memory */
    ops->work_group_per_row = !cl_cpu_rows(b);
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
        CHECK(cl_gpu_attn_create(b, ops->wg, &ops->gpu_attn));
    }
cleanup:
    return st;
}
