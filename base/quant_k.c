/* The K types' super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): dequantization as the GGUF spec lays
 * them out, and quantization that searches each sub-block's scale (and min, for the types that
 * have one) for the least squared error rather than rounding to its range. */
#include <string.h>

#include "quant_block.h"

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
void dequant_q4_K(const uint8_t *src, float *y) {
    block_q4_K b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
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

/* Q2_K and Q3_K keep the low 2 bits of element e in byte 32 (e / 128) + e % 32 of qs, at bits
 * 2 ((e / 32) % 4); Q3_K and Q5_K keep its high bit in byte e % 32 of their mask, at bit e / 32. */
static int low2(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

static int high_bit(const uint8_t *mask, int e) {
    return (mask[e % 32] >> (e / 32)) & 1;
}

/* Sub-block s (of 16): x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4). */
void dequant_q2_K(const uint8_t *src, float *y) {
    block_q2_K b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int e = 0; e < QK_K; e++) {
        uint8_t sc = b.scales[e / 16];
        y[e] = d * (float)(sc & 15) * (float)low2(b.qs, e) - dmin * (float)(sc >> 4);
    }
}

/* Q3_K's 16 six-bit scales in 12 bytes: the low 4 bits of scale j in the low (j < 8) or high
 * (j >= 8) nibble of byte j % 8, its top 2 bits at bits 2 (j / 4) of byte 8 + j % 4. Stored
 * biased by 32. */
static int q3_K_scale(const uint8_t *s, int j) {
    int low4 = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    int high2 = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low4 | high2 << 4) - 32;
}

/* x = d * scale * (q - 4), q from 2 low bits and the mask's high bit. */
void dequant_q3_K(const uint8_t *src, float *y) {
    block_q3_K b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d);
    for (int e = 0; e < QK_K; e++) {
        int q = low2(b.qs, e) + 4 * high_bit(b.hmask, e) - 4;
        y[e] = d * (float)q3_K_scale(b.scales, e / 16) * (float)q;
    }
}

/* Q4_K's layout with a fifth bit (16) from qh. */
void dequant_q5_K(const uint8_t *src, float *y) {
    block_q5_K b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int e = 0; e < QK_K; e++) {
        uint8_t sc, mn, byte = b.qs[32 * (e / 64) + e % 32];
        q4_K_scale_min(b.scales, e / 32, &sc, &mn);
        int q = ((e / 32) % 2 ? byte >> 4 : byte & 0x0f) + 16 * high_bit(b.qh, e);
        y[e] = d * (float)sc * (float)q - dmin * (float)mn;
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

void dequant_q6_K(const uint8_t *src, float *y) {
    block_q6_K b;
    memcpy(&b, src, sizeof b);
    float d = f16_to_f32(b.d);
    for (int h = 0; h < QK_K / 128; h++) {
        const uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
        const int8_t *sc = b.scales + 8 * h;
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                *y++ = d * (float)sc[2 * g + l / 16] * (float)q6_K_value(ql, qh, g, l);
    }
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

/* The types with scales and mins (Q2_K, Q4_K, Q5_K): per sub-block of `sub` elements,
 * x ~ scale * q - min with q in 0..nmax and min >= 0 (fit_scale_min). Scales and mins are then
 * quantized to 0..smax against the super-block's d and dmin, and q (element order) is recomputed
 * with the quantized values. */
static void quant_scale_min(const float *x, int sub, int nmax, int smax, uint16_t *d16,
                            uint16_t *dmin16, uint8_t *qscale, uint8_t *qmin, uint8_t *q) {
    float scale[QK_K / 16], min[QK_K / 16], max_scale = 0.0f, max_min = 0.0f;
    int n_sub = QK_K / sub;
    for (int j = 0; j < n_sub; j++) {
        fit_scale_min(x + sub * j, sub, nmax, &scale[j], &min[j]);
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, min[j]);
    }
    *d16 = f32_to_f16(max_scale / (float)smax);
    *dmin16 = f32_to_f16(max_min / (float)smax);
    float d = f16_to_f32(*d16), dmin = f16_to_f32(*dmin16);
    for (int j = 0; j < n_sub; j++) {
        qscale[j] = (uint8_t)round_clamp(scale[j] * inverse(d), 0, smax);
        qmin[j] = (uint8_t)round_clamp(min[j] * inverse(dmin), 0, smax);
        float id = inverse(d * (float)qscale[j]), m = dmin * (float)qmin[j];
        for (int l = 0; l < sub; l++)
            q[sub * j + l] = (uint8_t)round_clamp((x[sub * j + l] + m) * id, 0, nmax);
    }
}

/* Element 64c + l (l < 32) in the low nibble of qs[32c + l], 64c + 32 + l in its high one. */
static void pack_nibbles_k(const uint8_t *q, uint8_t *qs) {
    for (int c = 0; c < QK_K / 64; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 0x0f) | (q[64 * c + 32 + l] & 0x0f) << 4);
}

/* Inverses of low2 and high_bit: bits 0-1 of q into qs, bit `bit` of q into the mask. */
static void pack_low2(const uint8_t *q, uint8_t *qs) {
    memset(qs, 0, QK_K / 4);
    for (int e = 0; e < QK_K; e++)
        qs[32 * (e / 128) + e % 32] |= (uint8_t)((q[e] & 3) << (2 * ((e / 32) % 4)));
}

static void pack_high_bit(const uint8_t *q, int bit, uint8_t *mask) {
    memset(mask, 0, QK_K / 8);
    for (int e = 0; e < QK_K; e++)
        mask[e % 32] |= (uint8_t)(((q[e] >> bit) & 1) << (e / 32));
}

/* Q4_K (q in 0..15, qh NULL) and Q5_K (q in 0..31, the fifth bits in qh): sub-blocks of 32,
 * 6-bit scales and mins packed as Q4_K's, the low 4 bits of q as Q4_K's nibbles. */
static void quant_k4(const float *x, int nmax, uint16_t *d, uint16_t *dmin, uint8_t *scales,
                     uint8_t *qs, uint8_t *qh) {
    uint8_t qscale[8], qmin[8], q[QK_K];
    quant_scale_min(x, 32, nmax, 63, d, dmin, qscale, qmin, q);
    q4_K_pack_scales(scales, qscale, qmin);
    pack_nibbles_k(q, qs);
    if (qh) pack_high_bit(q, 4, qh);
}

void quant_q4_K(const float *x, uint8_t *dst) {
    block_q4_K b;
    quant_k4(x, 15, &b.d, &b.dmin, b.scales, b.qs, NULL);
    memcpy(dst, &b, sizeof b);
}

void quant_q5_K(const float *x, uint8_t *dst) {
    block_q5_K b;
    quant_k4(x, 31, &b.d, &b.dmin, b.scales, b.qs, b.qh);
    memcpy(dst, &b, sizeof b);
}

/* Sub-blocks of 16, q in 0..3, 4-bit scales and mins. */
void quant_q2_K(const float *x, uint8_t *dst) {
    block_q2_K b;
    uint8_t qscale[16], qmin[16], q[QK_K];
    quant_scale_min(x, 16, 3, 15, &b.d, &b.dmin, qscale, qmin, q);
    for (int j = 0; j < 16; j++)
        b.scales[j] = (uint8_t)(qscale[j] | qmin[j] << 4);
    pack_low2(q, b.qs);
    memcpy(dst, &b, sizeof b);
}

/* Per sub-block of 16: a symmetric scale (q in -4..3, fit_scale); the scale of largest magnitude
 * then maps to -32, the others to their nearest of -32..31 in its steps, and q is recomputed. */
void quant_q3_K(const float *x, uint8_t *dst) {
    float scale[QK_K / 16];
    for (int j = 0; j < QK_K / 16; j++)
        scale[j] = fit_scale(x + 16 * j, 16, 4);
    block_q3_K b;
    b.d = f32_to_f16(extreme(scale, QK_K / 16) / -32.0f);
    float d = f16_to_f32(b.d);
    uint8_t q[QK_K]; /* stored form, q + 4 in 0..7 */
    memset(b.scales, 0, sizeof b.scales);
    for (int j = 0; j < QK_K / 16; j++) {
        int sc = round_clamp(scale[j] * inverse(d), -32, 31);
        int biased = sc + 32;
        if (j < 8)
            b.scales[j] |= (uint8_t)(biased & 15);
        else
            b.scales[j - 8] |= (uint8_t)((biased & 15) << 4);
        b.scales[8 + j % 4] |= (uint8_t)((biased >> 4) << (2 * (j / 4)));
        float id = inverse(d * (float)sc);
        for (int l = 0; l < 16; l++)
            q[16 * j + l] = (uint8_t)(round_clamp(x[16 * j + l] * id, -4, 3) + 4);
    }
    pack_low2(q, b.qs);
    pack_high_bit(q, 2, b.hmask);
    memcpy(dst, &b, sizeof b);
}

/* Per sub-block of 16: a symmetric scale (q in -32..31, fit_scale); the scales are then quantized
 * to int8 against d = max |scale| / 127. */
void quant_q6_K(const float *x, uint8_t *dst) {
    float scale[QK_K / 16], max_abs_scale = 0.0f;
    for (int s = 0; s < QK_K / 16; s++) {
        scale[s] = fit_scale(x + 16 * s, 16, 32);
        max_abs_scale = fmaxf(max_abs_scale, fabsf(scale[s]));
    }
    block_q6_K b;
    b.d = f32_to_f16(max_abs_scale / 127.0f);
    float d = f16_to_f32(b.d);
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
