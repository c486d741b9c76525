/* Weight access for every storage type, the matvec kernels (decode: y = W x for a few columns)
 * and row dequantisation (embedding gather, f32 staging of quantized weights for GEMM).
 *
 * The program is built once per weight type with exactly one of -DWT_F32, -DWT_F16, -DWT_Q8_0,
 * -DWT_Q4_0, -DWT_Q4_1, -DWT_Q4_K, -DWT_Q6_K. The host stores each weight part as two arrays
 * (structure of arrays, see matmul_cl.c), rows contiguous:
 *   wq  the values: f32 / f16 elements, or the block quants without their scales
 *   ws  the per-block scales: f32 d (Q8_0, Q4_0), f32 d,m (Q4_1), a 20-byte header per
 *       super-block: f32 d,dmin + scales[12] (Q4_K), int8 scales[16] + f32 d (Q6_K); unused for
 *       f32/f16. The host widens the f16 scales to f32: PoCL converts a lone vload_half in
 *       scalar code with a branch, once per 32 elements.
 * A kernel block of BLK elements (16 for f32/f16, the GGUF block for Q8_0/Q4_0/Q4_1, a quarter
 * super-block for Q4_K, half a super-block for Q6_K) is decoded as NCH chunks of 16 values q with
 * one affine map per chunk, value = q * scale (+ offset where HAS_OFFSET); SPS consecutive chunks
 * share it, so the dot product scales once per SPS chunks and never materialises dequantized
 * weights. f16 is read with vload_half16 (no cl_khr_fp16 needed).
 *
 * The matvec kernels compute the part's rows r0 .. r0 + rows - 1 (a weight may hold several
 * matrices), output i = row r0 + i (x[c][k] at x + x_off + c*ldx, y[c][i] at y + y_off + c*ldy + i,
 * bias[bias_off + i]; c = get_global_id(1)):
 *   matvec_rows    one work-item per row, two float16 accumulators, no local memory or barriers
 *                  (cpu-rows: PoCL vectorises the float16 arithmetic)
 *   matvec_rows_norm  the same, then the RMSNORM of y (the op after it), in one launch
 *   matvec_rows_n  the same for 2 .. MV_MAX_N columns at once (x[c] for c < n, one launch
 *                  with global size (rows, 1)), so W is read once
 *   matvec_wg      one work-group of MV_WG items per row, blocks strided over the items,
 *                  local-memory tree reduction (gpu-local-reduce, gpu-subgroup)
 *   matvec_q8      quantized weights against 8-bit activations, AVX2 hosts only (see below)
 *   matvec_q8_il   the same over rows interleaved by 16, 16 rows per work-item (AVX2 hosts)
 *   dequant_rows   out[i][0..k) = W[row(i)] for row(i) = ids[i] (embedding) or first + i;
 *                  rows outside this part are left alone, ids outside [0, m) give zeros
 * flags: bit 0 accumulate (y +=), bit 1 add the bias. il: Q8_0/Q4_0/Q4_1 weights are stored with
 * their rows interleaved by 16 (word_at), as the host lays them out for matvec_q8_il; the other
 * kernels read either layout. */

#ifndef MV_WG
#define MV_WG 64
#endif
#ifndef MV_MAX_N
#define MV_MAX_N 8
#endif

/* Helpers must inline: PoCL otherwise calls blk_dot out of line for the K types and passes
 * every float16 through the stack (measured 2x slower). */
#define INLINE static inline __attribute__((always_inline))

#define F_ACCUMULATE 1
#define F_BIAS 2

typedef __global const uchar *wq_t;
typedef __global const uchar *ws_t;

/* Rows interleaved by 16 (il, Q8_0/Q4_0/Q4_1 on AVX2 hosts, see matvec_q8_il): the 4-byte
 * words of rows 16g .. 16g + 15 lie word-major, row-minor, so one 64-byte load holds the same
 * word of 16 rows. The index of word t of row r's block b, with w words per block (of quants or
 * of scales) and nb blocks per row, in either layout: */
INLINE size_t word_at(int il, int r, int nb, int b, int w, int t) {
    if (il) return (((size_t)(r / 16) * nb + b) * w + t) * 16 + r % 16;
    return ((size_t)r * nb + b) * w + t;
}

/* Words t0 .. t0 + 3 of row r's block b (w words per block). */
INLINE uint4 words4(wq_t wq, int il, int r, int nb, int b, int w, int t0) {
    __global const uint *p = (__global const uint *)wq;
    if (!il) return vload4(0, p + word_at(0, r, nb, b, w, t0));
    size_t i = word_at(1, r, nb, b, w, t0);
    return (uint4)(p[i], p[i + 16], p[i + 32], p[i + 48]);
}

#if defined(WT_F32) || defined(WT_F16)
#define BLK 16
#define NCH 1
#define SPS 1
#define UNIT_SCALE 1
#define HAS_OFFSET 0
#define HAS_TAIL 1

#ifdef WT_F32
#define ELEM(wq, r, k, i) (((__global const float *)(wq))[(size_t)(r) * (k) + (i)])
#define CHUNK16(wq, r, k, i) vload16(0, (__global const float *)(wq) + (size_t)(r) * (k) + (i))
#else
#define ELEM(wq, r, k, i) vload_half((size_t)(r) * (k) + (i), (__global const half *)(wq))
#define CHUNK16(wq, r, k, i) vload_half16(0, (__global const half *)(wq) + (size_t)(r) * (k) + (i))
#endif

INLINE void blk_values(wq_t wq, ws_t ws, int il, int r, int k, int b, float16 *q, float *sc,
                       float *of) {
    (void)ws, (void)il;
    q[0] = CHUNK16(wq, r, k, b * 16);
    sc[0] = 1.0f;
    of[0] = 0.0f;
}

#elif defined(WT_Q8_0)
#define BLK 32
#define NCH 2
#define SPS 2
#define UNIT_SCALE 0
#define HAS_OFFSET 0
#define HAS_TAIL 0

INLINE void blk_values(wq_t wq, ws_t ws, int il, int r, int k, int b, float16 *q, float *sc,
                       float *of) {
    float d = ((__global const float *)ws)[word_at(il, r, k / BLK, b, 1, 0)];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        q[j] = convert_float16(as_char16(words4(wq, il, r, k / BLK, b, 8, 4 * j)));
        sc[j] = d;
        of[j] = 0.0f;
    }
}

#elif defined(WT_Q4_0) || defined(WT_Q4_1)
#define BLK 32
#define NCH 2
#define SPS 2
#define UNIT_SCALE 0
#define HAS_TAIL 0
#ifdef WT_Q4_1
#define HAS_OFFSET 1
#else
#define HAS_OFFSET 0
#endif

/* Low nibbles hold elements 0..15, high nibbles 16..31. */
INLINE void blk_values(wq_t wq, ws_t ws, int il, int r, int k, int b, float16 *q, float *sc,
                       float *of) {
    int nb = k / BLK;
    uchar16 u = as_uchar16(words4(wq, il, r, nb, b, 4, 0));
    __global const float *s = (__global const float *)ws;
#ifdef WT_Q4_0
    float d = s[word_at(il, r, nb, b, 1, 0)], m = 0.0f;
    char zero = 8;
#else
    float d = s[word_at(il, r, nb, b, 2, 0)], m = s[word_at(il, r, nb, b, 2, 1)];
    char zero = 0;
#endif
    q[0] = convert_float16(as_char16(u & (uchar)0xF) - zero);
    q[1] = convert_float16(as_char16(u >> (uchar)4) - zero);
    sc[0] = sc[1] = d;
    of[0] = of[1] = m;
}

#elif defined(WT_Q4_K)
/* The kernels' block is a quarter super-block (64 elements, two 32-element sub-blocks): small
 * enough to stay in registers, and a quarter's 32 quant bytes are contiguous. */
#define BLK 64
#define NCH 4
#define SPS 2
#define UNIT_SCALE 0
#define HAS_OFFSET 1
#define HAS_TAIL 0

/* 6-bit scale and min of sub-block j (of 8) from the 12 packed bytes. */
INLINE void scale_min_k4(int j, __global const uchar *s, float *scale, float *min) {
    if (j < 4) {
        *scale = (float)(s[j] & 63);
        *min = (float)(s[j + 4] & 63);
    } else {
        *scale = (float)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *min = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Quarter g of a super-block: sub-block 2g is the low nibbles of its 32 bytes, 2g+1 the high
 * ones. The header per super-block is f32 d, f32 dmin, then the 12 packed scale bytes. */
INLINE void blk_values(wq_t wq, ws_t ws, int il, int r, int k, int b, float16 *q, float *sc,
                       float *of) {
    (void)il;
    size_t quarter = (size_t)r * (k / BLK) + b;
    int g = (int)(quarter % 4);
    __global const uchar *p = wq + quarter * 32;
    __global const uchar *h = ws + quarter / 4 * 20;
    float2 dd = vload2(0, (__global const float *)h);
    uchar16 u0 = vload16(0, p), u1 = vload16(1, p);
    float s_lo, m_lo, s_hi, m_hi;
    scale_min_k4(2 * g, h + 8, &s_lo, &m_lo);
    scale_min_k4(2 * g + 1, h + 8, &s_hi, &m_hi);
    q[0] = convert_float16(u0 & (uchar)0xF);
    q[1] = convert_float16(u1 & (uchar)0xF);
    q[2] = convert_float16(u0 >> (uchar)4);
    q[3] = convert_float16(u1 >> (uchar)4);
    sc[0] = sc[1] = dd.x * s_lo;
    sc[2] = sc[3] = dd.x * s_hi;
    of[0] = of[1] = -(dd.y * m_lo);
    of[2] = of[3] = -(dd.y * m_hi);
}

#elif defined(WT_Q6_K)
/* The kernels' block is half a super-block (128 elements): each loaded ql byte then yields both
 * of its nibbles (measured 30% faster than quarters). */
#define BLK 128
#define NCH 8
#define SPS 1 /* 16-element sub-blocks */
#define UNIT_SCALE 0
#define HAS_OFFSET 0
#define HAS_TAIL 0

/* A half is ql[64] (low 4 bits) and qh[32] (2 high bits); its element 32t + 16g + l
 * (t < 4, g < 2, l < 16) is the low (t < 2) or high (t >= 2) nibble of ql[32 (t & 1) + 16g + l]
 * with bits 2t, 2t+1 of qh[16g + l], scaled by scales[8 half + 2t + g]. */
INLINE void blk_values(wq_t wq, ws_t ws, int il, int r, int k, int b, float16 *q, float *sc,
                       float *of) {
    (void)il;
    size_t half_idx = (size_t)r * (k / BLK) + b, sb = half_idx / 2;
    int hh = (int)(half_idx % 2);
    __global const uchar *ql = wq + sb * 192 + 64 * hh, *qh = wq + sb * 192 + 128 + 32 * hh;
    __global const uchar *h = ws + sb * 20;
    __global const char *scales = (__global const char *)h + 8 * hh;
    float d = ((__global const float *)h)[4];
#pragma unroll
    for (int g = 0; g < 2; g++) {
        uchar16 a = vload16(g, ql), c = vload16(2 + g, ql), hb = vload16(g, qh);
        uchar16 v[4] = {(a & (uchar)0xF) | ((hb & (uchar)3) << (uchar)4),
                        (c & (uchar)0xF) | (((hb >> (uchar)2) & (uchar)3) << (uchar)4),
                        (a >> (uchar)4) | (((hb >> (uchar)4) & (uchar)3) << (uchar)4),
                        (c >> (uchar)4) | ((hb >> (uchar)6) << (uchar)4)};
#pragma unroll
        for (int t = 0; t < 4; t++) { /* chunk 2t + g == its scale's index in the half */
            q[2 * t + g] = convert_float16(as_char16(v[t]) - (char)32);
            sc[2 * t + g] = d * (float)scales[2 * t + g];
            of[2 * t + g] = 0.0f;
        }
    }
}

#else
#error "matvec.cl needs one of WT_F32, WT_F16, WT_Q8_0, WT_Q4_0, WT_Q4_1, WT_Q4_K, WT_Q6_K"
#endif

/* acc += the decoded block (q, sc, of) times xb[0 .. BLK), lane-wise (reduced once by the
 * caller). Chunks that share a scale (SPS of them) are summed first and scaled once. */
INLINE float16 values_dot(const float16 *q, const float *sc, const float *of,
                          __global const float *xb, float16 acc) {
    (void)sc, (void)of;
#if UNIT_SCALE
    acc = fma(q[0], vload16(0, xb), acc);
#else
#pragma unroll
    for (int j = 0; j < NCH; j += SPS) {
        float16 xv = vload16(j, xb), s = q[j] * xv;
#if HAS_OFFSET
        float16 xs = xv;
#endif
#pragma unroll
        for (int t = 1; t < SPS; t++) {
            float16 xt = vload16(j + t, xb);
            s = fma(q[j + t], xt, s);
#if HAS_OFFSET
            xs += xt;
#endif
        }
        acc = fma((float16)sc[j], s, acc);
#if HAS_OFFSET
        acc = fma((float16)of[j], xs, acc);
#endif
    }
#endif
    return acc;
}

INLINE float16 blk_dot(wq_t wq, ws_t ws, int il, int r, int k, int b, __global const float *x,
                       float16 acc) {
    float16 q[NCH];
    float sc[NCH], of[NCH];
    blk_values(wq, ws, il, r, k, b, q, sc, of);
    return values_dot(q, sc, of, x + (size_t)b * BLK, acc);
}

INLINE float hsum16(float16 v) {
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* Elements past the last whole 16-chunk of an f32/f16 row. */
INLINE float tail_dot(wq_t wq, int r, int k, int from, int step, __global const float *x) {
    float s = 0.0f;
#if HAS_TAIL
    for (int i = (k / BLK) * BLK + from; i < k; i += step)
        s = fma(ELEM(wq, r, k, i), x[i], s);
#else
    (void)wq, (void)r, (void)k, (void)from, (void)step, (void)x;
#endif
    return s;
}

INLINE void store_y(__global float *y, int r, float s, __global const float *bias, int bias_off,
                    int flags) {
    if (flags & F_BIAS) s += bias[bias_off + r];
    if (flags & F_ACCUMULATE) s += y[r];
    y[r] = s;
}

/* Row r of the part times xc. */
INLINE float row_dot(wq_t wq, ws_t ws, int il, int r, int k, __global const float *xc) {
    int nb = k / BLK, b = 0;
    float16 a0 = 0.0f, a1 = 0.0f;
    for (; b + 1 < nb; b += 2) {
        a0 = blk_dot(wq, ws, il, r, k, b, xc, a0);
        a1 = blk_dot(wq, ws, il, r, k, b + 1, xc, a1);
    }
    if (b < nb) a0 = blk_dot(wq, ws, il, r, k, b, xc, a0);
    return hsum16(a0 + a1) + tail_dot(wq, r, k, 0, 1, xc);
}

__kernel void matvec_rows(wq_t wq, ws_t ws, int il, int k, int r0, int rows,
                          __global const float *x, int x_off, int ldx, __global float *y, int y_off,
                          int ldy, __global const float *bias, int bias_off, int flags) {
    int i = get_global_id(0), c = get_global_id(1);
    if (i >= rows) return;
    float s = row_dot(wq, ws, il, r0 + i, k, x + x_off + (size_t)c * ldx);
    store_y(y + y_off + (size_t)c * ldy, i, s, bias, bias_off, flags);
}

#include "round_q8.clh"

/* matvec_rows for one column over all rows of the part (y's whole row), NORM_ROWS rows per
 * work-item, and then the RMSNORM op that follows it in the plan: ny = y normalised (weight nw
 * where has_nw), by the last work-item to finish. One launch instead of two. done counts the
 * finished work-items (atomic_inc is sequentially consistent on PoCL, so the last one sees every
 * y; the host uses this kernel on CPUs only) and is reset by the last one for the next launch. */
#define NORM_ROWS 8
__kernel void matvec_rows_norm(wq_t wq, ws_t ws, int il, int k, int rows, __global const float *x,
                               int x_off, __global float *y, int y_off, __global const float *bias,
                               int bias_off, int flags, __global int *done,
                               __global const float *nw, ulong nw_off, int has_nw,
                               __global float *ny, ulong ny_off, float eps) {
    int i0 = NORM_ROWS * get_global_id(0);
    for (int i = i0; i < min(i0 + NORM_ROWS, rows); i++)
        store_y(y + y_off, i, row_dot(wq, ws, il, i, k, x + x_off), bias, bias_off, flags);
    if (atomic_inc(done) != (int)get_global_size(0) - 1) return;
    *done = 0;
    rmsnorm_row(y + y_off, rows, nw + nw_off, has_nw, ny + ny_off, eps, 0,
                (__global char *)ny, (__global float2 *)ny, ny, 0);
}

/* 2 .. MV_MAX_N columns: each weight block is decoded once for all of them; the per-column
 * accumulators live in a private array (L1 on CPUs) instead of re-reading W per column. */
__kernel void matvec_rows_n(wq_t wq, ws_t ws, int il, int k, int r0, int rows,
                            __global const float *x, int x_off, int ldx, __global float *y,
                            int y_off, int ldy, __global const float *bias, int bias_off,
                            int flags, int n) {
    int i = get_global_id(0), r = r0 + i;
    if (i >= rows) return;
    float16 acc[MV_MAX_N];
    for (int c = 0; c < n; c++)
        acc[c] = 0.0f;
    __global const float *x0 = x + x_off;
    for (int b = 0; b < k / BLK; b++) {
        float16 q[NCH];
        float sc[NCH], of[NCH];
        blk_values(wq, ws, il, r, k, b, q, sc, of);
        for (int c = 0; c < n; c++)
            acc[c] = values_dot(q, sc, of, x0 + (size_t)c * ldx + (size_t)b * BLK, acc[c]);
    }
    for (int c = 0; c < n; c++) {
        float s = hsum16(acc[c]) + tail_dot(wq, r, k, 0, 1, x0 + (size_t)c * ldx);
        store_y(y + y_off + (size_t)c * ldy, i, s, bias, bias_off, flags);
    }
}

__kernel void matvec_wg(wq_t wq, ws_t ws, int il, int k, int r0, int rows, __global const float *x,
                        int x_off, int ldx, __global float *y, int y_off, int ldy,
                        __global const float *bias, int bias_off, int flags) {
    __local float red[MV_WG];
    int i = get_group_id(0), r = r0 + i, c = get_global_id(1), lid = get_local_id(0);
    __global const float *xc = x + x_off + (size_t)c * ldx;
    float16 acc = 0.0f;
    for (int b = lid; b < k / BLK; b += MV_WG)
        acc = blk_dot(wq, ws, il, r, k, b, xc, acc);
    red[lid] = hsum16(acc) + tail_dot(wq, r, k, lid, MV_WG, xc);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = MV_WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0 && i < rows)
        store_y(y + y_off + (size_t)c * ldy, i, red[0], bias, bias_off, flags);
}

/* ---- 8-bit activations (the MATMUL op's x_q8) --------------------------------------------
 * x comes rounded per 32-block by quantize.cl: xq[c][k] (char) and xd[c][k/32] = (d, d * sum q).
 * A block's dot product is then integer: 32 byte products summed by vpmaddubsw + vpmaddwd, one
 * int-to-float conversion and one FMA per 32 weights instead of per 8 (2x on Q4_0 at 14336 x
 * 4096, docs/PERFORMANCE.md). LLVM does not derive these instructions from portable OpenCL C
 * (tried: short and int products with even/odd sums compile to vpmulld and shuffles, slower than
 * the f32 path), so this kernel exists only where PoCL compiles for an AVX2 host; other devices
 * take x as d * q in f32 through the kernels above. */
#if defined(__AVX2__) && (defined(WT_Q8_0) || defined(WT_Q4_0) || defined(WT_Q4_1) ||            \
                          defined(WT_Q4_K) || defined(WT_Q6_K))
typedef char v32c __attribute__((vector_size(32)));
typedef uchar v32u __attribute__((vector_size(32))); /* byte shifts without sign extension */
typedef short v16s __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

INLINE v32c join16(char16 a, char16 b) {
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                   17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}

/* Loads through byte-aligned vector types: vload16 of chars, once blk8_dot_q8 unrolled eight
 * blocks, compiled to 16-bit word inserts. */
typedef char v32c_u __attribute__((vector_size(32), aligned(1)));
typedef uchar v16u_u __attribute__((vector_size(16), aligned(1)));

/* Bytes 32 i .. 32 i + 31 of p. */
INLINE v32c load32(__global const char *p, size_t i) {
    return *(__global const v32c_u *)(p + 32 * i);
}

/* Sum of u[i] * s[i] (u read as unsigned bytes, s as signed) as 8 partial sums, lane j from
 * bytes 4j .. 4j + 3. Pairs cannot saturate vpmaddubsw's 16 bits: |u| <= 128 and |s| <= 127
 * give at most 32512. */
INLINE v8i dot_u8s8(v32c u, v32c s) {
    v16s pairs = __builtin_ia32_pmaddubsw256(u, s);
    return __builtin_ia32_pmaddwd256(pairs, (v16s){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
}

/* Lane j = the sum of v[j]'s 8 lanes. vphaddd adds neighbours within each 128-bit half: two
 * rounds leave (v[0..3] low-half sums | v[0..3] high-half sums) in a, the same for v[4..7] in b;
 * one half swap and an add finish (integers: exact, |lane| < 2^25 here). */
INLINE v8i hsum8x8(const v8i *v) {
    v8i a = __builtin_ia32_phaddd256(__builtin_ia32_phaddd256(v[0], v[1]),
                                     __builtin_ia32_phaddd256(v[2], v[3]));
    v8i b = __builtin_ia32_phaddd256(__builtin_ia32_phaddd256(v[4], v[5]),
                                     __builtin_ia32_phaddd256(v[6], v[7]));
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
}

#if defined(WT_Q4_K) || defined(WT_Q6_K)
/* blk_dot_q8 takes a whole super-block: its 8 blocks of x end in one vector of 8 integer dots,
 * so the conversion and the FMAs with the per-block factors happen once per 256 weights. */
#define Q8_BLK 256
#else
#define Q8_BLK 32
#endif

#ifdef WT_Q4_K
/* Super-block b of row r: sub-block j (block j of x) contributes
 * d sc_j d_x (q . q_x) - dmin mn_j d_x sum q_x, lane j of both FMAs. */
INLINE void blk_dot_q8(wq_t wq, ws_t ws, int r, int nb, int b, __global const char *xq,
                       __global const float2 *xd, float8 *acc, float *off) {
    (void)off;
    size_t sb = (size_t)r * nb + b;
    __global const char *p = (__global const char *)wq + sb * 128;
    __global const uint *h = (__global const uint *)(ws + sb * 20);
    v8i dots[8];
#pragma unroll
    for (int g = 0; g < 4; g++) { /* quarter g: low nibbles are sub-block 2g, high ones 2g+1 */
        v32u u = __builtin_astype(load32(p, g), v32u);
        dots[2 * g] = dot_u8s8(__builtin_astype(u & 0xF, v32c), load32(xq, 8 * b + 2 * g));
        dots[2 * g + 1] = dot_u8s8(__builtin_astype(u >> 4, v32c), load32(xq, 8 * b + 2 * g + 1));
    }
    /* scale_min_k4 for all eight sub-blocks, four bytes per word */
    uint s0 = h[2], s1 = h[3], s2 = h[4];
    uint2 sc = (uint2)(s0 & 0x3F3F3F3F, (s2 & 0x0F0F0F0F) | ((s0 >> 2) & 0x30303030));
    uint2 mn = (uint2)(s1 & 0x3F3F3F3F, ((s2 >> 4) & 0x0F0F0F0F) | ((s1 >> 2) & 0x30303030));
    float16 x = vload16(b, (__global const float *)xd);
    float8 s = convert_float8(__builtin_astype(hsum8x8(dots), int8));
    *acc = fma(s, __builtin_astype(h[0], float) * convert_float8(as_uchar8(sc)) * x.even, *acc);
    *acc = fma(-__builtin_astype(h[1], float) * convert_float8(as_uchar8(mn)), x.odd, *acc);
}

#elif defined(WT_Q6_K)
/* Super-block b of row r (layout at WT_Q6_K's blk_values). The pair sums of (q - 32) x are
 * those of q x minus those of 32 x, both from vpmaddubsw with q unsigned (at most 16002 and
 * 8128: no saturation; measured 6% faster than Q8_0's sign trick on q - 32). vpmaddwd then
 * multiplies the pairs by the block's two 16-element scales (pairs 0..7 come from elements
 * 0..15, 8..15 from 16..31, in both 128-bit halves alike), leaving d d_x as the only float
 * factor. */
INLINE void blk_dot_q8(wq_t wq, ws_t ws, int r, int nb, int b, __global const char *xq,
                       __global const float2 *xd, float8 *acc, float *off) {
    (void)off;
    size_t sb = (size_t)r * nb + b;
    __global const char *q = (__global const char *)wq + sb * 192;
    __global const char *h = (__global const char *)ws + sb * 20;
    short16 scales = convert_short16(vload16(0, h));
    v8i dots[8];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        v32u ql0 = __builtin_astype(load32(q, 2 * hh), v32u);
        v32u ql1 = __builtin_astype(load32(q, 2 * hh + 1), v32u);
        v32u qh = __builtin_astype(load32(q + 128, hh), v32u);
        v32u v[4] = {(ql0 & 0xF) | ((qh << 4) & 0x30), (ql1 & 0xF) | ((qh << 2) & 0x30),
                     (ql0 >> 4) | (qh & 0x30), (ql1 >> 4) | ((qh >> 2) & 0x30)};
#pragma unroll
        for (int t = 0; t < 4; t++) {
            v32c x = load32(xq, 8 * b + 4 * hh + t);
            v16s pairs = __builtin_ia32_pmaddubsw256(__builtin_astype(v[t], v32c), x) -
                         __builtin_ia32_pmaddubsw256((v32c){} + 32, x);
            int i = 8 * hh + 2 * t;
            short16 sc = (short16)((short8)scales[i], (short8)scales[i + 1]);
            dots[4 * hh + t] = __builtin_ia32_pmaddwd256(pairs, __builtin_astype(sc, v16s));
        }
    }
    float8 s = convert_float8(__builtin_astype(hsum8x8(dots), int8));
    float d = ((__global const float *)h)[4];
    *acc = fma(s, d * vload16(b, (__global const float *)xd).even, *acc);
}

#else
/* One weight block of row r against block b of x: acc += d_w d_x (w . q_x) lane-wise; off
 * gathers the per-block terms that multiply sum q_x (Q4_0's zero point 8, Q4_1's m). */
INLINE void blk_dot_q8(wq_t wq, ws_t ws, int r, int nb, int b, __global const char *xq,
                       __global const float2 *xd, float8 *acc, float *off) {
    size_t blk = (size_t)r * nb + b;
    float2 dx = xd[b];
    v32c x = load32(xq, b);
#ifdef WT_Q8_0
    v32c w = load32((__global const char *)wq, blk);
    /* |w| * (x with w's sign) = w * x, with the unsigned operand vpmaddubsw wants (sign(w, w)
     * is |w|, -128 included as the unsigned 128; OpenCL's abs() compiles to scalar code here) */
    v8i s = dot_u8s8(__builtin_ia32_psignb256(w, w), __builtin_ia32_psignb256(x, w));
    *acc = fma(convert_float8(__builtin_astype(s, int8)),
               (float8)(((__global const float *)ws)[blk] * dx.x), *acc);
#else
    uchar16 u = vload16(blk, wq);
    v8i s = dot_u8s8(join16(as_char16(u & (uchar)0xF), as_char16(u >> (uchar)4)), x);
#ifdef WT_Q4_0
    float d = ((__global const float *)ws)[blk], m = -8.0f * d;
#else
    float2 dm = vload2(blk, (__global const float *)ws);
    float d = dm.x, m = dm.y;
#endif
    *acc = fma(convert_float8(__builtin_astype(s, int8)), (float8)(d * dx.x), *acc);
    *off = fma(m, dx.y, *off);
#endif
}

/* Blocks b .. b + 7 of row r, as the K types take a super-block: the 8 integer dots end in one
 * vector (lane j: block b + j), converted once and scaled by one FMA with the 8 blocks' factors,
 * which the separate scale array holds side by side, where blk_dot_q8 converts and scales
 * 8 lanes for each block. */
INLINE void blk8_dot_q8(wq_t wq, ws_t ws, int r, int nb, int b, __global const char *xq,
                        __global const float2 *xd, float8 *acc, float8 *off) {
    size_t blk = (size_t)r * nb + b;
    v8i dots[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        v32c x = load32(xq, b + j);
#ifdef WT_Q8_0
        v32c w = load32((__global const char *)wq, blk + j);
        dots[j] = dot_u8s8(__builtin_ia32_psignb256(w, w), __builtin_ia32_psignb256(x, w));
#else
        uchar16 u = __builtin_astype(*((__global const v16u_u *)wq + blk + j), uchar16);
        dots[j] = dot_u8s8(join16(as_char16(u & (uchar)0xF), as_char16(u >> (uchar)4)), x);
#endif
    }
    float8 s = convert_float8(__builtin_astype(hsum8x8(dots), int8));
    float16 x = vload16(0, (__global const float *)(xd + b)); /* (d, d * sum q) per block */
#ifdef WT_Q4_1
    float16 dm = vload16(0, (__global const float *)ws + 2 * blk);
    *acc = fma(s, dm.even * x.even, *acc);
    *off = fma(dm.odd, x.odd, *off);
#else
    float8 d = vload8(0, (__global const float *)ws + blk);
    *acc = fma(s, d * x.even, *acc);
#ifdef WT_Q4_0
    *off = fma(-8.0f * d, x.odd, *off);
#else
    (void)off;
#endif
#endif
}
#endif

/* One work-item per (output row, column): global size (rows rounded up, n). */
__kernel void matvec_q8(wq_t wq, ws_t ws, int k, int r0, int rows, __global const char *xq,
                        __global const float2 *xd, __global float *y, int y_off, int ldy,
                        __global const float *bias, int bias_off, int flags) {
    int i = get_global_id(0), c = get_global_id(1), r = r0 + i;
    if (i >= rows) return;
    int nb = k / Q8_BLK, b = 0;
    xq += (size_t)c * k;
    xd += (size_t)c * (k / 32);
    float8 a0 = 0.0f, a1 = 0.0f;
    float o0 = 0.0f, o1 = 0.0f;
#if Q8_BLK == 32
    float8 o8 = 0.0f;
    for (; b + 8 <= nb; b += 8)
        blk8_dot_q8(wq, ws, r, nb, b, xq, xd, &a0, &o8);
    float4 o4 = o8.lo + o8.hi;
    o0 = (o4.x + o4.y) + (o4.z + o4.w);
#endif
    for (; b + 1 < nb; b += 2) { /* two chains: the FMA latency hides behind the other block */
        blk_dot_q8(wq, ws, r, nb, b, xq, xd, &a0, &o0);
        blk_dot_q8(wq, ws, r, nb, b + 1, xq, xd, &a1, &o1);
    }
    if (b < nb) blk_dot_q8(wq, ws, r, nb, b, xq, xd, &a0, &o0);
    float8 a = a0 + a1;
    float4 h = a.lo + a.hi;
    float s = h.x + h.y + h.z + h.w + o0 + o1;
    store_y(y + y_off + (size_t)c * ldy, i, s, bias, bias_off, flags);
}
#endif

/* ---- 16 rows per work-item over 8-bit activations (rows interleaved by 16) -----------------
 * One 64-byte load holds the same 4-byte word of 16 rows (word_at's il layout), so lane j of
 * every vector belongs to one row: each word of x is broadcast to all lanes, a block's dot
 * products accumulate vertically through vpmaddubsw + vpmaddwd, and a row never needs a
 * horizontal sum (the row-major kernel above spends a third of a 576-element row on its
 * reduction and store). AVX-512 takes a group's 16 rows as one vector, AVX2 as two halves of 8.
 * AVX512-VNNI's vpdpbusd would fuse the two instructions, but PoCL's LLVM may know the host by
 * an older name without it, and a per-function target attribute does not survive PoCL's
 * work-group wrapper (LLVM "Cannot select" on Zen 4). */
#if (defined(__AVX512BW__) || defined(__AVX2__)) &&                                               \
    (defined(WT_Q8_0) || defined(WT_Q4_0) || defined(WT_Q4_1))

#ifdef __AVX512BW__
#define IL_LANES 16
#define MADDUBS __builtin_ia32_pmaddubsw512
#define MADDWD __builtin_ia32_pmaddwd512
typedef float16 floatL;
typedef int16 intL;
#define convert_floatL convert_float16
#define vloadL vload16
#define vstoreL vstore16
#else
#define IL_LANES 8
#define MADDUBS __builtin_ia32_pmaddubsw256
#define MADDWD __builtin_ia32_pmaddwd256
typedef float8 floatL;
typedef int8 intL;
#define convert_floatL convert_float8
#define vloadL vload8
#define vstoreL vstore8
#endif
typedef int vLi __attribute__((vector_size(4 * IL_LANES)));
typedef char vLc __attribute__((vector_size(4 * IL_LANES)));
typedef short vLs __attribute__((vector_size(4 * IL_LANES)));

#ifdef WT_Q8_0
#define IL_WORDS 8 /* quant words per block */
#else
#define IL_WORDS 4
#endif

/* Word t (of 16 rows) of a block at w, lanes h * IL_LANES onwards. */
INLINE vLi il_word(__global const int *w, int t, int h) {
    return *(__global const vLi *)(w + 16 * t + IL_LANES * h);
}

/* Integer dot products of a block of 16 rows (w: its IL_WORDS words) with x's block (xw: its 8
 * words), lanes h * IL_LANES onwards, lane j for the row of that lane. vpmaddubsw multiplies
 * unsigned by signed bytes and adds pairs into 16 bits, which must not saturate. */
INLINE vLi il_block_dot(__global const int *w, int h, __global const int *xw) {
#ifdef WT_Q8_0 /* |q| . (x with q's sign): pairs at most 2 * 128 * 127, so one vpmaddwd each */
    vLi acc = {};
    for (int t = 0; t < 8; t++) {
        vLc q = (vLc)il_word(w, t, h), neg = q < 0, x = (vLc)((vLi){} + xw[t]);
        vLs pairs = MADDUBS((q ^ neg) - neg, (x ^ neg) - neg);
        acc += MADDWD(pairs, (vLs){} + 1);
    }
    return acc;
#else /* word t's low nibbles are elements 4t .. 4t + 3, its high ones 16 + 4t ..: the pairs of
       * all eight products sum to at most 8 * 2 * 15 * 127 */
    vLs pairs = {};
    for (int t = 0; t < 4; t++) {
        vLi q = il_word(w, t, h);
        pairs += MADDUBS((vLc)(q & 0x0F0F0F0F), (vLc)((vLi){} + xw[t]));
        pairs += MADDUBS((vLc)((q >> 4) & 0x0F0F0F0F), (vLc)((vLi){} + xw[4 + t]));
    }
    return MADDWD(pairs, (vLs){} + 1);
#endif
}

#define IL_COLS 4 /* columns per work-item: the weights' words are unpacked once for all */

/* Rows 16g .. 16g + 15 of this part for columns c0 .. c0 + nc - 1 (nc <= IL_COLS, a constant
 * at each call, so the accumulators stay in registers), storing the rows in [r0, r0 + rows) as
 * outputs row - r0. */
INLINE void il_rows(wq_t wq, ws_t ws, int k, int r0, int rows, int g, int c0, const int nc,
                    __global const char *xq, __global const float2 *xd, __global float *y,
                    int y_off, int ldy, __global const float *bias, int bias_off, int flags) {
    int nb = k / 32;
    __global const int *w = (__global const int *)wq + (size_t)g * nb * IL_WORDS * 16;
#ifdef WT_Q4_1
    __global const float *s = (__global const float *)ws + (size_t)g * nb * 32;
#else
    __global const float *s = (__global const float *)ws + (size_t)g * nb * 16;
#endif
    float out[IL_COLS][16];
    for (int h = 0; h < 16 / IL_LANES; h++) {
        floatL acc[IL_COLS], off[IL_COLS];
#pragma unroll
        for (int j = 0; j < nc; j++)
            acc[j] = off[j] = 0.0f;
        for (int b = 0; b < nb; b++) {
#ifdef WT_Q4_1
            __global const float *sb = s + 32 * b + IL_LANES * h;
            floatL d = vloadL(0, sb), m = vloadL(0, sb + 16);
#else
            floatL d = vloadL(0, s + 16 * b + IL_LANES * h);
#endif
#pragma unroll
            for (int j = 0; j < nc; j++) {
                size_t c = (size_t)(c0 + j);
                __global const int *xw = (__global const int *)(xq + c * k) + 8 * b;
                floatL dot = convert_floatL(
                    __builtin_astype(il_block_dot(w + b * IL_WORDS * 16, h, xw), intL));
                float2 dx = xd[c * nb + b]; /* (d, d * sum q) of x's block */
                acc[j] = fma(dot, d * dx.x, acc[j]);
#ifdef WT_Q4_1
                off[j] = fma(m, (floatL)dx.y, off[j]); /* the minimum m times sum x */
#elif defined(WT_Q4_0)
                off[j] = fma(d, (floatL)dx.y, off[j]); /* the zero point 8 times sum x */
#endif
            }
        }
#pragma unroll
        for (int j = 0; j < nc; j++) {
#ifdef WT_Q4_0
            acc[j] = fma(off[j], -8.0f, acc[j]);
#elif defined(WT_Q4_1)
            acc[j] += off[j];
#endif
            vstoreL(acc[j], h, out[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < nc; j++)
        for (int l = 0; l < 16; l++) {
            int i = 16 * g + l - r0;
            if (i >= 0 && i < rows)
                store_y(y + y_off + (size_t)(c0 + j) * ldy, i, out[j][l], bias, bias_off, flags);
        }
}

/* Global size (groups of 16 rows that hold some of [r0, r0 + rows), columns n / IL_COLS
 * rounded up), both rounded up: work-item (g, t) takes columns IL_COLS t onwards. */
__kernel void matvec_q8_il(wq_t wq, ws_t ws, int k, int r0, int rows, __global const char *xq,
                           __global const float2 *xd, __global float *y, int y_off, int ldy,
                           __global const float *bias, int bias_off, int flags, int n) {
    int g = r0 / 16 + get_global_id(0), c0 = IL_COLS * get_global_id(1);
    if (16 * g >= r0 + rows || c0 >= n) return;
    if (c0 + IL_COLS <= n)
        il_rows(wq, ws, k, r0, rows, g, c0, IL_COLS, xq, xd, y, y_off, ldy, bias, bias_off,
                flags);
    else
        for (int c = c0; c < n; c++)
            il_rows(wq, ws, k, r0, rows, g, c, 1, xq, xd, y, y_off, ldy, bias, bias_off, flags);
}

/* matvec_q8_il for one column whose launch covers all of y's row (rows outputs), and then the
 * RMSNORM op that follows it in the plan, by the last work-item to finish: ny = y normalised
 * (weight nw where has_nw), with want_q rounded to 8 bits for the next matmul (aq, ad, af,
 * want_f as in quantize.cl). One launch instead of two. done counts the finished work-items
 * (atomic_inc is sequentially consistent on PoCL, so the last one sees every y; the host uses
 * this kernel on CPUs only) and is reset by the last one for the next launch. */
__kernel void matvec_q8_il_norm(wq_t wq, ws_t ws, int k, int rows, __global const char *xq,
                                __global const float2 *xd, __global float *y, int y_off,
                                __global const float *bias, int bias_off, int flags,
                                __global int *done, __global const float *nw, ulong nw_off,
                                int has_nw, __global float *ny, ulong ny_off, float eps,
                                int want_q, __global char *aq, __global float2 *ad,
                                __global float *af, int want_f) {
    int g = get_global_id(0);
    if (16 * g < rows)
        il_rows(wq, ws, k, 0, rows, g, 0, 1, xq, xd, y, y_off, rows, bias, bias_off, flags);
    if (atomic_inc(done) != (int)get_global_size(0) - 1) return;
    *done = 0;
    rmsnorm_row(y + y_off, rows, nw + nw_off, has_nw, ny + ny_off, eps, want_q, aq, ad, af,
                want_f);
}
#endif

/* Global size (k/BLK + tail, n): item (b, i) writes block b of output row i; the item with
 * b == k/BLK writes the f32/f16 tail. This part holds rows row0 .. row0+rows-1 of the m-row
 * weight; output row i is weight row ids[ids_off + i] (has_ids) or first + i. */
__kernel void dequant_rows(wq_t wq, ws_t ws, int il, int k, int row0, int rows, int m,
                           __global const int *ids, int ids_off, int has_ids, int first,
                           __global float *out, int out_off) {
    int b = get_global_id(0), i = get_global_id(1);
    int row = has_ids ? ids[ids_off + i] : first + i;
    __global float *o = out + out_off + (size_t)i * k;
    int nb = k / BLK, lo = b * BLK, hi = b < nb ? lo + BLK : k;
    if (row < 0 || row >= m) { /* only the first part writes the zeros */
        if (row0 == 0)
            for (int e = lo; e < hi; e++)
                o[e] = 0.0f;
        return;
    }
    if (row < row0 || row >= row0 + rows) return;
    int r = row - row0;
    if (b < nb) {
        float16 q[NCH];
        float sc[NCH], of[NCH];
        blk_values(wq, ws, il, r, k, b, q, sc, of);
#pragma unroll
        for (int j = 0; j < NCH; j++)
            vstore16(q[j] * sc[j] + of[j], 0, o + lo + 16 * j);
    }
#if HAS_TAIL
    else
        for (int e = lo; e < hi; e++)
            o[e] = ELEM(wq, r, k, e);
#endif
}
