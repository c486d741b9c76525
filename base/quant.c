/* Element types: names and sizes, and the GGUF block formats (dequantization follows the block
 * layouts of the GGUF spec / ggml bit for bit; quantization, what `clinfer quantize` writes and
 * the tests' fixtures are made of, rounds to nearest against each block's range, as ggml's
 * reference quantizers do for the 32-element types; the K types, in quant_k.c, also search for
 * better sub-block scales, as ggml's do, in a search of their own). The half and bfloat16
 * conversions of single values are in half.c.
 *
 * Blocks are copied into a local struct before use: source rows may sit at any address (a mapped
 * file, a byte buffer), and a memcpy of a fixed small size costs nothing after optimisation. */
#include "quant.h"
#include "quant_block.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

_Static_assert(sizeof(block_q4_0) == 2 + QK4_0 / 2, "block_q4_0 must have no padding");
_Static_assert(sizeof(block_q5_0) == 2 + 4 + QK5_0 / 2, "block_q5_0 must have no padding");
_Static_assert(sizeof(block_q5_1) == 4 + 4 + QK5_1 / 2, "block_q5_1 must have no padding");
_Static_assert(sizeof(block_q4_1) == 4 + QK4_1 / 2, "block_q4_1 must have no padding");
_Static_assert(sizeof(block_q8_0) == 2 + QK8_0, "block_q8_0 must have no padding");
_Static_assert(sizeof(block_iq4_nl) == 2 + QK4_NL / 2, "block_iq4_nl must have no padding");

const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
_Static_assert(sizeof(block_mxfp4) == 1 + QK_MXFP4 / 2, "block_mxfp4 must have no padding");

const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float mxfp4_scale(uint8_t e) {
    return ldexpf(1.0f, (int)e - 128);
}
_Static_assert(sizeof(block_q4_K) == 4 + K_SCALE_SIZE + QK_K / 2, "block_q4_K size");
_Static_assert(sizeof(block_q6_K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, "block_q6_K size");
_Static_assert(sizeof(block_q2_K) == QK_K / 16 + QK_K / 4 + 4, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == QK_K / 8 + QK_K / 4 + 12 + 2, "block_q3_K size");
_Static_assert(sizeof(block_q5_K) == 4 + K_SCALE_SIZE + QK_K / 8 + QK_K / 2, "block_q5_K size");

/* ---- dequantization, one block at a time ------------------------------------------------ */

static void dequant_q4_0(const uint8_t *src, float *y) {
    block_q4_0 b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        y[j] = (float)((b.qs[j] & 0x0f) - 8) * d;
        y[j + QK4_0 / 2] = (float)((b.qs[j] >> 4) - 8) * d;
    }
}

/* The 5-bit values of a Q5_0/Q5_1 block (0..31): nibbles as Q4_0's, fifth bits from qh. */
static void q5_values(const uint8_t qh[4], const uint8_t qs[16], int q[32]) {
    uint32_t h =
        (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0f) | (int)((h >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
    }
}

/* The inverse: 32 values of 0..31 into nibbles and qh. */
static void q5_pack(const int q[32], uint8_t qh[4], uint8_t qs[16]) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
        h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int i = 0; i < 4; i++)
        qh[i] = (uint8_t)(h >> (8 * i));
}

static void dequant_q5_0(const uint8_t *src, float *y) {
    block_q5_0 b;
    int q[QK5_0];
    memcpy(&b, src, sizeof b);
    q5_values(b.qh, b.qs, q);
    float d = f16_to_f32(b.d);
    for (int j = 0; j < QK5_0; j++)
        y[j] = (float)(q[j] - 16) * d;
}

static void dequant_q5_1(const uint8_t *src, float *y) {
    block_q5_1 b;
    int q[QK5_1];
    memcpy(&b, src, sizeof b);
    q5_values(b.qh, b.qs, q);
    float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    for (int j = 0; j < QK5_1; j++)
        y[j] = (float)q[j] * d + m;
}

/* IQ4_NL and MXFP4: each nibble (laid out as Q4_0's) an index into 16 levels, times d. */
static void dequant_levels(const uint8_t qs[16], const int8_t levels[16], float d, float *y) {
    for (int j = 0; j < 16; j++) {
        y[j] = (float)levels[qs[j] & 0x0f] * d;
        y[j + 16] = (float)levels[qs[j] >> 4] * d;
    }
}

static void dequant_iq4_nl(const uint8_t *src, float *y) {
    block_iq4_nl b;
    memcpy(&b, src, sizeof b);
    dequant_levels(b.qs, iq4nl_values, f16_to_f32(b.d), y);
}

static void dequant_mxfp4(const uint8_t *src, float *y) {
    block_mxfp4 b;
    memcpy(&b, src, sizeof b);
    dequant_levels(b.qs, mxfp4_values, mxfp4_scale(b.e), y);
}

static void dequant_q4_1(const uint8_t *src, float *y) {
    block_q4_1 b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        y[j] = (float)(b.qs[j] & 0x0f) * d + m;
        y[j + QK4_1 / 2] = (float)(b.qs[j] >> 4) * d + m;
    }
}

static void dequant_q8_0(const uint8_t *src, float *y) {
    block_q8_0 b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d);
    for (int j = 0; j < QK8_0; j++)
        y[j] = (float)b.qs[j] * d;
}

/* ---- quantization (round to nearest), one block at a time -------------------------------- */

static void quant_q8_0(const float *x, uint8_t *dst) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    block_q8_0 b;
    b.d = f32_to_f16(amax / 127.0f);
    float id = inverse(f16_to_f32(b.d));
    for (int j = 0; j < QK8_0; j++)
        b.qs[j] = (int8_t)round_clamp(x[j] * id, -127, 127);
    memcpy(dst, &b, sizeof b);
}

/* Q4_0 values are -8..7: the element of largest magnitude maps to -8 (scale = it / -8), which
 * uses the full asymmetric range on its side. */
static void quant_q4_0(const float *x, uint8_t *dst) {
    block_q4_0 b;
    b.d = f32_to_f16(extreme(x, QK4_0) / -8.0f);
    float id = inverse(f16_to_f32(b.d));
    for (int j = 0; j < QK4_0 / 2; j++) {
        int lo = round_clamp(x[j] * id, -8, 7) + 8;
        int hi = round_clamp(x[j + QK4_0 / 2] * id, -8, 7) + 8;
        b.qs[j] = (uint8_t)(lo | (hi << 4));
    }
    memcpy(dst, &b, sizeof b);
}

/* Q5_0 values are -16..15, the element of largest magnitude mapping to -16, as Q4_0 does. */
static void quant_q5_0(const float *x, uint8_t *dst) {
    block_q5_0 b;
    int q[QK5_0];
    b.d = f32_to_f16(extreme(x, QK5_0) / -16.0f);
    float id = inverse(f16_to_f32(b.d));
    for (int j = 0; j < QK5_0; j++)
        q[j] = round_clamp(x[j] * id, -16, 15) + 16;
    q5_pack(q, b.qh, b.qs);
    memcpy(dst, &b, sizeof b);
}

/* The index of the level nearest t (the first of equals). */
static int nearest_level(const int8_t levels[16], float t) {
    int best = 0;
    for (int i = 1; i < 16; i++)
        if (fabsf(t - levels[i]) < fabsf(t - levels[best])) best = i;
    return best;
}

/* 32 values, each to its nearest level of x * id, packed as Q4_0's nibbles. */
static void pack_levels(const float *x, const int8_t levels[16], float id, uint8_t qs[16]) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest_level(levels, x[j] * id) | nearest_level(levels, x[j + 16] * id)
                                                                 << 4);
}

/* IQ4_NL: the element of largest magnitude maps to the level -127 (as Q4_0's to -8), every
 * element to its nearest level. */
static void quant_iq4_nl(const float *x, uint8_t *dst) {
    block_iq4_nl b;
    b.d = f32_to_f16(extreme(x, QK4_NL) / -127.0f);
    pack_levels(x, iq4nl_values, inverse(f16_to_f32(b.d)), b.qs);
    memcpy(dst, &b, sizeof b);
}

/* The squared error of x against its nearest levels times d. */
static float levels_error(const float *x, const int8_t levels[16], float d) {
    float e = 0.0f, id = inverse(d);
    for (int j = 0; j < 32; j++) {
        float r = x[j] - (float)levels[nearest_level(levels, x[j] * id)] * d;
        e += r * r;
    }
    return e;
}

/* MXFP4: the smallest exponent whose largest level (12 d) reaches the block's largest
 * magnitude, or the one below where clipping that element costs less than the coarser steps. */
static void quant_mxfp4(const float *x, uint8_t *dst) {
    block_mxfp4 b;
    float amax = fabsf(extreme(x, QK_MXFP4));
    int e = 0;
    if (amax > 0.0f) {
        int p;
        float m = frexpf(amax / 12.0f, &p); /* amax / 12 = m 2^p, m in [0.5, 1) */
        e = 128 + (m == 0.5f ? p - 1 : p);
        e = e < 1 ? 1 : e > 254 ? 254 : e;
        if (levels_error(x, mxfp4_values, mxfp4_scale((uint8_t)(e - 1))) <
            levels_error(x, mxfp4_values, mxfp4_scale((uint8_t)e)))
            e--;
    }
    b.e = (uint8_t)e;
    pack_levels(x, mxfp4_values, inverse(mxfp4_scale(b.e)), b.qs);
    memcpy(dst, &b, sizeof b);
}

/* Q4_1 and Q5_1 span a block's range from its minimum m in `top` steps of d: q = 0 .. top. */
static void affine_q(const float *x, int top, uint16_t *d, uint16_t *m, int q[32]) {
    float lo, hi;
    min_max(x, 32, &lo, &hi);
    *d = f32_to_f16((hi - lo) / (float)top);
    *m = f32_to_f16(lo);
    float id = inverse(f16_to_f32(*d)), mf = f16_to_f32(*m);
    for (int j = 0; j < 32; j++)
        q[j] = round_clamp((x[j] - mf) * id, 0, top);
}

static void quant_q5_1(const float *x, uint8_t *dst) {
    block_q5_1 b;
    int q[QK5_1];
    affine_q(x, 31, &b.d, &b.m, q);
    q5_pack(q, b.qh, b.qs);
    memcpy(dst, &b, sizeof b);
}

static void quant_q4_1(const float *x, uint8_t *dst) {
    block_q4_1 b;
    int q[QK4_1];
    affine_q(x, 15, &b.d, &b.m, q);
    for (int j = 0; j < QK4_1 / 2; j++)
        b.qs[j] = (uint8_t)(q[j] | (q[j + QK4_1 / 2] << 4));
    memcpy(dst, &b, sizeof b);
}

/* ---- the type table ---------------------------------------------------------------------- */

/* The one table of weight types: the GGUF reader (which ids exist, block sizes), the reference
 * backend (the codecs) and the OpenCL backend (the -DWT_<name> its programs are built with,
 * whether matmuls round x to 8 bits, how its blocks are split at upload) all read it. f32, f16
 * and bf16 are one-element "blocks" with no codec here: rows of them convert in a loop. q8_act:
 * matmuls take 8-bit activations, for integer dot products with the integer blocks (f16/f32 rows
 * would only lose precision). weight: backends run matmuls over it (BF16 has no kernels: it is
 * only read and converted on the host). split: {kblk, q_off, q_len, scale segments {off, len,
 * f16}, s_bytes}, its type filled in by dtype_split. */
typedef struct {
    const char *name;
    size_t block_elems, block_bytes;
    void (*dequant)(const uint8_t *block, float *y);
    void (*quant)(const float *x, uint8_t *block);
    bool q8_act, weight;
    clinfer_block_split split;
} dtype_info;

/* A quantized weight type: codecs dequant_<t> and quant_<t> on block_<t> (named once, so that
 * they cannot pair with another type's block); its matmuls take 8-bit activations. */
#define QUANT(name, qk, t) name, qk, sizeof(block_##t), dequant_##t, quant_##t, true, true

/* clang-format off */
static const dtype_info dtypes[CLINFER_DT_ID_LIMIT] = {
    [CLINFER_DT_F32] = {"F32", 1, sizeof(float), NULL, NULL, false, true, {16, 0, 4, {{0}}, 0}},
    [CLINFER_DT_F16] = {"F16", 1, sizeof(uint16_t), NULL, NULL, false, true, {16, 0, 2, {{0}}, 0}},
    /* split: f32 d */
    [CLINFER_DT_Q4_0] = {QUANT("Q4_0", QK4_0, q4_0), {32, 2, 16, {{0, 2, 1}}, 4}},
    /* split: f32 d, m */
    [CLINFER_DT_Q4_1] = {QUANT("Q4_1", QK4_1, q4_1), {32, 4, 16, {{0, 4, 1}}, 8}},
    /* split: qh and qs together (5 words); f32 d */
    [CLINFER_DT_Q5_0] = {QUANT("Q5_0", QK5_0, q5_0), {32, 2, 20, {{0, 2, 1}}, 4}},
    /* split: qh and qs together (5 words); f32 d, m */
    [CLINFER_DT_Q5_1] = {QUANT("Q5_1", QK5_1, q5_1), {32, 4, 20, {{0, 4, 1}}, 8}},
    /* split: f32 d */
    [CLINFER_DT_Q8_0] = {QUANT("Q8_0", QK8_0, q8_0), {32, 2, 32, {{0, 2, 1}}, 4}},
    /* split: f32 d, dmin, then scales[16] */
    [CLINFER_DT_Q2_K] = {QUANT("Q2_K", QK_K, q2_K), {128, 16, 64, {{80, 4, 1}, {0, 16, 0}}, 24}},
    /* split: hmask and qs together; f32 d, then scales[12] */
    [CLINFER_DT_Q3_K] = {QUANT("Q3_K", QK_K, q3_K), {128, 0, 96, {{108, 2, 1}, {96, 12, 0}}, 16}},
    /* split: f32 d, dmin, then scales[12] */
    [CLINFER_DT_Q4_K] = {QUANT("Q4_K", QK_K, q4_K), {64, 16, 128, {{0, 4, 1}, {4, 12, 0}}, 20}},
    /* split: qh and qs together; Q4_K's header */
    [CLINFER_DT_Q5_K] = {QUANT("Q5_K", QK_K, q5_K), {64, 16, 160, {{0, 4, 1}, {4, 12, 0}}, 20}},
    /* split: ql and qh together; scales[16] then f32 d */
    [CLINFER_DT_Q6_K] = {QUANT("Q6_K", QK_K, q6_K), {128, 0, 192, {{192, 16, 0}, {208, 2, 1}}, 20}},
    /* split: f32 d */
    [CLINFER_DT_IQ4_NL] = {QUANT("IQ4_NL", QK4_NL, iq4_nl), {32, 2, 16, {{0, 2, 1}}, 4}},
    [CLINFER_DT_BF16] = {"BF16", 1, sizeof(uint16_t), NULL, NULL, false, false, {0}},
    /* split: the exponent byte as it is (cl/weights.clh decodes it) */
    [CLINFER_DT_MXFP4] = {QUANT("MXFP4", QK_MXFP4, mxfp4), {32, 1, 16, {{0, 1, 0}}, 1}},
};
/* clang-format on */
#undef QUANT

/* The entry of a known type, NULL for any other id (the table's gaps have no name). */
static const dtype_info *dtype_lookup(uint32_t type) {
    if (type >= sizeof dtypes / sizeof dtypes[0] || !dtypes[type].name) return NULL;
    return &dtypes[type];
}

int dtype_valid(uint32_t type) {
    return dtype_lookup(type) != NULL;
}

const char *dtype_name(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->name : "unknown";
}

bool dtype_is_weight(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t && t->weight;
}

/* The index-th type that matmuls run over, in id order. */
const char *dtype_weight_name_at(size_t index) {
    for (uint32_t id = 0; id < CLINFER_DT_ID_LIMIT; id++)
        if (dtype_valid(id) && dtype_is_weight((clinfer_dtype)id) && !index--)
            return dtype_name((clinfer_dtype)id);
    return NULL;
}

size_t dtype_block_elems(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->block_elems : 0;
}

size_t dtype_block_bytes(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->block_bytes : 0;
}

size_t dtype_row_bytes(clinfer_dtype type, size_t n) {
    size_t be = dtype_block_elems(type);
    return be ? n / be * dtype_block_bytes(type) : 0;
}

/* The types that are no blocks: f32 copied, f16 and bf16 converted one by one, towards f32
 * (to_f32) or from it; false for any other type. */
static bool convert_plain(clinfer_dtype type, const void *src, void *dst, size_t n, bool to_f32) {
    if (type == CLINFER_DT_F32) {
        memcpy(dst, src, n * sizeof(float));
        return true;
    }
    if (type != CLINFER_DT_F16 && type != CLINFER_DT_BF16) return false;
    bool bf16 = type == CLINFER_DT_BF16;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        if (to_f32) {
            memcpy(&h, (const uint8_t *)src + 2 * i, sizeof h);
            ((float *)dst)[i] = bf16 ? bf16_to_f32(h) : f16_to_f32(h);
        } else {
            float f = ((const float *)src)[i];
            h = bf16 ? f32_to_bf16(f) : f32_to_f16(f);
            memcpy((uint8_t *)dst + 2 * i, &h, sizeof h);
        }
    }
    return true;
}

/* Unknown types do nothing: callers validate types first. */
void dequantize_row(clinfer_dtype type, const void *src, float *dst, size_t n) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    if (!t || convert_plain(type, src, dst, n, true)) return;
    for (size_t i = 0; i < n / t->block_elems; i++)
        t->dequant((const uint8_t *)src + i * t->block_bytes, dst + i * t->block_elems);
}

void quantize_row(clinfer_dtype type, const float *src, void *dst, size_t n) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    if (!t || convert_plain(type, src, dst, n, false)) return;
    for (size_t i = 0; i < n / t->block_elems; i++)
        t->quant(src + i * t->block_elems, (uint8_t *)dst + i * t->block_bytes);
}

clinfer_block_split dtype_split(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    clinfer_block_split split = t ? t->split : (clinfer_block_split){0};
    split.type = type;
    return split;
}

bool dtype_takes_q8_act(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t && t->q8_act;
}

size_t dtype_q8_act_block(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t && t->q8_act && t->block_elems == QK_K ? CLINFER_Q8_ACT_SUPER : CLINFER_Q8_ACT_BLOCK;
}

void quant_q8_act(const float *x, size_t k, size_t block, int8_t *q, float *d) {
    for (size_t b = 0; b < k / block; b++) {
        const float *xb = x + b * block;
        int8_t *qb = q + b * block;
        float amax = 0.0f;
        bool finite = true;
        for (size_t i = 0; i < block; i++) {
            amax = fmaxf(amax, fabsf(xb[i]));
            finite = finite && isfinite(xb[i]);
        }
        /* A NaN or infinity makes the whole block NaN (d * 0), as it would poison the dot. */
        float db = finite ? amax / 127.0f : NAN, id = finite && db != 0.0f ? 1.0f / db : 0.0f;
        for (size_t i = 0; i < block; i++)
            qb[i] = finite ? (int8_t)roundf(xb[i] * id) : 0;
        d[b] = db;
    }
}
