/* base/quant.c and base/half.c: dtype table, IEEE half conversion, GGUF block dequantization and
 * quantization.
 *
 * Dequantization is checked on blocks built by hand, with expected values worked out from the
 * GGUF block layouts (the comments show the arithmetic); the conversion to half is checked
 * against its definition (nearest representable value, ties to even) using the exact decoder;
 * quantizers are checked by round trips with an NMSE bound per type. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "quant.h"
#include "random.h"

static void test_dtype_table(void) {
    static const struct {
        clinfer_dtype type;
        const char *name;
        size_t elems, bytes;
    } table[] = {
        {CLINFER_DT_F32, "F32", 1, 4},         {CLINFER_DT_F16, "F16", 1, 2},
        {CLINFER_DT_Q4_0, "Q4_0", 32, 18},     {CLINFER_DT_Q4_1, "Q4_1", 32, 20},
        {CLINFER_DT_Q5_0, "Q5_0", 32, 22},     {CLINFER_DT_Q5_1, "Q5_1", 32, 24},
        {CLINFER_DT_IQ4_NL, "IQ4_NL", 32, 18}, {CLINFER_DT_Q8_0, "Q8_0", 32, 34},
        {CLINFER_DT_Q4_K, "Q4_K", 256, 144},   {CLINFER_DT_Q6_K, "Q6_K", 256, 210},
        {CLINFER_DT_Q2_K, "Q2_K", 256, 84},    {CLINFER_DT_Q3_K, "Q3_K", 256, 110},
        {CLINFER_DT_Q5_K, "Q5_K", 256, 176},   {CLINFER_DT_BF16, "BF16", 1, 2},
        {CLINFER_DT_MXFP4, "MXFP4", 32, 17},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        clinfer_dtype t = table[i].type;
        EXPECT(dtype_valid((uint32_t)t), "type %d", (int)t);
        EXPECT(!strcmp(dtype_name(t), table[i].name), "%s", dtype_name(t));
        EXPECT(dtype_block_elems(t) == table[i].elems, "%s", table[i].name);
        EXPECT(dtype_block_bytes(t) == table[i].bytes, "%s", table[i].name);
        EXPECT(dtype_row_bytes(t, table[i].elems * 3) == table[i].bytes * 3, "%s", table[i].name);
        /* BF16 is read (quantize input) but no backend runs it */
        EXPECT(dtype_is_weight(t) == (t != CLINFER_DT_BF16), "%s", table[i].name);
    }
    /* GGUF ids that exist in the format but not here, and nonsense ids */
    static const uint32_t invalid[] = {4, 5, 9, 15, 16, 29, 31, 38, 40, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        EXPECT(!dtype_valid(invalid[i]), "type %u", invalid[i]);
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Conversions to half worked out by hand; `exact` marks values a half represents exactly, which
 * must also decode back to the same float bits. */
static void test_f16_known_values(void) {
    static const struct {
        float f;
        uint16_t h;
        bool exact;
    } cases[] = {
        {0.0f, 0x0000, true},
        {-0.0f, 0x8000, true},
        {1.0f, 0x3c00, true},
        {-2.0f, 0xc000, true},
        {0.5f, 0x3800, true},
        {65504.0f, 0x7bff, true},             /* largest half */
        {0x1p-14f, 0x0400, true},             /* smallest normal */
        {0x1p-24f, 0x0001, true},             /* smallest subnormal */
        {-1023 * 0x1p-24f, 0x83ff, true},     /* largest subnormal, negative */
        {65519.0f, 0x7bff, false},            /* below the midpoint to 65536: stays finite */
        {65520.0f, 0x7c00, false},            /* the midpoint rounds to even: infinity */
        {1e9f, 0x7c00, false},                /* overflow */
        {-1e9f, 0xfc00, false},               /* overflow, negative */
        {0x1p-25f, 0x0000, false},            /* half the smallest subnormal: tie, even is 0 */
        {1.5f * 0x1p-25f, 0x0001, false},     /* above that tie */
        {3 * 0x1p-25f, 0x0002, false},        /* tie between 1 and 2 ulps: even is 2 */
        {1.0f + 0x1p-11f, 0x3c00, false},     /* tie between 1 and 1 + 2^-10: even is 1 */
        {1.0f + 3 * 0x1p-11f, 0x3c02, false}, /* tie between 0x3c01 and 0x3c02 */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01, false}, /* just above the tie */
        {2047.5f, 0x6800, false},                    /* ulp 1 here: tie of 2047 (odd) and 2048 */
        {0x1p-14f - 0x1p-26f, 0x0400, false},        /* rounds up from subnormal into normal */
        {1e-10f, 0x0000, false},                     /* underflow */
        {0x1p-149f, 0x0000, false},                  /* f32 subnormal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = f32_to_f16(cases[i].f);
        EXPECT(h == cases[i].h, "f32_to_f16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f, h,
               cases[i].h);
        if (cases[i].exact) {
            float back = f16_to_f32(cases[i].h);
            EXPECT(bits(back) == bits(cases[i].f), "f16_to_f32(0x%04x) = %a, want %a", cases[i].h,
                   (double)back, (double)cases[i].f);
        }
    }
    EXPECT(f16_to_f32(0x3c00) == 1.0f, "1.0");
    EXPECT(f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal");
    EXPECT(f16_to_f32(0x7bff) == 65504.0f, "max");
    EXPECT(isinf(f16_to_f32(0x7c00)) && f16_to_f32(0x7c00) > 0, "+inf");
    EXPECT(isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0, "-inf");
    EXPECT(isnan(f16_to_f32(0x7e00)) && isnan(f16_to_f32(0xfc01)), "nan");
    EXPECT(f32_to_f16(INFINITY) == 0x7c00, "inf");
    EXPECT(f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    uint16_t hn = f32_to_f16(NAN);
    EXPECT((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "nan -> 0x%04x", hn);
}

/* bfloat16 is the top half of an f32: exact there, round to nearest even below, nan kept. */
static void test_bf16(void) {
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3f80},
        {-2.0f, 0xc000},
        {1.0f + 0x1p-8f, 0x3f80},            /* tie between 1 and 1 + 2^-7: even is 1 */
        {1.0f + 3 * 0x1p-8f, 0x3f82},        /* tie, the even neighbour above */
        {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81}, /* just above the tie */
        {0x1.fffffep127f, 0x7f80},           /* the largest f32 rounds to infinity */
        {INFINITY, 0x7f80},
        {0x1p-149f, 0x0000}, /* f32 subnormal below half a bf16 ulp */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = f32_to_bf16(cases[i].f);
        EXPECT(h == cases[i].h, "f32_to_bf16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f, h,
               cases[i].h);
    }
    EXPECT(bf16_to_f32(0x3f80) == 1.0f && bf16_to_f32(0xc000) == -2.0f, "decode");
    uint16_t hn = f32_to_bf16(NAN);
    EXPECT((hn & 0x7f80) == 0x7f80 && (hn & 0x7f) != 0 && isnan(bf16_to_f32(hn)), "nan -> 0x%04x",
           hn);
    /* a row through the type table */
    const float x[4] = {0.5f, -3.0f, 1e30f, 0x1p-100f};
    uint16_t q[4];
    float y[4];
    quantize_row(CLINFER_DT_BF16, x, q, 4);
    dequantize_row(CLINFER_DT_BF16, q, y, 4);
    for (int i = 0; i < 4; i++)
        EXPECT(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0x1p-8f, "bf16 row [%d]: %g -> %g", i,
               (double)x[i], (double)y[i]);
}

/* Every half decodes to a value that encodes back to itself, and positive finite halves decode
 * to strictly increasing values (the decoder is the ruler for the rounding test below). */
static void test_f16_all_values(void) {
    int bad_round_trip = 0, bad_order = 0;
    float prev = -1.0f;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = f16_to_f32((uint16_t)h);
        bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan ? !isnan(f) : f32_to_f16(f) != h) bad_round_trip++;
        if (h <= 0x7c00) {
            if (!(f > prev)) bad_order++;
            prev = f;
        }
    }
    EXPECT(bad_round_trip == 0, "%d halves do not round-trip", bad_round_trip);
    EXPECT(bad_order == 0, "%d halves out of order", bad_order);
}

/* Random floats across the half range: the chosen half h is at least as close as its
 * neighbours, and strictly closer unless it is a tie, which must pick the even one. */
static void test_f16_rounding(void) {
    rng_seed(11);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float mag = ldexpf(rng_uniform(1.0f, 2.0f), (int)rng_uniform(-26.0f, 16.0f));
        float f = i & 1 ? -mag : mag;
        uint16_t h = f32_to_f16(f);
        bool inf = (h & 0x7fff) == 0x7c00;
        if (inf != (fabsf(f) >= 65520.0f)) /* infinity exactly from the top midpoint up */
            bad++;
        if (inf) continue;
        double err = fabs((double)f16_to_f32(h) - f);
        for (int step = -1; step <= 1; step += 2) {
            uint16_t nb = (uint16_t)(h + step);
            if ((h & 0x7fff) == 0 && step < 0)
                continue; /* no neighbour below zero within this sign */
            double nerr = fabs((double)f16_to_f32(nb) - f);
            if (nerr < err || (nerr == err && (h & 1))) bad++;
        }
    }
    EXPECT(bad == 0, "%d of 200000 conversions are not round-to-nearest-even", bad);
}

static void put_f16(uint16_t *field, float v) {
    *field = f32_to_f16(v);
}

static void test_q8_0_block(void) {
    block_q8_0 b;
    put_f16(&b.d, 0.5f);
    for (int j = 0; j < QK8_0; j++)
        b.qs[j] = (int8_t)(j - 16);
    b.qs[5] = -128;
    b.qs[6] = 127;
    float y[QK8_0];
    dequantize_row(CLINFER_DT_Q8_0, &b, y, QK8_0);
    EXPECT(y[0] == -8.0f, "%g", y[0]);  /* -16 * 0.5 */
    EXPECT(y[5] == -64.0f, "%g", y[5]); /* -128 * 0.5 */
    EXPECT(y[6] == 63.5f, "%g", y[6]);  /* 127 * 0.5 */
    EXPECT(y[16] == 0.0f, "%g", y[16]); /* 0 * 0.5 */
    EXPECT(y[31] == 7.5f, "%g", y[31]); /* 15 * 0.5 */
}

static void test_q4_0_block(void) {
    block_q4_0 b;
    put_f16(&b.d, 2.0f);
    memset(b.qs, 0x88, sizeof b.qs); /* nibble 8 is zero */
    b.qs[0] = 0x1f;                  /* x[0] = (15 - 8) * 2 = 14, x[16] = (1 - 8) * 2 = -14 */
    b.qs[15] = 0x80;                 /* x[15] = (0 - 8) * 2 = -16, x[31] = 0 */
    float y[QK4_0];
    dequantize_row(CLINFER_DT_Q4_0, &b, y, QK4_0);
    EXPECT(y[0] == 14.0f && y[16] == -14.0f, "%g %g", y[0], y[16]);
    EXPECT(y[15] == -16.0f && y[31] == 0.0f, "%g %g", y[15], y[31]);
    EXPECT(y[7] == 0.0f && y[20] == 0.0f, "%g %g", y[7], y[20]);
}

static void test_q4_1_block(void) {
    block_q4_1 b;
    put_f16(&b.d, 0.25f);
    put_f16(&b.m, -1.0f);
    memset(b.qs, 0, sizeof b.qs);
    b.qs[3] = 0xa5; /* x[3] = 5 * 0.25 - 1 = 0.25, x[19] = 10 * 0.25 - 1 = 1.5 */
    float y[QK4_1];
    dequantize_row(CLINFER_DT_Q4_1, &b, y, QK4_1);
    EXPECT(y[3] == 0.25f && y[19] == 1.5f, "%g %g", y[3], y[19]);
    EXPECT(y[0] == -1.0f && y[31] == -1.0f, "%g %g", y[0], y[31]); /* nibble 0: the min */
}

/* MXFP4: x = level(nibble) * 2^(e - 128), the levels E2M1's doubled (0 1 2 3 4 6 8 12, bit 3
 * the sign); e < 2 gives the subnormal scales 2^-128 and 2^-127. */
static void test_mxfp4_block(void) {
    block_mxfp4 b;
    b.e = 129;                       /* d = 2 */
    memset(b.qs, 0x00, sizeof b.qs); /* nibbles 0 and 8 are +0 and -0 */
    b.qs[0] = 0xf7;                  /* x[0] = 12 * 2 = 24, x[16] = -12 * 2 = -24 */
    b.qs[1] = 0x95;                  /* x[1] = 6 * 2 = 12, x[17] = -1 * 2 = -2 */
    b.qs[15] = 0x38;                 /* x[15] = -0, x[31] = 3 * 2 = 6 */
    float y[QK_MXFP4];
    dequantize_row(CLINFER_DT_MXFP4, &b, y, QK_MXFP4);
    EXPECT(y[0] == 24.0f && y[16] == -24.0f, "%g %g", y[0], y[16]);
    EXPECT(y[1] == 12.0f && y[17] == -2.0f, "%g %g", y[1], y[17]);
    EXPECT(y[15] == 0.0f && y[31] == 6.0f, "%g %g", y[15], y[31]);
    EXPECT(y[2] == 0.0f && y[30] == 0.0f, "%g %g", y[2], y[30]);
    const struct {
        uint8_t e;
        uint32_t bits; /* of 2^(e - 128) */
    } scales[] = {{0, 0x00200000},   {1, 0x00400000},   {2, 0x00800000},
                  {128, 0x3f800000}, {127, 0x3f000000}, {254, 0x7e800000}};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++)
        EXPECT(bits(mxfp4_scale(scales[i].e)) == scales[i].bits, "e %u: 0x%08x", scales[i].e,
               bits(mxfp4_scale(scales[i].e)));
    /* the quantizer's exponent: 12 d reaches the largest magnitude (3.0: 12 * 2^-2, e 126) */
    float x[QK_MXFP4] = {0};
    x[3] = -3.0f;
    x[20] = 0.25f;
    uint8_t q[sizeof(block_mxfp4)];
    quantize_row(CLINFER_DT_MXFP4, x, q, QK_MXFP4);
    dequantize_row(CLINFER_DT_MXFP4, q, y, QK_MXFP4);
    EXPECT(q[0] == 126 && y[3] == -3.0f && y[20] == 0.25f, "e %u: %g %g", q[0], y[3], y[20]);
}

/* Q4_K: 8 sub-blocks of 32 with 6-bit scale sc and min mn; x = d * sc * q - dmin * mn.
 * Sub-blocks 0-3 keep sc in scales[j] & 63 and mn in scales[j + 4] & 63; sub-blocks 4-7 keep the
 * low 4 bits in scales[j + 4] (sc low nibble, mn high nibble) and the top 2 bits in bits 6-7 of
 * scales[j - 4] (sc) and scales[j] (mn). Elements 64c .. 64c + 31 are the low nibbles of
 * qs[32c ..], elements 64c + 32 .. 64c + 63 the high nibbles. */
/* The scales and mins of the Q4_K and Q5_K blocks below: sub-block 0 sc 3, mn 2; sub-block 1
 * sc 4, mn 1; sub-block 5 sc 37, mn 50; the others 0. */
static void k4_test_scales(uint8_t s[K_SCALE_SIZE]) {
    memset(s, 0, K_SCALE_SIZE);
    s[0] = 3; /* sub-block 0: sc 3 */
    s[4] = 2; /* sub-block 0: mn 2 */
    s[1] = 4; /* sub-block 1: sc 4 */
    s[5] = 1; /* sub-block 1: mn 1 */
    /* sub-block 5: sc 37 = 0b10'0101, mn 50 = 0b11'0010 */
    s[9] = 0x25;    /* low nibbles: sc 5, mn 2 */
    s[1] |= 2 << 6; /* sc top bits 0b10 */
    s[5] |= 3 << 6; /* mn top bits 0b11 */
}

static void test_q4_K_block(void) {
    block_q4_K b;
    memset(&b, 0, sizeof b);
    put_f16(&b.d, 1.0f);
    put_f16(&b.dmin, 0.5f);
    k4_test_scales(b.scales);
    b.qs[0] = 0x72;      /* x[0] = 3 * 2 - 0.5 * 2 = 5; x[32] = 4 * 7 - 0.5 * 1 = 27.5 */
    b.qs[64 + 7] = 0x90; /* x[128 + 32 + 7 = 167] = 37 * 9 - 0.5 * 50 = 308 */
    float y[QK_K];
    dequantize_row(CLINFER_DT_Q4_K, &b, y, QK_K);
    EXPECT(y[0] == 5.0f, "%g", y[0]);
    EXPECT(y[1] == -1.0f, "%g", y[1]); /* q 0: -0.5 * 2 */
    EXPECT(y[32] == 27.5f, "%g", y[32]);
    EXPECT(y[33] == -0.5f, "%g", y[33]); /* q 0: -0.5 * 1 */
    EXPECT(y[167] == 308.0f, "%g", y[167]);
    EXPECT(y[160] == -25.0f, "%g", y[160]); /* q 0 in sub-block 5: -0.5 * 50 */
    EXPECT(y[255] == 0.0f, "%g", y[255]);   /* sub-block 7: sc 0, mn 0 */
}

/* Q6_K: x = d * scales[e / 16] * (q - 32) with q 6 bits. In each half of 128 elements (ql
 * advancing by 64, qh by 32), element 32g + l takes its low 4 bits from ql[l] (g = 0: low
 * nibble, g = 2: high nibble) or ql[l + 32] (g = 1 low, g = 3 high), and its top 2 bits from
 * bits 2g, 2g + 1 of qh[l]. */
static void test_q6_K_block(void) {
    block_q6_K b;
    memset(&b, 0, sizeof b);
    put_f16(&b.d, 0.5f);
    b.ql[0] = 0x3a;  /* element 0: low 10; element 64: low 3 */
    b.ql[32] = 0xf0; /* element 32: low 0; element 96: low 15 */
    b.qh[0] = 0xe4;  /* 0b11'10'01'00: top bits 0 (e 0), 1 (e 32), 2 (e 64), 3 (e 96) */
    b.scales[0] = 2;
    b.scales[2] = -3;
    b.scales[4] = 5;
    b.scales[6] = -128;
    b.ql[64] = 0x01; /* element 128: low 1 */
    b.qh[32] = 0x02; /* element 128: top 2 -> q = 33 */
    b.scales[8] = 7;
    float y[QK_K];
    dequantize_row(CLINFER_DT_Q6_K, &b, y, QK_K);
    EXPECT(y[0] == -22.0f, "%g", y[0]);     /* 0.5 * 2 * (10 - 32) */
    EXPECT(y[1] == -32.0f, "%g", y[1]);     /* 0.5 * 2 * (0 - 32) */
    EXPECT(y[32] == 24.0f, "%g", y[32]);    /* 0.5 * -3 * (16 - 32) */
    EXPECT(y[64] == 7.5f, "%g", y[64]);     /* 0.5 * 5 * (35 - 32) */
    EXPECT(y[96] == -1984.0f, "%g", y[96]); /* 0.5 * -128 * (63 - 32) */
    EXPECT(y[128] == 3.5f, "%g", y[128]);   /* 0.5 * 7 * (33 - 32) */
    EXPECT(y[16] == 0.0f, "%g", y[16]);     /* sub-block 1 has scale 0 */
}

/* Q2_K: 16 sub-blocks of 16, x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits.
 * In each half of 128 elements (qs advancing by 32), element 32g + l takes bits 2g, 2g + 1 of
 * qs[l] (l < 32). */
static void test_q2_K_block(void) {
    block_q2_K b;
    memset(&b, 0, sizeof b);
    put_f16(&b.d, 1.0f);
    put_f16(&b.dmin, 0.5f);
    b.qs[0] = 0xe4;       /* 0b11'10'01'00: q 0 (e 0), 1 (e 32), 2 (e 64), 3 (e 96) */
    b.qs[16] = 0x03;      /* e 16: q 3 */
    b.qs[32 + 17] = 0x08; /* e 128 + 32 + 17 = 177: q 2 */
    b.scales[0] = 0x23;   /* sc 3, mn 2 */
    b.scales[1] = 0x07;
    b.scales[2] = 0x01;
    b.scales[4] = 0x15;
    b.scales[6] = 0xf4;
    b.scales[11] = 0x36;
    float y[QK_K];
    dequantize_row(CLINFER_DT_Q2_K, &b, y, QK_K);
    EXPECT(y[0] == -1.0f, "%g", y[0]);     /* 3 * 0 - 0.5 * 2 */
    EXPECT(y[1] == -1.0f, "%g", y[1]);     /* the same sub-block's min */
    EXPECT(y[16] == 21.0f, "%g", y[16]);   /* 7 * 3 */
    EXPECT(y[32] == 1.0f, "%g", y[32]);    /* 1 * 1 */
    EXPECT(y[64] == 9.5f, "%g", y[64]);    /* 5 * 2 - 0.5 * 1 */
    EXPECT(y[96] == 4.5f, "%g", y[96]);    /* 4 * 3 - 0.5 * 15 */
    EXPECT(y[177] == 10.5f, "%g", y[177]); /* 6 * 2 - 0.5 * 3 */
    EXPECT(y[255] == 0.0f, "%g", y[255]);  /* scale and min 0 */
}

/* Q3_K: x = d * (scale - 32) * (q - 4): q's low 2 bits as Q2_K's, its high bit at bit e / 32 of
 * hmask[e % 32]. Scale j (6 bits, biased by 32) keeps its low 4 bits in the low (j < 8) or high
 * (j >= 8) nibble of scales[j % 8] and its top 2 bits at bits 2 (j / 4) of scales[8 + j % 4]. */
static void test_q3_K_block(void) {
    block_q3_K b;
    memset(&b, 0, sizeof b);
    memset(b.hmask, 0xff, sizeof b.hmask); /* high bits set: q = the low 2 bits */
    put_f16(&b.d, 0.5f);
    b.scales[0] = 0x02;   /* scale 0: low 2; scale 8: low 0 */
    b.scales[8] = 0x02;   /* scale 0: top 2 -> 34, i.e. 2 */
    b.scales[1] = 0x50;   /* scale 9: low 5, top 0 -> -27; scale 1: 0 -> -32 */
    b.scales[7] = 0xf0;   /* scale 15: low 15 */
    b.scales[11] = 0xc0;  /* scale 15: top 3 -> 63, i.e. 31 */
    b.qs[0] = 0x03;       /* e 0: q 3 */
    b.hmask[1] = 0xfe;    /* e 1: high bit clear, q 0 - 4 */
    b.qs[16] = 0x01;      /* e 16: q 1 */
    b.qs[32 + 22] = 0x02; /* e 150 (second half, l 22): q 2 */
    b.qs[63] = 0xc0;      /* e 255: low 2 bits 3 */
    b.hmask[31] = 0x7f;   /* e 255: high bit clear, q 3 - 4 */
    float y[QK_K];
    dequantize_row(CLINFER_DT_Q3_K, &b, y, QK_K);
    EXPECT(y[0] == 3.0f, "%g", y[0]);       /* 0.5 * 2 * 3 */
    EXPECT(y[1] == -4.0f, "%g", y[1]);      /* 0.5 * 2 * -4 */
    EXPECT(y[16] == -16.0f, "%g", y[16]);   /* 0.5 * -32 * 1 */
    EXPECT(y[150] == -27.0f, "%g", y[150]); /* 0.5 * -27 * 2 */
    EXPECT(y[255] == -15.5f, "%g", y[255]); /* 0.5 * 31 * -1 */
    EXPECT(y[254] == 0.0f, "%g", y[254]);   /* q 0 */
}

/* Q5_K: Q4_K's scales, mins and nibbles, plus a fifth bit (16) at bit e / 32 of qh[e % 32]. */
static void test_q5_K_block(void) {
    block_q5_K b;
    memset(&b, 0, sizeof b);
    put_f16(&b.d, 1.0f);
    put_f16(&b.dmin, 0.5f);
    k4_test_scales(b.scales);
    b.qs[0] = 0x72;      /* e 0: nibble 2; e 32: nibble 7 */
    b.qh[0] = 0x03;      /* fifth bits of e 0 and e 32 */
    b.qs[64 + 7] = 0x90; /* e 167: nibble 9 */
    b.qh[7] = 0x20;      /* e 167 (bit 5): fifth bit */
    float y[QK_K];
    dequantize_row(CLINFER_DT_Q5_K, &b, y, QK_K);
    EXPECT(y[0] == 53.0f, "%g", y[0]);      /* 3 * 18 - 0.5 * 2 */
    EXPECT(y[32] == 91.5f, "%g", y[32]);    /* 4 * 23 - 0.5 * 1 */
    EXPECT(y[39] == -0.5f, "%g", y[39]);    /* q 0 (qh[7] bit 1 clear) */
    EXPECT(y[167] == 900.0f, "%g", y[167]); /* 37 * 25 - 0.5 * 50 */
    EXPECT(y[135] == 0.0f, "%g", y[135]);   /* sub-block 4: sc 0, mn 0 */
}

static void test_f16_row(void) {
    uint16_t h[5] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000};
    float y[5];
    dequantize_row(CLINFER_DT_F16, h, y, 5);
    EXPECT(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0x1p-24f && y[3] == 65504.0f, "f16 row");
    EXPECT(y[4] == 0.0f && signbit(y[4]), "-0");
    uint16_t back[5];
    quantize_row(CLINFER_DT_F16, y, back, 5);
    EXPECT(!memcmp(back, h, sizeof h), "f16 row round trip");
}

/* Rows are read from any address (GGUF data inside a byte buffer): an odd start must work. */
static void test_unaligned_row(void) {
    enum { N = 2 * QK8_0 };
    float x[N], y[N], y2[N];
    rng_seed(5);
    rng_fill(x, N, -1, 1);
    uint8_t row[2 * sizeof(block_q8_0)], shifted[sizeof row + 1];
    quantize_row(CLINFER_DT_Q8_0, x, row, N);
    memcpy(shifted + 1, row, sizeof row);
    dequantize_row(CLINFER_DT_Q8_0, row, y, N);
    dequantize_row(CLINFER_DT_Q8_0, shifted + 1, y2, N);
    EXPECT(!memcmp(y, y2, sizeof y), "unaligned row differs");
}

/* Round trips on random rows: uniform around 0, shifted away from 0 (exercises Q4_1 and Q4_K
 * mins), and sums of uniforms with outliers. Worst measured NMSE per type: F16 4e-8, Q8_0 6.5e-5,
 * Q4_0 1.8e-2, Q4_1 8.3e-3, Q4_K 7.4e-3, Q6_K 6.2e-4, Q2_K 8.6e-2, Q3_K 3.7e-2, Q5_K 1.9e-3,
 * MXFP4 1.9e-2 (all on the outlier shape; Q8_0/Q4_0/Q4_1 equal gguf-py's reference quantizers on
 * the same data; MXFP4's 9.9e-3 on the uniform shape against gguf-py's 2.1e-2, whose exponent
 * clips the largest values); the bounds leave about a factor 2. */
static void test_round_trips(void) {
    static const struct {
        clinfer_dtype type;
        double bound;
    } types[] = {
        {CLINFER_DT_F32, 0.0},     {CLINFER_DT_F16, 1e-7},    {CLINFER_DT_Q8_0, 1.5e-4},
        {CLINFER_DT_Q4_0, 3.5e-2}, {CLINFER_DT_Q4_1, 1.6e-2}, {CLINFER_DT_Q5_0, 9e-3},
        {CLINFER_DT_Q5_1, 4e-3},   {CLINFER_DT_Q4_K, 1.6e-2}, {CLINFER_DT_Q6_K, 1.5e-3},
        {CLINFER_DT_Q2_K, 1.7e-1}, {CLINFER_DT_Q3_K, 7.5e-2}, {CLINFER_DT_Q5_K, 4e-3},
        {CLINFER_DT_MXFP4, 4e-2},
    };
    enum { N = 4 * QK_K };
    static float x[N], y[N];
    static uint8_t q[N * sizeof(float)];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        clinfer_dtype type = types[t].type;
        for (int shape = 0; shape < 3; shape++) {
            rng_seed(100 + (uint64_t)shape);
            for (int i = 0; i < N; i++) {
                if (shape == 0)
                    x[i] = rng_uniform(-1, 1);
                else if (shape == 1)
                    x[i] = rng_uniform(0.5f, 2.0f);
                else
                    x[i] = rng_uniform(-1, 1) + rng_uniform(-1, 1) + rng_uniform(-1, 1) +
                           (i % 97 == 0 ? 8.0f : 0.0f);
            }
            quantize_row(type, x, q, N);
            dequantize_row(type, q, y, N);
            double e = nmse(y, x, N);
            EXPECT(e <= types[t].bound, "%s shape %d: nmse %.3g > %.3g", dtype_name(type), shape, e,
                   types[t].bound);
        }
        /* an all-zero row quantizes to blocks that dequantize to exact zeros (no 0/0) */
        memset(x, 0, sizeof x);
        quantize_row(type, x, q, N);
        dequantize_row(type, q, y, N);
        int nonzero = 0;
        for (int i = 0; i < N; i++)
            nonzero += y[i] != 0.0f;
        EXPECT(nonzero == 0, "%s: zero row gives %d non-zeros", dtype_name(type), nonzero);
    }
}

/* The K types fit their sub-block scales (base/quant.c: fit_scale_min, fit_scale) rather than
 * round against the range: on normally distributed weights, as trained ones roughly are, that
 * takes the error below plain range rounding (measured NMSE: Q4_K 6.10e-3 and Q6_K 3.62e-4 with
 * it, 4.95e-3 and 2.98e-4 with the fits; ggml's reference quantizers, 5.08e-3 and 3.14e-4 on
 * like data). Q2_K, Q3_K and Q5_K, fitted the same way: 7.15e-2, 2.06e-2 and 1.24e-3 (ggml's
 * reference quantizers, 8.86e-2, 2.28e-2 and 1.30e-3 on like data). */
static void test_k_fits(void) {
    enum { N = 16 * QK_K };
    static float x[N], y[N];
    static uint8_t q[N];
    rng_seed(17);
    for (int i = 0; i < N; i++) { /* Box-Muller */
        float u = rng_uniform(1e-7f, 1.0f), v = rng_uniform(0.0f, 1.0f);
        x[i] = sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
    }
    static const struct {
        clinfer_dtype type;
        double bound;
    } types[] = {{CLINFER_DT_Q4_K, 5.4e-3},
                 {CLINFER_DT_Q6_K, 3.3e-4},
                 {CLINFER_DT_Q2_K, 1},
                 {CLINFER_DT_Q3_K, 1},
                 {CLINFER_DT_Q5_K, 1}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        quantize_row(types[t].type, x, q, N);
        dequantize_row(types[t].type, q, y, N);
        double e = nmse(y, x, N);
        printf("%s on normal weights: nmse %.3g\n", dtype_name(types[t].type), e);
        EXPECT(e <= types[t].bound, "%s: nmse %.3g > %.3g", dtype_name(types[t].type), e,
               types[t].bound);
    }
}

/* quant_q8_act on blocks with known results. */
static void test_q8_act(void) {
    enum { B = CLINFER_Q8_ACT_BLOCK, N_BLOCKS = 6 };
    float x[N_BLOCKS * B] = {0}, d[N_BLOCKS];
    int8_t q[N_BLOCKS * B], want[N_BLOCKS * B] = {0};
    for (int i = 0; i < B; i++) /* block 0: integers up to 127 map to themselves, d = 1 */
        x[i] = want[i] = (int8_t)(i ? 8 * i - 128 : 127);
    /* block 1: d = 1 again; halves round away from zero */
    const float halves[] = {127, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, -126.5f};
    const int8_t rounded[] = {127, 3, -3, 1, -1, 127, -127};
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
        x[B + i] = halves[i];
        want[B + i] = rounded[i];
    }
    /* block 2 stays all zero: d 0, q 0; block 3 holds a NaN and block 4 an infinity: d NaN,
     * q 0 */
    x[3 * B + 5] = NAN;
    x[3 * B + 6] = 1;
    x[4 * B] = -INFINITY;
    x[4 * B + 1] = 3;
    x[5 * B] = -254; /* block 5: a negative maximum sets d = 2; 1 / 2 rounds away to 1 */
    x[5 * B + 1] = 1;
    x[5 * B + 2] = -3;
    want[5 * B] = -127;
    want[5 * B + 1] = 1;
    want[5 * B + 2] = -2;
    memset(q, 0x55, sizeof q);
    quant_q8_act(x, N_BLOCKS * B, B, q, d);
    const float want_d[N_BLOCKS] = {1, 1, 0, NAN, NAN, 2};
    for (int b = 0; b < N_BLOCKS; b++) {
        EXPECT(isnan(want_d[b]) ? isnan(d[b]) : d[b] == want_d[b], "q8 act block %d: d %g, want %g",
               b, (double)d[b], (double)want_d[b]);
        for (int i = 0; i < B; i++)
            EXPECT(q[b * B + i] == want[b * B + i], "q8 act block %d [%d] = %g: q %d, want %d", b,
                   i, (double)x[b * B + i], q[b * B + i], want[b * B + i]);
    }
}

/* The K-quants' x rounds per super-block of 256: one d for all of it, from its largest value
 * wherever that lies; a NaN anywhere in it makes the whole super-block NaN. */
static void test_q8_act_super(void) {
    enum { S = CLINFER_Q8_ACT_SUPER };
    EXPECT(dtype_q8_act_block(CLINFER_DT_Q4_K) == S && dtype_q8_act_block(CLINFER_DT_Q6_K) == S &&
               dtype_q8_act_block(CLINFER_DT_Q4_0) == CLINFER_Q8_ACT_BLOCK &&
               dtype_q8_act_block(CLINFER_DT_F32) == CLINFER_Q8_ACT_BLOCK,
           "q8 act block: Q4_K %zu, Q6_K %zu, Q4_0 %zu, F32 %zu",
           dtype_q8_act_block(CLINFER_DT_Q4_K), dtype_q8_act_block(CLINFER_DT_Q6_K),
           dtype_q8_act_block(CLINFER_DT_Q4_0), dtype_q8_act_block(CLINFER_DT_F32));
    float x[2 * S] = {0}, d[2];
    int8_t q[2 * S];
    x[200] = -254; /* super-block 0: d = 2 from its 7th block; 3 in its first block rounds to 2 */
    x[0] = 3;
    x[1] = 1;
    x[255] = 127;
    x[S + 40] = 5; /* super-block 1: a NaN in its last block zeroes all of it */
    x[S + 250] = NAN;
    memset(q, 0x55, sizeof q);
    quant_q8_act(x, 2 * S, S, q, d);
    EXPECT(d[0] == 2 && isnan(d[1]), "q8 act super-blocks: d %g %g, want 2 NaN", (double)d[0],
           (double)d[1]);
    EXPECT(q[0] == 2 && q[1] == 1 && q[200] == -127 && q[255] == 64 && q[2] == 0,
           "q8 act super-block 0: q %d %d %d %d %d, want 2 1 -127 64 0", q[0], q[1], q[200], q[255],
           q[2]);
    int nonzero = 0;
    for (int i = S; i < 2 * S; i++)
        nonzero += q[i] != 0;
    EXPECT(nonzero == 0, "q8 act super-block 1 (a NaN): %d values are not 0", nonzero);
}

int main(void) {
    test_dtype_table();
    test_f16_known_values();
    test_f16_all_values();
    test_f16_rounding();
    test_bf16();
    test_q8_0_block();
    test_q4_0_block();
    test_q4_1_block();
    test_mxfp4_block();
    test_q4_K_block();
    test_q6_K_block();
    test_q2_K_block();
    test_q3_K_block();
    test_q5_K_block();
    test_f16_row();
    test_unaligned_row();
    test_round_trips();
    test_k_fits();
    test_q8_act();
    test_q8_act_super();
    return finish("test_quant");
}
