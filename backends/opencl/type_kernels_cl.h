/* matvec.cl built once per weight type (type_kernels_cl.c): the kernels every matmul, embedding
 * and weight layout of that type uses, and what they are built with. */
#ifndef CLINFER_CL_TYPE_KERNELS_H
#define CLINFER_CL_TYPE_KERNELS_H

#include "cl_backend.h"

enum {
    MATVEC_MAX_N = 8, /* more columns go to GEMM */
    GPU_WG = 64,      /* items per row in matvec_wg (power of two), at most */
    GPU_MV_WG = 256,  /* items per work-group of matvec_gpu (cl/gpu_matvec.cl) */
    GPU_MV_ROWS = 8,  /* its rows per work-group: 32 items per row */
    IL_COLS = 8,      /* columns per work-item of matvec_q8_il (cl/matvec.cl) */
    IL_F32_COLS = 8,  /* columns per work-item of matvec_il_n (cl/matvec.cl) */
    GEMM_Q8_M = 2,    /* rows x columns per work-item of gemm_q8 (cl/matvec.cl) */
    GEMM_Q8_N = 4,
    KQ_REC_BYTES = 5632, /* sizeof(kq_rec): 16 rows x 256 elements staged (the kernel checks) */
    KQ_RECS = 2,         /* records (16 rows each) per work-item of gemm_kq */
};

typedef struct {
    cl_program program; /* matvec.cl built for one weight type; NULL until first used */
    cl_kernel matvec, matvec_n, dequant; /* matvec_n: cpu-rows only, 2 .. MATVEC_MAX_N columns */
    cl_kernel matvec_norm;               /* cpu-rows only: matvec_rows and the RMSNORM after it */
    cl_kernel matvec_q8;         /* integer dots on 8-bit x; NULL where the program has none */
    cl_kernel matvec_q8_il;      /* the same over rows interleaved by 16; or NULL */
    cl_kernel matvec_q8_il_norm; /* matvec_q8_il and the RMSNORM after it; NULL as it */
    cl_kernel gemm_q8;           /* matvec_q8 for more than MATVEC_MAX_N columns; NULL as it */
    cl_kernel matvec_il_n;       /* f32 x over rows interleaved by 16; NULL for other types */
    cl_kernel stage_kq, gemm_kq; /* the K-quants' prefill GEMM over 8-bit x; or NULL */
    cl_program gpu_program;      /* gpu_matvec.cl where matvec is its matvec_gpu; else NULL */
    int matvec_rows;             /* rows per work-group of matvec (GPU_MV_ROWS or 1) */
} type_kernels;

struct cl_types {
    size_t mv_wg;    /* matvec_wg's work-group: GPU_WG or the device's largest power of two */
    int q8_dots;     /* every weight type built that takes 8-bit x has matvec_q8 (1) or one has not
                      * (0); -1: no such type built yet */
    int interleave;  /* CLINFER_INTERLEAVE on a CPU device: 1 lay out weights for matvec_q8_il
                      * where it exists, 2 also where only matvec_il_n does (tests) */
    bool gpu_legacy; /* CLINFER_GPU_LEGACY: matvec_wg for every type on the GPU paths */
    type_kernels types[CLINFER_DT_ID_LIMIT]; /* by weight type */
};

/* The state, with matvec.cl built for f32 (a device that cannot build it fails here). */
clinfer_status cl_types_init(cl_backend_ctx *b);
void cl_types_free(cl_backend_ctx *b);
/* matvec.cl built for type, once (what its weights' layout needs). */
clinfer_status cl_build_type(cl_backend_ctx *b, clinfer_dtype type);
/* The -D options of a program that includes cl/weights.clh for weights of type (-DWT_<name>,
 * -DWT_Q8_ACT where matmuls take 8-bit x), in buf, returned: from the type table
 * (base/quant.c), as is the layout of each type's weights. */
const char *cl_type_defines(clinfer_dtype type, char *buf, size_t size);
/* Whether some weight type built so far has integer dots against 8-bit x (the backend's
 * int8_dots): matvec_q8, made on CPU devices where PoCL compiles for AVX2 or AVX-512. */
bool cl_types_int8_dots(const cl_backend_ctx *b);

#endif
