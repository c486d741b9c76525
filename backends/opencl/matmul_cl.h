/* What the matmul family shares (weights_cl.c, act_q8_cl.c, clblast_cl.c, matmul_cl.c): the
 * weight layouts, the per-type kernels, the matmul state and the weights themselves. */
#ifndef CLINFER_CL_MATMUL_H
#define CLINFER_CL_MATMUL_H

#include "cl_backend.h"

enum {
    MATVEC_MAX_N = 8, /* more columns go to GEMM */
    CPU_LOCAL = 8,    /* work-group size of the cpu-rows kernels: fixed, so PoCL compiles once */
    GPU_WG = 64,      /* items per row in matvec_wg (power of two), at most */
    GEMM_PM = 16,     /* rows per panel of gemm_panels (fixed by cl/gemm.cl) */
    GEMM_PN = 6,      /* columns per tile: 16 x 6 keeps 12 accumulators in AVX2's 16 registers */
    GEMM_PT = 32,     /* tiles of columns per work-item of gemm_panels (each converts once) */
    GEMM_PR = 2,      /* panels per work-item of gemm_panels (AVX-512 takes both at once) */
    GEMM_KC = 256,    /* elements of k per block of gemm_panels */
    STAGE_BYTES = 16 << 20,  /* f32 staging of one chunk of a weight for GEMM */
    ARENA_BYTES = 256 << 20, /* weight arenas (CPU devices), unless a part needs more */
    IL_COLS = 8,             /* columns per work-item of matvec_q8_il (cl/matvec.cl) */
    IL_F32_COLS = 8,         /* columns per work-item of matvec_il_n (cl/matvec.cl) */
    IL_F32_MAX_N = 16,       /* matvec_il_n for 1 .. this many columns of f32 x over il weights */
    GEMM_Q8_M = 2,           /* rows x columns per work-item of gemm_q8 (cl/matvec.cl) */
    GEMM_Q8_N = 4,
    /* 8-bit x over row-major weights (the K-quants...): from this many columns gemm_q8, whose
     * tile unpacks a weight block once for GEMM_Q8_N columns, where matvec_q8 unpacks it per
     * column (Gemma 3 270M Q4_K_M, 8 sequences' decode: 92-105 -> 129-135 tok/s; 2 even) */
    GEMM_Q8_MIN_N = 2,
    /* 8-bit x over Q4_K, Q5_K, Q6_K from this many columns: rows staged by stage_kq, then gemm_kq
     * (cl/weights_q8.clh), in chunks of at most KQ_STAGE_BYTES of records */
    GEMM_KQ_MIN_N = 32,
    KQ_STAGE_BYTES = 4 << 20,
    KQ_REC_BYTES = 5632, /* sizeof(kq_rec): 16 rows x 256 elements staged (the kernel checks) */
    KQ_RECS = 2,         /* records (16 rows each) per work-item of gemm_kq */
    NORM_ROWS = 8,       /* rows per work-item of matvec_rows_norm */
};

#define F_ACCUMULATE 1
#define F_BIAS 2

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
} type_kernels;

/* A device buffer that only grows. */
typedef struct {
    cl_mem mem;
    size_t bytes;
} scratch;

/* The 8-bit activations of the last x_q8 matmul (quantize.cl): q (char), d (float2 per block)
 * and, for kernels that take f32, f = d * q. Consecutive matmuls over the same x (q, k and v;
 * gate and up) reuse them, as does the matmul after an op that made them with its output
 * (cl_round_output); any other op may have written x, so cl_matmul_forget drops them. */
typedef struct {
    scratch q, d, f;
    cl_mem x; /* what they were made from; NULL: nothing valid */
    size_t x_off, count;
    int has_f;
    int span; /* blocks of 32 sharing one scale: 1, or 8 for a K-quant's x, whose offsets are
               * then in the state's xo (round_q8.clh) */
} act_q8;

/* On CPU devices weights live in arenas: a few large buffers, each weight array a sub-buffer of
 * one, so that one graph launch can name every weight of a model among its few buffer
 * arguments. An arena is filled in order and released when nothing holds it: neither an array
 * in it nor the state, while it is the one being filled. */
typedef struct cl_mapping { /* a mapped weight cache file, unmapped with its last arena */
    void *addr;
    size_t size;
    int holders;
} cl_mapping;

typedef struct cl_arena {
    cl_mem mem;
    const void *base; /* a window on host data (place_in_place): the host memory it is */
    size_t size, used;
    int holders;
    cl_mapping *mapping; /* the weight cache file it lies on (weight_cache_cl.c), or NULL */
} cl_arena;

/* One array of a weight part: its own buffer, or a sub-buffer at offset bytes of an arena. */
typedef struct {
    cl_mem mem;
    cl_arena *arena;
    size_t offset;
} weight_array;

typedef struct {
    weight_array q, s; /* s.mem is NULL for f32/f16 */
    int row0, rows;
} weight_part;

struct cl_matmul_state {
    int cpu;      /* cpu-rows kernels; else the work-group kernels of the GPU paths */
    size_t mv_wg; /* matvec_wg's work-group: GPU_WG or the device's largest power of two */
    size_t gemm_ts;
    type_kernels types[CLINFER_DT_ID_LIMIT]; /* by weight type */
    cl_program gemm_program;
    cl_kernel gemm, bias_fill; /* gemm: gemm_tiled (GPU paths; NULL on cpu-rows) */
    cl_kernel panels, panels_f16; /* cpu-rows: gemm_panels(_f16) */
    scratch stage;
    cl_program quantize_program;
    cl_kernel quantize, rmsnorm_q8, glu_q8;
    act_q8 act;
    scratch xo;   /* Q6_K's offsets of act (int per 16 values), where act.span is 8 */
    act_q8 spare; /* where matvec_q8_il_norm rounds its output while it reads act (then swapped) */
    cl_mem done;  /* finished work-items of a matvec with the norm at its end; 0 between launches */
    int q8_dots;  /* every weight type built that takes 8-bit x has matvec_q8 (1) or one has not
                   * (0); -1: no such type built yet */
    int interleave;    /* CLINFER_INTERLEAVE on a CPU device: 1 lay out weights for matvec_q8_il
                        * where it exists, 2 also where only matvec_il_n does (tests) */
    int use_clblast;   /* f32 GEMM through CLBlast (tuning table: GPUs only); counted in
                        * clblast_users from init to free */
    cl_arena *filling; /* weights go to arenas (CPU devices): the one being filled, or NULL */
    int arenas;
    size_t align; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes: where sub-buffers may start */
    /* Host data weights may use in place (host_data), on devices that share host memory; the
     * window of it that arrays are placed in now (an arena over the host memory), or NULL. */
    const uint8_t *host;
    size_t host_size;
    int host_unified;
    cl_arena *window;
    struct cl_weight_cache *wcache; /* from weight_cache_open to _close; NULL: none */
};

struct cl_weight {
    clinfer_block_split layout; /* its type's (base/quant.c) */
    int m, k;
    int il; /* the parts' rows are interleaved by 16 (word_at in cl/matvec.cl) */
    int n_parts;
    weight_part parts[];
};

/* What one matmul launch needs besides the weight part: its rows [r0, r0 + rows). */
typedef struct {
    cl_mem x, y, bias;
    int x_off, y_off, bias_off; /* y_off and bias_off already point at row r0's outputs */
    int k, n, ldy, flags;
    int r0, rows;
    int il;                 /* the weight's layout */
    const clinfer_op *norm; /* an RMSNORM of y for matvec_q8_il_norm (norm_fusable), or NULL */
} mm_args;

/* weights_cl.c: the allocation limit for one array; the bytes a row takes as stored. */
uint64_t cl_alloc_limit(const cl_backend_ctx *b);
size_t cl_stored_row_bytes(const clinfer_block_split *l, int il, int k);
void cl_release_arena(cl_arena *arena); /* drops a holder; the last releases it */
/* Makes a a read-only sub-buffer of bytes at offset at of arena, holding it (what: for the
 * error message). */
clinfer_status cl_arena_array(cl_arena *arena, size_t at, size_t bytes, const char *what,
                              weight_array *a);
/* Declares host memory that weights may use in place (the backend's host_data). */
void cl_weight_host_data(cl_backend_ctx *b, const void *base, size_t size);
/* repack_cl.c: lays out rows GGUF rows of nb blocks each from src as a part's quant array q and
 * scale array s (non-f32/f16 types), il: interleaved by 16, the last group padded with zero
 * rows. Every byte of both arrays is written. */
void cl_repack(const clinfer_block_split *l, int il, const uint8_t *src, size_t nb, size_t rows,
               uint8_t *q, uint8_t *s);

/* weight_cache_cl.c: the cache file of the arenas quantized weights are laid out into. One
 * record per weight part, as the file holds it. */
typedef struct {
    uint32_t type;
    int32_t m, k, il, n_parts, part;
    uint32_t q_arena, s_arena;
    uint64_t q_off, q_bytes, s_off, s_bytes;
} cl_cached_part;
/* The backend's weight_cache_open and _close (backend.h); _free drops it, unwritten. */
void cl_wcache_open(cl_backend_ctx *b, const void *id, size_t id_size);
void cl_wcache_close(cl_backend_ctx *b);
void cl_wcache_free(cl_backend_ctx *b);
/* Where quantized weights' arrays are reserved: the cache's arena while it writes one, else
 * the state's. */
cl_arena **cl_wcache_slot(cl_backend_ctx *b);
/* Reading a file: the next n_parts records where they are the parts of a weight of type,
 * m x k, il (the caller checks their sizes), else NULL; cl_wcache_array makes one of their
 * arrays, cl_wcache_taken consumes them; cl_wcache_mismatch drops the file for the rest of the
 * load (a weight it does not hold). */
const cl_cached_part *cl_wcache_next(cl_backend_ctx *b, clinfer_dtype type, int m, int k, int il,
                                     int n_parts);
clinfer_status cl_wcache_array(cl_backend_ctx *b, uint32_t arena, uint64_t off, uint64_t bytes,
                               weight_array *a);
void cl_wcache_taken(cl_backend_ctx *b, int n_parts);
void cl_wcache_mismatch(cl_backend_ctx *b);
/* Writing one: records part p of a weight (rec's type, shape and sizes; where p lies is filled
 * in here). */
void cl_wcache_record(cl_backend_ctx *b, cl_cached_part rec, const weight_part *p);
/* Process-wide counts of files mapped and written, for tests. */
void cl_weight_cache_stats(unsigned *hits, unsigned *writes);
void cl_mapping_release(cl_mapping *map); /* drops a holder; the last unmaps it */

/* matmul_cl.c: err as a status naming what; a buffer of bytes (from host with
 * CL_MEM_COPY_HOST_PTR); matvec.cl built for type (once; what its weights' layout needs). */
clinfer_status cl_error(cl_int err, const char *what);
clinfer_status cl_create_buffer(cl_backend_ctx *b, cl_mem_flags flags, size_t bytes, void *host,
                                cl_mem *out);
clinfer_status cl_build_type(cl_backend_ctx *b, clinfer_dtype type);

/* act_q8_cl.c: grows sc to bytes; makes room in act for count rounded values (the xq, xd, xf
 * and want_f arguments of quantize.cl's kernels in args); rounds a matmul op's x unless the op
 * before left it so (with want_f its f32 form too). */
clinfer_status cl_ensure_scratch(cl_backend_ctx *b, scratch *sc, size_t bytes);
clinfer_status cl_act_into(cl_backend_ctx *b, act_q8 *act, size_t count, int *want_f,
                           cl_arg args[4]);
clinfer_status cl_quantize_x(cl_backend_ctx *b, const clinfer_op *op, int want_f);
/* The integer kernels' xo argument: act's offsets where it has them, else a buffer not read. */
cl_mem cl_act_q8_xo(const cl_backend_ctx *b);

/* clblast_cl.c: contexts using CLBlast hold it (the last drop empties its program cache), and
 * its SGEMM for f32 weight rows. */
void cl_clblast_hold(void);
void cl_clblast_drop(void);
clinfer_status cl_clblast_gemm(cl_backend_ctx *b, cl_mem w, int w_off, int rows, const mm_args *a);

#endif
