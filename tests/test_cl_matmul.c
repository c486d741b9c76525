/* The OpenCL matmul (matvec for n <= 8, GEMM above) and embedding gather against the reference
 * backend, for every weight type, on every OpenCL device (CLINFER_TEST_DEVICES="0,2" picks some)
 * and for the kernel path in CLINFER_KERNEL_PATH (CTest runs one entry per path). Shapes include
 * m and k that are no multiple of any tile or vector width, 1-row weights, accumulate, bias,
 * offsets, and weights split over several allocations (CLINFER_MAX_ALLOC).
 *
 * Both sides multiply the same stored weights: the reference dequantizes a row to f32 and takes
 * f32 dot products, the device dequantizes in registers and applies each block scale once to a
 * partial sum. The results differ only in rounding order (fma, summation order over up to 1536
 * terms), so one NMSE threshold (sum (cl - ref)^2 / sum ref^2) serves every type:
 *   1e-9   matmul, all types: typically ~1e-14; single outputs (m 1, n 1) whose dot product
 *          cancels reach ~2e-10 on PoCL. A wrong scale, nibble order or tail shows as 1e-6
 *          (a 0.01 shift of one nibble half) to 1e-2.
 *   1e-12  embedding gather: measured 0 (the same dequantization, element by element); the
 *          margin allows a contracted fma in Q4_1/Q4_K's q * scale + offset on other devices */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "opencl/cl_backend.h"
#include "opencl/program.h"
#include "check.h"
#include "weight_types.h"
#include "cl_devices.h"
#include "random.h"
#include "op_pair.h"

enum { REF, CL, SIDES };

static clinfer_backend *be[SIDES];
static const char *path_name;

static const double MATMUL_NMSE = 1e-9, EMBED_NMSE = 1e-12;
static double worst[2]; /* largest NMSE seen for matmul and embed, printed at the end */

#define pair_new(data, bytes) op_pair_new(be, data, bytes)
#define pair_random(n) op_pair_random(be, n)
#define pair_free(p) op_pair_free(be, p)

/* Random m x k weights stored as type (quantized by the library's own quantizer), created on
 * both sides; NULL buffers when creation failed (already recorded). */
static pair weight_new(clinfer_dtype type, int m, int k) {
    size_t row = dtype_row_bytes(type, (size_t)k);
    float *f = malloc((size_t)k * sizeof *f);
    unsigned char *data = malloc(row * (size_t)m);
    for (int r = 0; r < m; r++) {
        rng_fill(f, (size_t)k, -1.0f, 1.0f);
        quantize_row(type, f, data + row * (size_t)r, (size_t)k);
    }
    pair p = {{NULL, NULL}};
    for (int s = 0; s < SIDES; s++)
        EXPECT_OK(be[s]->i->weight_create(be[s]->ctx, type, m, k, data, &p.buf[s]));
    free(f);
    free(data);
    return p;
}

static float *read_back(int side, clinfer_buffer *buf, size_t offset, size_t n) {
    float *out = calloc(n, sizeof *out);
    EXPECT_OK(be[side]->i->sync(be[side]->ctx));
    EXPECT_OK(be[side]->i->buffer_read(be[side]->ctx, buf, offset * sizeof(float),
                                       n * sizeof(float), out));
    return out;
}

static void compare(const pair *p, size_t offset, size_t n, double limit, const char *what) {
    float *ref = read_back(REF, p->buf[REF], offset, n);
    float *cl = read_back(CL, p->buf[CL], offset, n);
    double e = nmse(cl, ref, n);
    double *w = &worst[limit == EMBED_NMSE];
    *w = e > *w ? e : *w;
    EXPECT(e <= limit, "%s [%s]: nmse %.3g > %.3g", what, path_name, e, limit);
    free(ref);
    free(cl);
}

/* y = W x (+ bias) or y += ..., with x and y at odd offsets so no kernel may assume alignment;
 * x_q8: x rounded to 8 bits first by a ROUND_Q8, whose 8-bit form the matmul reads (integer dot
 * products on devices that have them). */
/* y = x . W^T over W's rows [row0, row0 + m). */
static void check_matmul(const pair *w, clinfer_dtype type, int row0, int m, int k, int n,
                         bool accumulate, bool bias, bool x_q8, const char *why) {
    const size_t x_off = 3, y_off = 5;
    pair x = pair_random(x_off + (size_t)n * k);
    pair y = pair_random(y_off + (size_t)n * m); /* accumulate adds to these */
    pair b = pair_random(1 + (size_t)m);
    pair xq = pair_new(NULL, (size_t)n * k * sizeof(float));
    char what[160];
    snprintf(what, sizeof what, "%s matmul %s rows %d + %d k %d n %d%s%s%s", why, dtype_name(type),
             row0, m, k, n, accumulate ? " accumulate" : "", bias ? " bias" : "",
             x_q8 ? " x_q8" : "");
    for (int s = 0; s < SIDES; s++) {
        clinfer_op op = {.kind = CLINFER_OP_MATMUL};
        op.matmul.w = w->buf[s];
        op.matmul.x = (clinfer_ref){x.buf[s], x_off};
        if (x_q8) {
            clinfer_op round = {.kind = CLINFER_OP_ROUND_Q8};
            round.round_q8 = (typeof(round.round_q8)){.x = op.matmul.x,
                                                      .y = {xq.buf[s], 0},
                                                      .n = n,
                                                      .k = k,
                                                      .block = (int)dtype_q8_act_block(type)};
            EXPECT_OK(be[s]->i->op(be[s]->ctx, &round));
            op.matmul.x = round.round_q8.y;
        }
        op.matmul.y = (clinfer_ref){y.buf[s], y_off};
        op.matmul.bias = (clinfer_ref){bias ? b.buf[s] : NULL, 1};
        op.matmul.row0 = row0;
        op.matmul.m = m;
        op.matmul.k = k;
        op.matmul.n = n;
        op.matmul.accumulate = accumulate;
        op.matmul.x_q8 = x_q8;
        clinfer_status st = be[s]->i->op(be[s]->ctx, &op);
        EXPECT(st == CLINFER_OK, "%s on side %d: %s: %s", what, s, clinfer_status_str(st),
               clinfer_last_error());
    }
    compare(&y, y_off, (size_t)n * m, MATMUL_NMSE, what);
    pair_free(&x);
    pair_free(&y);
    pair_free(&b);
    pair_free(&xq);
}

static void check_embed(const pair *w, clinfer_dtype type, int m, int k, const char *why) {
    int32_t ids[] = {0, m - 1, m / 2, m - 1, m / 3, 0, (m * 7) / 8};
    const int n = sizeof ids / sizeof ids[0];
    pair id = pair_new(ids, sizeof ids);
    pair y = pair_random(2 + (size_t)n * k);
    char what[128];
    for (int scaled = 0; scaled < 2; scaled++) { /* scale 0 (none), then gemma3's sqrt(640) */
        snprintf(what, sizeof what, "%s embed %s m %d k %d scale %d", why, dtype_name(type), m, k,
                 scaled);
        for (int s = 0; s < SIDES; s++) {
            clinfer_op op = {.kind = CLINFER_OP_EMBED};
            op.embed.w = w->buf[s];
            op.embed.ids = (clinfer_ref){id.buf[s], 0};
            op.embed.y = (clinfer_ref){y.buf[s], 2};
            op.embed.m = m;
            op.embed.k = k;
            op.embed.n = n;
            op.embed.scale = scaled ? 25.298221f : 0.0f;
            EXPECT_OK(be[s]->i->op(be[s]->ctx, &op));
        }
        compare(&y, 2, (size_t)n * k, EMBED_NMSE, what);
    }
    pair_free(&id);
    pair_free(&y);
}

/* Ids outside [0, m) must not read out of bounds: the device writes zero rows. */
static void check_embed_out_of_range(const pair *w, int m, int k) {
    int32_t ids[] = {-1, m, 1 << 30};
    const int n = sizeof ids / sizeof ids[0];
    clinfer_buffer *id = NULL, *y = NULL;
    EXPECT_OK(be[CL]->i->buffer_alloc(be[CL]->ctx, sizeof ids, &id));
    EXPECT_OK(be[CL]->i->buffer_write(be[CL]->ctx, id, 0, sizeof ids, ids));
    float *ones = malloc((size_t)n * k * sizeof *ones);
    for (int i = 0; i < n * k; i++)
        ones[i] = 1.0f;
    EXPECT_OK(be[CL]->i->buffer_alloc(be[CL]->ctx, (size_t)n * k * sizeof(float), &y));
    EXPECT_OK(be[CL]->i->buffer_write(be[CL]->ctx, y, 0, (size_t)n * k * sizeof(float), ones));
    clinfer_op op = {.kind = CLINFER_OP_EMBED};
    op.embed.w = w->buf[CL];
    op.embed.ids = (clinfer_ref){id, 0};
    op.embed.y = (clinfer_ref){y, 0};
    op.embed.m = m;
    op.embed.k = k;
    op.embed.n = n;
    EXPECT_OK(be[CL]->i->op(be[CL]->ctx, &op));
    float *out = read_back(CL, y, 0, (size_t)n * k);
    int nonzero = 0;
    for (int i = 0; i < n * k; i++)
        nonzero += out[i] != 0.0f;
    EXPECT(nonzero == 0, "embed of out-of-range ids [%s]: %d of %d values are not zero", path_name,
           nonzero, n * k);
    free(out);
    free(ones);
    be[CL]->i->buffer_free(be[CL]->ctx, id);
    be[CL]->i->buffer_free(be[CL]->ctx, y);
}

/* Rows past one x tile of matvec_gpu (GMV_XT, 4096 elements in local memory, cl/gpu_matvec.cl):
 * the tiles after the first and, for f32/f16, a tail in the last. */
static void test_long_rows(clinfer_dtype type) {
    int k = dtype_block_elems(type) == 1 ? 4096 + 256 + 67 : 4096 + 512;
    pair w = weight_new(type, 5, k);
    if (w.buf[REF] && w.buf[CL])
        for (int n = 1; n <= 2; n++)
            check_matmul(&w, type, 0, 5, k, n, n == 2, n == 1, false, "long rows");
    pair_free(&w);
}

/* Every type over the shape grid: m in {1, 3, 67, 576}, k per block size, n across the matvec
 * (<= 8; f32 x over interleaved rows <= 16, in passes of 8, 4, 2 and 1 columns) and GEMM (> 8)
 * paths; test_small() drops m 576 and the larger k, which only lengthen the same loops. */
static void test_shapes(clinfer_dtype type) {
    static const int ms[] = {1, 3, 67, 576};
    static const int ks_elem[] = {32, 96, 67, 576, 1536}; /* f32/f16: 67 leaves a tail */
    static const int ks_blk32[] = {32, 96, 576, 1536};
    static const int ks_k[] = {256, 768};
    static const int ns[] = {1, 2, 5, 7, 8, 9, 16, 33};
    const int *ks;
    int nk;
    size_t blk = dtype_block_elems(type);
    bool q8 = blk > 1,
         small = test_small(); /* 8-bit activations only pair with quantized weights */
    if (blk == 1) {
        ks = ks_elem;
        nk = small ? 3 : sizeof ks_elem / sizeof ks_elem[0];
    } else if (blk == 32) {
        ks = ks_blk32;
        nk = small ? 2 : sizeof ks_blk32 / sizeof ks_blk32[0];
    } else {
        ks = ks_k;
        nk = small ? 1 : sizeof ks_k / sizeof ks_k[0];
    }
    size_t n_ms = sizeof ms / sizeof ms[0] - (small ? 1 : 0);
    int variant = 0;
    for (size_t mi = 0; mi < n_ms; mi++)
        for (int ki = 0; ki < nk; ki++) {
            int m = ms[mi], k = ks[ki];
            pair w = weight_new(type, m, k);
            if (!w.buf[REF] || !w.buf[CL]) {
                pair_free(&w);
                continue;
            }
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++, variant++) {
                /* large shapes only at a few n: the reference is slow */
                if ((size_t)m * k >= 576 * 576 && ns[ni] > 9 && ni % 2) continue;
                /* small (Oclgrind): 2, 5, 8 and 9 already take every pass of 8, 4, 2 and 1
                 * columns that 7 and 16 take */
                if (small && (ns[ni] == 7 || ns[ni] == 16)) continue;
                check_matmul(&w, type, 0, m, k, ns[ni], variant % 2, variant % 3 == 1, false,
                             "grid");
                if (q8 && ns[ni] <= 9) /* matvec (integer kernels) and GEMM on d * q */
                    check_matmul(&w, type, 0, m, k, ns[ni], variant % 2, variant % 3 == 0, true,
                                 "grid");
            }
            if (m == 67) /* rows in the middle, as of stacked q, k, v */
                for (int n = 1; n <= 17; n += 8) {
                    check_matmul(&w, type, 3, 60, k, n, n > 1, true, false, "rows");
                    if (q8) check_matmul(&w, type, 64, 3, k, n, false, false, true, "rows");
                }
            if (m == 67 || m == 576) check_embed(&w, type, m, k, "grid");
            pair_free(&w);
        }
    /* prefill-sized batch on a mid-sized weight */
    int k = blk == 256 ? 512 : 576, n = small ? 40 : 128;
    pair w = weight_new(type, 67, k);
    if (w.buf[REF] && w.buf[CL]) {
        check_matmul(&w, type, 0, 67, k, n, false, true, false, "batch");
        if (q8) check_matmul(&w, type, 0, 67, k, n, true, false, true, "batch");
        if (q8) { /* 8-bit GEMM tiles cut at both edges: odd row counts (from an odd row on),
                   * column counts no multiple of any tile */
            check_matmul(&w, type, 1, 63, k, 37, false, true, true, "tile edges");
            check_matmul(&w, type, 0, 5, k, 13, true, false, true, "tile edges");
        }
        check_embed_out_of_range(&w, 67, k);
    }
    pair_free(&w);
}

/* Weights split by rows over several allocations: a limit of a few rows' bytes forces parts of
 * uneven size, and matvec, GEMM (and its f32 staging) and gather must stitch them together. */
static void test_split(clinfer_dtype type) {
    const int m = 67, k = dtype_block_elems(type) == 256 ? 512 : 192;
    bool q8 = dtype_block_elems(type) > 1;
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", 9 * dtype_row_bytes(type, (size_t)k) / 2);
    setenv("CLINFER_MAX_ALLOC", limit, 1);
    pair w = weight_new(type, m, k);
    if (w.buf[REF] && w.buf[CL]) { /* the limit also cuts GEMM's f32 staging into chunks */
        for (int n = 1; n <= 17; n += 8) {
            check_matmul(&w, type, 0, m, k, n, n > 1, true, n == 1 && q8, "split");
            /* a range that starts and ends inside parts */
            check_matmul(&w, type, 7, m - 12, k, n, false, n > 1, n == 1 && q8, "split");
        }
        check_embed(&w, type, m, k, "split");
    }
    unsetenv("CLINFER_MAX_ALLOC");
    pair_free(&w);
}

static clinfer_status run_q8(int side, const pair *w, int m, int k, int n, clinfer_ref x,
                             clinfer_ref y) {
    clinfer_op op = {.kind = CLINFER_OP_MATMUL};
    op.matmul.w = w->buf[side];
    op.matmul.x = x;
    op.matmul.y = y;
    op.matmul.m = m;
    op.matmul.k = k;
    op.matmul.n = n;
    op.matmul.x_q8 = true;
    return be[side]->i->op(be[side]->ctx, &op);
}

/* ops[0 .. n) as the executor runs them: in the backend's runs where it has them, else one by
 * one. */
static void run_walk(int side, const clinfer_op *ops, size_t n) {
    const clinfer_backend_i *i = be[side]->i;
    for (size_t at = 0, taken = 0; at < n; at += taken) {
        taken = 0;
        if (i->op_run) EXPECT_OK(i->op_run(be[side]->ctx, ops + at, n - at, &taken));
        if (!taken) {
            EXPECT_OK(i->op(be[side]->ctx, &ops[at]));
            taken = 1;
        }
    }
}

/* A ROUND_Q8 leaves beside its y the 8-bit form the matmuls over y read, whichever launch made
 * it: alone (step 0, read by two matmuls; step 1 after a write to its x, into y past its buffer's
 * first element), or with the rmsnorm or swiglu that wrote its x (steps 2, 3; step 4 an rmsnorm of
 * two rows, which CPUs round a row per item, before a matmul of two columns). Each step's result is
 * compared with the reference; a matmul over x no ROUND_Q8 made is refused. */
static void test_q8_round(clinfer_dtype type) {
    const int m = 40, k = dtype_block_elems(type) == 256 ? 256 : 96;
    const int q8_block = (int)dtype_q8_act_block(type);
    pair w = weight_new(type, m, k), w2 = weight_new(type, k, k);
    pair x = pair_random(2 * (size_t)k), y = pair_random(2 * (size_t)m);
    pair src = pair_random(2 * (size_t)k), xq = pair_new(NULL, 2 * (size_t)k * sizeof(float));
    pair y2 = pair_new(NULL, (size_t)k * sizeof(float));
    float *fresh = malloc((size_t)k * sizeof *fresh);
    rng_fill(fresh, (size_t)k, -2.0f, 2.0f);
    char what[96];
    for (int step = 0; step < 5 && w.buf[REF] && w.buf[CL] && w2.buf[REF] && w2.buf[CL]; step++) {
        int n = step == 4 ? 2 : 1;
        for (int s = 0; s < SIDES; s++) {
            clinfer_ref x0 = {x.buf[s], 0}, x1 = {x.buf[s], (size_t)k};
            clinfer_ref q = {xq.buf[s], step == 1 ? (size_t)k : 0}; /* 1: y inside its buffer */
            clinfer_ref from = {src.buf[s], 0};
            if (step == 1) /* a write to x */
                EXPECT_OK(be[s]->i->buffer_write(be[s]->ctx, x.buf[s], 0, (size_t)k * sizeof(float),
                                                 fresh));
            clinfer_op ops[2] = {{.kind = CLINFER_OP_RMSNORM}, {.kind = CLINFER_OP_ROUND_Q8}};
            ops[0].norm =
                (typeof(ops[0].norm)){.x = from, .w = from, .y = x0, .n = n, .d = k, .eps = 1e-5f};
            if (step == 3) {
                ops[0].kind = CLINFER_OP_SWIGLU;
                ops[0].eltwise =
                    (typeof(ops[0].eltwise)){.a = from, .b = x1, .y = x0, .count = (size_t)k};
            }
            ops[1].round_q8 =
                (typeof(ops[1].round_q8)){.x = x0, .y = q, .n = n, .k = k, .block = q8_block};
            if (step < 2)
                run_walk(s, ops + 1, 1);
            else
                run_walk(s, ops, 2);
            EXPECT_OK(run_q8(s, &w, m, k, n, q, (clinfer_ref){y.buf[s], 0}));
            if (step == 0) EXPECT_OK(run_q8(s, &w2, k, k, 1, q, (clinfer_ref){y2.buf[s], 0}));
            if (s == CL && step == 0) { /* x1 holds no rounding: the contract broken */
                clinfer_status st = run_q8(s, &w, m, k, 1, x1, (clinfer_ref){y.buf[s], m});
                EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT &&
                           strstr(clinfer_last_error(), "round_q8"),
                       "x_q8 matmul over x no round_q8 made: %s (%s)", clinfer_status_str(st),
                       clinfer_last_error());
            }
        }
        snprintf(what, sizeof what, "x_q8 round %s step %d", dtype_name(type), step);
        /* a norm's last-bit difference may move a value across a rounding step (test_cl_ops) */
        compare(&y, 0, (size_t)m * n, step == 2 || step == 4 ? 1e-5 : MATMUL_NMSE, what);
        if (step == 0) compare(&y2, 0, (size_t)k, MATMUL_NMSE, what);
    }
    free(fresh);
    pair_free(&w);
    pair_free(&w2);
    pair_free(&x);
    pair_free(&y);
    pair_free(&y2);
    pair_free(&src);
    pair_free(&xq);
}

/* Bad records are rejected with a status, and the backend stays usable. */
static void test_rejects(void) {
    const float data[64] = {0};
    clinfer_buffer *w = NULL;
    clinfer_status st = be[CL]->i->weight_create(be[CL]->ctx, CLINFER_DT_Q8_0, 2, 48, data, &w);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT && !w, "Q8_0 weight with k 48: %s",
           clinfer_status_str(st));
    st = be[CL]->i->weight_create(be[CL]->ctx, (clinfer_dtype)99, 1, 32, data, &w);
    EXPECT(st == CLINFER_ERR_UNSUPPORTED, "weight of type 99: %s", clinfer_status_str(st));
    EXPECT_OK(be[CL]->i->weight_create(be[CL]->ctx, CLINFER_DT_F32, 2, 32, data, &w));
    clinfer_buffer *x = NULL;
    EXPECT_OK(be[CL]->i->buffer_alloc(be[CL]->ctx, 64 * sizeof(float), &x));
    clinfer_op op = {.kind = CLINFER_OP_MATMUL};
    op.matmul.w = w;
    op.matmul.x = (clinfer_ref){x, 0};
    op.matmul.y = (clinfer_ref){x, 0};
    op.matmul.m = 3; /* the weight has 2 rows */
    op.matmul.k = 32;
    op.matmul.n = 1;
    st = be[CL]->i->op(be[CL]->ctx, &op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "matmul with the wrong m: %s",
           clinfer_status_str(st));
    op.matmul.m = 1;
    op.matmul.row0 = 2; /* rows 2 .. 2 of a 2-row weight */
    st = be[CL]->i->op(be[CL]->ctx, &op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "matmul past the weight's rows: %s",
           clinfer_status_str(st));
    op.matmul.row0 = -1;
    st = be[CL]->i->op(be[CL]->ctx, &op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "matmul from row -1: %s", clinfer_status_str(st));
    op.matmul.row0 = 0;
    op.matmul.m = 2;
    op.matmul.n = 2;
    op.matmul.x.offset = 8; /* 8 + 2 * 32 > 64 */
    st = be[CL]->i->op(be[CL]->ctx, &op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "matmul past the end of x: %s",
           clinfer_status_str(st));
    be[CL]->i->buffer_free(be[CL]->ctx, w);
    be[CL]->i->buffer_free(be[CL]->ctx, x);
}

/* 8-bit x past MATVEC_MAX_N columns (gemm_q8 where the device has integer dots, for weights
 * not interleaved: few rows, or split in parts of a few rows; from GEMM_KQ_MIN_N columns the
 * K-quants' staged gemm_kq, n 45 taking its passes of 8, 4 and 1 columns): edge tiles of rows
 * and columns, rows inside a weight, parts. Run after the other checks so their random data
 * stays as it was. test_small() keeps one k and n 9 (edge tiles of both): Oclgrind has no
 * gemm_q8 (it needs the AVX2 dot builtins), so there these checks take the staging path
 * test_shapes covers. */
static void test_gemm_q8(clinfer_dtype type) {
    static const int ms[] = {1, 5, 67}, ns[] = {9, 14, 33, 45};
    size_t blk = dtype_block_elems(type);
    bool small = test_small();
    int k = blk == 256 ? (small ? 256 : 512) : 96, variant = 0;
    size_t n_ns = small ? 1 : sizeof ns / sizeof ns[0];
    if (blk == 1) return;
    for (int split = 0; split < 2; split++) {
        char limit[32];
        snprintf(limit, sizeof limit, "%zu", 9 * dtype_row_bytes(type, (size_t)k) / 2);
        if (split) setenv("CLINFER_MAX_ALLOC", limit, 1);
        for (size_t mi = split ? 2 : 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int m = ms[mi];
            pair w = weight_new(type, m, k);
            for (size_t ni = 0; w.buf[REF] && w.buf[CL] && ni < n_ns; ni++, variant++) {
                int row0 = m == 67 ? 7 : 0, rows = m == 67 ? m - 12 : m;
                check_matmul(&w, type, row0, rows, k, ns[ni], variant % 2, variant % 3 == 0, true,
                             split ? "gemm_q8 split" : "gemm_q8");
            }
            pair_free(&w);
        }
        unsetenv("CLINFER_MAX_ALLOC");
    }
}

/* f32 x past MATVEC_MAX_N columns, shapes that are no multiple of the GEMM's tiles. On cpu-rows
 * both go to gemm_panels (16-row panels, 6-column tiles, 32 tiles per work-item, 256-element
 * blocks of k): n 193 = 192 + 1, a work-item of one column; 199 = 192 + 6 + 1, a partial
 * work-item and a partial tile. 37 rows from row 3 (a partial last panel, read from inside the
 * weight), k with a partial last block (f32/f16: 299, past a multiple of 8 too). */
static void test_gemm_tiles(clinfer_dtype type) {
    size_t blk = dtype_block_elems(type);
    int k = blk == 1 ? 299 : blk == 32 ? 320 : 512, m = 37;
    pair w = weight_new(type, m + 5, k);
    if (w.buf[REF] && w.buf[CL]) {
        check_matmul(&w, type, 3, m, k, 193, false, true, false, "gemm tiles");
        check_matmul(&w, type, 3, m, k, 199, true, false, false, "gemm tiles");
    }
    pair_free(&w);
}

/* Whether the device's compiler defines __AVX2__, under which matvec.cl compiles its integer
 * dots (PoCL compiles for its host CPU, as LLVM knows it). The probe always holds one kernel:
 * NVIDIA's driver crashed on a program without any. */
static bool compiles_avx2(const cl_backend_ctx *b) {
    const char *src =
        "__kernel void any(__global int *x) { x[0] = 0; }\n"
        "#ifdef __AVX2__\n__kernel void avx2(__global int *x) { x[0] = 1; }\n#endif\n";
    cl_int err;
    cl_program p = clCreateProgramWithSource(b->context, 1, &src, NULL, &err);
    bool has = err == CL_SUCCESS &&
               clBuildProgram(p, 1, &b->device, "", NULL, NULL) == CL_SUCCESS &&
               cl_program_has_kernel(p, "avx2");
    if (p) clReleaseProgram(p);
    return has;
}

/* int8_dots, which the default activations ask, says what the kernels do: integer dots exist on
 * the cpu-rows path where the device compiles matvec.cl's AVX2 sections, never on the GPU paths,
 * whose matmuls read 8-bit x back as f32. A backend of its own, so that no other test's weight
 * has been built first. */
static void test_int8_dots(size_t index) {
    clinfer_backend *cl = NULL;
    EXPECT_OK(cl_backend_create(index, NULL, &cl));
    if (!cl) return;
    const cl_backend_ctx *b = cl->ctx;
    EXPECT(!cl->i->int8_dots(cl->ctx), "int8_dots before any quantized weight");
    static const unsigned char zeros[16 * 2 * 34]; /* 16 rows of two Q8_0 blocks */
    clinfer_buffer *w = NULL;
    EXPECT_OK(cl->i->weight_create(cl->ctx, CLINFER_DT_Q8_0, 16, 64, zeros, &w));
    bool dots = cl->i->int8_dots(cl->ctx), avx2 = compiles_avx2(b);
    bool want = !strcmp(b->info.kernel_path, "cpu-rows") && avx2;
    EXPECT(dots == want, "int8_dots %d on the %s path, __AVX2__ %s", dots, b->info.kernel_path,
           avx2 ? "defined" : "not defined");
    if (w) cl->i->buffer_free(cl->ctx, w);
    backend_free(cl);
}

static void test_device(size_t index) {
    EXPECT_OK(ref_backend_create(&be[REF]));
    EXPECT_OK(cl_backend_create(index, NULL, &be[CL]));
    if (!be[REF] || !be[CL]) {
        backend_free(be[REF]);
        backend_free(be[CL]);
        return;
    }
    printf("device %zu: %s\n", index, be[CL]->i->describe(be[CL]->ctx));
    test_int8_dots(index);
    rng_seed(1234 + index);
    clinfer_dtype types[CLINFER_DT_ID_LIMIT];
    size_t n_types = weight_types(types);
    for (size_t t = 0; t < n_types; t++) {
        printf("  %s\n", dtype_name(types[t]));
        test_shapes(types[t]);
        test_long_rows(types[t]);
        test_split(types[t]);
        if (dtype_block_elems(types[t]) > 1) test_q8_round(types[t]);
    }
    test_rejects();
    for (size_t t = 0; t < n_types; t++) {
        test_gemm_q8(types[t]);
        test_gemm_tiles(types[t]);
    }
    backend_free(be[REF]);
    backend_free(be[CL]);
}

int main(void) {
    path_name = test_kernel_path();
    int skip = for_each_test_device(test_device);
    if (skip) return skip;
    printf("worst nmse: matmul %.3g, embed %.3g\n", worst[0], worst[1]);
    return finish("test_cl_matmul");
}
