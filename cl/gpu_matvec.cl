/* Decode matvec on the GPU paths (gpu-local-reduce) for F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K:
 * y = W x for one column per get_global_id(1), over the row-major weights of weights.clh
 * (quants and scales in arrays apart). Built per type with -DWT_<type> (cl_type_defines).
 *
 * A work-group of GMV_WG items takes GMV_ROWS rows, GMV_T = 32 items per row (a warp's worth).
 * Item t of a row reads units u = t, t + 32, ... of it, a unit being what one 16-byte load
 * holds (8 f16 values, half a Q8_0 block, a Q4_0 / Q4_1 block, half a Q4_K quarter; for Q6_K
 * a pair of 16-element sub-blocks, three loads): the 32 items of a row load consecutive 16-byte
 * words of quants, and their scales side by side. x goes through local memory in tiles of
 * GMV_XT elements, loaded once for the group's rows, one pad float per 32 so that the items'
 * reads of their units fall in different banks. Each row's 32 partial sums are added by a tree
 * in local memory. matvec_wg (matvec.cl), one row per group, one element (or block) per item,
 * stays behind CLINFER_GPU_LEGACY. */

#ifndef GMV_WG
#define GMV_WG 256
#endif
#define GMV_T 32
#define GMV_ROWS (GMV_WG / GMV_T)
#define GMV_XT 4096
#define XI(e) ((e) + (e) / 32) /* a tile element's place in local memory */

#include "weights.clh"

#if WT_F16
#define UNIT 8
#elif WT_Q8_0
#define UNIT 16
#elif WT_Q4_0 || WT_Q4_1 || WT_Q4_K
#define UNIT 32
#elif WT_Q6_K
#define UNIT 64
#else
#error "gpu_matvec.cl: no GPU matvec for this weight type"
#endif

/* 16 of x from local memory: elements e .. e + 15 of the tile (16-aligned, so within one
 * 32-element run and contiguous there). */
#define X16(xs, e) vload16(0, (xs) + XI(e))

/* acc plus unit u of row r against x, whose tile in local memory (xs) starts at element t0. */
INLINE float16 unit_dot(wq_t wq, ws_t ws, int r, int k, int u, __local const float *xs, int t0,
                        float16 acc) {
#if WT_F16
    float8 w = vload_half8(0, (__global const half *)wq + (size_t)r * k + (size_t)u * 8);
    acc.lo = fma(w, vload8(0, xs + XI(8 * u - t0)), acc.lo);
#elif WT_Q6_K
    /* unit u is sub-block pair g of half hh of super-block sb: ql bytes 16g .. of the half's
     * two 32-byte rows and qh bytes 16g .. (weights.clh's blk_values), 64 elements */
    int sb = u / 4, hh = u / 2 % 2, g = u % 2;
    size_t blk = (size_t)r * (k / 256) + sb;
    __global const uchar *ql = wq + blk * 192 + 64 * hh + 16 * g;
    uchar16 a = vload16(0, ql), c = vload16(2, ql);
    uchar16 hb = vload16(0, wq + blk * 192 + 128 + 32 * hh + 16 * g);
    __global const uchar *h = ws + blk * 20;
    __global const char *sc = (__global const char *)h + 8 * hh + g;
    float d = ((__global const float *)h)[4];
    uchar16 v[4] = {(a & (uchar)0xF) | ((hb & (uchar)3) << (uchar)4),
                    (c & (uchar)0xF) | (((hb >> (uchar)2) & (uchar)3) << (uchar)4),
                    (a >> (uchar)4) | (((hb >> (uchar)4) & (uchar)3) << (uchar)4),
                    (c >> (uchar)4) | ((hb >> (uchar)6) << (uchar)4)};
    int e = 256 * sb + 128 * hh + 16 * g - t0;
#pragma unroll
    for (int t = 0; t < 4; t++)
        acc = fma((float16)(d * (float)sc[2 * t]),
                  convert_float16(as_char16(v[t]) - (char)32) * X16(xs, e + 32 * t), acc);
#else
    __global const float *s = (__global const float *)ws;
    uint4 word = vload4(0, (__global const uint *)wq + ((size_t)r * (k / UNIT) + u) * 4);
#if WT_Q8_0
    float d = s[(size_t)r * (k / 32) + u / 2];
    acc = fma((float16)d, convert_float16(as_char16(word)) * X16(xs, 16 * u - t0), acc);
#elif WT_Q4_0 || WT_Q4_1
    /* a block: low nibbles elements 0 .. 15, high ones 16 .. 31 */
    uchar16 b = as_uchar16(word);
    float16 lo = convert_float16(b & (uchar)0xF), hi = convert_float16(b >> (uchar)4);
    float16 x_lo = X16(xs, 32 * u - t0), x_hi = X16(xs, 32 * u + 16 - t0);
    size_t blk = (size_t)r * (k / 32) + u;
#if WT_Q4_0
    acc = fma((float16)s[blk], (lo - 8.0f) * x_lo + (hi - 8.0f) * x_hi, acc);
#else
    acc = fma((float16)s[2 * blk], lo * x_lo + hi * x_hi,
              fma((float16)s[2 * blk + 1], x_lo + x_hi, acc));
#endif
#else /* Q4_K: unit u is half hh of quarter g of super-block sb (weights.clh's blk_values) */
    int sb = u / 8, g = u / 2 % 4, hh = u % 2;
    __global const uchar *h = ws + ((size_t)r * (k / 256) + sb) * 20;
    float2 dd = vload2(0, (__global const float *)h);
    float s_lo, m_lo, s_hi, m_hi;
    scale_min_k4(2 * g, h + 8, &s_lo, &m_lo);
    scale_min_k4(2 * g + 1, h + 8, &s_hi, &m_hi);
    uchar16 b = as_uchar16(word);
    int e = 256 * sb + 64 * g + 16 * hh - t0; /* the low nibbles' first element; high: + 32 */
    float16 x_lo = X16(xs, e), x_hi = X16(xs, e + 32);
    acc = fma((float16)(dd.x * s_lo), convert_float16(b & (uchar)0xF) * x_lo, acc);
    acc = fma((float16)(dd.x * s_hi), convert_float16(b >> (uchar)4) * x_hi, acc);
    acc = fma((float16)(-dd.y * m_lo), x_lo, fma((float16)(-dd.y * m_hi), x_hi, acc));
#endif
#endif
    return acc;
}

/* The arguments are matvec_wg's (il is always 0 on the GPU paths). */
__kernel __attribute__((reqd_work_group_size(GMV_WG, 1, 1))) void
matvec_gpu(wq_t wq, ws_t ws, int il, int k, int r0, int rows, __global const float *x, int x_off,
           int ldx, __global float *y, int y_off, int ldy, __global const float *bias, int bias_off,
           int flags) {
    __local float xs[XI(GMV_XT)];
    __local float red[GMV_WG];
    (void)il;
    int lid = get_local_id(0), t = lid % GMV_T, c = get_global_id(1);
    int i = get_group_id(0) * GMV_ROWS + lid / GMV_T;
    int r = r0 + min(i, rows - 1); /* rows past the part read its last one, and store nothing */
    __global const float *xc = x + x_off + (size_t)c * ldx;
    float16 acc = 0.0f;
    float tail = 0.0f;
    int nu = k / UNIT;
    for (int t0 = 0; t0 < k; t0 += GMV_XT) {
        int len = min(GMV_XT, k - t0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the last tile's reads are done */
        for (int e = lid; e < len; e += GMV_WG)
            xs[XI(e)] = xc[t0 + e];
        barrier(CLK_LOCAL_MEM_FENCE);
        int u_end = min(nu, (t0 + len) / UNIT);
        for (int u = t0 / UNIT + t; u < u_end; u += GMV_T)
            acc = unit_dot(wq, ws, r, k, u, xs, t0, acc);
#if WT_F16 /* the elements past the last whole unit */
        for (int e = max(nu * UNIT, t0) + t; e < t0 + len; e += GMV_T)
            tail += vload_half((size_t)r * k + e, (__global const half *)wq) * xs[XI(e - t0)];
#endif
    }
    red[lid] = hsum16(acc) + tail;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = GMV_T / 2; s > 0; s >>= 1) {
        if (t < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0 && i < rows)
        store_y(y + y_off + (size_t)c * ldy, i, red[lid], bias, bias_off, flags);
}
