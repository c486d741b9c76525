/* The matvec kernels (decode: y = W x for a few columns) and row dequantisation (embedding
 * gather, f32 staging of quantized weights for GEMM), over the weight types of weights.clh; the
 * program is built once per type with its -DWT_ define.
 *
 * The matvec kernels compute the part's rows r0 .. r0 + rows - 1 (a weight may hold several
 * matrices), output i = row r0 + i (x[c][k] at x + x_off + c*ldx, y[c][i] at y + y_off + c*ldy + i,
 * bias[bias_off + i]; c = get_global_id(1)):
 *   matvec_rows    one work-item per row, two float16 accumulators, no local memory or barriers
 *                  (cpu-rows: PoCL vectorises the float16 arithmetic)
 *   matvec_rows_norm  the same, then the RMSNORM of y (the op after it), in one launch
 *   matvec_rows_n  the same for 2 .. MV_MAX_N columns at once (x[c] for c < n, one launch
 *                  with global size (rows, 1)), so W is read once
 *   matvec_wg      one work-group of MV_WG items per row, blocks strided over the items
 *                  (elements, for Q8_0/Q4_0/Q4_1: lane_value), local-memory tree reduction
 *                  (gpu-local-reduce, gpu-subgroup)
 *   matvec_q8      quantized weights against 8-bit activations, AVX2 hosts only (see below)
 *   matvec_q8_il   the same over rows interleaved by 16, 16 rows per work-item (AVX2 hosts)
 *   matvec_il_n    f32 x over rows interleaved by 16 (Q8_0, Q4_0, Q4_1), a group of 16 rows
 *                  and up to ILF_COLS columns per work-item (a decode step, or a batch of them)
 *   gemm_q8        matvec_q8 as a GEMM (prefill, batches): GQ_M rows x GQ_N columns per
 *                  work-item
 *   stage_kq, gemm_kq  the K-quants' prefill GEMM: rows staged 16 at a time as bytes,
 *                  then 16 rows x IL_COLS columns per work-item (cpu_q8_k.clh's kq_rec)
 *   dequant_rows   out[i][0..k) = W[row(i)] for row(i) = ids[i] (embedding) or first + i;
 *                  rows outside this part are left alone, ids outside [0, m) give zeros
 * flags and il as in weights.clh. */

#ifndef MV_WG
#define MV_WG 64
#endif
#ifndef MV_MAX_N
#define MV_MAX_N 8
#endif

#include "f32_lanes.clh"
#include "round_q8.clh"
#include "transpose8.clh"
#include "weights.clh"
#include "cpu_weights.clh"

__kernel void matvec_rows(wq_t wq, ws_t ws, int il, int k, int r0, int rows,
                          __global const float *x, int x_off, int ldx, __global float *y, int y_off,
                          int ldy, __global const float *bias, int bias_off, int flags) {
    int i = get_global_id(0), c = get_global_id(1);
    if (i >= rows) return;
    float s = row_dot(wq, ws, il, r0 + i, k, x + x_off + (size_t)c * ldx);
    store_y(y + y_off + (size_t)c * ldy, i, s, bias, bias_off, flags);
}

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
    rmsnorm_row(y + y_off, rows, nw + nw_off, has_nw, ny + ny_off, eps, 0, (__global char *)ny,
                (__global float2 *)ny, ny, 0);
}

/* 2 .. MV_MAX_N columns: each weight block is decoded once for all of them; the per-column
 * accumulators live in a private array (L1 on CPUs) instead of re-reading W per column. */
__kernel void matvec_rows_n(wq_t wq, ws_t ws, int il, int k, int r0, int rows,
                            __global const float *x, int x_off, int ldx, __global float *y,
                            int y_off, int ldy, __global const float *bias, int bias_off, int flags,
                            int n) {
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

#if WT_Q8_0 || WT_Q4_0 || WT_Q4_1
/* Work-item (g, t) takes the rows of group 16g of the part that lie in [r0, r0 + rows) and
 * columns ILF_COLS t onwards (up to n). Global size (the groups that hold some of the rows,
 * column tiles). */
__kernel void matvec_il_n(wq_t wq, ws_t ws, int k, int r0, int rows, __global const float *x,
                          int x_off, int ldx, __global float *y, int y_off, int ldy,
                          __global const float *bias, int bias_off, int flags, int n) {
    int g = r0 / 16 + get_global_id(0), c0 = ILF_COLS * get_global_id(1);
    if (16 * g >= r0 + rows || c0 >= n) return;
    il_f32_cols(wq, ws, k, g, r0, rows, c0, min(c0 + ILF_COLS, n), x + x_off, ldx, y + y_off, ldy,
                bias, bias_off, flags);
}
#endif

#if MV_WG < 1 || (MV_WG & (MV_WG - 1))
#error "MV_WG must be a power of two: matvec_wg's reduction halves it"
#endif

#if WT_Q8_0 || WT_Q4_0 || WT_Q4_1
/* Element e of row r's block b, dequantized, for matvec_wg over the 32-element types: there a
 * work-item takes one element at a time, so neighbouring items read neighbouring floats of x and
 * bytes of the block. With a whole block per item (blk_dot), the items of a warp read x 128
 * bytes apart, 32 cache lines per load; an H200 then read every type at the same rate per
 * element, whatever its bytes (Q4_0 146 GB/s, F16 640: docs/PERFORMANCE.md). */
INLINE float lane_value(wq_t wq, ws_t ws, int il, int r, int nb, int b, int e) {
    __global const uint *p = (__global const uint *)wq;
#if WT_Q8_0 /* byte e % 4 of word e / 4, signed */
    uint w = p[word_at(il, r, nb, b, 8, e / 4)];
    return (float)(as_int(w << (24 - 8 * (e % 4))) >> 24) * scale_at(ws, il, r, nb, b, 1, 0);
#else /* byte e % 16 (word e % 16 / 4): its low nibble below element 16, its high one from it */
    uint w = p[word_at(il, r, nb, b, 4, e % 16 / 4)];
    int q = (int)(w >> (8 * (e % 4) + 4 * (e / 16))) & 15;
#if WT_Q4_0
    return (float)(q - 8) * scale_at(ws, il, r, nb, b, 1, 0);
#else
    return fma((float)q, scale_at(ws, il, r, nb, b, 2, 0), scale_at(ws, il, r, nb, b, 2, 1));
#endif
#endif
}
#define LANE_DOT 1
#endif
__kernel __attribute__((reqd_work_group_size(MV_WG, 1, 1))) void
matvec_wg(wq_t wq, ws_t ws, int il, int k, int r0, int rows, __global const float *x, int x_off,
          int ldx, __global float *y, int y_off, int ldy, __global const float *bias, int bias_off,
          int flags) {
    __local float red[MV_WG];
    int i = get_group_id(0), r = r0 + i, c = get_global_id(1), lid = get_local_id(0);
    __global const float *xc = x + x_off + (size_t)c * ldx;
#ifdef LANE_DOT
    float acc = 0.0f;
    for (int e = lid; e < k; e += MV_WG)
        acc = fma(lane_value(wq, ws, il, r, k / 32, e / 32, e % 32), xc[e], acc);
    red[lid] = acc;
#else
    float16 acc = 0.0f;
    for (int b = lid; b < k / BLK; b += MV_WG)
        acc = blk_dot(wq, ws, il, r, k, b, xc, acc);
    red[lid] = hsum16(acc) + tail_dot(wq, r, k, lid, MV_WG, xc);
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = MV_WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0 && i < rows)
        store_y(y + y_off + (size_t)c * ldy, i, red[0], bias, bias_off, flags);
}

#ifdef Q8_DOTS
/* One work-item per (output row, column): global size (rows rounded up, n). xo: x's group
 * offsets (round_q8.clh), read for Q6_K only, as in gemm_q8. */
__kernel void matvec_q8(wq_t wq, ws_t ws, int k, int r0, int rows, __global const char *xq,
                        __global const float2 *xd, __global float *y, int y_off, int ldy,
                        __global const float *bias, int bias_off, int flags,
                        __global const int *xo) {
    int i = get_global_id(0), c = get_global_id(1);
    if (i >= rows) return;
    float s = q8_row_dot(wq, ws, k, r0 + i, xq + (size_t)c * k, xd + (size_t)c * (k / 32),
                         xo + (size_t)c * (k / 16));
    store_y(y + y_off + (size_t)c * ldy, i, s, bias, bias_off, flags);
}
/* GEMM over 8-bit x (prefill, batches): work-item (g, t) computes GQ_M rows from output row
 * GQ_M g and GQ_N columns from GQ_N t (q8_tile), global size (ceil(rows / GQ_M), ceil(n /
 * GQ_N)); a work-group walks the column tiles of one row tile, whose weights stay in L1. */
__kernel void gemm_q8(wq_t wq, ws_t ws, int k, int r0, int rows, __global const char *xq,
                      __global const float2 *xd, __global float *y, int y_off, int ldy,
                      __global const float *bias, int bias_off, int flags,
                      __global const int *xo, int n) {
    int c0 = get_global_id(1) * GQ_N, i0 = get_global_id(0) * GQ_M;
    if (c0 >= n || i0 >= rows) return;
    q8_tile(wq, ws, k, r0, rows, i0, c0, n, xq, xd, xo, y + y_off, ldy, bias, bias_off, flags);
}
#endif

#ifdef KQ_STAGED
/* Rows [r0, r0 + rows) of the part staged for gemm_kq: global size (k / 256 super-blocks, groups
 * of 16 rows), item (b, g) writes record g * (k / 256) + b of rec. Super-blocks first: PoCL runs
 * items in that order, so each row is read front to back (with groups first, the reads of the
 * weights stalled for 45% of pp64's staging time). */
__kernel void stage_kq(wq_t wq, ws_t ws, int k, int r0, int rows, __global kq_rec *rec) {
    int b = get_global_id(0), g = get_global_id(1), nb = k / 256;
    kq_stage(wq, ws, nb, r0, rows, g, b, rec + (size_t)g * nb + b);
}

/* The staged rows (rows of them) against n columns of 8-bit x: global size (records / KQ_RECS,
 * n / IL_COLS, both rounded up), work-item (g, t) takes records KQ_RECS g .. KQ_RECS g + KQ_RECS -
 * 1, KQ_SIDE at a time (kq_rows), and columns IL_COLS t onwards. */
__kernel void gemm_kq(__global const kq_rec *rec, int k, int rows, __global const char *xq,
                      __global const float2 *xd, __global const int *xo, __global float *y,
                      int y_off, int ldy, __global const float *bias, int bias_off, int flags,
                      int n) {
    int g0 = KQ_RECS * get_global_id(0), c0 = IL_COLS * get_global_id(1);
    if (16 * g0 >= rows || c0 >= n) return;
    int end = min(c0 + IL_COLS, n);
    for (int g = g0; g < g0 + KQ_RECS && 16 * g < rows; g += KQ_SIDE) {
        int c = c0;
#define KQ_ROWS(c, nc)                                                                             \
    kq_rows(rec, k, rows, g, c, nc, xq, xd, xo, y, y_off, ldy, bias, bias_off, flags)
        IL_WALK_COLS(c, end, KQ_ROWS);
    }
}
#endif

#ifdef IL_DOTS
/* Global size (groups of 16 rows that hold some of [r0, r0 + rows), columns n / IL_COLS
 * rounded up): work-item (g, t) takes columns IL_COLS t onwards (IL_WALK_COLS). */
__kernel void matvec_q8_il(wq_t wq, ws_t ws, int k, int r0, int rows, __global const char *xq,
                           __global const float2 *xd, __global float *y, int y_off, int ldy,
                           __global const float *bias, int bias_off, int flags, int n) {
    int g = r0 / 16 + get_global_id(0), c = IL_COLS * get_global_id(1);
    if (16 * g >= r0 + rows || c >= n) return;
    int end = min(c + IL_COLS, n);
#define IL_ROWS(c, nc)                                                                             \
    il_rows(wq, ws, k, r0, rows, g, c, nc, xq, xd, y, y_off, ldy, bias, bias_off, flags)
    IL_WALK_COLS(c, end, IL_ROWS);
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
                                int has_nw, __global float *ny, ulong ny_off, float eps, int want_q,
                                __global char *aq, __global float2 *ad, __global float *af,
                                int want_f) {
    int g = get_global_id(0);
    if (16 * g < rows)
        il_rows(wq, ws, k, 0, rows, g, 0, 1, xq, xd, y, y_off, rows, bias, bias_off, flags);
    if (atomic_inc(done) != (int)get_global_size(0) - 1) return;
    *done = 0;
    rmsnorm_row(y + y_off, rows, nw + nw_off, has_nw, ny + ny_off, eps, want_q, aq, ad, af, want_f);
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
    if (row >= row0 && row < row0 + rows) dequant_block(wq, ws, il, row - row0, k, b, o);
}
