/* Element types: names and sizes, IEEE half and bfloat16 conversion, and the GGUF block formats
 * (dequantization follows the block layouts of the GGUF spec / ggml bit for bit; quantization,
 * what `clinfer quantize` writes and the tests' fixtures are made of, rounds to nearest against
 * each block's range, as ggml's reference quantizers do for Q8_0, Q4_0 and Q4_1; the K types also
 * search for better sub-block scales, as ggml's do, in a search of their own).
 *
 * Blocks are copied into a local struct before use: source rows may sit at any address (a mapped
 * file, a byte buffer), and a memcpy of a fixed small size costs nothing after optimisation. */
#include "quant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

_Static_assert(sizeof(block_q4_0) == 2 + QK4_0 / 2, "block_q4_0 must have no padding");
_Static_assert(sizeof(block_q5_0) == 2 + 4 + QK5_0 / 2, "block_q5_0 must have no padding");
_Static_assert(sizeof(block_q5_1) == 4 + 4 + QK5_1 / 2, "block_q5_1 must have no padding");
_Static_assert(sizeof(block_q4_1) == 4 + QK4_1 / 2, "block_q4_1 must have no padding");
_Static_assert(sizeof(block_q8_0) == 2 + QK8_0, "block_q8_0 must have no padding");
_Static_assert(sizeof(block_q4_K) == 4 + K_SCALE_SIZE + QK_K / 2, "block_q4_K size");
_Static_assert(sizeof(block_q6_K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, "block_q6_K size");

/* ---- IEEE 754 binary16 ------------------------------------------------------------------- */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A half's 15 exponent+mantissa bits shifted left by 13 line its mantissa up with an f32's; read
 * as an f32, that is the same value scaled by 2^-112 (the exponent biases are 15 and 127), so
 * multiplying by 2^112 restores it exactly, for normals and (through f32 subnormals) for half
 * subnormals alike. Only inf/nan (half exponent 31) need their own f32 exponent. */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t finite = f32_bits(f32_from_bits(em << 13) * 0x1p112f);
    uint32_t inf_nan = 0x7f800000u | ((em & 0x3ffu) << 13); /* nan keeps its payload */
    return f32_from_bits(sign | (em >= 0x7c00u ? inf_nan : finite));
}

float clinfer_f16_to_f32(uint16_t h) {
    return half_to_float(h);
}

/* Rounds value >> shift to nearest, ties to even. shift is 1..31. */
static uint32_t shift_round_even(uint32_t value, unsigned shift) {
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) kept++;
    return kept;
}

uint16_t clinfer_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) /* nan: stays a quiet nan, top of the payload kept */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* >= 65520 rounds past the largest half (65504): inf */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t exp = abs >> 23;
    if (exp >= 113) /* normal half: rebias, round the 13 dropped bits; a carry bumps the exponent */
        return (uint16_t)(sign | shift_round_even(((exp - 112) << 23) | (abs & 0x7fffffu), 13));
    /* Subnormal half (or zero): the value in units of 2^-24 is mant * 2^(exp - 126). */
    unsigned shift = 126 - exp;
    if (shift > 24) /* below 2^-25: rounds to zero (also f32 zeros and subnormals) */
        return sign;
    return (uint16_t)(sign | shift_round_even((abs & 0x7fffffu) | 0x800000u, shift));
}

/* ---- bfloat16 --------------------------------------------------------------------------- */

float clinfer_bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t clinfer_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* nan: quiet, so rounding cannot carry it into inf */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)shift_round_even(x, 16); /* a carry into the exponent rounds up to inf */
}

/* ---- dequantization, one block at a time ------------------------------------------------ */

static void dequant_q4_0(const uint8_t *src, float *y) {
    block_q4_0 b;
    memcpy(&b, src, sizeof b);
    float d = clinfer_f16_to_f32(b.d);
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
    float d = clinfer_f16_to_f32(b.d);
    for (int j = 0; j < QK5_0; j++)
        y[j] = (float)(q[j] - 16) * d;
}

static void dequant_q5_1(const uint8_t *src, float *y) {
    block_q5_1 b;
    int q[QK5_1];
    memcpy(&b, src, sizeof b);
    q5_values(b.qh, b.qs, q);
    float d = clinfer_f16_to_f32(b.d), m = clinfer_f16_to_f32(b.m);
    for (int j = 0; j < QK5_1; j++)
        y[j] = (float)q[j] * d + m;
}

static void dequant_q4_1(const uint8_t *src, float *y) {
    block_q4_1 b;
    memcpy(&b, src, sizeof b);
    float d = clinfer_f16_to_f32(b.d), m = clinfer_f16_to_f32(b.m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        y[j] = (float)(b.qs[j] & 0x0f) * d + m;
        y[j + QK4_1 / 2] = (float)(b.qs[j] >> 4) * d + m;
    }
}

static void dequant_q8_0(const uint8_t *src, float *y) {
    block_q8_0 b;
    memcpy(&b, src, sizeof b);
    float d = clinfer_f16_to_f32(b.d);
    for (int j = 0; j < QK8_0; j++)
        y[j] = (float)b.qs[j] * d;
}

/* Q4_K packs 8 six-bit scales and 8 six-bit mins into 12 bytes: sub-blocks 0-3 keep theirs in
 * the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep the low 4 bits in the
 * nibbles of bytes 8-11 and the high 2 bits in the top bits of bytes 0-3 / 4-7. */
static void q4_K_scale_min(const uint8_t *s, int j, uint8_t *scale, uint8_t *min) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *min = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Each 64 elements share 32 bytes of qs: low nibbles are sub-block 2c, high nibbles 2c + 1.
 * x = d * scale * q - dmin * min. */
static void dequant_q4_K(const uint8_t *src, float *y) {
    block_q4_K b;
    memcpy(&b, src, sizeof b);
    float d = clinfer_f16_to_f32(b.d), dmin = clinfer_f16_to_f32(b.dmin);
    for (int c = 0; c < QK_K / 64; c++) {
        const uint8_t *q = b.qs + 32 * c;
        for (int half = 0; half < 2; half++) {
            uint8_t sc, mn;
            q4_K_scale_min(b.scales, 2 * c + half, &sc, &mn);
            float d1 = d * (float)sc, m1 = dmin * (float)mn;
            for (int l = 0; l < 32; l++) {
                int nibble = half ? q[l] >> 4 : q[l] & 0x0f;
                *y++ = d1 * (float)nibble - m1;
            }
        }
    }
}

/* Q6_K: 6-bit values q in 0..63 (x = d * scale[e / 16] * (q - 32)). Each 128 elements use 64
 * bytes of ql and 32 of qh; element 32 * g + l (g = 0..3, l = 0..31) takes its low 4 bits from
 * ql[l + 32 * (g & 1)] (low nibble for g < 2, high for g >= 2) and its high 2 bits from bits
 * 2g, 2g+1 of qh[l]. */
static int q6_K_value(const uint8_t *ql, const uint8_t *qh, int g, int l) {
    uint8_t lo = ql[l + 32 * (g & 1)];
    int low4 = g < 2 ? lo & 0x0f : lo >> 4;
    int high2 = (qh[l] >> (2 * g)) & 3;
    return (low4 | (high2 << 4)) - 32;
}

static void dequant_q6_K(const uint8_t *src, float *y) {
    block_q6_K b;
    memcpy(&b, src, sizeof b);
    float d = clinfer_f16_to_f32(b.d);
    for (int h = 0; h < QK_K / 128; h++) {
        const uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
        const int8_t *sc = b.scales + 8 * h;
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)sc[2 * g + l / 16] * (float)q6_K_value(ql, qh, g, l);
    }
}

/* ---- quantization (round to nearest), one block at a time -------------------------------- */

/* x rounded to the nearest integer and clamped to lo..hi. */
static int round_clamp(float x, int lo, int hi) {
    int v = (int)lrintf(x);
    return v < lo ? lo : v > hi ? hi : v;
}

/* The reciprocal of a scale, 0 for a zero scale (an all-zero block quantizes to zeros). */
static float inverse(float d) {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/* The element of largest magnitude, sign kept (the first of equals; 0 for n == 0). */
static float extreme(const float *x, int n) {
    float e = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > fabsf(e)) e = x[j];
    return e;
}

static void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = *hi = x[0];
    for (int j = 1; j < n; j++) {
        *lo = fminf(*lo, x[j]);
        *hi = fmaxf(*hi, x[j]);
    }
}

static void quant_q8_0(const float *x, uint8_t *dst) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    block_q8_0 b;
    b.d = clinfer_f32_to_f16(amax / 127.0f);
    float id = inverse(clinfer_f16_to_f32(b.d));
    for (int j = 0; j < QK8_0; j++)
        b.qs[j] = (int8_t)round_clamp(x[j] * id, -127, 127);
    memcpy(dst, &b, sizeof b);
}

/* Q4_0 values are -8..7: the element of largest magnitude maps to -8 (scale = it / -8), which
 * uses the full asymmetric range on its side. */
static void quant_q4_0(const float *x, uint8_t *dst) {
    block_q4_0 b;
    b.d = clinfer_f32_to_f16(extreme(x, QK4_0) / -8.0f);
    float id = inverse(clinfer_f16_to_f32(b.d));
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
    b.d = clinfer_f32_to_f16(extreme(x, QK5_0) / -16.0f);
    float id = inverse(clinfer_f16_to_f32(b.d));
    for (int j = 0; j < QK5_0; j++)
        q[j] = round_clamp(x[j] * id, -16, 15) + 16;
    q5_pack(q, b.qh, b.qs);
    memcpy(dst, &b, sizeof b);
}

/* Q4_1 and Q5_1 span a block's range from its minimum m in `top` steps of d: q = 0 .. top. */
static void affine_q(const float *x, int top, uint16_t *d, uint16_t *m, int q[32]) {
    float lo, hi;
    min_max(x, 32, &lo, &hi);
    *d = clinfer_f32_to_f16((hi - lo) / (float)top);
    *m = clinfer_f32_to_f16(lo);
    float id = inverse(clinfer_f16_to_f32(*d)), mf = clinfer_f16_to_f32(*m);
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

/* Inverse of q4_K_scale_min: packs 8 six-bit scales and mins into 12 bytes. */
static void q4_K_pack_scales(uint8_t *s, const uint8_t *scale, const uint8_t *min) {
    memset(s, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] |= scale[j];
            s[j + 4] |= min[j];
        } else {
            s[j + 4] = (uint8_t)((scale[j] & 0x0f) | ((min[j] & 0x0f) << 4));
            s[j - 4] |= (uint8_t)((scale[j] >> 4) << 6);
            s[j] |= (uint8_t)((min[j] >> 4) << 6);
        }
    }
}

/* The K types' sub-block fits. Rounding against the block's range is the first guess; as the
 * largest magnitudes are few, a scale a little smaller (clipping them) or larger can round the
 * many others closer. So the range is also divided into nmax - 1 to nmax + 1 steps (21 tries), each
 * refit by least squares to the levels it rounds to, and the smallest squared error is kept. The
 * error of a fit comes from the sums the refit needs, so each try is one pass over the sub-block.
 */
#define FIT_TRIES 21

/* The squared error of x ~ a * q + b from the sums over the sub-block. */
static double fit_error(double a, double b, int n, const double sums[5]) {
    enum { SQ, SQQ, SX, SQX, SXX };
    return a * a * sums[SQQ] + 2 * a * b * sums[SQ] + n * b * b - 2 * a * sums[SQX] -
           2 * b * sums[SX] + sums[SXX];
}

/* x ~ scale * q - min, q in 0..nmax, scale and min >= 0 (the format stores them unsigned). */
static void fit_scale_min(const float *x, int n, int nmax, float *scale, float *min) {
    float lo, hi, sx = 0.0f, sxx = 0.0f;
    min_max(x, n, &lo, &hi);
    lo = fminf(lo, 0.0f);
    *scale = (hi - lo) / (float)nmax;
    *min = -lo;
    if (!(hi > lo)) return;
    for (int i = 0; i < n; i++) {
        sx += x[i];
        sxx += x[i] * x[i];
    }
    double best = INFINITY;
    for (int t = -1; t < FIT_TRIES; t++) {
        /* t = -1: the range itself; then its candidates */
        float s = t < 0 ? *scale : (hi - lo) / ((float)nmax - 1.0f + 0.1f * (float)t);
        float inv = 1.0f / s, sqx = 0.0f;
        int sq = 0, sqq = 0;
        for (int i = 0; i < n; i++) {
            float v = (x[i] - lo) * inv;            /* >= 0 */
            v = v <= (float)nmax ? v : (float)nmax; /* before the conversion: NaN too */
            int q = (int)(v + 0.5f);                /* halves up */
            sq += q;
            sqq += q * q;
            sqx += (float)q * x[i];
        }
        double sums[5] = {sq, sqq, sx, sqx, sxx}, a = s, b = lo; /* x ~ a * q + b */
        double det = n * (double)sqq - (double)sq * sq;
        if (t >= 0 && det > 0) {
            a = (n * (double)sqx - (double)sq * sx) / det;
            b = ((double)sqq * sx - (double)sq * sqx) / det;
            if (b > 0) { /* min >= 0: the line through the origin instead */
                b = 0;
                a = sqx / (double)sqq;
            }
        }
        double err = fit_error(a, b, n, sums);
        if (a > 0 && err < best) {
            best = err;
            *scale = (float)a;
            *min = (float)-b;
        }
    }
}

/* x ~ scale * q, q in -nmax..nmax - 1; the element of largest magnitude maps to -nmax first. */
static float fit_scale(const float *x, int n, int nmax) {
    float e = extreme(x, n), first = e / (float)-nmax, best_scale = first, sxx = 0.0f;
    if (e == 0.0f) return 0.0f;
    for (int i = 0; i < n; i++)
        sxx += x[i] * x[i];
    double best = INFINITY;
    for (int t = -1; t < FIT_TRIES; t++) {
        float s = t < 0 ? first : e / -((float)nmax - 1.0f + 0.1f * (float)t);
        float inv = 1.0f / s, sqx = 0.0f;
        int sqq = 0;
        for (int i = 0; i < n; i++) {
            float v = x[i] * inv;
            v = v <= (float)(nmax - 1) ? v : (float)(nmax - 1); /* NaN too */
            v = v >= (float)-nmax ? v : (float)-nmax;
            int q = (int)(v + (v < 0.0f ? -0.5f : 0.5f)); /* halves away from zero */
            sqq += q * q;
            sqx += (float)q * x[i];
        }
        double a = t >= 0 && sqq > 0 ? sqx / (double)sqq : s;
        double sums[5] = {0, sqq, 0, sqx, sxx}, err = fit_error(a, 0.0, n, sums);
        if (err < best) {
            best = err;
            best_scale = (float)a;
        }
    }
    return best_scale;
}

/* Per sub-block of 32: x ~ scale * q - min with q in 0..15 and min >= 0 (fit_scale_min). Scales
 * and mins are then quantized to 6 bits against the super-block's d and dmin, and q is recomputed
 * with the quantized values. */
static void quant_q4_K(const float *x, uint8_t *dst) {
    float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        fit_scale_min(x + 32 * j, 32, 15, &scale[j], &min[j]);
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, min[j]);
    }
    block_q4_K b;
    b.d = clinfer_f32_to_f16(max_scale / 63.0f);
    b.dmin = clinfer_f32_to_f16(max_min / 63.0f);
    float d = clinfer_f16_to_f32(b.d), dmin = clinfer_f16_to_f32(b.dmin);
    uint8_t qscale[8], qmin[8];
    for (int j = 0; j < 8; j++) {
        qscale[j] = (uint8_t)round_clamp(scale[j] * inverse(d), 0, 63);
        qmin[j] = (uint8_t)round_clamp(min[j] * inverse(dmin), 0, 63);
    }
    q4_K_pack_scales(b.scales, qscale, qmin);
    uint8_t q[QK_K];
    for (int j = 0; j < 8; j++) {
        float id = inverse(d * (float)qscale[j]), m = dmin * (float)qmin[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)round_clamp((x[32 * j + l] + m) * id, 0, 15);
    }
    for (int c = 0; c < QK_K / 64; c++)
        for (int l = 0; l < 32; l++)
            b.qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    memcpy(dst, &b, sizeof b);
}

/* Per sub-block of 16: a symmetric scale (q in -32..31, fit_scale); the scales are then quantized
 * to int8 against d = max |scale| / 127. */
static void quant_q6_K(const float *x, uint8_t *dst) {
    float scale[QK_K / 16], max_abs_scale = 0.0f;
    for (int s = 0; s < QK_K / 16; s++) {
        scale[s] = fit_scale(x + 16 * s, 16, 32);
        max_abs_scale = fmaxf(max_abs_scale, fabsf(scale[s]));
    }
    block_q6_K b;
    b.d = clinfer_f32_to_f16(max_abs_scale / 127.0f);
    float d = clinfer_f16_to_f32(b.d);
    uint8_t q[QK_K]; /* stored form, q + 32 in 0..63 */
    for (int s = 0; s < QK_K / 16; s++) {
        b.scales[s] = (int8_t)round_clamp(scale[s] * inverse(d), -127, 127);
        float id = inverse(d * (float)b.scales[s]);
        for (int l = 0; l < 16; l++)
            q[16 * s + l] = (uint8_t)(round_clamp(x[16 * s + l] * id, -32, 31) + 32);
    }
    for (int h = 0; h < QK_K / 128; h++) {
        const uint8_t *qq = q + 128 * h;
        uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((qq[l] & 0x0f) | ((qq[l + 64] & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((qq[l + 32] & 0x0f) | ((qq[l + 96] & 0x0f) << 4));
            qh[l] = (uint8_t)((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                              ((qq[l + 96] >> 4) << 6));
        }
    }
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
 * f16}, s_bytes}, its type filled in by clinfer_dtype_split. */
typedef struct {
    const char *name;
    size_t block_elems, block_bytes;
    void (*dequant)(const uint8_t *block, float *y);
    void (*quant)(const float *x, uint8_t *block);
    bool q8_act, weight;
    clinfer_block_split split;
} dtype_info;

/* clang-format off */
static const dtype_info dtypes[CLINFER_DT_ID_LIMIT] = {
    [CLINFER_DT_F32] = {"F32", 1, sizeof(float), NULL, NULL, false, true, {16, 0, 4, {{0}}, 0}},
    [CLINFER_DT_F16] = {"F16", 1, sizeof(uint16_t), NULL, NULL, false, true,
                        {16, 0, 2, {{0}}, 0}},
    /* split: f32 d */
    [CLINFER_DT_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), dequant_q4_0, quant_q4_0, true, true,
                         {32, 2, 16, {{0, 2, 1}}, 4}},
    /* split: f32 d, m */
    [CLINFER_DT_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), dequant_q4_1, quant_q4_1, true, true,
                         {32, 4, 16, {{0, 4, 1}}, 8}},
    /* split: qh and qs together (5 words); f32 d */
    [CLINFER_DT_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), dequant_q5_0, quant_q5_0, true, true,
                         {32, 2, 20, {{0, 2, 1}}, 4}},
    /* split: qh and qs together (5 words); f32 d, m */
    [CLINFER_DT_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), dequant_q5_1, quant_q5_1, true, true,
                         {32, 4, 20, {{0, 4, 1}}, 8}},
    /* split: f32 d */
    [CLINFER_DT_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), dequant_q8_0, quant_q8_0, true, true,
                         {32, 2, 32, {{0, 2, 1}}, 4}},
    /* split: f32 d, dmin, then scales[12] */
    [CLINFER_DT_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), dequant_q4_K, quant_q4_K, true, true,
                         {64, 16, 128, {{0, 4, 1}, {4, 12, 0}}, 20}},
    /* split: ql and qh together; scales[16] then f32 d */
    [CLINFER_DT_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), dequant_q6_K, quant_q6_K, true, true,
                         {128, 0, 192, {{192, 16, 0}, {208, 2, 1}}, 20}},
    [CLINFER_DT_BF16] = {"BF16", 1, sizeof(uint16_t), NULL, NULL, false, false, {0}},
};
/* clang-format on */

/* The entry of a known type, NULL for any other id (the table's gaps have no name). */
static const dtype_info *dtype_lookup(uint32_t type) {
    if (type >= sizeof dtypes / sizeof dtypes[0] || !dtypes[type].name) return NULL;
    return &dtypes[type];
}

int clinfer_dtype_valid(uint32_t type) {
    return dtype_lookup(type) != NULL;
}

const char *clinfer_dtype_name(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->name : "unknown";
}

bool clinfer_dtype_is_weight(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t && t->weight;
}

size_t clinfer_dtype_block_elems(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->block_elems : 0;
}

size_t clinfer_dtype_block_bytes(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t ? t->block_bytes : 0;
}

size_t clinfer_dtype_row_bytes(clinfer_dtype type, size_t n) {
    size_t be = clinfer_dtype_block_elems(type);
    return be ? n / be * clinfer_dtype_block_bytes(type) : 0;
}

/* Unknown types do nothing: callers validate types first. */
void clinfer_dequantize_row(clinfer_dtype type, const void *src, float *dst, size_t n) {
    const uint8_t *s = src;
    const dtype_info *t = dtype_lookup((uint32_t)type);
    if (!t) return;
    if (type == CLINFER_DT_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else if (type == CLINFER_DT_F16 || type == CLINFER_DT_BF16) {
        bool bf16 = type == CLINFER_DT_BF16;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, sizeof h);
            dst[i] = bf16 ? clinfer_bf16_to_f32(h) : half_to_float(h);
        }
    } else {
        for (size_t i = 0; i < n / t->block_elems; i++)
            t->dequant(s + i * t->block_bytes, dst + i * t->block_elems);
    }
}

void clinfer_quantize_row(clinfer_dtype type, const float *src, void *dst, size_t n) {
    uint8_t *d = dst;
    const dtype_info *t = dtype_lookup((uint32_t)type);
    if (!t) return;
    if (type == CLINFER_DT_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else if (type == CLINFER_DT_F16 || type == CLINFER_DT_BF16) {
        bool bf16 = type == CLINFER_DT_BF16;
        for (size_t i = 0; i < n; i++) {
            uint16_t h = bf16 ? clinfer_f32_to_bf16(src[i]) : clinfer_f32_to_f16(src[i]);
            memcpy(d + 2 * i, &h, sizeof h);
        }
    } else {
        for (size_t i = 0; i < n / t->block_elems; i++)
            t->quant(src + i * t->block_elems, d + i * t->block_bytes);
    }
}

clinfer_block_split clinfer_dtype_split(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    clinfer_block_split split = t ? t->split : (clinfer_block_split){0};
    split.type = type;
    return split;
}

bool clinfer_dtype_takes_q8_act(clinfer_dtype type) {
    const dtype_info *t = dtype_lookup((uint32_t)type);
    return t && t->q8_act;
}

void clinfer_quantize_q8_act(const float *x, size_t k, int8_t *q, float *d) {
    for (size_t b = 0; b < k / CLINFER_Q8_ACT_BLOCK; b++) {
        const float *xb = x + b * CLINFER_Q8_ACT_BLOCK;
        int8_t *qb = q + b * CLINFER_Q8_ACT_BLOCK;
        float amax = 0.0f;
        bool finite = true;
        for (int i = 0; i < CLINFER_Q8_ACT_BLOCK; i++) {
            amax = fmaxf(amax, fabsf(xb[i]));
            finite = finite && isfinite(xb[i]);
        }
        /* A NaN or infinity makes the whole block NaN (d * 0), as it would poison the dot. */
        float db = finite ? amax / 127.0f : NAN, id = finite && db != 0.0f ? 1.0f / db : 0.0f;
        for (int i = 0; i < CLINFER_Q8_ACT_BLOCK; i++)
            qb[i] = finite ? (int8_t)roundf(xb[i] * id) : 0;
        d[b] = db;
    }
}
