/* Attention on the GPU paths (gpu_attention_cl.h): attention_split over the chunks of positions
 * attention_cl.c chose, attention_merge_wg where there are several. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gpu_attention_cl.h"
#include "options.h"

struct cl_gpu_attn {
    cl_program program[2]; /* f32, f16 caches */
    cl_kernel split[2], merge, tiled[2];
    size_t wg;
};

clinfer_status cl_gpu_attn_create(cl_backend_ctx *b, size_t wg, struct cl_gpu_attn **out) {
    clinfer_dev_options dev;
    dev_options_get(&dev);
    *out = NULL;
    if (dev.gpu_legacy) return CLINFER_OK;
    struct cl_gpu_attn *g = calloc(1, sizeof *g);
    if (!g) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: GPU attention state");
    g->wg = wg;
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    for (int f16 = 0; f16 < 2; f16++) {
        char options[96];
        snprintf(options, sizeof options, "-DOPS_WG=%zu%s", wg, f16 ? " -DKV_F16" : "");
        CHECK(cl_build(b, "gpu_attention.cl", options, &g->program[f16]));
        g->split[f16] = clCreateKernel(g->program[f16], "attention_split", &err);
        CHECK(cl_check(b, err, "clCreateKernel(attention_split)"));
        g->tiled[f16] = clCreateKernel(g->program[f16], "attention_tiled", &err);
        CHECK(cl_check(b, err, "clCreateKernel(attention_tiled)"));
    }
    g->merge = clCreateKernel(g->program[0], "attention_merge_wg", &err);
    CHECK(cl_check(b, err, "clCreateKernel(attention_merge_wg)"));
cleanup:
    if (st == CLINFER_OK)
        *out = g;
    else
        cl_gpu_attn_free(g);
    return st;
}

void cl_gpu_attn_free(struct cl_gpu_attn *g) {
    if (!g) return;
    for (int i = 0; i < 2; i++) {
        if (g->split[i]) clReleaseKernel(g->split[i]);
        if (g->tiled[i]) clReleaseKernel(g->tiled[i]);
        if (g->program[i]) clReleaseProgram(g->program[i]);
    }
    if (g->merge) clReleaseKernel(g->merge);
    free(g);
}

void cl_attention_sink_args(const clinfer_op *op, cl_ulong *off, cl_arg args[3]) {
    static const cl_int has[2] = {0, 1};
    const clinfer_ref *sinks = &op->attention.sinks;
    *off = sinks->buf ? sinks->offset : 0;
    args[0] = CL_ARG((sinks->buf ? sinks->buf : op->attention.out.buf)->mem);
    args[1] = CL_ARG(*off);
    args[2] = CL_ARG(has[sinks->buf != NULL]);
}

void cl_attention_head_args(const clinfer_op *op, cl_ulong offs[5], cl_arg *args) {
    const clinfer_ref refs[4] = {op->attention.q, op->attention.k, op->attention.v,
                                 op->attention.out};
    cl_ref_args(refs, 4, offs, args);
    cl_arg shape[8] = {CL_ARG(op->attention.n),         CL_ARG(op->attention.n_head),
                       CL_ARG(op->attention.n_kv_head), CL_ARG(op->attention.head_dim),
                       CL_ARG(op->attention.pos0),      CL_ARG(op->attention.window),
                       CL_ARG(op->attention.scale),     CL_ARG(op->attention.softcap)};
    memcpy(args + 8, shape, sizeof shape);
    cl_attention_sink_args(op, &offs[4], args + 16);
}

clinfer_status cl_gpu_attn_run(cl_backend_ctx *b, struct cl_gpu_attn *g, const clinfer_op *op,
                               size_t chunk, size_t n_chunks, cl_mem part) {
    clinfer_status st = CLINFER_OK;
    cl_ulong offs[5];
    cl_int chunk_arg = (cl_int)chunk, n_chunks_arg = (cl_int)n_chunks;
    cl_arg args[CL_ATTN_HEAD_ARGS + 2];
    cl_attention_head_args(op, offs, args);
    args[CL_ATTN_HEAD_ARGS] = CL_ARG(chunk_arg);
    args[CL_ATTN_HEAD_ARGS + 1] = CL_ARG(part);
    size_t local[3] = {g->wg, 1, 1};
    size_t global[3] = {(size_t)op->attention.n_head * g->wg, (size_t)op->attention.n, n_chunks};
    bool f16 = op->attention.kv_type == CLINFER_DT_F16;
    CHECK(cl_launch(b, g->split[f16], "attention_split", args, CL_ATTN_HEAD_ARGS + 2, 3, global,
                    local));
    if (n_chunks > 1) {
        cl_arg merge[] = {CL_ARG(part),
                          CL_ARG(n_chunks_arg),
                          args[6],
                          CL_ARG(offs[3]),
                          CL_ARG(op->attention.n_head),
                          CL_ARG(op->attention.head_dim),
                          args[16],
                          args[17],
                          args[18]};
        CHECK(cl_launch(b, g->merge, "attention_merge_wg", merge, sizeof merge / sizeof *merge, 2,
                        global, local));
    }
cleanup:
    return st;
}

/* TILE_Q in cl/gpu_attention.cl */
#define TILE_Q 8

clinfer_status cl_gpu_attn_tiled(cl_backend_ctx *b, struct cl_gpu_attn *g, const clinfer_op *op) {
    cl_ulong offs[5];
    cl_arg args[CL_ATTN_HEAD_ARGS];
    cl_attention_head_args(op, offs, args);
    size_t local[2] = {g->wg, 1};
    size_t global[2] = {(size_t)op->attention.n_head * g->wg,
                        ((size_t)op->attention.n + TILE_Q - 1) / TILE_Q};
    bool f16 = op->attention.kv_type == CLINFER_DT_F16;
    return cl_launch(b, g->tiled[f16], "attention_tiled", args, CL_ATTN_HEAD_ARGS, 2, global,
                     local);
}
