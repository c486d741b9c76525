/* What ops_cl.c and attention_cl.c share: the kernels of the non-matmul ops, their state and
 * the launch by kernel id; the ops themselves, for backend_cl.c's dispatch. */
#ifndef CLINFER_CL_OPS_H
#define CLINFER_CL_OPS_H

#include "cl_backend.h"

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
    PROG_ELTWISE,
    PROG_COUNT
} prog_id;

typedef enum {
    K_RMSNORM,
    K_LAYERNORM,
    K_ROPE,
    K_ATTN_F32,
    K_ATTN_F16,
    K_ATTN_MERGE,
    K_ADD,
    K_GELU,
    K_SWIGLU,
    K_GEGLU,
    K_SWIGLU_OAI,
    K_SCALE,
    K_STORE_F32,
    K_STORE_F16,
    K_COUNT
} kernel_id;

/* per_path: the name gets "_rows" (cpu-rows) or "_wg" (the GPU paths) appended. */

struct cl_ops_state {
    cl_program programs[PROG_COUNT];
    cl_kernel kernels[K_COUNT];
    char kernel_names[K_COUNT][32];
    bool work_group_per_row; /* the GPU paths: one work-group of wg items per row */
    size_t wg;
    struct cl_gpu_attn *gpu_attn; /* GPU paths' attention (NULL: attention_wg, or cpu-rows) */
    cl_mem scratch;               /* attention's per-chunk partial results */
    size_t scratch_bytes;
};

/* The op state: programs built for the device's kernel path; freed with cl_ops_free. */
clinfer_status cl_ops_init(cl_backend_ctx *b);
void cl_ops_free(struct cl_ops_state *ops);

/* Launches kernel id (cl_launch). */
clinfer_status cl_ops_launch(cl_backend_ctx *b, kernel_id id, size_t n_args, const cl_arg *args,
                             cl_uint dims, const size_t *global, const size_t *local);

/* The ops, on records that passed op_check_operands (backend.h says what they compute). */
clinfer_status cl_op_norm(cl_backend_ctx *b, const clinfer_op *op);
clinfer_status cl_op_rope(cl_backend_ctx *b, const clinfer_op *op);
clinfer_status cl_op_store(cl_backend_ctx *b, const clinfer_op *op);
/* With round (NULL: none), a ROUND_Q8 of its output where cl_attention_rounds says the kernel
 * can round it as it writes it, both checked. */
clinfer_status cl_op_attention(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round);
bool cl_attention_rounds(const cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round);
clinfer_status cl_op_eltwise(cl_backend_ctx *b, const clinfer_op *op);
/* attention_cl.c: this backend's limits on a valid (op_check_operands) attention op: the head
 * sizes its kernels hold; CLINFER_ERR_UNSUPPORTED beyond them. */
clinfer_status cl_attention_limits(const clinfer_op *op);
/* How an attention op's positions are split: chunk positions per item, n_chunks items per
 * (head, token); with more than one chunk, part (grown to bytes) holds their partial results. */
void cl_attention_chunks(const cl_backend_ctx *b, const clinfer_op *op, size_t *chunk,
                         size_t *n_chunks);
clinfer_status cl_attention_scratch(cl_backend_ctx *b, size_t bytes, cl_mem *part);
/* y[i] = a[i] * scale capped by cap (the SCALE op; y == a: the EMBED op's scale), i < count, as
 * one elementwise launch. */
clinfer_status cl_scale(cl_backend_ctx *b, clinfer_ref a, clinfer_ref y, size_t count, float scale,
                        float cap);

#endif
