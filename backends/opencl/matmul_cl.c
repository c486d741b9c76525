/* Matrix products over weights of every storage type (cl/matvec.cl, cl/gemm.cl):
 *   - weight upload: quantized blocks are split into two arrays (quants, scales) so kernels load
 *     the quants of a row with wide aligned loads; rows are split over several cl_mem when one
 *     array would exceed the device's (or CLINFER_MAX_ALLOC's) allocation limit; where the
 *     device built matvec_q8_il (PoCL on an AVX2 host), Q8_0/Q4_0/Q4_1 rows are interleaved
 *     by 16 so that kernel reads 16 rows with one load; on CPU devices the arrays are
 *     sub-buffers of a few large arenas;
 *   - matvec for n <= MATVEC_MAX_N columns (decode), one kernel per kernel path;
 *   - GEMM for more columns (prefill): f32 weights directly, other types staged to f32 in row
 *     chunks by dequant_rows; CLBlast SGEMM instead of our kernel where the table says it wins;
 *   - embedding gather through dequant_rows. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_backend.h"
#include "error.h"
#include "fault.h"
#include "options.h"
#include "program.h"

#ifdef CLINFER_WITH_CLBLAST
#include <clblast_c.h>
#include <pthread.h>
#endif

enum {
    MATVEC_MAX_N = 8, /* more columns go to GEMM */
    CPU_LOCAL = 8,    /* work-group size of the cpu-rows kernels: fixed, so PoCL compiles once */
    GPU_WG = 64,      /* items per row in matvec_wg (power of two), at most */
    GEMM_GM = 6,      /* rows x columns per item in gemm_rows */
    GEMM_GN = 2,
    STAGE_BYTES = 16 << 20,  /* f32 staging of one chunk of a non-f32 weight for GEMM */
    ARENA_BYTES = 256 << 20, /* weight arenas (CPU devices), unless a part needs more */
    IL_COLS = 4,             /* columns per work-item of matvec_q8_il (cl/matvec.cl) */
    NORM_ROWS = 8,           /* rows per work-item of matvec_rows_norm */
};

#define F_ACCUMULATE 1
#define F_BIAS 2

/* How a GGUF block is split at upload: bytes [q_off, q_off + q_len) go to the quant array, the
 * scale segments (in order) to the scale array, padded to s_bytes. A segment marked f16 holds
 * half-precision scales that are widened to f32 (exactly): PoCL compiles a lone vload_half to
 * branchy scalar code, which cost more per 32 weights than the 2 extra bytes. Rows interleaved
 * by 16 keep their f16 scales as they are (Q8_0, Q4_0, Q4_1: one f16 segment), 16 rows' in one
 * 32-byte load that one instruction widens. f32/f16 weights: blk 1, no scales. */
typedef struct {
    size_t off, len;
    int f16; /* len bytes of f16 values, stored as 2 * len bytes of f32 */
} scale_segment;

typedef struct {
    clinfer_dtype type; /* its GGUF block: clinfer_dtype_block_elems and _bytes (base/quant.c) */
    size_t kblk;        /* elements per block of the kernels (BLK in matvec.cl) */
    size_t q_off, q_len;
    scale_segment s[2];
    size_t s_bytes;
} type_layout;

static const type_layout layouts[CL_N_TYPES] = {
    /* type, kblk, q_off, q_len, scale segments, s_bytes */
    {CLINFER_DT_F32, 16, 0, 4, {{0, 0, 0}, {0, 0, 0}}, 0},
    {CLINFER_DT_F16, 16, 0, 2, {{0, 0, 0}, {0, 0, 0}}, 0},
    /* f32 d */
    {CLINFER_DT_Q8_0, 32, 2, 32, {{0, 2, 1}, {0}}, 4},
    {CLINFER_DT_Q4_0, 32, 2, 16, {{0, 2, 1}, {0}}, 4},
    /* f32 d, m */
    {CLINFER_DT_Q4_1, 32, 4, 16, {{0, 4, 1}, {0}}, 8},
    /* f32 d, dmin, then scales[12] */
    {CLINFER_DT_Q4_K, 64, 16, 128, {{0, 4, 1}, {4, 12, 0}}, 20},
    /* ql and qh together; scales[16] then f32 d */
    {CLINFER_DT_Q6_K, 128, 0, 192, {{192, 16, 0}, {208, 2, 1}}, 20},
};

typedef struct {
    cl_program program; /* matvec.cl built for one weight type; NULL until first used */
    cl_kernel matvec, matvec_n, dequant; /* matvec_n: cpu-rows only, 2 .. MATVEC_MAX_N columns */
    cl_kernel matvec_norm;               /* cpu-rows only: matvec_rows and the RMSNORM after it */
    cl_kernel matvec_q8;         /* integer dots on 8-bit x; NULL where the program has none */
    cl_kernel matvec_q8_il;      /* the same over rows interleaved by 16; or NULL */
    cl_kernel matvec_q8_il_norm; /* matvec_q8_il and the RMSNORM after it; NULL as it */
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
} act_q8;

/* On CPU devices weights live in arenas: a few large buffers, each weight array a sub-buffer of
 * one, so that one graph launch can name every weight of a model among its few buffer
 * arguments. An arena is filled in order and released when nothing holds it: neither an array
 * in it nor the state, while it is the one being filled. */
typedef struct cl_arena {
    cl_mem mem;
    size_t size, used;
    int holders;
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

static void release_arena(cl_arena *arena) {
    if (--arena->holders > 0) return;
    clReleaseMemObject(arena->mem);
    free(arena);
}

struct cl_matmul_state {
    int cpu;      /* cpu-rows kernels; else the work-group kernels of the GPU paths */
    size_t mv_wg; /* matvec_wg's work-group: GPU_WG or the device's largest power of two */
    size_t gemm_ts;
    type_kernels types[CL_N_TYPES];
    cl_program gemm_program;
    cl_kernel gemm, bias_fill;
    scratch stage;
    cl_program quantize_program;
    cl_kernel quantize, rmsnorm_q8, swiglu_q8;
    act_q8 act;
    act_q8 spare; /* where matvec_q8_il_norm rounds its output while it reads act (then swapped) */
    cl_mem done;  /* finished work-items of a matvec with the norm at its end; 0 between launches */
    int q8_dots;  /* a weight type has matvec_q8 (1) or has not (0); -1: no type built yet */
    int interleave;    /* lay out weights for matvec_q8_il where it exists (CLINFER_INTERLEAVE) */
    int use_clblast;   /* f32 GEMM through CLBlast (tuning table: GPUs only); counted in
                        * clblast_users from init to free */
    cl_arena *filling; /* weights go to arenas (CPU devices): the one being filled, or NULL */
    int arenas;
    size_t align; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes: where sub-buffers may start */
};

struct cl_weight {
    const type_layout *layout;
    int m, k;
    int il; /* the parts' rows are interleaved by 16 (word_at in cl/matvec.cl) */
    int n_parts;
    weight_part parts[];
};

int cl_type_index(clinfer_dtype type) {
    for (int i = 0; i < CL_N_TYPES; i++)
        if (layouts[i].type == type) return i;
    return -1;
}

static size_t blk_elems(const type_layout *l) {
    return clinfer_dtype_block_elems(l->type);
}

static size_t blk_bytes(const type_layout *l) {
    return clinfer_dtype_block_bytes(l->type);
}

static const type_layout *layout_of(clinfer_dtype type) {
    int i = cl_type_index(type);
    return i < 0 ? NULL : &layouts[i];
}

const char *cl_type_defines(clinfer_dtype type, char *buf, size_t size) {
    snprintf(buf, size, "-DWT_%s%s", clinfer_dtype_name(type),
             clinfer_dtype_takes_q8_act(type) ? " -DWT_Q8_ACT" : "");
    return buf;
}

static clinfer_status cl_error(cl_int err, const char *what) {
    if (err == CL_SUCCESS) return CLINFER_OK;
    return clinfer_fail(err, "OpenCL matmul: %s failed: %s (%d)", what, clinfer_status_str(err),
                        err);
}

static clinfer_status create_buffer(cl_backend_ctx *b, cl_mem_flags flags, size_t bytes, void *host,
                                    cl_mem *out) {
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS) *out = clCreateBuffer(b->context, flags, bytes, host, &err);
    if (err != CL_SUCCESS)
        return clinfer_fail(err, "OpenCL matmul: clCreateBuffer(%zu bytes) failed: %s (%d)", bytes,
                            clinfer_status_str(err), err);
    return CLINFER_OK;
}

static size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* ---- programs -------------------------------------------------------------------------- */

static clinfer_status build_type(cl_backend_ctx *b, const type_layout *l) {
    type_kernels *t = &b->mm->types[l - layouts];
    if (t->program) return CLINFER_OK;
    char options[160], defines[64]; /* the fused norm of matvec_q8_il rounds as quantize.cl does */
    snprintf(options, sizeof options,
             "%s -DMV_WG=%zu -DMV_MAX_N=%d -cl-fp32-correctly-rounded-divide-sqrt",
             cl_type_defines(l->type, defines, sizeof defines), b->mm->mv_wg, MATVEC_MAX_N);
    clinfer_status st = cl_program_build(b->context, b->device, &b->info, b->cache_dir, "matvec.cl",
                                         options, &t->program);
    cl_int err = CL_SUCCESS;
    if (st == CLINFER_OK)
        t->matvec = clCreateKernel(t->program, b->mm->cpu ? "matvec_rows" : "matvec_wg", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && b->mm->cpu)
        t->matvec_n = clCreateKernel(t->program, "matvec_rows_n", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && b->mm->cpu)
        t->matvec_norm = clCreateKernel(t->program, "matvec_rows_norm", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS)
        t->dequant = clCreateKernel(t->program, "dequant_rows", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && b->mm->cpu) {
        /* present only where matvec.cl compiled its AVX2 / AVX-512 integer paths */
        if (cl_program_has_kernel(t->program, "matvec_q8"))
            t->matvec_q8 = clCreateKernel(t->program, "matvec_q8", &err);
        if (err == CL_SUCCESS && b->mm->interleave &&
            cl_program_has_kernel(t->program, "matvec_q8_il")) /* the types laid out by 16 rows */
            t->matvec_q8_il = clCreateKernel(t->program, "matvec_q8_il", &err);
        if (err == CL_SUCCESS && t->matvec_q8_il)
            t->matvec_q8_il_norm = clCreateKernel(t->program, "matvec_q8_il_norm", &err);
    }
    if (st == CLINFER_OK) st = cl_error(err, "clCreateKernel(matvec.cl)");
    if (st == CLINFER_OK && clinfer_dtype_takes_q8_act(l->type))
        b->mm->q8_dots = t->matvec_q8 != NULL; /* the same for all such types: AVX2 or not */
    if (st != CLINFER_OK) { /* leave nothing half-built: the next call tries again */
        clinfer_error_prefix("building matvec.cl for %s", clinfer_dtype_name(l->type));
        if (t->matvec) clReleaseKernel(t->matvec);
        if (t->matvec_n) clReleaseKernel(t->matvec_n);
        if (t->matvec_norm) clReleaseKernel(t->matvec_norm);
        if (t->dequant) clReleaseKernel(t->dequant);
        if (t->matvec_q8) clReleaseKernel(t->matvec_q8);
        if (t->matvec_q8_il) clReleaseKernel(t->matvec_q8_il);
        if (t->matvec_q8_il_norm) clReleaseKernel(t->matvec_q8_il_norm);
        if (t->program) clReleaseProgram(t->program);
        *t = (type_kernels){0};
    }
    return st;
}

#ifdef CLINFER_WITH_CLBLAST
/* CLBlast keeps its compiled programs in a process-wide cache keyed by context, each holding
 * its context: left there they pile up with every backend made, and CLBlast's static
 * destructors release them at exit after the OpenCL runtime may be gone (heap corruption under
 * oclgrind). So the last live context using CLBlast empties the cache before its own context
 * is released; a later one compiles CLBlast's kernels again. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;
static int clblast_users;

static void clblast_hold(void) {
    pthread_mutex_lock(&clblast_lock);
    clblast_users++;
    pthread_mutex_unlock(&clblast_lock);
}

static void clblast_drop(void) {
    pthread_mutex_lock(&clblast_lock);
    if (--clblast_users == 0) CLBlastClearCache(); /* its status has nowhere to go */
    pthread_mutex_unlock(&clblast_lock);
}
#endif

clinfer_status cl_matmul_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    b->mm = calloc(1, sizeof *b->mm);
    if (!b->mm) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul: state");
    struct cl_matmul_state *s = b->mm;
    s->cpu = strcmp(b->info.kernel_path, "cpu-rows") == 0;
    clinfer_dev_options dev;
    clinfer_dev_options_get(&dev);
    s->interleave = s->cpu && dev.interleave;
    s->gemm_ts = b->info.max_work_group_size >= 256 ? 16 : 8;
    for (s->mv_wg = GPU_WG; s->mv_wg > 1 && s->mv_wg > b->info.max_work_group_size;)
        s->mv_wg /= 2;
#ifdef CLINFER_WITH_CLBLAST
    /* Tuning table: on CPU OpenCL CLBlast's SGEMM is untuned and loses to gemm_rows (measured on
     * PoCL, docs/PERFORMANCE.md); on GPUs its tuned kernels are taken over our plain local-memory
     * gemm_tiled (not measured yet). The clblast option overrides; bench_ops compares both. */
    s->use_clblast = b->options.clblast ? b->options.clblast == CLINFER_ON : !s->cpu;
    if (s->use_clblast) clblast_hold();
#endif
    char options[64];
    snprintf(options, sizeof options, "-DGM=%d -DGN=%d -DTS=%zu", GEMM_GM, GEMM_GN, s->gemm_ts);
    CHECK(cl_program_build(b->context, b->device, &b->info, b->cache_dir, "gemm.cl", options,
                           &s->gemm_program));
    s->gemm = clCreateKernel(s->gemm_program, s->cpu ? "gemm_rows" : "gemm_tiled", &err);
    CHECK(cl_error(err, "clCreateKernel(gemm)"));
    s->bias_fill = clCreateKernel(s->gemm_program, "bias_fill", &err);
    CHECK(cl_error(err, "clCreateKernel(bias_fill)"));
    CHECK(cl_program_build(b->context, b->device, &b->info, b->cache_dir, "quantize.cl",
                           "-cl-fp32-correctly-rounded-divide-sqrt", &s->quantize_program));
    const struct {
        cl_kernel *kernel;
        const char *name;
    } rounding[] = {{&s->quantize, "quantize_q8_act"},
                    {&s->rmsnorm_q8, "rmsnorm_q8_act"},
                    {&s->swiglu_q8, "swiglu_q8_act"}};
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++) {
        *rounding[i].kernel = clCreateKernel(s->quantize_program, rounding[i].name, &err);
        CHECK(cl_error(err, rounding[i].name));
    }
    s->q8_dots = -1;
    cl_uint align_bits = 0;
    CHECK(cl_error(clGetDeviceInfo(b->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits,
                                   &align_bits, NULL),
                   "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)"));
    s->align = align_bits >= 8 ? align_bits / 8 : 1;
    s->arenas = b->info.type == CLINFER_DEVICE_CPU;     /* for graph launches */
    if (s->cpu && b->info.type == CLINFER_DEVICE_CPU) { /* see norm_fusable */
        cl_int zero = 0;
        CHECK(create_buffer(b, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero,
                            &s->done));
    }
    /* matvec.cl for f32 now, so a device that cannot build it fails at context creation. */
    CHECK(build_type(b, layout_of(CLINFER_DT_F32)));
cleanup:
    return st;
}

int cl_matmul_clblast(const cl_backend_ctx *b) {
    return b->mm && b->mm->use_clblast;
}

void cl_matmul_free(cl_backend_ctx *b) {
    struct cl_matmul_state *s = b->mm;
    if (!s) return;
    for (int i = 0; i < CL_N_TYPES; i++) {
        if (s->types[i].matvec) clReleaseKernel(s->types[i].matvec);
        if (s->types[i].matvec_n) clReleaseKernel(s->types[i].matvec_n);
        if (s->types[i].matvec_norm) clReleaseKernel(s->types[i].matvec_norm);
        if (s->types[i].dequant) clReleaseKernel(s->types[i].dequant);
        if (s->types[i].matvec_q8) clReleaseKernel(s->types[i].matvec_q8);
        if (s->types[i].matvec_q8_il) clReleaseKernel(s->types[i].matvec_q8_il);
        if (s->types[i].matvec_q8_il_norm) clReleaseKernel(s->types[i].matvec_q8_il_norm);
        if (s->types[i].program) clReleaseProgram(s->types[i].program);
    }
    scratch *bufs[] = {&s->stage,   &s->act.q,   &s->act.d,  &s->act.f,
                       &s->spare.q, &s->spare.d, &s->spare.f};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->mem) clReleaseMemObject(bufs[i]->mem);
    if (s->done) clReleaseMemObject(s->done);
    if (s->filling) release_arena(s->filling); /* weights still alive keep their arena */
    cl_kernel rounding[] = {s->quantize, s->rmsnorm_q8, s->swiglu_q8};
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++)
        if (rounding[i]) clReleaseKernel(rounding[i]);
    if (s->quantize_program) clReleaseProgram(s->quantize_program);
    if (s->gemm) clReleaseKernel(s->gemm);
    if (s->bias_fill) clReleaseKernel(s->bias_fill);
    if (s->gemm_program) clReleaseProgram(s->gemm_program);
#ifdef CLINFER_WITH_CLBLAST
    if (s->use_clblast) clblast_drop();
#endif
    free(s);
    b->mm = NULL;
}

/* ---- weights --------------------------------------------------------------------------- */

/* The allocation limit for one array: the device's, or CLINFER_MAX_ALLOC when smaller. */
static uint64_t alloc_limit(const cl_backend_ctx *b) {
    uint64_t limit = b->info.max_alloc ? b->info.max_alloc : UINT64_MAX;
    clinfer_dev_options dev;
    clinfer_dev_options_get(&dev);
    if (dev.max_alloc > 0 && dev.max_alloc < limit) limit = dev.max_alloc;
    return limit;
}

/* Splits rows [row0, row0 + rows) of GGUF data into the quant and scale arrays (s NULL: quants
 * only). */
static void split_blocks(const type_layout *l, const uint8_t *data, size_t row_bytes, int row0,
                         int rows, int k, uint8_t *q, uint8_t *s) {
    size_t nb = (size_t)rows * (size_t)(k / (int)blk_elems(l)), step = blk_bytes(l);
    const uint8_t *src = data + (size_t)row0 * row_bytes;
    for (size_t i = 0; i < nb; i++, src += step) {
        memcpy(q + i * l->q_len, src + l->q_off, l->q_len);
        if (!s) continue;
        uint8_t *dst = s + i * l->s_bytes;
        memset(dst, 0, l->s_bytes);
        for (int j = 0; j < 2 && l->s[j].len; j++) {
            const scale_segment *g = &l->s[j];
            for (size_t h = 0; g->f16 && h < g->len / 2; h++, dst += sizeof(float)) {
                uint16_t bits;
                memcpy(&bits, src + g->off + 2 * h, sizeof bits);
                float f = clinfer_f16_to_f32(bits);
                memcpy(dst, &f, sizeof f);
            }
            if (!g->f16) {
                memcpy(dst, src + g->off, g->len);
                dst += g->len;
            }
        }
    }
}

/* Re-lays out row-major rows (a multiple of 16) of nb blocks of w words of `size` bytes each
 * into rows interleaved by 16 (word_at in cl/weights.clh). */
static void interleave16(const uint8_t *src, uint8_t *dst, size_t rows, size_t nb, size_t w,
                         size_t size) {
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < nb * w; i++) /* block i / w, word i % w */
            memcpy(dst + (((r / 16 * nb) * w + i) * 16 + r % 16) * size,
                   src + (r * nb * w + i) * size, size);
}

/* The scales of rows [row0, row0 + rows) as they are in the GGUF blocks (f16: Q8_0 and Q4_0 d,
 * Q4_1 d then m), block after block: what the interleaved layout keeps, as one 64-byte load then
 * converts 16 of them (the row-major layout widens them to f32 instead, see scale_segment). */
static void gather_f16_scales(const type_layout *l, const uint8_t *data, size_t row_bytes, int row0,
                              int rows, int k, uint8_t *s) {
    size_t nb = (size_t)rows * (size_t)(k / (int)blk_elems(l)), len = l->s[0].len;
    size_t step = blk_bytes(l);
    const uint8_t *src = data + (size_t)row0 * row_bytes + l->s[0].off;
    for (size_t i = 0; i < nb; i++, src += step)
        memcpy(s + i * len, src, len);
}

/* Bytes of the scales of one block as the weight stores them. */
static size_t scale_bytes(const type_layout *l, int il) {
    return il ? l->s[0].len : l->s_bytes;
}

/* Bytes of a row of k elements as the weight stores them (what kernels read). */
static size_t stored_row_bytes(const type_layout *l, int il, int k) {
    return (size_t)k / blk_elems(l) * (l->s_bytes ? l->q_len + scale_bytes(l, il) : blk_bytes(l));
}

/* Uploads bytes of host data as a weight array: a sub-buffer of an arena where weights go to
 * arenas (a new arena when the one being filled lacks room), else a buffer of its own. */
static clinfer_status place(cl_backend_ctx *b, size_t bytes, const void *host, weight_array *a) {
    struct cl_matmul_state *s = b->mm;
    void *src = (void *)(uintptr_t)host;
    if (!s->arenas)
        return create_buffer(b, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, src, &a->mem);
    size_t at = s->filling ? round_up(s->filling->used, s->align) : 0;
    if (!s->filling || at + bytes > s->filling->size) {
        uint64_t size = bytes > ARENA_BYTES ? bytes : ARENA_BYTES;
        if (size > alloc_limit(b)) size = alloc_limit(b); /* parts never exceed it */
        cl_arena *arena = calloc(1, sizeof *arena);
        if (!arena) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul: arena");
        clinfer_status st = create_buffer(b, CL_MEM_READ_ONLY, size, NULL, &arena->mem);
        if (st != CLINFER_OK) {
            free(arena);
            return st;
        }
        arena->size = size;
        arena->holders = 1; /* the state's, while it fills it */
        if (s->filling) release_arena(s->filling);
        s->filling = arena;
        at = 0;
    }
    cl_arena *arena = s->filling;
    cl_int err =
        clEnqueueWriteBuffer(b->queue, arena->mem, CL_TRUE, at, bytes, host, 0, NULL, NULL);
    cl_buffer_region region = {at, bytes};
    if (err == CL_SUCCESS)
        a->mem = clCreateSubBuffer(arena->mem, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION,
                                   &region, &err);
    if (err != CL_SUCCESS) return cl_error(err, "placing a weight array in an arena");
    arena->used = at + bytes;
    arena->holders++;
    a->arena = arena;
    a->offset = at;
    return CLINFER_OK;
}

static void release_array(weight_array *a) {
    if (a->mem) clReleaseMemObject(a->mem);
    if (a->arena) release_arena(a->arena);
}

/* Uploads part p; with il its rows are interleaved by 16, zero rows padding the last group. */
static clinfer_status upload_part(cl_backend_ctx *b, const type_layout *l, const uint8_t *data,
                                  int k, int il, weight_part *p) {
    clinfer_status st = CLINFER_OK;
    size_t nb_row = (size_t)k / blk_elems(l), row_bytes = nb_row * blk_bytes(l);
    uint8_t *q = NULL, *s = NULL, *qi = NULL, *si = NULL;
    if (!l->s_bytes) /* f32/f16: the GGUF rows are the layout */
        return place(b, (size_t)p->rows * row_bytes, data + (size_t)p->row0 * row_bytes, &p->q);
    size_t rows = il ? round_up((size_t)p->rows, 16) : (size_t)p->rows;
    size_t q_bytes = rows * nb_row * l->q_len, s_bytes = rows * nb_row * scale_bytes(l, il);
    q = calloc(1, q_bytes);
    s = calloc(1, s_bytes);
    if (il) {
        qi = malloc(q_bytes);
        si = malloc(s_bytes);
    }
    if (!q || !s || (il && (!qi || !si)))
        CHECK(clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY,
                           "OpenCL matmul: %zu + %zu bytes to re-lay out %d rows of %s", q_bytes,
                           s_bytes, p->rows, clinfer_dtype_name(l->type)));
    if (il) {
        split_blocks(l, data, row_bytes, p->row0, p->rows, k, q, NULL);
        gather_f16_scales(l, data, row_bytes, p->row0, p->rows, k, s);
        interleave16(q, qi, rows, nb_row, l->q_len / 4, 4);
        interleave16(s, si, rows, nb_row, l->s[0].len / 2, 2);
    } else {
        split_blocks(l, data, row_bytes, p->row0, p->rows, k, q, s);
    }
    CHECK(place(b, q_bytes, il ? (void *)qi : q, &p->q));
    CHECK(place(b, s_bytes, il ? (void *)si : s, &p->s));
cleanup:
    free(q);
    free(s);
    free(qi);
    free(si);
    return st;
}

clinfer_status cl_weight_create(cl_backend_ctx *b, clinfer_dtype type, int m, int k,
                                const void *data, clinfer_buffer **out) {
    clinfer_status st = CLINFER_OK;
    struct cl_weight *w = NULL;
    clinfer_buffer *buf = NULL;
    const type_layout *l = layout_of(type);
    if (!out || !data || m <= 0 || k <= 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL weight_create: m %d, k %d, data %p, out %p", m, k, data,
                            (void *)out);
    *out = NULL;
    if (!l)
        return clinfer_fail(CLINFER_ERR_UNSUPPORTED, "OpenCL weight_create: type %d", (int)type);
    if (k % (int)blk_elems(l))
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL weight_create: k %d is not a multiple of the %s block (%zu)", k,
                            clinfer_dtype_name(type), blk_elems(l));
    if ((uint64_t)m * (uint64_t)k > INT_MAX)
        return clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                            "OpenCL weight_create: %d x %d elements exceed the kernels' int "
                            "indexing",
                            m, k);
    CHECK(build_type(b, l));
    size_t nb_row = (size_t)k / blk_elems(l);
    size_t widest = nb_row * (l->s_bytes ? l->q_len : blk_bytes(l));
    if (nb_row * l->s_bytes > widest) widest = nb_row * l->s_bytes;
    uint64_t rows_per_part = alloc_limit(b) / widest;
    /* interleaved parts hold whole groups of 16 rows (the last one padded) */
    int il = b->mm->types[l - layouts].matvec_q8_il && rows_per_part >= 16;
    if (il) rows_per_part -= rows_per_part % 16;
    if (rows_per_part == 0)
        CHECK(clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                           "OpenCL weight_create: one %s row of %d elements (%zu bytes) exceeds "
                           "the allocation limit of %llu bytes",
                           clinfer_dtype_name(type), k, widest,
                           (unsigned long long)alloc_limit(b)));
    if (rows_per_part > (uint64_t)m) rows_per_part = (uint64_t)m;
    int n_parts = (int)(((uint64_t)m + rows_per_part - 1) / rows_per_part);
    w = calloc(1, sizeof *w + (size_t)n_parts * sizeof w->parts[0]);
    buf = calloc(1, sizeof *buf);
    if (!w || !buf)
        CHECK(clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL weight_create: %d parts", n_parts));
    w->layout = l;
    w->m = m;
    w->k = k;
    w->il = il;
    for (int i = 0; i < n_parts; i++) {
        weight_part *p = &w->parts[i];
        p->row0 = (int)((uint64_t)i * rows_per_part);
        p->rows = m - p->row0 < (int)rows_per_part ? m - p->row0 : (int)rows_per_part;
        w->n_parts = i + 1; /* counts parts holding buffers, for cleanup */
        CHECK(upload_part(b, l, data, k, il, p));
    }
    buf->weight = w;
    buf->bytes = (size_t)m * stored_row_bytes(l, il, k);
    *out = buf;
    return CLINFER_OK;
cleanup:
    clinfer_error_prefix("OpenCL weight_create(%s, %d x %d)", clinfer_dtype_name(type), m, k);
    cl_weight_free(w);
    free(buf);
    return st;
}

void cl_weight_free(struct cl_weight *w) {
    if (!w) return;
    for (int i = 0; i < w->n_parts; i++) {
        release_array(&w->parts[i].q);
        release_array(&w->parts[i].s);
    }
    free(w);
}

/* ---- operand checks -------------------------------------------------------------------- */

/* cl_check_ref, and the elements must be reachable by the kernels' int offsets. */
static clinfer_status check_operand(const char *op, const char *name, clinfer_ref ref, size_t count,
                                    size_t elem) {
    clinfer_status st = cl_check_ref(op, name, ref, count, elem);
    if (st != CLINFER_OK) return st;
    if (ref.offset + count > INT_MAX)
        return clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                            "OpenCL %s: operand %s ends at element %zu, past int indexing", op,
                            name, ref.offset + count);
    return CLINFER_OK;
}

/* Rows [row0, row0 + m) of k elements of wb, all of them when whole. */
static clinfer_status check_weight(const char *op, const clinfer_buffer *wb, int row0, int m, int k,
                                   int n, bool whole) {
    if (!wb || !wb->weight)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL %s: w is not a weight", op);
    const struct cl_weight *w = wb->weight;
    if (row0 < 0 || m <= 0 || row0 > w->m - m || (whole && m != w->m) || w->k != k || n <= 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "OpenCL %s: rows %d .. %d, k %d, n %d against a weight of %d x %d", op,
                            row0, row0 + m, k, n, w->m, w->k);
    return CLINFER_OK;
}

/* ---- matmul ---------------------------------------------------------------------------- */

/* What one matmul launch needs besides the weight part: its rows [r0, r0 + rows). */
typedef struct {
    cl_mem x, y, bias;
    int x_off, y_off, bias_off; /* y_off and bias_off already point at row r0's outputs */
    int k, n, ldy, flags;
    int r0, rows;
    int il;                 /* the weight's layout */
    const clinfer_op *norm; /* an RMSNORM of y for matvec_q8_il_norm (norm_fusable), or NULL */
} mm_args;

static clinfer_status run_matvec(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                 const mm_args *a) {
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem; /* f32/f16 kernels never read ws */
    int rows = a->rows;
    cl_arg args[] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},       {sizeof(int), &a->il},
        {sizeof(int), &a->k},        {sizeof(int), &a->r0},       {sizeof(int), &rows},
        {sizeof(cl_mem), &a->x},     {sizeof(int), &a->x_off},    {sizeof(int), &a->k},
        {sizeof(cl_mem), &a->y},     {sizeof(int), &a->y_off},    {sizeof(int), &a->ldy},
        {sizeof(cl_mem), &a->bias},  {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags},
        {sizeof(int), &a->n}};
    cl_uint n_args = sizeof args / sizeof args[0] - 1; /* n only for matvec_rows_n */
    cl_kernel kernel = t->matvec;
    size_t global[2] = {(size_t)rows * b->mm->mv_wg, (size_t)a->n}, local[2] = {b->mm->mv_wg, 1};
    if (b->mm->cpu) {
        global[0] = round_up((size_t)rows, CPU_LOCAL);
        local[0] = CPU_LOCAL;
        if (a->n > 1) { /* all columns in one pass over W */
            kernel = t->matvec_n;
            n_args++;
            global[1] = 1;
        }
    }
    return cl_launch(b, kernel, "matvec", args, n_args, 2, global, local);
}

/* GEMM over `rows` f32 weight rows starting at element w_off of w: CLBlast or gemm.cl. */
static clinfer_status run_gemm(cl_backend_ctx *b, cl_mem w, int w_off, int rows, const mm_args *a) {
    struct cl_matmul_state *s = b->mm;
#ifdef CLINFER_WITH_CLBLAST
    if (s->use_clblast) {
        clinfer_status st = CLINFER_OK;
        if (a->flags & F_BIAS) {
            size_t global[2] = {(size_t)rows, (size_t)a->n};
            cl_arg fill[] = {{sizeof(cl_mem), &a->y},    {sizeof(int), &a->y_off},
                             {sizeof(int), &a->ldy},     {sizeof(int), &rows},
                             {sizeof(cl_mem), &a->bias}, {sizeof(int), &a->bias_off},
                             {sizeof(int), &a->flags}};
            st = cl_launch(b, s->bias_fill, "bias_fill", fill, sizeof fill / sizeof fill[0], 2,
                           global, NULL);
            if (st != CLINFER_OK) return st;
        }
        /* Row-major y[n][rows] = x[n][k] . w[rows][k]^T; beta 1 keeps the y to accumulate onto
         * or what bias_fill wrote. The event is its last kernel's (CLBlast issue 159): the
         * profile counts any pad/transpose kernels it runs besides as gaps. */
        cl_event event = NULL;
        CLBlastStatusCode cs =
            CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                         (size_t)a->n, (size_t)rows, (size_t)a->k, 1.0f, a->x, (size_t)a->x_off,
                         (size_t)a->k, w, (size_t)w_off, (size_t)a->k, a->flags ? 1.0f : 0.0f, a->y,
                         (size_t)a->y_off, (size_t)a->ldy, &b->queue, cl_timing_slot(b, &event));
        if (cs != CLBlastSuccess)
            /* OpenCL errors pass through; CLBlast's own codes (<= -1000) are not device faults */
            return clinfer_fail(cs < 0 && cs > -1000 ? cs : CLINFER_ERR_UNSUPPORTED,
                                "OpenCL matmul: CLBlastSgemm(%d x %d x %d) failed with %d", a->n,
                                rows, a->k, (int)cs);
        return cl_timing_keep(b, event);
    }
#endif
    cl_arg args[] = {
        {sizeof(cl_mem), &w},        {sizeof(int), &w_off},   {sizeof(int), &a->k},
        {sizeof(int), &rows},        {sizeof(int), &a->n},    {sizeof(cl_mem), &a->x},
        {sizeof(int), &a->x_off},    {sizeof(int), &a->k},    {sizeof(cl_mem), &a->y},
        {sizeof(int), &a->y_off},    {sizeof(int), &a->ldy},  {sizeof(cl_mem), &a->bias},
        {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags}};
    size_t global[2], local[2];
    if (s->cpu) {
        /* A work-group walks the column tiles of one row tile: its GM weight rows stay cached. */
        size_t col_tiles = ((size_t)a->n + GEMM_GN - 1) / GEMM_GN;
        local[0] = col_tiles < 16 ? col_tiles : 16;
        local[1] = 1;
        global[0] = round_up(col_tiles, local[0]);
        global[1] = ((size_t)rows + GEMM_GM - 1) / GEMM_GM;
    } else {
        local[0] = local[1] = s->gemm_ts;
        global[0] = round_up((size_t)rows, s->gemm_ts);
        global[1] = round_up((size_t)a->n, s->gemm_ts);
    }
    return cl_launch(b, s->gemm, "gemm", args, sizeof args / sizeof args[0], 2, global, local);
}

/* Kernels still queued on a released buffer keep it alive until they finish. */
static clinfer_status ensure_scratch(cl_backend_ctx *b, scratch *sc, size_t bytes) {
    if (sc->bytes >= bytes) return CLINFER_OK;
    if (sc->mem) clReleaseMemObject(sc->mem);
    sc->mem = NULL;
    sc->bytes = 0;
    clinfer_status st = create_buffer(b, CL_MEM_READ_WRITE, bytes, NULL, &sc->mem);
    if (st == CLINFER_OK) sc->bytes = bytes;
    return st;
}

void cl_matmul_forget(cl_backend_ctx *b) {
    if (b->mm) b->mm->act.x = NULL;
}

/* Makes room in act for count rounded activations (and their f32 form with *want_f): the
 * arguments xq, xd, xf and want_f of the kernels in quantize.cl go to args[0 .. 4), pointing at
 * the caller's *want_f. */
static clinfer_status act_into(cl_backend_ctx *b, act_q8 *act, size_t count, int *want_f,
                               cl_arg args[4]) {
    clinfer_status st = CLINFER_OK;
    act->x = NULL;
    CHECK(ensure_scratch(b, &act->q, count));
    CHECK(ensure_scratch(b, &act->d, count / CLINFER_Q8_ACT_BLOCK * 2 * sizeof(float)));
    if (*want_f) CHECK(ensure_scratch(b, &act->f, count * sizeof(float)));
    args[0] = (cl_arg){sizeof(cl_mem), &act->q.mem};
    args[1] = (cl_arg){sizeof(cl_mem), &act->d.mem};
    args[2] = (cl_arg){sizeof(cl_mem), *want_f ? &act->f.mem : &act->q.mem}; /* unwritten if not */
    args[3] = (cl_arg){sizeof(int), want_f};
cleanup:
    return st;
}

static clinfer_status act_args(cl_backend_ctx *b, size_t count, int *want_f, cl_arg args[4]) {
    return act_into(b, &b->mm->act, count, want_f, args);
}

/* Rounds the op's x to 8 bits (quantize.cl) unless the last op left it so; with want_f the f32
 * form d * q too. */
static clinfer_status quantize_x(cl_backend_ctx *b, const clinfer_op *op, int want_f) {
    act_q8 *act = &b->mm->act;
    size_t count = (size_t)op->matmul.n * (size_t)op->matmul.k;
    cl_mem x = op->matmul.x.buf->mem;
    int x_off = (int)op->matmul.x.offset;
    if (act->x == x && act->x_off == op->matmul.x.offset && act->count == count &&
        (act->has_f || !want_f))
        return CLINFER_OK;
    clinfer_status st = CLINFER_OK;
    cl_arg args[6] = {{sizeof(cl_mem), &x}, {sizeof(int), &x_off}};
    CHECK(act_args(b, count, &want_f, args + 2));
    size_t global[2] = {count / CLINFER_Q8_ACT_BLOCK, 1};
    CHECK(cl_launch(b, b->mm->quantize, "quantize_q8_act", args, 6, 2, global, NULL));
    *act = (act_q8){act->q, act->d, act->f, x, op->matmul.x.offset, count, want_f};
cleanup:
    return st;
}

bool cl_round_output(const clinfer_op *op) {
    if (op->kind == CLINFER_OP_RMSNORM)
        return op->norm.y_q8 && op->norm.n > 0 && op->norm.d % CLINFER_Q8_ACT_BLOCK == 0 &&
               op->norm.y.buf != op->norm.x.buf; /* its items read whole rows of x */
    return op->kind == CLINFER_OP_SWIGLU && op->eltwise.y_q8 && op->eltwise.count > 0 &&
           op->eltwise.count % CLINFER_Q8_ACT_BLOCK == 0;
}

clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    struct cl_matmul_state *s = b->mm;
    int want_f = cl_act_q8_want_f(b), norm = op->kind == CLINFER_OP_RMSNORM;
    clinfer_ref y = norm ? op->norm.y : op->eltwise.y;
    size_t count = norm ? (size_t)op->norm.n * (size_t)op->norm.d : op->eltwise.count;
    cl_arg args[13];
    size_t n_args, global[2];
    cl_ulong off[3];
    int has_w = norm && op->norm.w.buf != NULL; /* the arguments point at these locals */
    if (norm) {
        const clinfer_ref *x = &op->norm.x, *w = &op->norm.w;
        off[0] = x->offset, off[1] = w->offset, off[2] = y.offset;
        cl_arg head[] = {{sizeof(cl_mem), &x->buf->mem},
                         {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), has_w ? &w->buf->mem : &x->buf->mem},
                         {sizeof(cl_ulong), &off[1]},
                         {sizeof(int), &has_w},
                         {sizeof(cl_mem), &y.buf->mem},
                         {sizeof(cl_ulong), &off[2]},
                         {sizeof(int), &op->norm.d},
                         {sizeof(float), &op->norm.eps}};
        n_args = sizeof head / sizeof head[0];
        memcpy(args, head, sizeof head);
        global[0] = (size_t)op->norm.d / CLINFER_Q8_ACT_BLOCK;
        global[1] = (size_t)op->norm.n;
    } else {
        const clinfer_ref *a = &op->eltwise.a, *g = &op->eltwise.b;
        off[0] = a->offset, off[1] = g->offset, off[2] = y.offset;
        cl_arg head[] = {{sizeof(cl_mem), &a->buf->mem}, {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), &g->buf->mem}, {sizeof(cl_ulong), &off[1]},
                         {sizeof(cl_mem), &y.buf->mem},  {sizeof(cl_ulong), &off[2]}};
        n_args = sizeof head / sizeof head[0];
        memcpy(args, head, sizeof head);
        global[0] = count / CLINFER_Q8_ACT_BLOCK;
        global[1] = 1;
    }
    CHECK(act_args(b, count, &want_f, args + n_args));
    CHECK(cl_launch(b, norm ? s->rmsnorm_q8 : s->swiglu_q8,
                    norm ? "rmsnorm_q8_act" : "swiglu_q8_act", args, (cl_uint)n_args + 4, 2, global,
                    NULL));
    s->act = (act_q8){s->act.q, s->act.d, s->act.f, y.buf->mem, y.offset, count, want_f};
cleanup:
    return st;
}

int cl_act_q8_want_f(const cl_backend_ctx *b) {
    return b->mm->q8_dots != 1; /* the next matmul's kernel is not known: f32 kernels read d * q */
}

clinfer_status cl_act_q8_buffers(cl_backend_ctx *b, size_t count, cl_mem mem[3], int *want_f) {
    act_q8 *act = &b->mm->act;
    cl_arg args[4];
    *want_f = cl_act_q8_want_f(b);
    clinfer_status st = act_args(b, count, want_f, args);
    mem[0] = act->q.mem;
    mem[1] = act->d.mem;
    mem[2] = *want_f ? act->f.mem : act->q.mem; /* unwritten if not */
    return st;
}

void cl_act_q8_made(cl_backend_ctx *b, clinfer_ref y, size_t count, int want_f) {
    act_q8 *act = &b->mm->act;
    *act = (act_q8){act->q, act->d, act->f, y.buf->mem, y.offset, count, want_f};
}

static clinfer_status run_matvec_q8(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                    const mm_args *a) {
    int rows = a->rows;
    cl_mem ws = p->s.mem;
    cl_arg args[] = {{sizeof(cl_mem), &p->q.mem},
                     {sizeof(cl_mem), &ws},
                     {sizeof(int), &a->k},
                     {sizeof(int), &a->r0},
                     {sizeof(int), &rows},
                     {sizeof(cl_mem), &b->mm->act.q.mem},
                     {sizeof(cl_mem), &b->mm->act.d.mem},
                     {sizeof(cl_mem), &a->y},
                     {sizeof(int), &a->y_off},
                     {sizeof(int), &a->ldy},
                     {sizeof(cl_mem), &a->bias},
                     {sizeof(int), &a->bias_off},
                     {sizeof(int), &a->flags},
                     {sizeof(int), &a->n}};
    cl_uint n_args = sizeof args / sizeof args[0] - 1; /* n only for matvec_q8_il */
    if (!a->il) {                                      /* one work-item per (row, column) */
        size_t global[2] = {round_up((size_t)rows, CPU_LOCAL), (size_t)a->n};
        size_t local[2] = {CPU_LOCAL, 1};
        return cl_launch(b, t->matvec_q8, "matvec_q8", args, n_args, 2, global, local);
    }
    /* a work-item per group of 16 rows that holds some of them and IL_COLS columns */
    size_t global[2] = {(size_t)((a->r0 + rows - 1) / 16 - a->r0 / 16 + 1),
                        (size_t)(a->n + IL_COLS - 1) / IL_COLS},
           local[2] = {1, 1};
    return cl_launch(b, t->matvec_q8_il, "matvec_q8_il", args, n_args + 1, 2, global, local);
}

/* The fused RMSNORM's operands (an absent weight binds y, never read). */
typedef struct {
    cl_mem w, y;
    cl_ulong w_off, y_off;
    int has_w;
} norm_operands;

static norm_operands norm_of(const mm_args *a) {
    const clinfer_op *no = a->norm;
    return (norm_operands){no->norm.w.buf ? no->norm.w.buf->mem : a->y, no->norm.y.buf->mem,
                           no->norm.w.offset, no->norm.y.offset, no->norm.w.buf != NULL};
}

/* The arguments the *_norm kernels take after the matmul's: done, nw, nw_off, has_nw, ny,
 * ny_off, eps (pointing into o and a). */
static void norm_args(const cl_backend_ctx *b, const norm_operands *o, const mm_args *a,
                      cl_arg out[7]) {
    cl_arg args[] = {
        {sizeof(cl_mem), &b->mm->done},     {sizeof(cl_mem), &o->w}, {sizeof(cl_ulong), &o->w_off},
        {sizeof(int), &o->has_w},           {sizeof(cl_mem), &o->y}, {sizeof(cl_ulong), &o->y_off},
        {sizeof(float), &a->norm->norm.eps}};
    memcpy(out, args, sizeof args);
}

/* matvec_rows_norm: the matmul of a (all rows of a one-part weight, one column of f32 x), then
 * the RMSNORM a->norm of its output. */
static clinfer_status run_matvec_norm(cl_backend_ctx *b, const type_kernels *t,
                                      const weight_part *p, const mm_args *a) {
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem; /* f32/f16 kernels never read ws */
    norm_operands o = norm_of(a);
    int rows = a->rows;
    cl_arg args[19] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},       {sizeof(int), &a->il},
        {sizeof(int), &a->k},        {sizeof(int), &rows},        {sizeof(cl_mem), &a->x},
        {sizeof(int), &a->x_off},    {sizeof(cl_mem), &a->y},     {sizeof(int), &a->y_off},
        {sizeof(cl_mem), &a->bias},  {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags}};
    norm_args(b, &o, a, args + 12);
    size_t global[2] = {(size_t)(rows + NORM_ROWS - 1) / NORM_ROWS, 1}, local[2] = {1, 1};
    return cl_launch(b, t->matvec_norm, "matvec_rows_norm", args, 19, 2, global, local);
}

/* matvec_q8_il_norm: the matmul of a (all rows of a one-part weight, one column), then a->norm,
 * rounding its output for the next matmul where cl_round_output says so. */
static clinfer_status run_matvec_q8_norm(cl_backend_ctx *b, const type_kernels *t,
                                         const weight_part *p, const mm_args *a) {
    struct cl_matmul_state *s = b->mm;
    clinfer_status st = CLINFER_OK;
    norm_operands o = norm_of(a);
    int rows = a->rows, want_q = cl_round_output(a->norm);
    int want_f = want_q && cl_act_q8_want_f(b);
    cl_arg args[23] = {{sizeof(cl_mem), &p->q.mem},
                       {sizeof(cl_mem), &p->s.mem},
                       {sizeof(int), &a->k},
                       {sizeof(int), &rows},
                       {sizeof(cl_mem), &s->act.q.mem},
                       {sizeof(cl_mem), &s->act.d.mem},
                       {sizeof(cl_mem), &a->y},
                       {sizeof(int), &a->y_off},
                       {sizeof(cl_mem), &a->bias},
                       {sizeof(int), &a->bias_off},
                       {sizeof(int), &a->flags}};
    norm_args(b, &o, a, args + 11);
    args[18] = (cl_arg){sizeof(int), &want_q};
    if (want_q) {
        CHECK(act_into(b, &s->spare, (size_t)rows, &want_f, args + 19));
    } else { /* the activations stay unwritten */
        for (int i = 19; i < 22; i++)
            args[i] = (cl_arg){sizeof(cl_mem), &o.y};
        args[22] = (cl_arg){sizeof(int), &want_f};
    }
    size_t global[2] = {(size_t)(rows + 15) / 16, 1}, local[2] = {1, 1};
    CHECK(cl_launch(b, t->matvec_q8_il_norm, "matvec_q8_il_norm", args, 23, 2, global, local));
    if (want_q) { /* the rounded output becomes act, the input's buffers the spare */
        act_q8 input = s->act;
        s->act = (act_q8){s->spare.q, s->spare.d, s->spare.f, o.y, o.y_off, (size_t)rows, want_f};
        s->spare = (act_q8){input.q, input.d, input.f, NULL, 0, 0, 0};
    }
cleanup:
    return st;
}

/* Dequantizes rows [first, first + count) of part p (weight-global numbering) into out. */
static clinfer_status run_dequant(cl_backend_ctx *b, const struct cl_weight *w,
                                  const weight_part *p, cl_mem ids, int ids_off, int has_ids,
                                  int first, int count, cl_mem out, int out_off) {
    const type_kernels *t = &b->mm->types[w->layout - layouts];
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem;
    cl_mem ids_arg = has_ids ? ids : out; /* never read without has_ids */
    /* one item per kernel block; for f32/f16 one more per row writes the tail */
    size_t nb = (size_t)w->k / w->layout->kblk + ((size_t)w->k % w->layout->kblk != 0);
    size_t global[2] = {nb, (size_t)count};
    cl_arg args[] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},      {sizeof(int), &w->il},
        {sizeof(int), &w->k},        {sizeof(int), &p->row0},    {sizeof(int), &p->rows},
        {sizeof(int), &w->m},        {sizeof(cl_mem), &ids_arg}, {sizeof(int), &ids_off},
        {sizeof(int), &has_ids},     {sizeof(int), &first},      {sizeof(cl_mem), &out},
        {sizeof(int), &out_off}};
    return cl_launch(b, t->dequant, "dequant_rows", args, sizeof args / sizeof args[0], 2, global,
                     NULL);
}

/* Whether the matmul op's kernel can run `norm`, an RMSNORM (already checked) of its output, at
 * its end: one launch of one column over all rows of a one-part weight, through
 * matvec_q8_il_norm (8-bit x) or matvec_rows_norm (f32 x). */
static bool norm_fusable(const cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm) {
    const clinfer_buffer *wb = op->matmul.w;
    if (norm->kind != CLINFER_OP_RMSNORM || op->matmul.n != 1 || !wb || !wb->weight) return false;
    const struct cl_weight *w = wb->weight;
    const type_kernels *t = &b->mm->types[w->layout - layouts];
    bool kernel = op->matmul.x_q8 ? w->il && t->matvec_q8_il_norm : t->matvec_norm != NULL;
    /* done, the kernels' counter, exists on CPU devices only: the last work-item seeing the
     * others' rows rests on their coherent memory (the kernel path can be forced on a GPU) */
    return kernel && b->mm->done && w->n_parts == 1 && op->matmul.row0 == 0 && norm->norm.n == 1 &&
           norm->norm.d == op->matmul.m && norm->norm.d % CLINFER_Q8_ACT_BLOCK == 0 &&
           norm->norm.x.buf == op->matmul.y.buf && norm->norm.x.offset == op->matmul.y.offset;
}

static clinfer_status matmul(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm);

clinfer_status cl_matmul(cl_backend_ctx *b, const clinfer_op *op) {
    return matmul(b, op, NULL);
}

clinfer_status cl_matmul_norm(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                              bool *fused) {
    *fused = norm_fusable(b, op, norm);
    return *fused ? matmul(b, op, norm) : CLINFER_OK;
}

/* The operands of a matmul op against its weight and buffers. */
static clinfer_status check_matmul(const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    int m = op->matmul.m, k = op->matmul.k, n = op->matmul.n;
    CHECK(check_weight("matmul", op->matmul.w, op->matmul.row0, m, k, n, false));
    CHECK(check_operand("matmul", "x", op->matmul.x, (size_t)n * k, sizeof(float)));
    CHECK(check_operand("matmul", "y", op->matmul.y, (size_t)n * m, sizeof(float)));
    if (op->matmul.bias.buf)
        CHECK(check_operand("matmul", "bias", op->matmul.bias, (size_t)m, sizeof(float)));
    if (op->matmul.x_q8 && k % CLINFER_Q8_ACT_BLOCK)
        CHECK(clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                           "OpenCL matmul: 8-bit activations need k %% %d == 0, k is %d",
                           CLINFER_Q8_ACT_BLOCK, k));
cleanup:
    return st;
}

/* Whether a matmul over 8-bit x runs an integer kernel (else f32 kernels read x as d * q). */
static int q8_kernel_for(const struct cl_weight *w, const type_kernels *t, int n) {
    /* matvec_q8_il takes any n: IL_COLS columns per work-item make it a GEMM */
    return w->il ? t->matvec_q8_il != NULL : t->matvec_q8 && n <= MATVEC_MAX_N;
}

/* The matmul op, with norm (norm_fusable) run by its launch's last work-item. */
static clinfer_status matmul(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm) {
    clinfer_status st = CLINFER_OK;
    int m = op->matmul.m, k = op->matmul.k, n = op->matmul.n;
    int row0 = op->matmul.row0;
    CHECK(check_matmul(op));
    int has_bias = op->matmul.bias.buf != NULL;
    const struct cl_weight *w = op->matmul.w->weight;
    const type_layout *l = w->layout;
    const type_kernels *t = &b->mm->types[l - layouts];
    int q8_kernel = 0;
    if (op->matmul.x_q8) {
        q8_kernel = q8_kernel_for(w, t, n);
        CHECK(quantize_x(b, op, !q8_kernel));
    }
    mm_args a = {
        .x = op->matmul.x.buf->mem,
        .y = op->matmul.y.buf->mem,
        .bias = has_bias ? op->matmul.bias.buf->mem : op->matmul.y.buf->mem,
        .x_off = (int)op->matmul.x.offset,
        .k = k,
        .n = n,
        .ldy = m,
        .flags = (op->matmul.accumulate ? F_ACCUMULATE : 0) | (has_bias ? F_BIAS : 0),
        .il = w->il,
        .norm = norm,
    };
    if (op->matmul.x_q8 && !q8_kernel) { /* the f32 kernels read x as d * q */
        a.x = b->mm->act.f.mem;
        a.x_off = 0;
    }
    for (int i = 0; i < w->n_parts; i++) {
        const weight_part *p = &w->parts[i];
        /* the op's rows this part holds: [lo, hi) in the weight's numbering */
        int lo = p->row0 > row0 ? p->row0 : row0;
        int hi = p->row0 + p->rows < row0 + m ? p->row0 + p->rows : row0 + m;
        if (lo >= hi) continue;
        a.r0 = lo - p->row0;
        a.rows = hi - lo;
        a.y_off = (int)op->matmul.y.offset + (lo - row0);
        a.bias_off = (has_bias ? (int)op->matmul.bias.offset : 0) + (lo - row0);
        if (norm) {
            CHECK(q8_kernel ? run_matvec_q8_norm(b, t, p, &a) : run_matvec_norm(b, t, p, &a));
        } else if (q8_kernel) {
            CHECK(run_matvec_q8(b, t, p, &a));
        } else if (n <= MATVEC_MAX_N) {
            CHECK(run_matvec(b, t, p, &a));
        } else if (l->type == CLINFER_DT_F32) {
            CHECK(run_gemm(b, p->q.mem, a.r0 * k, a.rows, &a));
        } else {
            uint64_t stage = alloc_limit(b) < STAGE_BYTES ? alloc_limit(b) : STAGE_BYTES;
            int chunk = (int)(stage / ((uint64_t)k * sizeof(float)));
            chunk = chunk < 1 ? 1 : chunk < a.rows ? chunk : a.rows;
            CHECK(ensure_scratch(b, &b->mm->stage, (size_t)chunk * k * sizeof(float)));
            int part_y = a.y_off, part_bias = a.bias_off;
            for (int r = 0; r < a.rows; r += chunk) {
                int count = a.rows - r < chunk ? a.rows - r : chunk;
                CHECK(run_dequant(b, w, p, NULL, 0, 0, lo + r, count, b->mm->stage.mem, 0));
                a.y_off = part_y + r;
                a.bias_off = part_bias + r;
                CHECK(run_gemm(b, b->mm->stage.mem, 0, count, &a));
            }
        }
    }
    if (!(norm && cl_round_output(norm)) && (op->matmul.y.buf->mem == b->mm->act.x || norm))
        cl_matmul_forget(b); /* x may be overwritten; norm's y is, and not rounded */
cleanup:
    return st;
}

static clinfer_status check_embed(const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    int m = op->embed.m, k = op->embed.k, n = op->embed.n;
    CHECK(check_weight("embed", op->embed.w, 0, m, k, n, true));
    CHECK(check_operand("embed", "ids", op->embed.ids, (size_t)n, sizeof(int32_t)));
    CHECK(check_operand("embed", "y", op->embed.y, (size_t)n * k, sizeof(float)));
cleanup:
    return st;
}

clinfer_status cl_embed(cl_backend_ctx *b, const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    int n = op->embed.n;
    CHECK(check_embed(op));
    const struct cl_weight *w = op->embed.w->weight;
    /* Every part looks at every id and writes the rows it holds; ids outside [0, m) give zero
     * rows (written by the first part) instead of reading out of bounds. */
    for (int i = 0; i < w->n_parts; i++)
        CHECK(run_dequant(b, w, &w->parts[i], op->embed.ids.buf->mem, (int)op->embed.ids.offset, 1,
                          0, n, op->embed.y.buf->mem, (int)op->embed.y.offset));
cleanup:
    return st;
}

clinfer_status cl_weight_view_of(cl_backend_ctx *b, const clinfer_op *op, cl_weight_view *v) {
    bool matmul = op->kind == CLINFER_OP_MATMUL;
    clinfer_status st = matmul ? check_matmul(op) : check_embed(op);
    if (st != CLINFER_OK) return st;
    const struct cl_weight *w = (matmul ? op->matmul.w : op->embed.w)->weight;
    const weight_part *p = &w->parts[0];
    const weight_array *q = &p->q, *sc = p->s.mem ? &p->s : &p->q; /* f32/f16: no scales */
    const type_kernels *t = &b->mm->types[w->layout - layouts];
    int q8 = matmul && op->matmul.x_q8 && q8_kernel_for(w, t, op->matmul.n);
    *v = (cl_weight_view){.type = w->layout->type,
                          .parts = w->n_parts,
                          .q = q->arena ? q->arena->mem : q->mem,
                          .q_off = q->offset,
                          .s = sc->arena ? sc->arena->mem : sc->mem,
                          .s_off = sc->offset,
                          .il = w->il,
                          .variant = !q8     ? CL_MM_ROWS
                                     : w->il ? CL_MM_IL
                                             : CL_MM_Q8,
                          .row_bytes = stored_row_bytes(w->layout, w->il, w->k)};
    return CLINFER_OK;
}
