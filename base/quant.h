/* Element types of tensors and the GGUF block formats, with the layouts of the GGUF spec.
 * Numbering follows GGUF's tensor type ids so a file's type field maps directly. */
#ifndef CLINFER_QUANT_H
#define CLINFER_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"

typedef enum {
    CLINFER_DT_F32 = 0,
    CLINFER_DT_F16 = 1,
    CLINFER_DT_Q4_0 = 2,
    CLINFER_DT_Q4_1 = 3,
    CLINFER_DT_Q5_0 = 6,
    CLINFER_DT_Q5_1 = 7,
    CLINFER_DT_Q8_0 = 8,
    CLINFER_DT_Q2_K = 10,
    CLINFER_DT_Q3_K = 11,
    CLINFER_DT_Q4_K = 12,
    CLINFER_DT_Q5_K = 13,
    CLINFER_DT_Q6_K = 14,
    CLINFER_DT_IQ4_NL = 20,
    CLINFER_DT_BF16 = 30, /* read only: quantize input and host-converted vectors, no kernels */
    CLINFER_DT_MXFP4 = 39,
} clinfer_dtype;
/* One past the largest id, for tables indexed by type (quant.c's fails to compile if a type
 * lies past it). */
#define CLINFER_DT_ID_LIMIT 40

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK4_NL 32
#define QK_MXFP4 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* Block layouts; f16 fields are raw IEEE half bits. */
typedef struct {
    uint16_t d;            /* scale */
    uint8_t qs[QK4_0 / 2]; /* x[i] = (nibble - 8) * d; low nibbles hold 0..15, high 16..31 */
} block_q4_0;

typedef struct {
    uint16_t d, m; /* x = nibble * d + m */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct {
    uint16_t d;
    uint8_t qh[4];         /* bit j: the fifth bit of element j */
    uint8_t qs[QK5_0 / 2]; /* low four bits, as block_q4_0's nibbles; x = (q - 16) * d */
} block_q5_0;

typedef struct {
    uint16_t d, m;         /* x = q * d + m */
    uint8_t qh[4];         /* bit j: the fifth bit of element j */
    uint8_t qs[QK5_1 / 2]; /* low four bits, as block_q4_1's nibbles */
} block_q5_1;

typedef struct {
    uint16_t d;
    int8_t qs[QK8_0]; /* x = q * d */
} block_q8_0;

typedef struct {
    uint16_t d;
    uint8_t qs[QK4_NL / 2]; /* x = iq4nl_values[nibble] * d, nibbles as block_q4_0's */
} block_iq4_nl;

/* IQ4_NL's 16 levels, denser near 0 than Q4_0's even steps. */
extern const int8_t iq4nl_values[16];

/* MXFP4 (OCP microscaling): 32 E2M1 values sharing one E8M0 exponent e. x = mxfp4_values[nibble]
 * * 2^(e - 128): the levels are E2M1's doubled, so the scale is half of 2^(e - 127). Nibbles as
 * block_q4_0's. */
typedef struct {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;

/* E2M1's values times 2: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (nibble bit 3 the
 * sign). */
extern const int8_t mxfp4_values[16];
/* 2^(e - 128), the scale of an MXFP4 block of exponent e, exact (e < 2: subnormal). */
float mxfp4_scale(uint8_t e);

typedef struct {
    uint16_t d, dmin;             /* super-block scales for the 6-bit scales and mins */
    uint8_t scales[K_SCALE_SIZE]; /* 8 sub-blocks of 32: 6-bit scale and 6-bit min each */
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* Q2_K: 16 sub-blocks of 16, x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* 4-bit scale (low nibble) and 4-bit min (high) per sub-block */
    uint8_t qs[QK_K / 4];      /* 2-bit quants, four to a byte */
    uint16_t d, dmin;
} block_q2_K;

/* Q3_K: 16 sub-blocks of 16, x = d * (scale - 32) * (q - 4), q 3 bits (a clear high bit in hmask
 * subtracts the 4), scale 6 bits. */
typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bits */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 16 six-bit scales */
    uint16_t d;
} block_q3_K;

/* Q5_K: Q4_K's scales and mins with a fifth bit per quant. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8]; /* fifth bits */
    uint8_t qs[QK_K / 2]; /* low 4 bits, as block_q4_K's */
} block_q5_K;

typedef struct {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 16 sub-blocks of 16, 8-bit scales */
    uint16_t d;
} block_q6_K;

/* How a device that keeps quants and scales apart (the OpenCL backend) splits a block at
 * upload: bytes [q_off, q_off + q_len) are the quants, the scale segments (in order) the scales,
 * padded to s_bytes. A segment marked f16 holds half-precision scales that are widened to f32
 * (exactly): PoCL compiles a lone vload_half to branchy scalar code, which cost more per 32
 * weights than the 2 extra bytes. Rows interleaved by 16 keep their f16 scales as they are (Q8_0,
 * Q4_0, Q4_1: one f16 segment), 16 rows' in one 32-byte load that one instruction widens.
 * kblk: elements per block of the kernels (BLK in cl/matvec.cl). f32/f16: no scales. */
typedef struct {
    size_t off, len;
    int f16; /* len bytes of f16 values, stored as 2 * len bytes of f32 */
} clinfer_scale_segment;

typedef struct {
    size_t kblk;
    size_t q_off, q_len;
    clinfer_scale_segment s[2];
    size_t s_bytes;
    clinfer_dtype type;
} clinfer_block_split;

/* Known type? Unknown ids from files are rejected through this. */
int dtype_valid(uint32_t type);
const char *dtype_name(clinfer_dtype type);
/* Whether backends take it as weights (their matmuls have kernels for it): every known type but
 * BF16, which files may hold (a quantizer's input) but models may not run. */
bool dtype_is_weight(clinfer_dtype type);
/* The index-th weight type's name, in id order; NULL past the last (base/names.h reads it). */
const char *dtype_weight_name_at(size_t index);
/* Elements per block (1 for f32/f16/bf16) and bytes per block. */
size_t dtype_block_elems(clinfer_dtype type);
size_t dtype_block_bytes(clinfer_dtype type);
/* Bytes of a row of n elements; n must be a multiple of the block size. */
size_t dtype_row_bytes(clinfer_dtype type, size_t n);
/* type's split (kblk 0 for an unknown type). */
clinfer_block_split dtype_split(clinfer_dtype type);

/* Row conversions; n is a multiple of the block size. */
void dequantize_row(clinfer_dtype type, const void *src, float *dst, size_t n);
void quantize_row(clinfer_dtype type, const float *src, void *dst, size_t n);

/* Activations rounded to 8 bits per block, the form the integer dot products of quantized
 * weights take: per block d = max |x| / 127, id = 1 / d (0 when d is 0), q[i] = roundf(x[i] * id)
 * (halves away from zero); x is then read as d * q[i]. A block is 32 elements (as ggml's Q8_0),
 * or for the K-quant weights 256 (as ggml's Q8_K): one scale per super-block lets their dots sum a
 * super-block's integer products before one float multiply. Every backend rounds this way, so
 * their results stay comparable. k % block == 0; d[k / block]. */
#define CLINFER_Q8_ACT_BLOCK 32
#define CLINFER_Q8_ACT_SUPER 256
void quant_q8_act(const float *x, size_t k, size_t block, int8_t *q, float *d);
/* The block a weight type's matmuls round x by: CLINFER_Q8_ACT_SUPER for the K-quants,
 * CLINFER_Q8_ACT_BLOCK for every other type. */
size_t dtype_q8_act_block(clinfer_dtype type);
/* Weight types whose matmuls take 8-bit activations, for integer dot products with their integer
 * blocks; F16/F32 rows would only lose precision. */
bool dtype_takes_q8_act(clinfer_dtype type);

#endif
