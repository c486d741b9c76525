/* The reference backend: every op against an independent computation written here in double
 * precision, or against closed-form facts (rotations keep norms, one
 * visible position returns V...), over odd shapes; and bad op records rejected with
 * CLINFER_ERR_INVALID_ARGUMENT. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "weight_types.h"
#include "random.h"

static clinfer_backend *be;

/* ---- helpers ----------------------------------------------------------------------------- */

static clinfer_buffer *upload(const void *data, size_t bytes) {
    clinfer_buffer *b = NULL;
    EXPECT_OK(be->i->buffer_alloc(be->ctx, bytes, &b));
    if (b && data) EXPECT_OK(be->i->buffer_write(be->ctx, b, 0, bytes, data));
    return b;
}

static clinfer_buffer *upload_f32(const float *x, size_t n) {
    return upload(x, n * sizeof *x);
}

static void download(clinfer_buffer *b, void *dst, size_t bytes) {
    EXPECT_OK(be->i->buffer_read(be->ctx, b, 0, bytes, dst));
}

static void release(clinfer_buffer *b) {
    be->i->buffer_free(be->ctx, b);
}

static clinfer_ref ref(clinfer_buffer *b) {
    return (clinfer_ref){b, 0};
}

static clinfer_status run(clinfer_op *op) {
    return be->i->op(be->ctx, op);
}

static float *random_floats(size_t n, float lo, float hi) {
    float *x = malloc(n * sizeof *x);
    rng_fill(x, n, lo, hi);
    return x;
}

static double max_abs_diff(const float *a, const double *ref, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - ref[i]));
    return m;
}

/* NMSE of a result against a double-precision expectation. */
static double nmse_d(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* A random m x k weight in `type`; *dense receives its dequantized f32 values. */
static clinfer_buffer *random_weight(clinfer_dtype type, int m, int k, float **dense) {
    size_t row = dtype_row_bytes(type, (size_t)k);
    float *w = random_floats((size_t)m * k, -1, 1);
    uint8_t *raw = malloc((size_t)m * row);
    for (int r = 0; r < m; r++) {
        quantize_row(type, w + (size_t)r * k, raw + r * row, (size_t)k);
        dequantize_row(type, raw + r * row, w + (size_t)r * k, (size_t)k);
    }
    clinfer_buffer *b = NULL;
    EXPECT_OK(be->i->weight_create(be->ctx, type, m, k, raw, &b));
    free(raw);
    *dense = w;
    return b;
}

static clinfer_dtype all_types[CLINFER_DT_ID_LIMIT];
static size_t N_TYPES; /* weight_types(all_types), filled by main */

/* ---- matmul and embed -------------------------------------------------------------------- */

/* x_q8: a ROUND_Q8 rounds x first, which must give x rounded by hand (per the type's block, a
 * whole row per quant_q8_act call) exactly; the matmul reads its y. */
static void check_matmul(clinfer_dtype type, int m, int k, int n, bool bias, bool accumulate,
                         bool x_q8) {
    float *w;
    clinfer_buffer *wb = random_weight(type, m, k, &w);
    float *x = random_floats((size_t)n * k, -1, 1);
    float *xr = malloc((size_t)n * k * sizeof *xr); /* x as the matmul reads it */
    memcpy(xr, x, (size_t)n * k * sizeof *xr);
    if (x_q8) {
        size_t block = dtype_q8_act_block(type);
        int8_t *q = malloc((size_t)k);
        float *d = malloc((size_t)k / block * sizeof *d);
        for (size_t r = 0; r < (size_t)n; r++) {
            quant_q8_act(x + r * k, (size_t)k, block, q, d);
            for (size_t j = 0; j < (size_t)k; j++)
                xr[r * k + j] = d[j / block] * q[j];
        }
        free(q);
        free(d);
    }
    float *bv = random_floats((size_t)m, -1, 1);
    float *y0 = random_floats((size_t)n * m, -1, 1); /* what accumulate adds to */
    float *y = malloc((size_t)n * m * sizeof *y);
    double *want = malloc((size_t)n * m * sizeof *want);
    double err = 0, scale = 0; /* the float sums' error against the size of their terms */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < m; i++) {
            double s = bias ? bv[i] : 0.0, a = fabs(s);
            for (int j = 0; j < k; j++) {
                double t = (double)xr[(size_t)r * k + j] * w[(size_t)i * k + j];
                s += t;
                a += fabs(t);
            }
            double y_in = accumulate ? y0[(size_t)r * m + i] : 0.0;
            want[(size_t)r * m + i] = y_in + s;
            scale += (a + fabs(y_in)) * (a + fabs(y_in));
        }
    clinfer_buffer *xb = upload_f32(x, (size_t)n * k), *yb = upload_f32(y0, (size_t)n * m);
    clinfer_buffer *bb = bias ? upload_f32(bv, (size_t)m) : NULL;
    clinfer_buffer *xq = x_q8 ? upload_f32(x, (size_t)n * k) : NULL;
    if (x_q8) {
        clinfer_op round = {.kind = CLINFER_OP_ROUND_Q8,
                            .round_q8 = {.x = ref(xb),
                                         .y = ref(xq),
                                         .n = n,
                                         .k = k,
                                         .block = (int)dtype_q8_act_block(type)}};
        EXPECT_OK(run(&round));
        float *got = malloc((size_t)n * k * sizeof *got);
        download(xq, got, (size_t)n * k * sizeof *got);
        EXPECT(!memcmp(got, xr, (size_t)n * k * sizeof *got), "round_q8 %s k %d n %d: not exact",
               dtype_name(type), k, n);
        free(got);
    }
    clinfer_op op = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = wb,
                                .x = ref(x_q8 ? xq : xb),
                                .y = ref(yb),
                                .bias = ref(bb),
                                .m = m,
                                .k = k,
                                .n = n,
                                .accumulate = accumulate,
                                .x_q8 = x_q8}};
    EXPECT_OK(run(&op));
    download(yb, y, (size_t)n * m * sizeof *y);
    /* Squared error over the squared sums of |terms|, not of the results: a sum that cancels
     * to near zero keeps its float rounding of the terms, which a result-relative NMSE would
     * blow up (one output of 32 symmetric Q5_0 products did). */
    for (size_t i = 0; i < (size_t)n * m; i++)
        err += (y[i] - want[i]) * (y[i] - want[i]);
    double e = scale > 0 ? err / scale : err;
    EXPECT(e < 1e-11, "matmul %s m %d k %d n %d bias %d acc %d x_q8 %d: error %.3g",
           dtype_name(type), m, k, n, bias, accumulate, x_q8, e);
    release(wb);
    release(xb);
    release(xq);
    release(yb);
    release(bb);
    free(w);
    free(x);
    free(xr);
    free(bv);
    free(y0);
    free(y);
    free(want);
}

static void test_matmul(void) {
    rng_seed(1);
    for (size_t t = 0; t < N_TYPES; t++) {
        clinfer_dtype type = all_types[t];
        int kb = (int)dtype_block_elems(type);
        int k_odd = kb == 1 ? 37 : 3 * kb; /* f32/f16 take any k */
        check_matmul(type, 1, kb == 1 ? 1 : kb, 1, false, false, false);
        check_matmul(type, 7, k_odd, 1, true, false, false);
        check_matmul(type, 13, k_odd, 5, true, true, false);
        check_matmul(type, 33, 2 * (kb == 1 ? 64 : kb), 3, false, true, false);
    }
}

/* 8-bit activations, for any k that is a multiple of 32 (x_q8 is legal on f32 weights too). */
static void test_matmul_q8(void) {
    rng_seed(11);
    for (size_t t = 0; t < N_TYPES; t++) {
        int kb = (int)dtype_block_elems(all_types[t]);
        int k = kb == 1 ? 3 * CLINFER_Q8_ACT_BLOCK : 3 * kb;
        check_matmul(all_types[t], 7, k, 1, true, false, true);
        check_matmul(all_types[t], 13, k, 5, true, true, true);
    }
}

/* A row range of a weight (stacked q, k, v): row r of W is all r + 1, x all ones, so output i
 * of rows [row0, row0 + m) is k (row0 + i + 1); rows outside the weight are rejected. */
static void test_matmul_rows(void) {
    enum { M = 5, K = 32 };
    float wd[M * K], ones[K], y[M];
    for (int i = 0; i < M * K; i++)
        wd[i] = (float)(i / K + 1);
    for (int i = 0; i < K; i++)
        ones[i] = 1.0f;
    clinfer_buffer *w = NULL, *x = upload_f32(ones, K), *yb = upload_f32(ones, M);
    EXPECT_OK(be->i->weight_create(be->ctx, CLINFER_DT_F32, M, K, wd, &w));
    clinfer_op op = {
        .kind = CLINFER_OP_MATMUL,
        .matmul = {.w = w, .x = ref(x), .y = ref(yb), .m = 3, .k = K, .n = 1, .row0 = 1}};
    EXPECT_OK(run(&op));
    EXPECT_OK(be->i->buffer_read(be->ctx, yb, 0, sizeof y, y));
    for (int i = 0; i < 3; i++)
        EXPECT(y[i] == (float)(K * (i + 2)), "rows 1 .. 3: y[%d] = %g", i, (double)y[i]);
    EXPECT(y[3] == 1.0f && y[4] == 1.0f, "rows 1 .. 3 wrote past y[2]");
    op.matmul.row0 = 3; /* rows 3 .. 5 of 5 */
    EXPECT(run(&op) == CLINFER_ERR_INVALID_ARGUMENT, "rows past the weight accepted");
    op.matmul.row0 = -1;
    EXPECT(run(&op) == CLINFER_ERR_INVALID_ARGUMENT, "row0 -1 accepted");
    release(w);
    release(x);
    release(yb);
}

static void test_embed(void) {
    rng_seed(2);
    for (size_t t = 0; t < N_TYPES; t++) {
        clinfer_dtype type = all_types[t];
        int m = 11, k = dtype_block_elems(type) == 1 ? 19 : 2 * (int)dtype_block_elems(type);
        float *w;
        clinfer_buffer *wb = random_weight(type, m, k, &w);
        int32_t ids[5] = {0, 10, 3, 3, 7};
        float *y = malloc(5 * (size_t)k * sizeof *y);
        clinfer_buffer *ib = upload(ids, sizeof ids), *yb = upload(NULL, 5 * (size_t)k * 4);
        clinfer_op op = {.kind = CLINFER_OP_EMBED,
                         .embed = {.w = wb, .ids = ref(ib), .y = ref(yb), .m = m, .k = k, .n = 5}};
        EXPECT_OK(run(&op));
        download(yb, y, 5 * (size_t)k * sizeof *y);
        for (int i = 0; i < 5; i++)
            EXPECT(!memcmp(y + (size_t)i * k, w + (size_t)ids[i] * k, (size_t)k * sizeof *y),
                   "embed %s: row %d (id %d) is not the dequantized weight row", dtype_name(type),
                   i, ids[i]);
        op.embed.scale = 3.5f; /* each element multiplied, in f32 */
        EXPECT_OK(run(&op));
        download(yb, y, 5 * (size_t)k * sizeof *y);
        for (int i = 0; i < 5 * k; i++)
            EXPECT(y[i] == w[(size_t)ids[i / k] * k + (size_t)(i % k)] * 3.5f,
                   "embed %s scaled: element %d", dtype_name(type), i);
        release(wb);
        release(ib);
        release(yb);
        free(w);
        free(y);
    }
}

/* ---- norms ------------------------------------------------------------------------------- */

/* weight false: no w operand, a scale of 1 */
static void check_norm(clinfer_op_kind kind, int n, int d, bool weight, bool bias) {
    float eps = 1e-5f;
    float *x = random_floats((size_t)n * d, -3, 5), *w = random_floats((size_t)d, -2, 2);
    for (int i = 0; !weight && i < d; i++)
        w[i] = 1.0f;
    float *b = random_floats((size_t)d, -1, 1), *y = malloc((size_t)n * d * sizeof *y);
    double *want = malloc((size_t)n * d * sizeof *want);
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        double mean = 0, ms = 0;
        for (int i = 0; i < d; i++)
            mean += xr[i] / (double)d;
        for (int i = 0; i < d; i++) {
            double c = kind == CLINFER_OP_LAYERNORM ? xr[i] - mean : xr[i];
            ms += c * c / d;
        }
        for (int i = 0; i < d; i++) {
            double c = kind == CLINFER_OP_LAYERNORM ? xr[i] - mean : xr[i];
            want[(size_t)r * d + i] = c / sqrt(ms + eps) * w[i] + (bias ? b[i] : 0.0);
        }
    }
    clinfer_buffer *xb = upload_f32(x, (size_t)n * d),
                   *wb = weight ? upload_f32(w, (size_t)d) : NULL;
    clinfer_buffer *bb = bias ? upload_f32(b, (size_t)d) : NULL;
    clinfer_buffer *yb = upload(NULL, (size_t)n * d * sizeof(float));
    clinfer_op op = {
        .kind = kind,
        .norm = {
            .x = ref(xb), .w = ref(wb), .b = ref(bb), .y = ref(yb), .n = n, .d = d, .eps = eps}};
    EXPECT_OK(run(&op));
    download(yb, y, (size_t)n * d * sizeof *y);
    double e = nmse_d(y, want, (size_t)n * d);
    EXPECT(e < 1e-12, "norm kind %d n %d d %d: nmse %.3g", (int)kind, n, d, e);
    /* in place: x is overwritten with the same result */
    op.norm.y = ref(xb);
    EXPECT_OK(run(&op));
    float *y2 = malloc((size_t)n * d * sizeof *y2);
    download(xb, y2, (size_t)n * d * sizeof *y2);
    EXPECT(!memcmp(y, y2, (size_t)n * d * sizeof *y), "norm in place differs");
    release(xb);
    release(wb);
    release(bb);
    release(yb);
    free(x);
    free(w);
    free(b);
    free(y);
    free(y2);
    free(want);
}

static void test_norms(void) {
    rng_seed(3);
    static const int shapes[][2] = {{1, 1}, {1, 7}, {3, 64}, {5, 577}, {2, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        check_norm(CLINFER_OP_RMSNORM, shapes[s][0], shapes[s][1], true, false);
        check_norm(CLINFER_OP_RMSNORM, shapes[s][0], shapes[s][1], false, false);
        check_norm(CLINFER_OP_LAYERNORM, shapes[s][0], shapes[s][1], true, true);
        check_norm(CLINFER_OP_LAYERNORM, shapes[s][0], shapes[s][1], true, false);
        check_norm(CLINFER_OP_LAYERNORM, shapes[s][0], shapes[s][1], false, true);
    }
}

/* ---- rope -------------------------------------------------------------------------------- */

static void rope_run(float *x, int n, int heads, int head_dim, int n_rot, int pos0, float base,
                     float scale, bool neox) {
    size_t count = (size_t)n * heads * head_dim;
    clinfer_buffer *xb = upload_f32(x, count);
    clinfer_op op = {.kind = CLINFER_OP_ROPE,
                     .rope = {.x = ref(xb),
                              .n = n,
                              .n_heads = heads,
                              .head_dim = head_dim,
                              .n_rot = n_rot,
                              .pos0 = pos0,
                              .freq_base = base,
                              .freq_scale = scale,
                              .neox = neox}};
    EXPECT_OK(run(&op));
    download(xb, x, count * sizeof *x);
    release(xb);
}

static void test_rope(void) {
    /* one pair at position 3, freq_scale 0.5: theta = 1.5 rad, (1, 0) -> (cos, sin) */
    float p[2] = {1.0f, 0.0f};
    rope_run(p, 1, 1, 2, 2, 3, 10000.0f, 0.5f, false);
    EXPECT(fabs(p[0] - cos(1.5)) < 1e-6 && fabs(p[1] - sin(1.5)) < 1e-6, "(%g, %g)", p[0], p[1]);
    /* position 0 is the identity */
    float z[8] = {1, 2, 3, 4, 5, 6, 7, 8}, z0[8];
    memcpy(z0, z, sizeof z);
    rope_run(z, 1, 2, 4, 4, 0, 10000.0f, 1.0f, true);
    EXPECT(!memcmp(z, z0, sizeof z), "rope at position 0 changed x");

    rng_seed(4);
    static const struct {
        int n, heads, head_dim, n_rot, pos0;
        float base, scale;
    } cases[] = {{1, 1, 2, 2, 7, 10000, 1},
                 {3, 2, 8, 8, 0, 10000, 1},
                 {4, 3, 10, 6, 5, 500000, 0.25f},
                 {2, 5, 64, 32, 1000, 10000, 1},
                 {5, 1, 6, 4, 17, 100, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int neox = 0; neox < 2; neox++) {
            int n = cases[c].n, heads = cases[c].heads, hd = cases[c].head_dim;
            int n_rot = cases[c].n_rot, half = n_rot / 2;
            size_t count = (size_t)n * heads * hd;
            float *x = random_floats(count, -1, 1), *orig = malloc(count * sizeof *x);
            double *want = malloc(count * sizeof *want);
            memcpy(orig, x, count * sizeof *x);
            for (size_t i = 0; i < count; i++)
                want[i] = x[i];
            for (int t = 0; t < n; t++)
                for (int h = 0; h < heads; h++) {
                    size_t base = ((size_t)t * heads + h) * hd;
                    for (int j = 0; j < half; j++) {
                        double theta = (cases[c].pos0 + t) * (double)cases[c].scale *
                                       pow(cases[c].base, -2.0 * j / n_rot);
                        size_t a = base + (neox ? j : 2 * j),
                               b = base + (neox ? j + half : 2 * j + 1);
                        want[a] = x[a] * cos(theta) - x[b] * sin(theta);
                        want[b] = x[a] * sin(theta) + x[b] * cos(theta);
                    }
                }
            rope_run(x, n, heads, hd, n_rot, cases[c].pos0, cases[c].base, cases[c].scale, neox);
            double e = max_abs_diff(x, want, count);
            EXPECT(e < 2e-6, "rope case %zu neox %d: max error %.3g", c, neox, e);
            /* dims past n_rot are untouched; every rotated pair keeps its length */
            for (int t = 0; t < n; t++)
                for (int h = 0; h < heads; h++) {
                    size_t base = ((size_t)t * heads + h) * hd;
                    EXPECT(!memcmp(x + base + n_rot, orig + base + n_rot,
                                   (size_t)(hd - n_rot) * sizeof *x),
                           "rope case %zu touched dims past n_rot", c);
                    for (int j = 0; j < half; j++) {
                        size_t a = base + (neox ? j : 2 * j),
                               b = base + (neox ? j + half : 2 * j + 1);
                        double before = hypot(orig[a], orig[b]), after = hypot(x[a], x[b]);
                        EXPECT(fabs(before - after) < 1e-6, "rope case %zu: pair norm %g -> %g", c,
                               before, after);
                    }
                }
            free(x);
            free(orig);
            free(want);
        }
}

/* The rope's cache write against a plain rope followed by one store per token for the keys and
 * one for the values: x and both caches must come out byte for byte the same. */
static void test_rope_cache(void) {
    rng_seed(5);
    static const struct {
        int n, q_heads, kv_heads, head_dim, n_rot, pos0; /* q_heads: heads before the keys */
    } cases[] = {{1, 9, 3, 64, 64, 37},                  /* decode: queries and keys in one row */
                 {1, 4, 2, 10, 6, 5},                    /* n_rot < head_dim */
                 {5, 0, 2, 12, 4, 0},                    /* prefill: keys only */
                 {3, 0, 1, 8, 8, 11}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int variant = 0; variant < 4; variant++) {
            bool neox = variant & 1;
            clinfer_dtype type = variant & 2 ? CLINFER_DT_F16 : CLINFER_DT_F32;
            int n = cases[c].n, heads = cases[c].q_heads + cases[c].kv_heads;
            size_t kv_dim = (size_t)cases[c].kv_heads * cases[c].head_dim;
            size_t row = (size_t)heads * cases[c].head_dim, nx = n * row, nkv = n * kv_dim;
            size_t off = 3 * kv_dim, cache_bytes = (off + nkv) * (variant & 2 ? 2 : 4);
            float *x = random_floats(nx, -1, 1), *v = random_floats(nkv, -1, 1);
            clinfer_buffer *xb[2], *vb[2], *kc[2], *vc[2];
            for (int side = 0; side < 2; side++) {
                xb[side] = upload_f32(x, nx);
                vb[side] = upload_f32(v, nkv);
                kc[side] = upload(NULL, cache_bytes);
                vc[side] = upload(NULL, cache_bytes);
            }
            clinfer_op op = {.kind = CLINFER_OP_ROPE,
                             .rope = {.x = ref(xb[0]),
                                      .n = n,
                                      .n_heads = heads,
                                      .head_dim = cases[c].head_dim,
                                      .n_rot = cases[c].n_rot,
                                      .pos0 = cases[c].pos0,
                                      .freq_base = 10000,
                                      .freq_scale = 1,
                                      .neox = neox,
                                      .k_dst = {kc[0], off},
                                      .v_src = ref(vb[0]),
                                      .v_dst = {vc[0], off},
                                      .kv_heads = cases[c].kv_heads,
                                      .kv_type = type}};
            EXPECT_OK(run(&op));
            op.rope.x = ref(xb[1]);
            op.rope.k_dst = op.rope.v_src = op.rope.v_dst = (clinfer_ref){0};
            EXPECT_OK(run(&op));
            for (int t = 0; t < n; t++) {
                clinfer_op st = {.kind = CLINFER_OP_STORE,
                                 .store = {.src = {xb[1], t * row + row - kv_dim},
                                           .dst = {kc[1], off + t * kv_dim},
                                           .dst_type = type,
                                           .count = kv_dim}};
                EXPECT_OK(run(&st));
            }
            clinfer_op st = {
                .kind = CLINFER_OP_STORE,
                .store = {.src = ref(vb[1]), .dst = {vc[1], off}, .dst_type = type, .count = nkv}};
            EXPECT_OK(run(&st));
            clinfer_buffer *const *outs[] = {xb, kc, vc};
            size_t sizes[] = {nx * sizeof(float), cache_bytes, cache_bytes};
            for (int o = 0; o < 3; o++) {
                uint8_t *got[2];
                for (int side = 0; side < 2; side++) {
                    got[side] = malloc(sizes[o]);
                    download(outs[o][side], got[side], sizes[o]);
                }
                EXPECT(!memcmp(got[0], got[1], sizes[o]),
                       "rope cache case %zu variant %d: %s differs from rope + store", c, variant,
                       (const char *[]){"x", "k cache", "v cache"}[o]);
                free(got[0]);
                free(got[1]);
            }
            for (int side = 0; side < 2; side++) {
                release(xb[side]);
                release(vb[side]);
                release(kc[side]);
                release(vc[side]);
            }
            free(x);
            free(v);
        }
}

/* ---- store and attention ----------------------------------------------------------------- */

static void test_store(void) {
    rng_seed(6);
    size_t n = 77;
    float *x = random_floats(n, -70000, 70000);
    x[0] = 1e-7f; /* subnormal in half */
    clinfer_buffer *src = upload_f32(x, n), *d32 = upload(NULL, 100 * 4),
                   *d16 = upload(NULL, 100 * 2);
    clinfer_op op = {
        .kind = CLINFER_OP_STORE,
        .store = {.src = ref(src), .dst = {d32, 23}, .dst_type = CLINFER_DT_F32, .count = n}};
    EXPECT_OK(run(&op));
    float y[100];
    download(d32, y, sizeof y);
    EXPECT(!memcmp(y + 23, x, n * sizeof *x) && y[22] == 0.0f, "f32 store");
    op.store.dst = (clinfer_ref){d16, 23};
    op.store.dst_type = CLINFER_DT_F16;
    EXPECT_OK(run(&op));
    uint16_t h[100];
    download(d16, h, sizeof h);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[23 + i] != f32_to_f16(x[i]);
    EXPECT(bad == 0 && h[22] == 0, "f16 store: %d wrong", bad);
    release(src);
    release(d32);
    release(d16);
    free(x);
}

typedef struct {
    int n, n_head, n_kv_head, head_dim, pos0;
    clinfer_dtype kv_type;
    int window; /* the sliding window (0: none) */
} attn_shape;

/* The scores' soft-cap of the attention runs (0: none): some of test_attention's. */
static float attn_softcap;

/* Runs attention on q and f32 caches k, v ([pos0 + n][n_kv_head][head_dim]), stored in the
 * shape's cache type; writes out. */
static void attention_run(const attn_shape *s, const float *q, const float *k, const float *v,
                          float scale, float *out) {
    size_t nq = (size_t)s->n * s->n_head * s->head_dim;
    size_t nkv = (size_t)(s->pos0 + s->n) * s->n_kv_head * s->head_dim;
    size_t elem = dtype_block_bytes(s->kv_type);
    uint8_t *kc = malloc(nkv * elem), *vc = malloc(nkv * elem);
    quantize_row(s->kv_type, k, kc, nkv);
    quantize_row(s->kv_type, v, vc, nkv);
    clinfer_buffer *qb = upload_f32(q, nq), *kb = upload(kc, nkv * elem),
                   *vb = upload(vc, nkv * elem);
    clinfer_buffer *ob = upload(NULL, nq * sizeof(float));
    clinfer_op op = {.kind = CLINFER_OP_ATTENTION,
                     .attention = {.q = ref(qb),
                                   .k = ref(kb),
                                   .v = ref(vb),
                                   .out = ref(ob),
                                   .kv_type = s->kv_type,
                                   .n = s->n,
                                   .n_head = s->n_head,
                                   .n_kv_head = s->n_kv_head,
                                   .head_dim = s->head_dim,
                                   .pos0 = s->pos0,
                                   .window = s->window,
                                   .scale = scale,
                                   .softcap = attn_softcap}};
    EXPECT_OK(run(&op));
    download(ob, out, nq * sizeof *out);
    release(qb);
    release(kb);
    release(vb);
    release(ob);
    free(kc);
    free(vc);
}

static void check_attention(const attn_shape *s) {
    size_t nq = (size_t)s->n * s->n_head * s->head_dim;
    size_t nkv = (size_t)(s->pos0 + s->n) * s->n_kv_head * s->head_dim;
    float *q = random_floats(nq, -1, 1), *k = random_floats(nkv, -1, 1);
    float *v = random_floats(nkv, -1, 1), *out = malloc(nq * sizeof *out);
    double *want = calloc(nq, sizeof *want), *p = malloc((size_t)(s->pos0 + s->n) * sizeof *p);
    /* the cache holds what the chosen type represents */
    for (size_t i = 0; i < nkv && s->kv_type == CLINFER_DT_F16; i++) {
        k[i] = f16_to_f32(f32_to_f16(k[i]));
        v[i] = f16_to_f32(f32_to_f16(v[i]));
    }
    float scale = 1.0f / sqrtf((float)s->head_dim);
    for (int i = 0; i < s->n; i++)
        for (int h = 0; h < s->n_head; h++) {
            int kvh = h * s->n_kv_head / s->n_head, visible = s->pos0 + i + 1;
            /* a window sees the last `window` positions, its own included */
            int first = s->window > 0 && visible > s->window ? visible - s->window : 0;
            const float *qh = q + ((size_t)i * s->n_head + h) * s->head_dim;
            double max = -INFINITY, sum = 0;
            for (int t = first; t < visible; t++) {
                const float *kt = k + ((size_t)t * s->n_kv_head + kvh) * s->head_dim;
                double dot = 0;
                for (int e = 0; e < s->head_dim; e++)
                    dot += (double)qh[e] * kt[e];
                p[t] = dot * scale;
                if (attn_softcap > 0) p[t] = attn_softcap * tanh(p[t] / attn_softcap);
                max = fmax(max, p[t]);
            }
            for (int t = first; t < visible; t++)
                sum += p[t] = exp(p[t] - max);
            double *w = want + ((size_t)i * s->n_head + h) * s->head_dim;
            for (int t = first; t < visible; t++)
                for (int e = 0; e < s->head_dim; e++)
                    w[e] += p[t] / sum * v[((size_t)t * s->n_kv_head + kvh) * s->head_dim + e];
        }
    attention_run(s, q, k, v, scale, out);
    double e = max_abs_diff(out, want, nq);
    EXPECT(e < 1e-5,
           "attention n %d heads %d/%d dim %d pos0 %d window %d softcap %g %s: max error %.3g",
           s->n, s->n_head, s->n_kv_head, s->head_dim, s->pos0, s->window, (double)attn_softcap,
           dtype_name(s->kv_type), e);
    free(q);
    free(k);
    free(v);
    free(out);
    free(want);
    free(p);
}

static void test_attention(void) {
    rng_seed(7);
    /* one visible position: the output is V of that position, whatever q and k are */
    attn_shape one = {1, 4, 2, 5, 0, CLINFER_DT_F32, 0};
    float q[20], k[10], v[10], out[20];
    rng_fill(q, 20, -3, 3);
    rng_fill(k, 10, -3, 3);
    rng_fill(v, 10, -3, 3);
    attention_run(&one, q, k, v, 0.5f, out);
    for (int h = 0; h < 4; h++)
        EXPECT(!memcmp(out + 5 * h, v + 5 * (h / 2), 5 * sizeof *out), "head %d is not V", h);
    /* identical keys: every visible position weighs the same, output is the mean of V */
    attn_shape eq = {2, 1, 1, 3, 2, CLINFER_DT_F32, 0};
    float kq[6] = {1, 2, 3, 4, 5, 6}, ke[12], ve[12], oe[6];
    for (int t = 0; t < 4; t++)
        for (int e = 0; e < 3; e++) {
            ke[3 * t + e] = 0.25f;
            ve[3 * t + e] = (float)(t * 10 + e);
        }
    attention_run(&eq, kq, ke, ve, 1.0f, oe);
    /* token 0 sees positions 0..2 (mean 10 + e), token 1 sees 0..3 (mean 15 + e) */
    for (int e = 0; e < 3; e++)
        EXPECT(fabsf(oe[e] - (10.0f + e)) < 1e-5f && fabsf(oe[3 + e] - (15.0f + e)) < 1e-5f,
               "mean of V: %g %g", oe[e], oe[3 + e]);
    /* with a window of 2, token 0 sees positions 1..2 (mean 15 + e), token 1 2..3 (25 + e) */
    eq.window = 2;
    attention_run(&eq, kq, ke, ve, 1.0f, oe);
    for (int e = 0; e < 3; e++)
        EXPECT(fabsf(oe[e] - (15.0f + e)) < 1e-5f && fabsf(oe[3 + e] - (25.0f + e)) < 1e-5f,
               "mean of V in a window of 2: %g %g", oe[e], oe[3 + e]);
    static const attn_shape shapes[] = {
        {1, 1, 1, 1, 0, CLINFER_DT_F32, 0},     {1, 6, 2, 16, 9, CLINFER_DT_F32, 0},
        {4, 6, 2, 5, 3, CLINFER_DT_F16, 0},     {7, 3, 3, 8, 0, CLINFER_DT_F32, 0},
        {3, 8, 1, 64, 40, CLINFER_DT_F16, 0},   {1, 9, 3, 64, 300, CLINFER_DT_F16, 0},
        {7, 3, 3, 8, 0, CLINFER_DT_F32, 3},     {5, 4, 1, 256, 10, CLINFER_DT_F16, 8},
        {1, 9, 3, 64, 300, CLINFER_DT_F32, 64}, {3, 2, 2, 8, 2, CLINFER_DT_F32, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_attention(&shapes[i]);
    /* gemma2's soft-capped scores (these reach about 1.5): a window, head_dim 256 */
    attn_softcap = 0.5f;
    for (size_t i = 4; i < sizeof shapes / sizeof shapes[0]; i++)
        check_attention(&shapes[i]);
    attn_softcap = 0.0f;
}

/* ---- element-wise ------------------------------------------------------------------------ */

static double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double expect_eltwise(clinfer_op_kind kind, double a, double b) {
    switch (kind) {
    case CLINFER_OP_ADD:
        return a + b;
    case CLINFER_OP_GELU:
        return gelu_tanh(a);
    case CLINFER_OP_SWIGLU:
        return a / (1.0 + exp(-a)) * b;
    case CLINFER_OP_GEGLU:
        return gelu_tanh(a) * b;
    case CLINFER_OP_SCALE: /* the op's scale 0.6, cap 3 */
        return 3.0 * tanh(a * 0.6 / 3.0);
    case CLINFER_OP_SWIGLU_OAI: { /* the gate capped at 7, b clamped to [-7, 7] */
        double g = fmin(a, 7.0), u = fmin(fmax(b, -7.0), 7.0);
        return g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
    }
    default:
        return NAN;
    }
}

static void test_eltwise(void) {
    rng_seed(9);
    static const clinfer_op_kind kinds[] = {CLINFER_OP_ADD,    CLINFER_OP_GELU,
                                            CLINFER_OP_SWIGLU, CLINFER_OP_GEGLU,
                                            CLINFER_OP_SCALE,  CLINFER_OP_SWIGLU_OAI};
    size_t n = 1001;
    /* b past 7 too: SWIGLU_OAI clamps it */
    float *a = random_floats(n, -8, 8), *b = random_floats(n, -9, 9), *y = malloc(n * sizeof *y);
    double *want = malloc(n * sizeof *want);
    a[0] = 0.0f;
    a[1] = -100.0f; /* silu/gelu of a very negative value: -0, not nan */
    a[2] = 100.0f;
    clinfer_buffer *ab = upload_f32(a, n), *bb = upload_f32(b, n), *yb = upload(NULL, n * 4);
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++)
        for (int bcast = 0; bcast < 2; bcast++) {
            clinfer_op_kind kind = kinds[t];
            bool uses_b_count = kind == CLINFER_OP_ADD;
            if (bcast && !uses_b_count) continue;
            size_t b_count = bcast ? 13 : n;
            for (size_t i = 0; i < n; i++)
                want[i] = expect_eltwise(kind, a[i], b[uses_b_count ? i % b_count : i]);
            clinfer_op op = {.kind = kind,
                             .eltwise = {.a = ref(ab),
                                         .b = ref(bb),
                                         .y = ref(yb),
                                         .count = n,
                                         .b_count = b_count,
                                         .scale = 0.6f,
                                         .cap = 3.0f}};
            EXPECT_OK(run(&op));
            download(yb, y, n * sizeof *y);
            double e = nmse_d(y, want, n), m = max_abs_diff(y, want, n);
            EXPECT(e < 1e-12 && m < 1e-4, "eltwise kind %d bcast %d: nmse %.3g max %.3g", (int)kind,
                   bcast, e, m);
            int nans = 0;
            for (size_t i = 0; i < n; i++)
                nans += isnan(y[i]);
            EXPECT(nans == 0, "eltwise kind %d: %d nans", (int)kind, nans);
        }
    release(ab);
    release(bb);
    release(yb);
    free(a);
    free(b);
    free(y);
    free(want);
}

/* ---- invalid arguments ------------------------------------------------------------------- */

static void expect_invalid(clinfer_op *op, const char *what) {
    clinfer_status st = run(op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT && clinfer_last_error()[0],
           "%s: status %s, message '%s'", what, clinfer_status_str(st), clinfer_last_error());
}

static void test_invalid(void) {
    float x[64] = {0};
    clinfer_buffer *b = upload_f32(x, 64), *w = NULL, *small = upload_f32(x, 4);
    float wd[4 * 32] = {0};
    uint8_t raw[4 * sizeof(block_q8_0)] = {0};
    EXPECT_OK(be->i->weight_create(be->ctx, CLINFER_DT_F32, 4, 32, wd, &w));
    clinfer_buffer *bad = NULL;
    EXPECT(be->i->weight_create(be->ctx, CLINFER_DT_Q8_0, 4, 33, raw, &bad) ==
               CLINFER_ERR_INVALID_ARGUMENT,
           "k not a multiple of the block");
    EXPECT(be->i->weight_create(be->ctx, (clinfer_dtype)9, 4, 32, raw, &bad) ==
               CLINFER_ERR_INVALID_ARGUMENT,
           "unknown type");
    EXPECT(be->i->buffer_write(be->ctx, small, 8, 9, x) == CLINFER_ERR_INVALID_ARGUMENT,
           "write past the end");
    EXPECT(be->i->buffer_read(be->ctx, small, SIZE_MAX, 2, x) == CLINFER_ERR_INVALID_ARGUMENT,
           "read with a wrapping offset");
    EXPECT(be->i->buffer_copy(be->ctx, b, 0, small, 8, 9) == CLINFER_ERR_INVALID_ARGUMENT,
           "copy past the destination's end");
    EXPECT(be->i->buffer_copy(be->ctx, b, 0, b, 8, 9) == CLINFER_ERR_INVALID_ARGUMENT,
           "copy between overlapping ranges of one buffer");
    EXPECT(be->i->buffer_copy(be->ctx, w, 0, small, 0, 4) == CLINFER_ERR_INVALID_ARGUMENT,
           "copy from a weight");
    EXPECT(be->i->buffer_alloc(be->ctx, 0, &bad) == CLINFER_ERR_INVALID_ARGUMENT, "alloc 0");

    clinfer_op op = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = w, .x = ref(b), .y = {b, 32}, .m = 4, .k = 32, .n = 1}};
    EXPECT_OK(run(&op));
    op.matmul.y = (clinfer_ref){b, 16};
    expect_invalid(&op, "matmul x and y overlap");
    op.matmul.y = (clinfer_ref){small, 1};
    expect_invalid(&op, "matmul y too small");
    op.matmul.y = (clinfer_ref){b, 61};
    expect_invalid(&op, "matmul y offset past the end");
    op.matmul.y = (clinfer_ref){b, SIZE_MAX};
    expect_invalid(&op, "matmul y offset huge");
    op.matmul.y = (clinfer_ref){b, 32};
    op.matmul.k = 16;
    expect_invalid(&op, "matmul k differs from the weight");
    op.matmul.k = 32;
    op.matmul.x.buf = NULL;
    expect_invalid(&op, "matmul x NULL");
    op.matmul.x.buf = w;
    expect_invalid(&op, "matmul x is a weight");
    op.matmul.x.buf = b;
    op.matmul.w = b;
    expect_invalid(&op, "matmul w is not a weight");
    op.matmul.w = w;
    op.matmul.n = 0;
    expect_invalid(&op, "matmul n 0");
    op.matmul.n = -3;
    expect_invalid(&op, "matmul n negative");
    /* 8-bit activations round blocks of 32: k = 20 works only without them */
    clinfer_buffer *w20 = NULL;
    EXPECT_OK(be->i->weight_create(be->ctx, CLINFER_DT_F32, 2, 20, wd, &w20));
    clinfer_op q8 = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = w20, .x = ref(b), .y = {b, 32}, .m = 2, .k = 20, .n = 1}};
    EXPECT_OK(run(&q8));
    q8.matmul.x_q8 = true;
    expect_invalid(&q8, "matmul x_q8 with k 20");
    EXPECT(strstr(clinfer_last_error(), "x_q8") && strstr(clinfer_last_error(), "32"),
           "x_q8 with k 20: message '%s' names neither x_q8 nor 32", clinfer_last_error());
    release(w20);
    /* ROUND_Q8: blocks of 32 or 256, whole in each row, y apart from x */
    clinfer_op round = {.kind = CLINFER_OP_ROUND_Q8,
                        .round_q8 = {.x = ref(b), .y = {b, 32}, .n = 1, .k = 32, .block = 32}};
    EXPECT_OK(run(&round));
    round.round_q8.block = 48;
    expect_invalid(&round, "round_q8 block 48");
    round.round_q8.block = 256;
    expect_invalid(&round, "round_q8 k 32 by 256");
    round.round_q8.block = 32;
    round.round_q8.y.offset = 16;
    expect_invalid(&round, "round_q8 y over x");

    int32_t ids[2] = {1, 4};
    clinfer_buffer *ib = upload(ids, sizeof ids);
    clinfer_op em = {.kind = CLINFER_OP_EMBED,
                     .embed = {.w = w, .ids = ref(ib), .y = ref(b), .m = 4, .k = 32, .n = 2}};
    expect_invalid(&em, "embed id 4 of 4 rows");
    ids[1] = -1;
    EXPECT_OK(be->i->buffer_write(be->ctx, ib, 0, sizeof ids, ids));
    expect_invalid(&em, "embed id -1");
    em.embed.scale = INFINITY;
    expect_invalid(&em, "embed scale inf");

    clinfer_op rope = {.kind = CLINFER_OP_ROPE,
                       .rope = {.x = ref(b),
                                .n = 2,
                                .n_heads = 2,
                                .head_dim = 8,
                                .n_rot = 5,
                                .freq_base = 10000,
                                .freq_scale = 1}};
    expect_invalid(&rope, "rope odd n_rot");
    rope.rope.n_rot = 10;
    expect_invalid(&rope, "rope n_rot > head_dim");
    rope.rope.n_rot = 8;
    EXPECT_OK(run(&rope));
    rope.rope.n = 5;
    expect_invalid(&rope, "rope x too small");
    /* the cache write: 2 tokens x 1 key head x 8 in f16 need 32 bytes, small holds 16 */
    clinfer_buffer *vc = upload(NULL, 64);
    rope.rope = (typeof(rope.rope)){.x = ref(b),
                                    .n = 2,
                                    .n_heads = 2,
                                    .head_dim = 8,
                                    .n_rot = 8,
                                    .freq_base = 10000,
                                    .freq_scale = 1,
                                    .k_dst = ref(small),
                                    .v_src = {b, 32},
                                    .v_dst = ref(vc),
                                    .kv_heads = 1,
                                    .kv_type = CLINFER_DT_F16};
    expect_invalid(&rope, "rope k_dst too small");
    rope.rope.k_dst = ref(w);
    expect_invalid(&rope, "rope k_dst a weight");
    rope.rope.k_dst = rope.rope.v_dst;
    expect_invalid(&rope, "rope k_dst and v_dst one buffer");
    rope.rope.k_dst = ref(small);
    rope.rope.n = 1;
    EXPECT_OK(run(&rope));
    rope.rope.v_src.offset = 8;
    expect_invalid(&rope, "rope v_src overlapping x");
    rope.rope.v_src.offset = 32;
    rope.rope.kv_heads = 3;
    expect_invalid(&rope, "rope kv_heads > n_heads");
    rope.rope.kv_heads = 1;
    rope.rope.v_src.buf = NULL;
    expect_invalid(&rope, "rope cache write without v_src");
    rope.rope.v_src.buf = b;
    rope.rope.kv_type = CLINFER_DT_Q8_0;
    expect_invalid(&rope, "rope quantized cache");
    release(vc);

    clinfer_op at = {.kind = CLINFER_OP_ATTENTION,
                     .attention = {.q = ref(small),
                                   .k = ref(b),
                                   .v = ref(b),
                                   .out = ref(small),
                                   .kv_type = CLINFER_DT_F32,
                                   .n = 1,
                                   .n_head = 4,
                                   .n_kv_head = 3,
                                   .head_dim = 1,
                                   .scale = 1}};
    expect_invalid(&at, "attention n_head not a multiple of n_kv_head");
    at.attention.n_kv_head = 2;
    at.attention.kv_type = CLINFER_DT_Q8_0;
    expect_invalid(&at, "attention quantized cache");
    at.attention.kv_type = CLINFER_DT_F16;
    EXPECT_OK(run(&at));
    at.attention.out = ref(b);
    expect_invalid(&at, "attention out in a cache's buffer");
    at.attention.out = ref(small);
    at.attention.pos0 = 64;
    expect_invalid(&at, "attention cache shorter than pos0 + n");
    at.attention.pos0 = INT32_MAX;
    expect_invalid(&at, "attention pos0 huge");
    at.attention.pos0 = 0;
    at.attention.window = -4;
    expect_invalid(&at, "attention window -4");

    clinfer_op ew = {
        .kind = CLINFER_OP_ADD,
        .eltwise = {.a = ref(b), .b = ref(small), .y = ref(b), .count = 64, .b_count = 0}};
    expect_invalid(&ew, "add b_count 0");
    ew.eltwise.b_count = 5;
    expect_invalid(&ew, "add b shorter than b_count");
    ew.kind = CLINFER_OP_SWIGLU;
    expect_invalid(&ew, "swiglu b shorter than count");
    ew.kind = CLINFER_OP_GEGLU;
    expect_invalid(&ew, "geglu b shorter than count");
    ew.kind = CLINFER_OP_SWIGLU_OAI;
    expect_invalid(&ew, "swiglu_oai b shorter than count");

    clinfer_op st = {
        .kind = CLINFER_OP_STORE,
        .store = {.src = ref(b), .dst = ref(small), .dst_type = CLINFER_DT_F16, .count = 9}};
    expect_invalid(&st, "store past the end of dst");
    clinfer_op unknown = {.kind = CLINFER_OP_COUNT};
    expect_invalid(&unknown, "unknown op kind");
    EXPECT(be->i->op(be->ctx, NULL) == CLINFER_ERR_INVALID_ARGUMENT, "NULL op");
    release(b);
    release(w);
    release(small);
    release(ib);
}

int main(void) {
    N_TYPES = weight_types(all_types);
    if (ref_backend_create(&be) != CLINFER_OK) {
        fprintf(stderr, "create: %s\n", clinfer_last_error());
        return 1;
    }
    EXPECT(!strcmp(be->i->name(be->ctx), "reference"), "name");
    EXPECT(be->i->api_version == CLINFER_BACKEND_API, "api version");
    test_matmul();
    test_matmul_q8();
    test_matmul_rows();
    test_embed();
    test_norms();
    test_rope();
    test_rope_cache();
    test_store();
    test_attention();
    test_eltwise();
    test_invalid();
    EXPECT_OK(be->i->sync(be->ctx));
    backend_free(be);
    return finish("test_reference_ops");
}
