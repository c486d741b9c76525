/* IEEE 754 binary16 and bfloat16 conversions of single values, bit for bit (the f16 scales of
 * the block formats, F16/BF16 tensors). */
#include "half.h"

#include <string.h>

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
float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t finite = f32_bits(f32_from_bits(em << 13) * 0x1p112f);
    uint32_t inf_nan = 0x7f800000u | ((em & 0x3ffu) << 13); /* nan keeps its payload */
    return f32_from_bits(sign | (em >= 0x7c00u ? inf_nan : finite));
}

/* Rounds value >> shift to nearest, ties to even. shift is 1..31. */
static uint32_t shift_round_even(uint32_t value, unsigned shift) {
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) kept++;
    return kept;
}

uint16_t f32_to_f16(float f) {
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

float bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* nan: quiet, so rounding cannot carry it into inf */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)shift_round_even(x, 16); /* a carry into the exponent rounds up to inf */
}
