/* Every non-matmul op of the OpenCL backend against the reference backend on seeded random inputs,
 * over odd, one-row and large shapes, on every OpenCL device (CLINFER_TEST_DEVICES="0,2" picks
 * some) and for the kernel path in CLINFER_KERNEL_PATH (CTest runs one entry per path). Then bad op
 * records, which must be rejected with a status and leave the backend usable.
 *
 * NMSE thresholds (sum (cl - ref)^2 / sum ref^2), all f32 arithmetic on the device:
 *   1e-10  add, swiglu, geglu, gelu, scale (capped or not): a few ulp per element from the
 *          device's exp/tanh (OpenCL allows up to 4 ulp) against the host's libm
 *   1e-10  rmsnorm, layernorm: f32 sums in a different order than the reference's double sums
 *   1e-9   rope: the device forms the angle in f32 (the reference in double); at pos ~1000 that
 *          is ~1e-4 rad absolute, below 1e-8 relative energy; also its f32 key cache writes
 *   1e-6   rope's f16 key cache writes: a rotated value that differs in its last f32 bits may
 *          round to the other f16 neighbour (one such flip is ~1e-9 here; measured 2e-11)
 *   1e-9   attention: online softmax rescaling and summation order over up to ~300 positions
 *          (head_dim up to 256, sliding windows and gemma2's soft-capped scores too);
 *          with its own rotation and cache write, the caches as rope's (k 1e-9, f16 1e-6, v exact)
 *   1e-5   a matmul after attention that rounds its output: attention's differences may move a
 * value across an 8-bit rounding boundary (one step in a block is ~1e-6 of y's energy here) exact
 * store and rope's value cache writes (f32 copies; f16 rounding to nearest even on both sides); on
 * the device, attention with its own rotation and cache write against the rope and attention
 * launches it replaces (output and caches), and a matmul after attention that rounds its output
 * against one after a round_q8 of its own */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "cl_devices.h"
#include "random.h"

enum { REF, CL, SIDES };

static clinfer_backend *be[SIDES];
static const char *path_name;

/* One tensor held by both backends with the same contents. */
typedef struct {
    clinfer_buffer *buf[SIDES];
    size_t bytes;
} pair;

static pair pair_new(const void *data, size_t bytes) {
    pair p = {.bytes = bytes};
    for (int s = 0; s < SIDES; s++) {
        EXPECT_OK(be[s]->i->buffer_alloc(be[s]->ctx, bytes, &p.buf[s]));
        if (data && p.buf[s])
            EXPECT_OK(be[s]->i->buffer_write(be[s]->ctx, p.buf[s], 0, bytes, data));
    }
    return p;
}

static pair pair_random(size_t n, float lo, float hi) {
    float *x = malloc(n * sizeof *x);
    rng_fill(x, n, lo, hi);
    pair p = pair_new(x, n * sizeof *x);
    free(x);
    return p;
}

static void pair_free(pair *p) {
    for (int s = 0; s < SIDES; s++)
        be[s]->i->buffer_free(be[s]->ctx, p->buf[s]);
}

static clinfer_ref ref_of(const pair *p, int side, size_t offset) {
    return (clinfer_ref){p->buf[side], offset};
}

static void run(int side, const clinfer_op *op, const char *what) {
    clinfer_status st = be[side]->i->op(be[side]->ctx, op);
    EXPECT(st == CLINFER_OK, "%s on %s: %s: %s", what, side == CL ? "opencl" : "reference",
           clinfer_status_str(st), clinfer_last_error());
}

/* op, then with block (0: none) a ROUND_Q8 of its output y (count values, rows of row elements)
 * into q, run as the executor runs them: through op_run, where the device may fuse the two. */
static void run_rounded(int side, const clinfer_op *op, clinfer_ref y, size_t count, int row,
                        int block, clinfer_ref q, const char *what) {
    clinfer_op ops[2] = {*op, {.kind = CLINFER_OP_ROUND_Q8}};
    ops[1].round_q8 = (typeof(ops[1].round_q8)){
        .x = y, .y = q, .n = (int)(count / (size_t)row), .k = row, .block = block};
    size_t n = block ? 2 : 1, taken = 0;
    const clinfer_backend_i *i = be[side]->i;
    for (size_t at = 0; at < n; at += taken) {
        taken = 0;
        clinfer_status st = i->op_run ? i->op_run(be[side]->ctx, ops + at, n - at, &taken) : 0;
        EXPECT(st == CLINFER_OK, "%s: op_run: %s", what, clinfer_last_error());
        if (!taken) {
            run(side, &ops[at], what);
            taken = 1;
        }
    }
}

/* Reads n floats at offset from both sides and compares them. */
static void compare(const pair *p, size_t offset, size_t n, double limit, const char *what) {
    float *out[SIDES];
    for (int s = 0; s < SIDES; s++) {
        out[s] = calloc(n, sizeof(float));
        EXPECT_OK(be[s]->i->sync(be[s]->ctx));
        EXPECT_OK(be[s]->i->buffer_read(be[s]->ctx, p->buf[s], offset * sizeof(float),
                                        n * sizeof(float), out[s]));
    }
    double e = nmse(out[CL], out[REF], n);
    EXPECT(e <= limit, "%s [%s]: nmse %.3g > %.3g", what, path_name, e, limit);
    free(out[REF]);
    free(out[CL]);
}

static void compare_exact(const pair *p, size_t bytes, const char *what) {
    unsigned char *out[SIDES];
    for (int s = 0; s < SIDES; s++) {
        out[s] = calloc(1, bytes);
        EXPECT_OK(be[s]->i->sync(be[s]->ctx));
        EXPECT_OK(be[s]->i->buffer_read(be[s]->ctx, p->buf[s], 0, bytes, out[s]));
    }
    EXPECT(memcmp(out[REF], out[CL], bytes) == 0, "%s [%s]: outputs differ", what, path_name);
    free(out[REF]);
    free(out[CL]);
}

/* The device's contents of a and b, bytes each, must be equal: two ways of computing one thing. */
static void compare_cl_exact(const pair *a, const pair *b, size_t bytes, const char *what) {
    unsigned char *out[2] = {calloc(1, bytes), calloc(1, bytes)};
    EXPECT_OK(be[CL]->i->sync(be[CL]->ctx));
    EXPECT_OK(be[CL]->i->buffer_read(be[CL]->ctx, a->buf[CL], 0, bytes, out[0]));
    EXPECT_OK(be[CL]->i->buffer_read(be[CL]->ctx, b->buf[CL], 0, bytes, out[1]));
    EXPECT(memcmp(out[0], out[1], bytes) == 0, "%s [%s]: device results differ", what, path_name);
    free(out[0]);
    free(out[1]);
}

/* ---- element-wise ---- */

static void test_eltwise(void) {
    static const clinfer_op_kind kinds[] = {CLINFER_OP_ADD,    CLINFER_OP_GELU,
                                            CLINFER_OP_SWIGLU, CLINFER_OP_GEGLU,
                                            CLINFER_OP_SCALE,  CLINFER_OP_SWIGLU_OAI};
    static const size_t counts[] = {1, 7, 64, 1000, 4097, 576 * 3, 768};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            size_t n = counts[c], off = 5;
            /* Broadcast widths: full, one element, a width that does not divide n. */
            size_t b_counts[] = {n, 1, n > 3 ? n / 3 + 1 : 1};
            for (int bc = 0; bc < 3; bc++) {
                bool in_place = bc == 2;
                /* SWIGLU_OAI: past its limit of 7 on both sides */
                bool oai = kinds[k] == CLINFER_OP_SWIGLU_OAI;
                pair a = pair_random(n + off, oai ? -9.0f : -6.0f, oai ? 9.0f : 6.0f),
                     b = pair_random(n, oai ? -9.0f : -2.0f, oai ? 9.0f : 2.0f);
                pair y = pair_new(NULL, n * sizeof(float)), q = pair_new(NULL, n * sizeof(float));
                /* a ROUND_Q8 after it (256: a K-quant's span), which SWIGLU and GEGLU may fuse */
                int block = (int[]){CLINFER_Q8_ACT_BLOCK, 0, 256}[bc];
                if (n % (block ? (size_t)block : 1)) block = 0;
                for (int s = 0; s < SIDES; s++) {
                    clinfer_op op = {.kind = kinds[k]};
                    op.eltwise.a = ref_of(&a, s, off);
                    op.eltwise.b = ref_of(&b, s, 0);
                    op.eltwise.y = in_place ? op.eltwise.a : ref_of(&y, s, 0);
                    op.eltwise.count = n;
                    op.eltwise.b_count = b_counts[bc];
                    op.eltwise.scale = 1.7f; /* SCALE: capped at 4 (values to 10), or not */
                    op.eltwise.cap = bc == 1 ? 0.0f : 4.0f;
                    run_rounded(s, &op, op.eltwise.y, n, (int)n, block, ref_of(&q, s, 0),
                                "eltwise");
                }
                char what[64];
                snprintf(what, sizeof what, "eltwise kind %d n %zu b_count %zu", (int)kinds[k], n,
                         b_counts[bc]);
                if (in_place)
                    compare(&a, off, n, 1e-10, what);
                else
                    compare(&y, 0, n, 1e-10, what);
                if (block) compare(&q, 0, n, 1e-5, what); /* a step apart at most (verify.c) */
                pair_free(&a);
                pair_free(&b);
                pair_free(&y);
                pair_free(&q);
            }
        }
}

static void test_store(void) {
    static const size_t counts[] = {1, 13, 1000, 4099};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
        for (int f16 = 0; f16 < 2; f16++) {
            size_t n = counts[c], elem = f16 ? 2 : 4, off = 3;
            pair src = pair_random(n + off, -70000.0f, 70000.0f);
            pair dst = pair_new(NULL, (n + off) * elem);
            for (int s = 0; s < SIDES; s++) {
                clinfer_op op = {.kind = CLINFER_OP_STORE};
                op.store.src = ref_of(&src, s, off);
                op.store.dst = ref_of(&dst, s, off);
                op.store.dst_type = f16 ? CLINFER_DT_F16 : CLINFER_DT_F32;
                op.store.count = n;
                /* Zero the destination first so the untouched head compares equal. */
                void *zero = calloc(n + off, elem);
                EXPECT_OK(be[s]->i->buffer_write(be[s]->ctx, dst.buf[s], 0, dst.bytes, zero));
                free(zero);
                run(s, &op, "store");
            }
            char what[64];
            snprintf(what, sizeof what, "store %s n %zu", f16 ? "f16" : "f32", n);
            compare_exact(&dst, dst.bytes, what);
            pair_free(&src);
            pair_free(&dst);
        }
}

/* ---- norms ---- */

static void test_norms(void) {
    static const int shapes[][2] = {{1, 1},     {1, 7},  {3, 576}, {5, 1000}, {2, 4097},
                                    {1, 49152}, {9, 64}, {4, 512}, {2, 768}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        /* rmsnorm, layernorm +b, layernorm, then both without w (a scale of 1) */
        for (int variant = 0; variant < 5; variant++) {
            int n = shapes[i][0], d = shapes[i][1];
            size_t total = (size_t)n * d;
            pair x = pair_random(total, -3.0f, 5.0f), w = pair_random(d, 0.5f, 1.5f);
            pair bias = pair_random(d, -1.0f, 1.0f), y = pair_new(NULL, total * sizeof(float));
            pair q = pair_new(NULL, total * sizeof(float));
            /* a ROUND_Q8 after it (256: a K-quant's span), which an rmsnorm may fuse */
            int block = i % 4 == 2 ? CLINFER_Q8_ACT_BLOCK : i % 4 == 0 ? 256 : 0;
            if (d % (block ? block : 1)) block = 0;
            bool in_place = i % 2 == 1; /* y == x on every other shape */
            for (int s = 0; s < SIDES; s++) {
                clinfer_op op = {.kind = variant % 3 ? CLINFER_OP_LAYERNORM : CLINFER_OP_RMSNORM};
                op.norm.x = ref_of(&x, s, 0);
                op.norm.w = variant < 3 ? ref_of(&w, s, 0) : (clinfer_ref){0};
                op.norm.b = variant == 1 ? ref_of(&bias, s, 0) : (clinfer_ref){0};
                op.norm.y = in_place ? op.norm.x : ref_of(&y, s, 0);
                op.norm.n = n;
                op.norm.d = d;
                op.norm.eps = 1e-5f;
                run_rounded(s, &op, op.norm.y, total, d, block, ref_of(&q, s, 0), "norm");
            }
            char what[64];
            snprintf(what, sizeof what, "norm variant %d n %d d %d", variant, n, d);
            compare(in_place ? &x : &y, 0, total, 1e-10, what);
            if (block) compare(&q, 0, total, 1e-5, what);
            pair_free(&q);
            pair_free(&x);
            pair_free(&w);
            pair_free(&bias);
            pair_free(&y);
        }
}

/* ---- rope ---- */

/* Per-pair factors as Llama 3's and YaRN's tables have them (1 .. 8, one per pair of the
 * largest head), apart from every activation. */
static pair rope_factors(void) {
    return pair_random(128, 1.0f, 8.0f);
}

static void test_rope(void) {
    static const int head_dims[] = {64, 80};
    static const int pos0s[] = {0, 17, 1000};
    pair factors = rope_factors();
    for (size_t h = 0; h < 2; h++)
        for (size_t p = 0; p < 3; p++)
            for (int variant = 0; variant < 8; variant++) {
                int head_dim = head_dims[h], n = p == 1 ? 1 : 5, n_heads = 3;
                int n_rot = variant & 2 ? 32 : head_dim; /* partial rotation (phi, neox) */
                bool neox = variant & 1;
                size_t total = (size_t)n * n_heads * head_dim;
                pair x = pair_random(total, -2.0f, 2.0f);
                for (int s = 0; s < SIDES; s++) {
                    clinfer_op op = {.kind = CLINFER_OP_ROPE};
                    op.rope.x = ref_of(&x, s, 0);
                    op.rope.n = n;
                    op.rope.n_heads = n_heads;
                    op.rope.head_dim = head_dim;
                    op.rope.n_rot = n_rot;
                    op.rope.pos0 = pos0s[p];
                    op.rope.freq_base = variant == 3 ? 1000000.0f : 10000.0f;
                    op.rope.freq_scale = variant == 2 ? 0.25f : 1.0f;
                    op.rope.neox = neox;
                    if (variant & 4) { /* Llama 3's factors; YaRN's magnitude */
                        op.rope.factors = ref_of(&factors, s, 0);
                        op.rope.mscale = variant & 1 ? 1.25f : 0.0f;
                    }
                    run(s, &op, "rope");
                }
                char what[96];
                snprintf(what, sizeof what, "rope head_dim %d n_rot %d pos0 %d neox %d factors %d",
                         head_dim, n_rot, pos0s[p], neox, variant >> 2);
                compare(&x, 0, total, 1e-9, what);
                pair_free(&x);
            }
    pair_free(&factors);
}

/* n cache elements (f32 or f16) of both sides as floats, compared by NMSE. */
static void compare_cache(const pair *p, size_t n, bool f16, double limit, const char *what) {
    size_t elem = f16 ? 2 : 4;
    float *out[SIDES];
    for (int s = 0; s < SIDES; s++) {
        uint8_t *raw = calloc(n, elem);
        out[s] = calloc(n, sizeof(float));
        EXPECT_OK(be[s]->i->sync(be[s]->ctx));
        EXPECT_OK(be[s]->i->buffer_read(be[s]->ctx, p->buf[s], 0, n * elem, raw));
        if (f16)
            for (size_t i = 0; i < n; i++)
                out[s][i] = f16_to_f32(((const uint16_t *)raw)[i]);
        else
            memcpy(out[s], raw, n * sizeof(float));
        free(raw);
    }
    double e = nmse(out[CL], out[REF], n);
    EXPECT(e <= limit, "%s [%s]: nmse %.3g > %.3g", what, path_name, e, limit);
    free(out[REF]);
    free(out[CL]);
}

/* The rope's KV cache write. The caches start zeroed and hold unwritten rows before the written
 * ones, so a missed or misplaced element shows as a difference. */
static void test_rope_cache(void) {
    static const struct {
        int n, q_heads, kv_heads, head_dim, n_rot, pos0; /* q_heads: heads before the keys */
    } cases[] = {{1, 9, 3, 64, 64, 37}, {1, 4, 2, 80, 32, 1000}, /* decode */
                 {7, 0, 3, 64, 64, 0},  {5, 0, 2, 80, 32, 17},   /* prefill */
                 {3, 2, 2, 12, 4, 5},   {2, 1, 1, 6, 2, 3}};     /* odd head_dim / n_rot */
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int variant = 0; variant < 4; variant++) {
            bool neox = variant & 1, f16 = variant & 2;
            int n = cases[c].n, heads = cases[c].q_heads + cases[c].kv_heads;
            size_t kv_dim = (size_t)cases[c].kv_heads * cases[c].head_dim;
            size_t total = (size_t)n * heads * cases[c].head_dim, off = 2 * kv_dim;
            size_t cache = off + n * kv_dim;
            void *zero = calloc(cache, sizeof(float));
            pair x = pair_random(total, -2.0f, 2.0f), v = pair_random(n * kv_dim, -2.0f, 2.0f);
            pair kc = pair_new(zero, cache * (f16 ? 2 : 4)), vc = pair_new(zero, kc.bytes);
            free(zero);
            for (int s = 0; s < SIDES; s++) {
                clinfer_op op = {.kind = CLINFER_OP_ROPE};
                op.rope.x = ref_of(&x, s, 0);
                op.rope.n = n;
                op.rope.n_heads = heads;
                op.rope.head_dim = cases[c].head_dim;
                op.rope.n_rot = cases[c].n_rot;
                op.rope.pos0 = cases[c].pos0;
                op.rope.freq_base = 10000.0f;
                op.rope.freq_scale = 1.0f;
                op.rope.neox = neox;
                op.rope.k_dst = ref_of(&kc, s, off);
                op.rope.v_src = ref_of(&v, s, 0);
                op.rope.v_dst = ref_of(&vc, s, off);
                op.rope.kv_heads = cases[c].kv_heads;
                op.rope.kv_type = f16 ? CLINFER_DT_F16 : CLINFER_DT_F32;
                run(s, &op, "rope with cache write");
            }
            char what[96];
            snprintf(what, sizeof what, "rope cache case %zu neox %d %s: x", c, neox,
                     f16 ? "f16" : "f32");
            compare(&x, 0, total, 1e-9, what);
            snprintf(what, sizeof what, "rope cache case %zu neox %d %s: k", c, neox,
                     f16 ? "f16" : "f32");
            compare_cache(&kc, cache, f16, f16 ? 1e-6 : 1e-9, what);
            snprintf(what, sizeof what, "rope cache case %zu neox %d %s: v", c, neox,
                     f16 ? "f16" : "f32");
            compare_exact(&vc, vc.bytes, what);
            pair_free(&x);
            pair_free(&v);
            pair_free(&kc);
            pair_free(&vc);
        }
}

/* ---- attention ---- */

/* elems random cache values, f32 or f16 (malloc'd). */
static void *cache_data(size_t elems, bool f16) {
    float *x = malloc(elems * sizeof *x);
    rng_fill(x, elems, -1.5f, 1.5f);
    if (!f16) return x;
    uint16_t *h = malloc(elems * sizeof *h);
    for (size_t i = 0; i < elems; i++)
        h[i] = f32_to_f16(x[i]);
    free(x);
    return h;
}

/* A cache of n_pos x n_kv x head_dim random values, f32 or f16. */
static pair cache_random(size_t elems, bool f16) {
    void *data = cache_data(elems, f16);
    pair p = pair_new(data, elems * (f16 ? 2 : 4));
    free(data);
    return p;
}

/* The attention ops' soft-cap (0: none): test_attention_softcap's and some of
 * test_attention_rope's. */
static float attention_softcap;
/* Where set, the attention ops' sinks (from element 1, up to 16 heads): test_attention_sinks's
 * and some of test_attention_rope's. */
static const pair *attention_sinks;

/* One attention op on both sides over random q and caches, compared: heads (n_head, n_kv) of
 * head_dim, n tokens from pos0, window (0: none), attention_softcap. The cache holds a few more
 * positions than are visible, which must be ignored, and starts one position into its buffer
 * (kv_off). */
static void check_attention(int n_head, int n_kv, int head_dim, int n, int pos0, int window,
                            bool f16) {
    size_t q_total = (size_t)n * n_head * head_dim, kv_off = (size_t)n_kv * head_dim;
    size_t kv_total = kv_off + (size_t)(pos0 + n + 3) * n_kv * head_dim;
    pair q = pair_random(q_total, -1.0f, 1.0f);
    pair k = cache_random(kv_total, f16), v = cache_random(kv_total, f16);
    pair out = pair_new(NULL, q_total * sizeof(float));
    for (int s = 0; s < SIDES; s++) {
        clinfer_op op = {.kind = CLINFER_OP_ATTENTION};
        op.attention.q = ref_of(&q, s, 0);
        op.attention.k = ref_of(&k, s, kv_off);
        op.attention.v = ref_of(&v, s, kv_off);
        op.attention.out = ref_of(&out, s, 0);
        op.attention.kv_type = f16 ? CLINFER_DT_F16 : CLINFER_DT_F32;
        op.attention.n = n;
        op.attention.n_head = n_head;
        op.attention.n_kv_head = n_kv;
        op.attention.head_dim = head_dim;
        op.attention.pos0 = pos0;
        op.attention.window = window;
        op.attention.scale = 1.0f / sqrtf((float)head_dim) * 2.0f;
        op.attention.softcap = attention_softcap;
        if (attention_sinks) op.attention.sinks = ref_of(attention_sinks, s, 1);
        run(s, &op, "attention");
    }
    char what[128];
    snprintf(what, sizeof what,
             "attention hd %d heads %d/%d n %d pos0 %d window %d %s softcap %g%s", head_dim, n_head,
             n_kv, n, pos0, window, f16 ? "f16" : "f32", (double)attention_softcap,
             attention_sinks ? " sinks" : "");
    compare(&out, 0, q_total, 1e-9, what);
    pair_free(&q);
    pair_free(&k);
    pair_free(&v);
    pair_free(&out);
}

static void test_attention(void) {
    static const int heads[][2] = {{4, 4}, {6, 2}, {8, 2}, {1, 1}}; /* ratios 1, 3, 4, 1 */
    static const int head_dims[] = {64, 80};
    /* n, pos0; from 8 tokens in one chunk the CPU kernel takes them by eights (attention.cl):
     * whole and partial eights, from position 0 and later */
    static const int cases[][2] = {{1, 0},   {7, 0}, {1, 5},  {3, 100},
                                   {1, 300}, {8, 0}, {13, 0}, {21, 40}};
    for (size_t hd = 0; hd < 2; hd++)
        for (size_t g = 0; g < sizeof heads / sizeof *heads; g++)
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
                for (int f16 = 0; f16 < 2; f16++)
                    check_attention(heads[g][0], heads[g][1], head_dims[hd], cases[c][0],
                                    cases[c][1], 0, f16);
}

/* Decode over long caches: on the GPU paths attention_split cuts the positions into many chunks
 * (several blocks of work-group size each) and merges them; heads of 128 take 32 lanes of four
 * dimensions. Under a simulator (test_small) the first case. */
static void test_attention_long(void) {
    static const int cases[][4] = {{8, 2, 64, 1000}, {2, 1, 128, 2047}, {4, 4, 80, 1500}};
    size_t n_cases = test_small() ? 1 : sizeof cases / sizeof *cases;
    for (size_t c = 0; c < n_cases; c++)
        for (int f16 = 0; f16 < 2; f16++)
            check_attention(cases[c][0], cases[c][1], cases[c][2], 1, cases[c][3], 0, f16);
}

/* Sliding windows (gemma3's local layers, mistral): token i sees only the last `window`
 * positions up to its own. Windows shorter than, equal to and longer than what is in the
 * cache, prefill batches that straddle the window's edge, decode past it, one and several
 * chunks, and gemma's head_dim 256 with one kv head. Under a simulator (test_small) the first
 * shape and every other case. */
static void test_attention_window(void) {
    static const int shapes[][3] = {{4, 1, 256}, {6, 2, 64}, {2, 2, 32}}; /* heads, kv, dim */
    static const int cases[][3] = {                                       /* n, pos0, window */
                                   {1, 0, 4},    {1, 3, 4},   {1, 4, 4},      {1, 300, 4},
                                   {1, 300, 64}, {7, 0, 4},   {7, 2, 4},      {20, 5, 8},
                                   {3, 100, 1},  {9, 60, 64}, {1, 1000, 200}, {5, 10, 512}};
    bool small = test_small();
    for (size_t sh = 0; sh < (small ? 1 : sizeof shapes / sizeof *shapes); sh++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c += small ? 2 : 1)
            for (int f16 = 0; f16 < 2; f16++)
                check_attention(shapes[sh][0], shapes[sh][1], shapes[sh][2], cases[c][0],
                                cases[c][1], cases[c][2], f16);
}

/* gemma2's soft-capped scores (scores of these q and k reach about 2; the cap is 0.5): prefill
 * in one chunk (by eights on CPUs) and past it, decode over one chunk and several, windows, and
 * head_dim 256. */
static void test_attention_softcap(void) {
    static const int cases[][3] = {{1, 0, 0},   {13, 0, 0}, {8, 0, 0},   {1, 300, 0},
                                   {21, 40, 0}, {7, 2, 4},  {1, 300, 64}}; /* n, pos0, window */
    attention_softcap = 0.5f;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c += test_small() ? 2 : 1)
        for (int f16 = 0; f16 < 2; f16++) {
            check_attention(8, 2, 64, cases[c][0], cases[c][1], cases[c][2], f16);
            if (!test_small()) check_attention(4, 1, 256, cases[c][0], cases[c][1], 0, f16);
        }
    attention_softcap = 0.0f;
}

/* gpt-oss's sinks (a logit per head joining the softmax, in [-1, 3): about these scores' size,
 * above them and below): prefill in one chunk (by eights on CPUs, tiles on the GPU paths) and
 * past it, decode over one chunk and several (the merges), windows, the soft-cap beside. */
static void test_attention_sinks(void) {
    static const int cases[][3] = {{1, 0, 0},   {13, 0, 0}, {8, 0, 0},    {1, 300, 0},
                                   {21, 40, 0}, {7, 2, 4},  {1, 300, 64}, {1, 1000, 0}};
    float values[17];
    rng_fill(values, 17, -1.0f, 3.0f);
    pair sinks = pair_new(values, sizeof values);
    attention_sinks = &sinks;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c += test_small() ? 2 : 1)
        for (int f16 = 0; f16 < 2; f16++) {
            check_attention(8, 2, 64, cases[c][0], cases[c][1], cases[c][2], f16);
            attention_softcap = 0.5f;
            if (!test_small()) check_attention(4, 4, 80, cases[c][0], cases[c][1], 0, f16);
            attention_softcap = 0.0f;
        }
    attention_sinks = NULL;
    pair_free(&sinks);
}

/* One layer's decode buffers as the executor lays them out: n tokens' q, then k and v, in qkv;
 * caches of pos0 + n + 2 positions, random throughout (the new slots too, so a missed write
 * shows). */
typedef struct {
    int n_head, n_kv, head_dim, n_rot, n, pos0;
    bool neox, f16;
    int window; /* the attention's (0: none) */
} layer_case;

typedef struct {
    pair qkv, k, v, out;
    size_t q_total, kv_total, row, cache_elems;
} layer_bufs;

/* The sizes of lc's buffers, none allocated. */
static layer_bufs layer_shape(const layer_case *lc) {
    layer_bufs l = {0};
    l.q_total = (size_t)lc->n * lc->n_head * lc->head_dim;
    l.kv_total = (size_t)lc->n * lc->n_kv * lc->head_dim;
    l.row = l.q_total + 2 * l.kv_total;
    l.cache_elems = (size_t)(lc->pos0 + lc->n + 2) * lc->n_kv * lc->head_dim;
    return l;
}

static layer_bufs layer_new(const layer_case *lc, const float *qkv, const void *cache) {
    layer_bufs l = layer_shape(lc);
    l.qkv = pair_new(qkv, l.row * sizeof(float));
    l.k = pair_new(cache, l.cache_elems * (lc->f16 ? 2 : 4));
    l.v = pair_new(cache, l.k.bytes);
    l.out = pair_new(NULL, l.q_total * sizeof(float));
    return l;
}

static void layer_free(layer_bufs *l) {
    pair_free(&l->qkv);
    pair_free(&l->k);
    pair_free(&l->v);
    pair_free(&l->out);
}

/* Where set, the rotation of layer_attention's ops takes these factors and magnitude. */
static const pair *attention_factors;
static float attention_mscale;

/* The attention op of lc over l on side s; rope: with its rotation and cache write. */
static clinfer_op layer_attention(const layer_case *lc, const layer_bufs *l, int s, bool rope) {
    clinfer_op op = {.kind = CLINFER_OP_ATTENTION};
    op.attention.q = ref_of(&l->qkv, s, 0);
    op.attention.k = ref_of(&l->k, s, 0);
    op.attention.v = ref_of(&l->v, s, 0);
    op.attention.out = ref_of(&l->out, s, 0);
    op.attention.kv_type = lc->f16 ? CLINFER_DT_F16 : CLINFER_DT_F32;
    op.attention.n = lc->n;
    op.attention.n_head = lc->n_head;
    op.attention.n_kv_head = lc->n_kv;
    op.attention.head_dim = lc->head_dim;
    op.attention.pos0 = lc->pos0;
    op.attention.window = lc->window;
    op.attention.scale = 1.0f / sqrtf((float)lc->head_dim);
    op.attention.softcap = attention_softcap;
    if (attention_sinks) op.attention.sinks = ref_of(attention_sinks, s, 1);
    if (rope) {
        op.attention.rope.n_rot = lc->n_rot;
        op.attention.rope.freq_base = 10000.0f;
        op.attention.rope.freq_scale = lc->neox ? 0.5f : 1.0f;
        op.attention.rope.neox = lc->neox;
        op.attention.rope.k_src = ref_of(&l->qkv, s, l->q_total);
        op.attention.rope.v_src = ref_of(&l->qkv, s, l->q_total + l->kv_total);
        if (attention_factors) op.attention.rope.factors = ref_of(attention_factors, s, 0);
        op.attention.rope.mscale = attention_mscale;
    }
    return op;
}

/* The rope with cache write that a decode attention op's rotation stands for, as the executor
 * issued it before: the token's q and k as one row of n_head + n_kv heads. */
static clinfer_op rope_of(const clinfer_op *at) {
    size_t slot = (size_t)at->attention.pos0 * at->attention.n_kv_head * at->attention.head_dim;
    clinfer_op op = {.kind = CLINFER_OP_ROPE};
    op.rope.x = at->attention.q;
    op.rope.n = 1;
    op.rope.n_heads = at->attention.n_head + at->attention.n_kv_head;
    op.rope.head_dim = at->attention.head_dim;
    op.rope.n_rot = at->attention.rope.n_rot;
    op.rope.pos0 = at->attention.pos0;
    op.rope.freq_base = at->attention.rope.freq_base;
    op.rope.freq_scale = at->attention.rope.freq_scale;
    op.rope.neox = at->attention.rope.neox;
    op.rope.factors = at->attention.rope.factors;
    op.rope.mscale = at->attention.rope.mscale;
    op.rope.k_dst = (clinfer_ref){at->attention.k.buf, at->attention.k.offset + slot};
    op.rope.v_src = at->attention.rope.v_src;
    op.rope.v_dst = (clinfer_ref){at->attention.v.buf, at->attention.v.offset + slot};
    op.rope.kv_heads = at->attention.n_kv_head;
    op.rope.kv_type = at->attention.kv_type;
    return op;
}

/* Decode attention with its own rotation and cache write: against the reference's, and on the
 * device against the rope and attention launches it replaces, bit for bit. Query heads share a
 * kv head (GQA) or not; pos0 spans one chunk of positions and several (attention_merge). */
static void test_attention_rope(void) {
    static const int shapes[][4] = {{9, 3, 64, 64},   {4, 4, 80, 32},
                                    {6, 2, 32, 32},   {1, 1, 64, 64},
                                    {4, 1, 256, 256}, {8, 2, 128, 96}}; /* heads, kv, dim, n_rot */
    static const int pos0s[] = {0, 1, 7, 63, 64, 300, 1000};
    pair factors = rope_factors();
    float values[17];
    rng_fill(values, 17, -1.0f, 3.0f);
    pair sinks = pair_new(values, sizeof values);
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
        for (size_t p = 0; p < sizeof pos0s / sizeof *pos0s; p++)
            for (int variant = 0; variant < 4; variant++) {
                if (test_small() && shapes[sh][2] == 256 && pos0s[p] > 7) continue;
                /* half the cases with pair factors (Llama 3), some of those with a magnitude */
                int with_factors = (int)(sh + p) % 2;
                attention_factors = with_factors ? &factors : NULL;
                attention_mscale = with_factors && variant == 1 ? 0.8f : 0.0f;
                attention_softcap = (sh + p) % 3 == 0 ? 0.5f : 0.0f; /* gemma2's decode */
                attention_sinks = (sh + p) % 3 == 1 ? &sinks : NULL; /* gpt-oss's */
                layer_case lc = {
                    shapes[sh][0], shapes[sh][1], shapes[sh][2], shapes[sh][3],        1,
                    pos0s[p],      variant & 1,   variant & 2,   variant == 3 ? 40 : 0};
                layer_bufs shape = layer_shape(&lc);
                float *qkv = malloc(shape.row * sizeof *qkv);
                rng_fill(qkv, shape.row, -1.0f, 1.0f);
                void *cache = cache_data(shape.cache_elems, lc.f16);
                layer_bufs fused = layer_new(&lc, qkv, cache), split = layer_new(&lc, qkv, cache);
                for (int s = 0; s < SIDES; s++) {
                    clinfer_op op = layer_attention(&lc, &fused, s, true);
                    run(s, &op, "attention with rope");
                }
                clinfer_op op = layer_attention(&lc, &split, CL, true), rope = rope_of(&op);
                run(CL, &rope, "rope before attention");
                op.attention.rope.n_rot = 0;
                run(CL, &op, "attention after rope");
                char what[128];
                int len = snprintf(what, sizeof what,
                                   "attention+rope heads %d/%d hd %d rot %d pos0 %d neox %d %s "
                                   "window %d factors %d softcap %g sinks %d",
                                   lc.n_head, lc.n_kv, lc.head_dim, lc.n_rot, lc.pos0, lc.neox,
                                   lc.f16 ? "f16" : "f32", lc.window, with_factors,
                                   (double)attention_softcap, attention_sinks != NULL);
                size_t rest = sizeof what - (size_t)len;
                snprintf(what + len, rest, ": out");
                compare(&fused.out, 0, fused.q_total, 1e-9, what);
                compare_cl_exact(&fused.out, &split.out, fused.out.bytes, what);
                snprintf(what + len, rest, ": k cache");
                compare_cache(&fused.k, fused.cache_elems, lc.f16, lc.f16 ? 1e-6 : 1e-9, what);
                compare_cl_exact(&fused.k, &split.k, fused.k.bytes, what);
                snprintf(what + len, rest, ": v cache");
                compare_exact(&fused.v, fused.v.bytes, what);
                compare_cl_exact(&fused.v, &split.v, fused.v.bytes, what);
                free(qkv);
                free(cache);
                layer_free(&fused);
                layer_free(&split);
            }
    attention_factors = NULL;
    attention_mscale = 0.0f;
    attention_softcap = 0.0f;
    attention_sinks = NULL;
    pair_free(&factors);
    pair_free(&sinks);
}

/* Attention followed by a ROUND_Q8 of its output may round it as it writes it: the x_q8 matmul
 * after it must give the same bits as after attention and the ROUND_Q8 apart. Run with type F32
 * first, whose kernels read the rounding's f32 values, then Q8_0. Cases span one chunk and
 * several, head_dim 80 (heads are not whole blocks: no rounding there), prefill, and decode
 * with rotation. */
static void test_attention_q8(clinfer_dtype type) {
    static const struct {
        int n_head, n_kv, head_dim, n, pos0;
        bool rope;
    } cases[] = {{9, 3, 64, 1, 5, true},  {9, 3, 64, 1, 1000, true}, {9, 3, 64, 1, 300, false},
                 {4, 4, 80, 1, 10, true}, {6, 2, 32, 7, 20, false},  {4, 2, 64, 3, 0, false}};
    const int m = 40;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        layer_case lc = {cases[c].n_head,
                         cases[c].n_kv,
                         cases[c].head_dim,
                         cases[c].head_dim,
                         cases[c].n,
                         cases[c].pos0,
                         false,
                         true,
                         cases[c].pos0 == 1000 ? 100 : 0};
        int k = lc.n_head * lc.head_dim;
        layer_bufs shape = layer_shape(&lc);
        size_t w_row = dtype_row_bytes(type, (size_t)k);
        float *qkv = malloc(shape.row * sizeof *qkv), *w_f = malloc((size_t)k * sizeof *w_f);
        unsigned char *w_data = malloc(w_row * m);
        rng_fill(qkv, shape.row, -1.0f, 1.0f);
        for (int r = 0; r < m; r++) {
            rng_fill(w_f, (size_t)k, -1.0f, 1.0f);
            quantize_row(type, w_f, w_data + w_row * r, (size_t)k);
        }
        void *cache = cache_data(shape.cache_elems, lc.f16);
        layer_bufs l = layer_new(&lc, qkv, cache);
        pair y[2] = {pair_new(NULL, (size_t)lc.n * m * sizeof(float)),
                     pair_new(NULL, (size_t)lc.n * m * sizeof(float))};
        pair w = {.buf = {NULL, NULL}}, xq = pair_new(NULL, (size_t)lc.n * k * sizeof(float));
        for (int s = 0; s < SIDES; s++)
            EXPECT_OK(be[s]->i->weight_create(be[s]->ctx, type, m, k, w_data, &w.buf[s]));
        /* pass 0 as the executor runs them (op_run) on both sides, pass 1 one by one on the
         * device */
        for (int pass = 0; pass < 2 && w.buf[REF] && w.buf[CL]; pass++)
            for (int s = pass; s < SIDES; s++) {
                /* a backend may have rotated q and k in place: restore them */
                EXPECT_OK(be[s]->i->buffer_write(be[s]->ctx, l.qkv.buf[s], 0,
                                                 shape.row * sizeof *qkv, qkv));
                clinfer_op op = layer_attention(&lc, &l, s, cases[c].rope);
                clinfer_ref out = ref_of(&l.out, s, 0), q = ref_of(&xq, s, 0);
                if (pass == 0) {
                    run_rounded(s, &op, out, (size_t)lc.n * k, k, 32, q, "attention, round_q8");
                } else {
                    run(s, &op, "attention before a matmul");
                    clinfer_op round = {.kind = CLINFER_OP_ROUND_Q8};
                    round.round_q8 =
                        (typeof(round.round_q8)){.x = out, .y = q, .n = lc.n, .k = k, .block = 32};
                    run(s, &round, "round_q8 after attention");
                }
                clinfer_op mm = {.kind = CLINFER_OP_MATMUL};
                mm.matmul.w = w.buf[s];
                mm.matmul.x = q;
                mm.matmul.y = ref_of(&y[pass], s, 0);
                mm.matmul.m = m;
                mm.matmul.k = k;
                mm.matmul.n = lc.n;
                mm.matmul.x_q8 = true;
                run(s, &mm, "matmul after attention");
            }
        char what[128];
        snprintf(what, sizeof what, "%s matmul after attention heads %d/%d hd %d n %d pos0 %d%s",
                 dtype_name(type), lc.n_head, lc.n_kv, lc.head_dim, lc.n, lc.pos0,
                 cases[c].rope ? " rope" : "");
        compare(&y[0], 0, (size_t)lc.n * m, 1e-5, what);
        compare_cl_exact(&y[0], &y[1], y[0].bytes, what);
        free(qkv);
        free(w_f);
        free(w_data);
        free(cache);
        layer_free(&l);
        pair_free(&y[0]);
        pair_free(&y[1]);
        pair_free(&w);
        pair_free(&xq);
    }
}

/* ---- bad op records ---- */

static void expect_rejected(const clinfer_op *op, const char *what) {
    clinfer_status st = be[CL]->i->op(be[CL]->ctx, op);
    EXPECT(st != CLINFER_OK, "%s was accepted", what);
    EXPECT(strlen(clinfer_last_error()) > 0, "%s: no message", what);
}

static void test_bad_args(void) {
    void *ctx = be[CL]->ctx;
    const clinfer_backend_i *i = be[CL]->i;
    clinfer_buffer *small = NULL, *big = NULL;
    EXPECT_OK(i->buffer_alloc(ctx, 64 * sizeof(float), &small));
    EXPECT_OK(i->buffer_alloc(ctx, 4096 * sizeof(float), &big));
    if (!small || !big) return;

    clinfer_op op = {.kind = CLINFER_OP_ADD};
    op.eltwise = (typeof(op.eltwise)){{small, 0}, {small, 0}, {big, 0}, 65, 1, 0, 0};
    expect_rejected(&op, "add reading past a 64-float buffer");
    op.eltwise.count = 10;
    op.eltwise.a.offset = 60;
    expect_rejected(&op, "add with an offset near the end");
    op.eltwise.a.offset = SIZE_MAX - 2;
    expect_rejected(&op, "add with a wrapping offset");
    op.eltwise.a = (clinfer_ref){NULL, 0};
    expect_rejected(&op, "add without a");
    op.eltwise = (typeof(op.eltwise)){{small, 0}, {small, 0}, {small, 0}, 10, 0, 0, 0};
    expect_rejected(&op, "add with b_count 0");

    op.kind = CLINFER_OP_SCALE;
    op.eltwise = (typeof(op.eltwise)){{small, 0}, {0}, {small, 0}, 10, 0, NAN, 0.0f};
    expect_rejected(&op, "scale by nan");
    op.eltwise.scale = 1.0f;
    op.eltwise.cap = -2.0f;
    expect_rejected(&op, "scale with cap -2");

    op = (clinfer_op){.kind = CLINFER_OP_RMSNORM};
    op.norm = (typeof(op.norm)){{small, 0}, {small, 0}, {0}, {small, 0}, -1, 8, 1e-5f};
    expect_rejected(&op, "rmsnorm with n -1");
    op.norm.n = 9;
    expect_rejected(&op, "rmsnorm of 9 x 8 in 64 floats");

    op = (clinfer_op){.kind = CLINFER_OP_ROPE};
    op.rope = (typeof(op.rope)){.x = {big, 0},
                                .n = 1,
                                .n_heads = 2,
                                .head_dim = 64,
                                .n_rot = 63,
                                .freq_base = 10000.0f,
                                .freq_scale = 1.0f};
    expect_rejected(&op, "rope with odd n_rot");
    op.rope.n_rot = 128;
    expect_rejected(&op, "rope with n_rot > head_dim");
    /* the cache write: 2 tokens x 1 key head x 64 halves are 256 bytes, all of small */
    clinfer_buffer *vc = NULL;
    EXPECT_OK(i->buffer_alloc(ctx, 4096 * sizeof(float), &vc));
    op.rope.n_rot = 64;
    op.rope.n = 2;
    op.rope.k_dst = (clinfer_ref){small, 1};
    op.rope.v_src = (clinfer_ref){big, 1024};
    op.rope.v_dst = (clinfer_ref){vc, 0};
    op.rope.kv_heads = 1;
    op.rope.kv_type = CLINFER_DT_F16;
    clinfer_status st = i->op(ctx, &op);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT && strstr(clinfer_last_error(), "k_dst"),
           "rope with a k_dst too small: %s: %s", clinfer_status_str(st), clinfer_last_error());
    op.rope.k_dst.offset = 0;
    EXPECT_OK(i->op(ctx, &op));
    op.rope.v_src.offset = 200;
    expect_rejected(&op, "rope with v_src overlapping x");
    op.rope.v_src.offset = 1024;
    op.rope.v_dst.buf = big;
    expect_rejected(&op, "rope with v_dst in x's buffer");
    op.rope.v_dst.buf = vc;
    op.rope.kv_heads = 3;
    expect_rejected(&op, "rope with kv_heads > n_heads");
    op.rope.kv_heads = 1;
    op.rope.kv_type = CLINFER_DT_Q8_0;
    expect_rejected(&op, "rope with a q8_0 cache");
    i->buffer_free(ctx, vc);

    op = (clinfer_op){.kind = CLINFER_OP_ATTENTION};
    op.attention = (typeof(op.attention)){.q = {big, 0},
                                          .k = {big, 0},
                                          .v = {big, 0},
                                          .out = {big, 0},
                                          .kv_type = CLINFER_DT_F32,
                                          .n = 1,
                                          .n_head = 6,
                                          .n_kv_head = 4,
                                          .head_dim = 64,
                                          .scale = 0.125f};
    expect_rejected(&op, "attention with n_head 6, n_kv_head 4");
    op.attention.n_kv_head = 2;
    op.attention.head_dim = 6;
    expect_rejected(&op, "attention with head_dim 6");
    op.attention.head_dim = 64;
    op.attention.pos0 = 100;
    expect_rejected(&op, "attention with a cache too short for pos0 100");
    op.attention.pos0 = 0;
    op.attention.kv_type = CLINFER_DT_Q8_0;
    expect_rejected(&op, "attention with a q8_0 cache");
    op.attention.kv_type = CLINFER_DT_F32;
    op.attention.window = -1;
    expect_rejected(&op, "attention with window -1");
    op.attention.window = 0;
    op.attention.softcap = -1.0f;
    expect_rejected(&op, "attention with softcap -1");
    op.attention.softcap = INFINITY;
    expect_rejected(&op, "attention with softcap inf");
    op.attention.softcap = 0.0f;
    op.attention.sinks = (clinfer_ref){big, 30}; /* inside out (the 128 values from 0) */
    expect_rejected(&op, "attention with sinks overlapping out");
    op.attention.sinks = (clinfer_ref){0};
    /* with rotation and cache write: q in small, caches in big and vc, new keys and values in
     * src */
    clinfer_buffer *src = NULL;
    EXPECT_OK(i->buffer_alloc(ctx, 4096 * sizeof(float), &vc));
    EXPECT_OK(i->buffer_alloc(ctx, 128 * sizeof(float), &src));
    op.attention.kv_type = CLINFER_DT_F32;
    op.attention.n_head = op.attention.n_kv_head = 1;
    op.attention.q = (clinfer_ref){small, 0};
    op.attention.v = (clinfer_ref){vc, 0};
    op.attention.rope =
        (typeof(op.attention.rope)){63, 10000.0f, 1.0f, false, {src, 0}, {src, 64}, {0}, 0.0f};
    expect_rejected(&op, "attention with rope.n_rot 63");
    op.attention.rope.n_rot = 64;
    op.attention.rope.k_src = (clinfer_ref){small, 0};
    expect_rejected(&op, "attention with rope.k_src overlapping q");
    op.attention.rope.k_src = (clinfer_ref){0};
    expect_rejected(&op, "attention with rope and no rope.k_src");
    op.attention.rope.k_src = (clinfer_ref){big, 2048};
    expect_rejected(&op, "attention with rope.k_src in the key cache's buffer");
    op.attention.rope.k_src = (clinfer_ref){src, 0};
    op.attention.out = (clinfer_ref){big, 1024}; /* past the cache, but in its buffer */
    expect_rejected(&op, "attention writing out into the key cache's buffer");
    op.attention.out = (clinfer_ref){vc, 1024};
    expect_rejected(&op, "attention writing out into the value cache's buffer");
    clinfer_buffer *out = NULL;
    EXPECT_OK(i->buffer_alloc(ctx, 64 * sizeof(float), &out));
    op.attention.out = (clinfer_ref){out, 0};
    EXPECT_OK(i->op(ctx, &op));
    i->buffer_free(ctx, vc);
    i->buffer_free(ctx, src);
    i->buffer_free(ctx, out);

    op = (clinfer_op){.kind = CLINFER_OP_STORE};
    op.store = (typeof(op.store)){{big, 0}, {small, 0}, CLINFER_DT_Q4_0, 8};
    expect_rejected(&op, "store to q4_0");
    op.store.dst_type = CLINFER_DT_F16;
    op.store.count = 129;
    expect_rejected(&op, "store of 129 halves into 256 bytes");

    op = (clinfer_op){.kind = CLINFER_OP_COUNT};
    expect_rejected(&op, "unknown op kind");

    float rows[4 * 8] = {0};
    clinfer_buffer *weight = NULL;
    EXPECT_OK(i->weight_create(ctx, CLINFER_DT_F32, 4, 8, rows, &weight));
    op = (clinfer_op){.kind = CLINFER_OP_GELU};
    op.eltwise = (typeof(op.eltwise)){{weight, 0}, {0}, {small, 0}, 8, 0, 0, 0};
    expect_rejected(&op, "gelu reading a weight as an activation");
    i->buffer_free(ctx, weight);

    float host[8] = {0}, ramp[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT(i->buffer_read(ctx, small, 250, 8, host) != CLINFER_OK, "read past the end accepted");
    EXPECT_OK(i->buffer_write(ctx, small, 0, sizeof ramp, ramp));
    EXPECT_OK(i->buffer_copy(ctx, small, 0, small, 224, sizeof ramp));
    EXPECT_OK(i->buffer_read(ctx, small, 224, sizeof host, host));
    EXPECT(memcmp(host, ramp, sizeof ramp) == 0, "copy within a buffer: %g .. %g", host[0],
           host[7]);
    EXPECT(i->buffer_copy(ctx, small, 0, small, 16, sizeof ramp) != CLINFER_OK,
           "overlapping copy accepted");
    EXPECT(i->buffer_copy(ctx, small, 0, big, SIZE_MAX - 3, 8) != CLINFER_OK,
           "copy to a wrapping offset accepted");
    EXPECT(i->buffer_write(ctx, small, SIZE_MAX - 3, 8, host) != CLINFER_OK,
           "write at a wrapping offset accepted");
    clinfer_buffer *none = NULL;
    EXPECT(i->buffer_alloc(ctx, 0, &none) != CLINFER_OK && !none, "0-byte alloc accepted");
    EXPECT(i->buffer_alloc(ctx, SIZE_MAX / 2, &none) != CLINFER_OK && !none, "huge alloc accepted");

    /* Still usable after all the rejections. */
    op = (clinfer_op){.kind = CLINFER_OP_ADD};
    op.eltwise = (typeof(op.eltwise)){{small, 0}, {small, 0}, {small, 0}, 64, 64, 0, 0};
    EXPECT_OK(i->op(ctx, &op));
    EXPECT_OK(i->sync(ctx));
    i->buffer_free(ctx, small);
    i->buffer_free(ctx, big);
}

static void test_device(size_t index) {
    EXPECT_OK(ref_backend_create(&be[REF]));
    clinfer_status st = cl_backend_create(index, NULL, &be[CL]);
    EXPECT(st == CLINFER_OK, "opencl backend on device %zu: %s: %s", index, clinfer_status_str(st),
           clinfer_last_error());
    if (be[REF] && be[CL]) {
        printf("device %zu: %s\n", index, be[CL]->i->describe(be[CL]->ctx));
        rng_seed(42 + index);
        test_eltwise();
        test_store();
        test_norms();
        test_rope();
        test_rope_cache();
        test_attention_long();
        test_attention();
        test_attention_window();
        test_attention_softcap();
        test_attention_sinks();
        test_attention_rope();
        test_attention_q8(CLINFER_DT_F32);
        test_attention_q8(CLINFER_DT_Q8_0);
        test_bad_args();
    }
    backend_free(be[CL]);
    backend_free(be[REF]);
    be[CL] = be[REF] = NULL;
}

int main(void) {
    path_name = test_kernel_path();
    int skip = for_each_test_device(test_device);
    if (skip) return skip;
    return finish("test_cl_ops");
}
