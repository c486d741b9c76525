/* The OpenCL mixture-of-experts ops (MOE_ROUTE, MATMUL_ID, MOE_SUM; backends/opencl/moe_cl.c)
 * against the reference backend, on every OpenCL device and the kernel path in
 * CLINFER_KERNEL_PATH (CTest runs one entry per path; the label oclgrind with CLINFER_TEST_SMALL).
 *
 * Routing: top-1/2/4/8 of 8 to 128 experts, each gating, with and without renormalised gates
 * and a scale, tokens whose logits tie (the lower index wins on both sides): the ids must be
 * equal, the gates within 1e-10 NMSE (exp and the division differ in their last bits). The
 * expert matmul: f32, Q8_0, Q4_K and MXFP4 experts (8-bit x for the quantized ones), inputs
 * shared by a token's experts or one per slot, tokens that choose the same experts (one group: a
 * GEMM of all the tokens) and different ones (groups of one), rows and k that are no multiple of
 * a tile, out-of-range ids (zero rows), with and without each expert's bias rows (gpt-oss):
 * within matmul's 1e-9 (tests/test_cl_matmul.c says why). The sum with and without accumulate:
 * 1e-12. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "cl_devices.h"
#include "random.h"
#include "op_pair.h"

enum { REF, CL, SIDES };

static clinfer_backend *be[SIDES];
static const char *path_name;
static const double MATMUL_NMSE = 1e-9, GATE_NMSE = 1e-10, SUM_NMSE = 1e-12;

#define pair_new(data, bytes) op_pair_new(be, data, bytes)
#define pair_random(n) op_pair_random(be, n)
#define pair_free(p) op_pair_free(be, p)

static void *read_back(int side, clinfer_buffer *buf, size_t offset, size_t bytes) {
    void *out = calloc(1, bytes);
    EXPECT_OK(be[side]->i->sync(be[side]->ctx));
    EXPECT_OK(be[side]->i->buffer_read(be[side]->ctx, buf, offset, bytes, out));
    return out;
}

static void run_both(clinfer_op op[SIDES], const char *what) {
    for (int s = 0; s < SIDES; s++) {
        clinfer_status st = be[s]->i->op(be[s]->ctx, &op[s]);
        EXPECT(st == CLINFER_OK, "%s on side %d: %s: %s", what, s, clinfer_status_str(st),
               clinfer_last_error());
    }
}

static void compare(const pair *p, size_t offset, size_t n, double limit, const char *what) {
    float *ref = read_back(REF, p->buf[REF], offset * sizeof(float), n * sizeof(float));
    float *cl = read_back(CL, p->buf[CL], offset * sizeof(float), n * sizeof(float));
    double e = nmse(cl, ref, n);
    EXPECT(e <= limit, "%s [%s]: nmse %.3g > %.3g", what, path_name, e, limit);
    free(ref);
    free(cl);
}

/* ---- routing ------------------------------------------------------------------------------ */

static void check_route(int n, int n_expert, int used, int gating, bool norm, float scale) {
    size_t nl = (size_t)n * n_expert, ns = (size_t)n * used;
    float *logits = malloc(nl * sizeof *logits);
    rng_fill(logits, nl, -4.0f, 4.0f);
    if (n > 1) /* token 1: every logit equal, then two tied pairs at the top */
        for (int e = 0; e < n_expert; e++)
            logits[n_expert + e] = e % 3 == 1 ? 2.5f : e % 5 == 2 ? 1.5f : 0.25f;
    pair l = pair_new(logits, nl * sizeof *logits);
    pair ids = pair_new(NULL, (1 + ns) * sizeof(int32_t)), w = pair_random(2 + ns);
    char what[128];
    snprintf(what, sizeof what, "route n %d top-%d of %d gating %d%s scale %g", n, used, n_expert,
             gating, norm ? " norm" : "", (double)scale);
    clinfer_op op[SIDES];
    for (int s = 0; s < SIDES; s++)
        op[s] = (clinfer_op){.kind = CLINFER_OP_MOE_ROUTE,
                             .moe_route = {.logits = {l.buf[s], 0},
                                           .ids = {ids.buf[s], 1},
                                           .weights = {w.buf[s], 2},
                                           .n = n,
                                           .n_expert = n_expert,
                                           .n_used = used,
                                           .gating = gating,
                                           .norm = norm,
                                           .scale = scale}};
    run_both(op, what);
    int32_t *ri = read_back(REF, ids.buf[REF], sizeof(int32_t), ns * sizeof(int32_t));
    int32_t *ci = read_back(CL, ids.buf[CL], sizeof(int32_t), ns * sizeof(int32_t));
    EXPECT(!memcmp(ri, ci, ns * sizeof *ri), "%s [%s]: the chosen experts differ", what, path_name);
    /* the reference's choice is the top of each row, largest first, the lower index on ties */
    for (int t = 0; t < n; t++)
        for (int j = 1; j < used; j++) {
            float a = logits[(size_t)t * n_expert + ri[t * used + j - 1]],
                  b = logits[(size_t)t * n_expert + ri[t * used + j]];
            EXPECT(a > b || (a == b && ri[t * used + j - 1] < ri[t * used + j]),
                   "%s: token %d slot %d out of order", what, t, j);
        }
    compare(&w, 2, ns, GATE_NMSE, what);
    free(ri);
    free(ci);
    free(logits);
    pair_free(&l);
    pair_free(&ids);
    pair_free(&w);
}

static void test_route(void) {
    static const int shapes[][2] = {{8, 1}, {8, 2}, {16, 4}, {64, 8}, {128, 8}, {8, 8}};
    bool small = test_small();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int gating = 0; gating < CLINFER_MOE_GATING_COUNT; gating++) {
            check_route(small ? 3 : 37, shapes[i][0], shapes[i][1], gating, gating != 2,
                        i % 2 ? 2.5f : 0.0f);
            if (!small) check_route(1, shapes[i][0], shapes[i][1], gating, false, 0.0f);
        }
}

/* ---- the expert matmul -------------------------------------------------------------------- */

/* n_expert experts of m x k in type, made on both sides from the same random rows. */
static pair experts_new(clinfer_dtype type, int n_expert, int m, int k) {
    size_t rows = (size_t)n_expert * m, row = dtype_row_bytes(type, (size_t)k);
    float *f = malloc((size_t)k * sizeof *f);
    unsigned char *data = malloc(row * rows);
    for (size_t r = 0; r < rows; r++) {
        rng_fill(f, (size_t)k, -1.0f, 1.0f);
        quantize_row(type, f, data + row * r, (size_t)k);
    }
    pair p = {{NULL, NULL}};
    for (int s = 0; s < SIDES; s++)
        EXPECT_OK(be[s]->i->weight_create(be[s]->ctx, type, (int)rows, k, data, &p.buf[s]));
    free(f);
    free(data);
    return p;
}

typedef enum { IDS_RANDOM, IDS_SAME, IDS_APART, IDS_OUT_OF_RANGE } ids_kind;

static void fill_ids(int32_t *ids, int n, int used, int n_expert, ids_kind kind) {
    for (int t = 0; t < n; t++)
        for (int j = 0; j < used; j++) {
            int32_t *id = &ids[t * used + j];
            if (kind == IDS_SAME) /* every token the same experts: one group each */
                *id = (j * 5 + 3) % n_expert;
            else if (kind == IDS_APART) /* a token's experts apart from the others' */
                *id = (t * used + j) % n_expert;
            else /* random, distinct within a token */
                do {
                    *id = (int32_t)(rng_next() % (uint64_t)n_expert);
                    for (int i = 0; i < j; i++)
                        if (ids[t * used + i] == *id) *id = -1;
                } while (*id < 0);
            if (kind == IDS_OUT_OF_RANGE && j == used - 1) *id = t % 2 ? n_expert : -1;
        }
}

/* biased: with bias rows of the experts (at an offset of 7 in their buffer). */
static void check_matmul_id(const pair *w, clinfer_dtype type, int n_expert, int m, int k, int n,
                            int used, int x_rows, ids_kind kind, bool biased) {
    bool x_q8 = dtype_block_elems(type) > 1 && k % (int)dtype_q8_act_block(type) == 0;
    size_t nx = (size_t)n * x_rows * k, ns = (size_t)n * used, ny = ns * m;
    const size_t x_off = 3, y_off = 5, b_off = 7;
    int32_t *id = malloc(ns * sizeof *id);
    fill_ids(id, n, used, n_expert, kind);
    pair ids = pair_new(id, ns * sizeof *id);
    pair x = pair_random(x_off + nx), xq = pair_new(NULL, nx * sizeof(float));
    pair y = pair_random(y_off + ny), bias = pair_random(b_off + (size_t)n_expert * m);
    char what[160];
    snprintf(what, sizeof what,
             "matmul_id %s %d experts of %d x %d, n %d top-%d x_rows %d ids %d%s%s",
             dtype_name(type), n_expert, m, k, n, used, x_rows, (int)kind, x_q8 ? " x_q8" : "",
             biased ? " biased" : "");
    clinfer_op op[SIDES], round[SIDES];
    for (int s = 0; s < SIDES; s++) {
        clinfer_ref xin = {x.buf[s], x_off};
        if (x_q8) {
            round[s] = (clinfer_op){.kind = CLINFER_OP_ROUND_Q8,
                                    .round_q8 = {.x = xin,
                                                 .y = {xq.buf[s], 0},
                                                 .n = n * x_rows,
                                                 .k = k,
                                                 .block = (int)dtype_q8_act_block(type)}};
            xin = round[s].round_q8.y;
        }
        op[s] = (clinfer_op){.kind = CLINFER_OP_MATMUL_ID,
                             .matmul_id = {.w = w->buf[s],
                                           .x = xin,
                                           .ids = {ids.buf[s], 0},
                                           .y = {y.buf[s], y_off},
                                           .m = m,
                                           .k = k,
                                           .n = n,
                                           .n_used = used,
                                           .n_expert = n_expert,
                                           .x_rows = x_rows,
                                           .x_q8 = x_q8,
                                           .bias = {biased ? bias.buf[s] : NULL, b_off}}};
    }
    if (x_q8) run_both(round, what);
    run_both(op, what);
    compare(&y, y_off, ny, MATMUL_NMSE, what);
    if (kind == IDS_OUT_OF_RANGE) { /* the last slot of each token: zeros on the device */
        float *cl = read_back(CL, y.buf[CL], y_off * sizeof(float), ny * sizeof(float));
        int nonzero = 0;
        for (int t = 0; t < n; t++)
            for (int r = 0; r < m; r++)
                nonzero += cl[((size_t)t * used + used - 1) * m + r] != 0.0f;
        EXPECT(nonzero == 0, "%s [%s]: %d values of out-of-range experts are not zero", what,
               path_name, nonzero);
        free(cl);
    }
    free(id);
    pair_free(&ids);
    pair_free(&x);
    pair_free(&xq);
    pair_free(&y);
    pair_free(&bias);
}

static void test_matmul_id(void) {
    static const clinfer_dtype types[] = {CLINFER_DT_F32, CLINFER_DT_Q8_0, CLINFER_DT_Q4_K,
                                          CLINFER_DT_MXFP4};
    static const int useds[] = {1, 2, 4, 8};
    bool small = test_small();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        clinfer_dtype type = types[ti];
        int k = dtype_block_elems(type) == 256 ? 256 : type == CLINFER_DT_F32 ? 67 : 96;
        static const int experts[] = {8, 64};
        for (size_t ei = 0; ei < (small ? 1 : 2); ei++) {
            int n_expert = experts[ei], m = ei ? 16 : 67;
            pair w = experts_new(type, n_expert, m, k);
            if (!w.buf[REF] || !w.buf[CL]) {
                pair_free(&w);
                continue;
            }
            for (size_t ui = 0; ui < sizeof useds / sizeof useds[0]; ui++) {
                int used = useds[ui];
                if (small && used == 4) continue;
                /* decode: one token; a prompt of 17 (groups of 9 and more take GEMM paths);
                 * biases on every other case */
                check_matmul_id(&w, type, n_expert, m, k, 1, used, 1, IDS_RANDOM, false);
                check_matmul_id(&w, type, n_expert, m, k, 1, used, used, IDS_RANDOM, true);
                for (int x_rows = 1; x_rows <= used; x_rows += used > 1 ? used - 1 : 1) {
                    int n = small ? 5 : 17;
                    check_matmul_id(&w, type, n_expert, m, k, n, used, x_rows, IDS_SAME, true);
                    check_matmul_id(&w, type, n_expert, m, k, n, used, x_rows, IDS_APART, false);
                    if (!small)
                        check_matmul_id(&w, type, n_expert, m, k, 3, used, x_rows, IDS_RANDOM,
                                        x_rows > 1);
                }
                if (used > 1)
                    check_matmul_id(&w, type, n_expert, m, k, 3, used, used, IDS_OUT_OF_RANGE,
                                    true);
            }
            pair_free(&w);
        }
    }
}

/* ---- the gated sum ------------------------------------------------------------------------ */

static void test_sum(void) {
    static const int shapes[][3] = {{1, 8, 64}, {5, 2, 67}, {3, 1, 33}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            int n = shapes[i][0], used = shapes[i][1], d = shapes[i][2];
            pair x = pair_random(1 + (size_t)n * used * d), w = pair_random(2 + (size_t)n * used);
            pair y = pair_random(3 + (size_t)n * d);
            char what[96];
            snprintf(what, sizeof what, "moe_sum n %d of %d, d %d%s", n, used, d,
                     accumulate ? " accumulate" : "");
            clinfer_op op[SIDES];
            for (int s = 0; s < SIDES; s++)
                op[s] = (clinfer_op){.kind = CLINFER_OP_MOE_SUM,
                                     .moe_sum = {.x = {x.buf[s], 1},
                                                 .weights = {w.buf[s], 2},
                                                 .y = {y.buf[s], 3},
                                                 .n = n,
                                                 .n_used = used,
                                                 .d = d,
                                                 .accumulate = accumulate}};
            run_both(op, what);
            compare(&y, 3, (size_t)n * d, SUM_NMSE, what);
            pair_free(&x);
            pair_free(&w);
            pair_free(&y);
        }
}

/* Records the op check refuses, the same on both sides. */
static void test_rejects(void) {
    pair x = pair_random(64), ids = pair_new(NULL, 16 * sizeof(int32_t));
    for (int s = 0; s < SIDES; s++) {
        clinfer_op route = {.kind = CLINFER_OP_MOE_ROUTE,
                            .moe_route = {.logits = {x.buf[s], 0},
                                          .ids = {ids.buf[s], 0},
                                          .weights = {x.buf[s], 32},
                                          .n = 1,
                                          .n_expert = 8,
                                          .n_used = 9}};
        clinfer_status st = be[s]->i->op(be[s]->ctx, &route);
        EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "top-9 of 8 experts on side %d: %s", s,
               clinfer_status_str(st));
        route.moe_route.n_used = 2;
        route.moe_route.weights.offset = 4; /* inside the logits */
        st = be[s]->i->op(be[s]->ctx, &route);
        EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "gates over the logits on side %d: %s", s,
               clinfer_status_str(st));
        clinfer_op sum = {.kind = CLINFER_OP_MOE_SUM,
                          .moe_sum = {.x = {x.buf[s], 0},
                                      .weights = {x.buf[s], 40},
                                      .y = {x.buf[s], 48},
                                      .n = 1,
                                      .n_used = 2,
                                      .d = 32}};
        st = be[s]->i->op(be[s]->ctx, &sum);
        EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT, "moe_sum past its buffer on side %d: %s", s,
               clinfer_status_str(st));
    }
    pair_free(&x);
    pair_free(&ids);
}

static void test_device(size_t index) {
    EXPECT_OK(ref_backend_create(&be[REF]));
    EXPECT_OK(cl_backend_create(index, NULL, &be[CL]));
    if (be[REF] && be[CL]) {
        printf("device %zu: %s\n", index, be[CL]->i->describe(be[CL]->ctx));
        rng_seed(77 + index);
        test_route();
        test_matmul_id();
        test_sum();
        test_rejects();
    }
    backend_free(be[REF]);
    backend_free(be[CL]);
}

int main(void) {
    path_name = test_kernel_path();
    int skip = for_each_test_device(test_device);
    return skip ? skip : finish("test_cl_moe");
}
