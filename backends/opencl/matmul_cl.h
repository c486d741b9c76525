/* The matmul family (matmul_cl.c, clblast_cl.c): matvec and GEMM over weights of every type
 * (weights_cl.h), over f32 or 8-bit x (act_q8_cl.h), and the embedding gather. */
#ifndef CLINFER_CL_MATMUL_H
#define CLINFER_CL_MATMUL_H

#include "act_q8_cl.h"
#include "type_kernels_cl.h"
#include "weights_cl.h"

enum {
    CPU_LOCAL = 8, /* work-group size of the cpu-rows kernels: fixed, so PoCL compiles once */
    GEMM_PM = 16,  /* rows per panel of gemm_panels (fixed by cl/gemm.cl) */
    GEMM_PN = 6,   /* columns per tile: 16 x 6 keeps 12 accumulators in AVX2's 16 registers */
    GEMM_PT = 32,  /* tiles of columns per work-item of gemm_panels (each converts once) */
    GEMM_PR = 2,   /* panels per work-item of gemm_panels (AVX-512 takes both at once) */
    GEMM_KC = 256, /* elements of k per block of gemm_panels */
    STAGE_BYTES = 16 << 20, /* f32 staging of one chunk of a weight for GEMM */
    IL_F32_MAX_N = 16,      /* matvec_il_n for 1 .. this many columns of f32 x over il weights */
    /* 8-bit x over row-major weights (the K-quants...): from this many columns gemm_q8, whose
     * tile unpacks a weight block once for GEMM_Q8_N columns, where matvec_q8 unpacks it per
     * column (Gemma 3 270M Q4_K_M, 8 sequences' decode: 92-105 -> 129-135 tok/s; 2 even) */
    GEMM_Q8_MIN_N = 2,
    /* 8-bit x over Q4_K, Q5_K, Q6_K from this many columns: rows staged by stage_kq, then gemm_kq
     * (cl/cpu_q8_k.clh), in chunks of at most KQ_STAGE_BYTES of records */
    GEMM_KQ_MIN_N = 32,
    KQ_STAGE_BYTES = 4 << 20,
    NORM_ROWS = 8, /* rows per work-item of matvec_rows_norm */
};

#define F_ACCUMULATE 1
#define F_BIAS 2

struct cl_matmul_state {
    size_t gemm_ts;
    cl_program gemm_program;
    cl_kernel gemm, bias_fill;    /* gemm: gemm_tiled (GPU paths; NULL on cpu-rows) */
    cl_kernel panels, panels_f16; /* cpu-rows: gemm_panels(_f16) */
    scratch stage;
    cl_mem done; /* finished work-items of a matvec with the norm at its end; 0 between launches */
    int use_clblast; /* f32 GEMM through CLBlast (tuning table: GPUs only); counted in
                      * clblast_users from init to free */
};

/* What one matmul launch needs besides the weight part: its rows [r0, r0 + rows). */
typedef struct {
    cl_mem x, y, bias;
    int x_off, y_off, bias_off; /* y_off and bias_off already point at row r0's outputs */
    int k, n, ldy, flags;
    int r0, rows;
    int il;                  /* the weight's layout */
    const clinfer_op *norm;  /* an RMSNORM of y for matvec_q8_il_norm (norm_fusable), or NULL */
    const clinfer_op *round; /* a ROUND_Q8 of norm's y that matvec_q8_il_norm does, or NULL */
    const cl_q8_side *xq;    /* x_q8: x's 8-bit form */
} mm_args;

clinfer_status cl_matmul_init(cl_backend_ctx *b);
void cl_matmul_free(cl_backend_ctx *b);
clinfer_status cl_matmul(cl_backend_ctx *b, const clinfer_op *op);
/* The matmul op and the RMSNORM `norm` of its output in one launch where the kernel for op can,
 * with round (a ROUND_Q8 after norm, or NULL) rounding norm's y where that kernel can as well:
 * *taken says how many of the three it took (0: none, nothing enqueued). All are checked. */
clinfer_status cl_matmul_norm(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                              const clinfer_op *round, size_t *taken);
clinfer_status cl_embed(cl_backend_ctx *b, const clinfer_op *op);
/* This backend's limits on a valid MATMUL or EMBED op (the kernels index operands with ints):
 * CLINFER_ERR_UNSUPPORTED beyond them; CLINFER_OK for other ops. */
clinfer_status cl_matmul_limits(const clinfer_op *op);
/* What graph_cl.c needs to know of a MATMUL or EMBED op's weight, after checking the op as the
 * per-op path does: its type and first part's arrays (their arena, where it has one; s is q for
 * f32/f16), whether its rows are interleaved, the bytes a row takes as stored, and the matvec
 * the per-op path would run: CL_MM_ROWS over f32 x (or d * q of 8-bit x), CL_MM_IL or CL_MM_Q8
 * over 8-bit x (graph_record.clh names them, for graph.cl too). */
typedef struct {
    clinfer_dtype type;
    int parts;
    cl_mem q, s; /* at q_off and s_off bytes */
    size_t q_off, s_off;
    int il, variant;
    size_t row_bytes;
} cl_weight_view;
clinfer_status cl_weight_view_of(cl_backend_ctx *b, const clinfer_op *op, cl_weight_view *v);
/* 1 when f32 GEMM goes through CLBlast on this context (for bench-ops' side-by-side). */
int cl_matmul_clblast(const cl_backend_ctx *b);

/* clblast_cl.c: contexts using CLBlast hold it (the last drop empties its program cache), and
 * its SGEMM for f32 weight rows. */
void cl_clblast_hold(void);
void cl_clblast_drop(void);
clinfer_status cl_clblast_gemm(cl_backend_ctx *b, cl_mem w, int w_off, int rows, const mm_args *a);

#endif
