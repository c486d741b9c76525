/* What base/quant.c (the type table, the 32-element blocks) and base/quant_k.c (the K-type
 * super-blocks) share: the rounding helpers of the quantizers and the K types' block functions
 * the table names. Private to base/. */
#ifndef CLINFER_QUANT_BLOCK_H
#define CLINFER_QUANT_BLOCK_H

#include <math.h>
#include <stdint.h>

#include "quant.h"

/* x rounded to the nearest integer and clamped to lo..hi. */
static inline int round_clamp(float x, int lo, int hi) {
    int v = (int)lrintf(x);
    return v < lo ? lo : v > hi ? hi : v;
}

/* The reciprocal of a scale, 0 for a zero scale (an all-zero block quantizes to zeros). */
static inline float inverse(float d) {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

/* The element of largest magnitude, sign kept (the first of equals; 0 for n == 0). */
static inline float extreme(const float *x, int n) {
    float e = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > fabsf(e)) e = x[j];
    return e;
}

static inline void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = *hi = x[0];
    for (int j = 1; j < n; j++) {
        *lo = fminf(*lo, x[j]);
        *hi = fmaxf(*hi, x[j]);
    }
}

/* quant_k.c: one K-type super-block from or to QK_K floats. */
void dequant_q2_K(const uint8_t *src, float *y);
void dequant_q3_K(const uint8_t *src, float *y);
void dequant_q4_K(const uint8_t *src, float *y);
void dequant_q5_K(const uint8_t *src, float *y);
void dequant_q6_K(const uint8_t *src, float *y);
void quant_q2_K(const float *x, uint8_t *dst);
void quant_q3_K(const float *x, uint8_t *dst);
void quant_q4_K(const float *x, uint8_t *dst);
void quant_q5_K(const float *x, uint8_t *dst);
void quant_q6_K(const float *x, uint8_t *dst);

#endif
