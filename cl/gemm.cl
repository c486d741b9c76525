/* GEMM for prefill: y[c][r] (+)= sum_i x[c][i] * w[r][i] (+ bias[r]) for r < rows, c < n;
 * row-major x[n][ldx], y[n][ldy] with element offsets.
 *
 * Variants, chosen by kernel path and n:
 *   pack_panels(_f16)   cpu-rows, every GEMM (more than MATVEC_MAX_N columns; once packing was
 *               fast, panels beat per-row dot products from 9 columns: 1B F16 pp9 1.3x, pp16
 *               1.15x): copy weight rows (f32, or f16 kept as f16; quantized types arrive as f32
 *               rows staged by matvec.cl's dequant_rows) into panels of PM rows, k-major:
 *               element e of rows 16p .. 16p + 15 at p[(p * k + e) * PM + i], rows past the last
 *               zero. Item (g, p) moves elements 8g .. 8g + 7 of panel p (transpose8.clh).
 *   gemm_panels(_f16)   cpu-rows, over those panels: an outer product per element of k. A
 *               work-item takes PR panels and PN * PT columns. Per block of KC elements of k it
 *               converts its panels' block to f32 in private memory once (f16: vcvtph2ps) for
 *               all its tiles, then per tile of PN columns and element of k loads one PM-row
 *               vector of each panel and broadcasts PN values of x into PM x PN accumulators
 *               per panel (AVX2: 2 x PN float8, 12 of its 16 registers at 16 x 6; AVX-512: two
 *               panels side by side, PSIDE below, 2 x PN float16), where a dot product along k
 *               (one float8 per row and column) needs a vector load per row and per column.
 *               The accumulators wait in private memory between blocks. Global size
 *               (ceil(rows / (PM * PR)), ceil(n / (PN * PT))). PoCL's AVX-512 inner loop: 2
 *               vmovaps of the block and 6 vbroadcastss feeding 12 vfmadd231ps zmm.
 *   gemm_tiled  TS x TS outputs per work-group, one per item, TS x TS tiles of x and w staged in
 *               local memory (gpu-local-reduce, gpu-subgroup), over f32 rows (dequant_rows
 *               stages the other types).
 *   bias_fill   y[c][r] = (accumulate ? y[c][r] : 0) + bias[r], before a CLBlast SGEMM with
 *               beta = 1.
 * flags: bit 0 accumulate, bit 1 bias (as in matvec.cl). Edge tiles clamp their loads to the
 * last valid row/column and skip the stores, so no size has to be a multiple of a tile. The
 * tile loops carry `#pragma unroll`: without it PoCL kept accumulator arrays in memory and ran
 * 4-6x slower (measured on the former gemm_rows). */

#include "f32_lanes.clh"
#include "transpose8.clh"

#define PM 16 /* rows per panel: one float16 */
#ifndef PN
#define PN 6
#endif
#ifndef PT
#define PT 8
#endif
#ifndef PR
#define PR 2
#endif
#ifndef KC
#define KC 256
#endif
#ifndef TS
#define TS 16
#endif

#define F_ACCUMULATE 1
#define F_BIAS 2

static void store_out(__global float *y, int r, float s, __global const float *bias, int bias_off,
                      int flags) {
    if (flags & F_BIAS) s += bias[bias_off + r];
    if (flags & F_ACCUMULATE) s += y[r];
    y[r] = s;
}

/* Packing a 16 x 8 block of rows into panel order by transpose8.clh: a vector gathered lane by
 * lane from all 16 rows' vectors compiled to extracts and stack stores (packing took 28% of a 1B
 * F16 pp64), and in private arrays a vector written in halves and read whole stalled. */

/* Panel elements e0 .. e0 + 7 (dst) of 16 rows' f32 (v[i]: row i's): rows 0..7 and 8..15 by
 * halves. */
static void panel_block_f32(const float8 *v, __global float *dst) {
    uint8 u[16], lo[8], hi[8];
#pragma unroll
    for (int i = 0; i < 16; i++)
        u[i] = as_uint8(v[i]);
    transpose8(u, lo);
    transpose8(u + 8, hi);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        ((__global uint8 *)dst)[2 * e] = lo[e];
        ((__global uint8 *)dst)[2 * e + 1] = hi[e];
    }
}

/* The same for f16 bits: rows 2i and 2i + 1 zipped into words first, so that one word
 * transpose moves both. */
static void panel_block_f16(const ushort8 *v, __global ushort *dst) {
    uint8 z[8], out[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        ushort8 a = v[2 * i], b = v[2 * i + 1];
        z[i] = as_uint8((ushort16)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3, a.s4, b.s4, a.s5,
                                   b.s5, a.s6, b.s6, a.s7, b.s7));
    }
    transpose8(z, out);
#pragma unroll
    for (int e = 0; e < 8; e++)
        ((__global uint8 *)dst)[e] = out[e];
}

/* PACK_PANELS(name, T, T8, BLOCK): rows [0, rows) of w (element type T, offset w_off, k per row)
 * into panels p. */
#define PACK_PANELS(name, T, T8, BLOCK)                                                            \
    __kernel void name(__global const T *w, int w_off, int k, int rows, __global T *p) {           \
        int e0 = get_global_id(0) * 8, r0 = get_global_id(1) * PM;                                 \
        __global const T *src = w + w_off + (size_t)r0 * k;                                        \
        __global T *dst = p + (size_t)r0 * k + (size_t)e0 * PM;                                    \
        if (e0 + 8 <= k && r0 + PM <= rows) {                                                      \
            T8 v[PM];                                                                              \
            _Pragma("unroll") for (int i = 0; i < PM; i++) v[i] =                                  \
                vload8(0, src + (size_t)i * k + e0);                                               \
            BLOCK(v, dst);                                                                         \
            return;                                                                                \
        }                                                                                          \
        for (int e = 0; e < 8 && e0 + e < k; e++) /* the last panel, the tail of k */              \
            for (int i = 0; i < PM; i++)                                                           \
                dst[e * PM + i] = r0 + i < rows ? src[(size_t)i * k + e0 + e] : (T)0;              \
    }
PACK_PANELS(pack_panels, float, float8, panel_block_f32)
PACK_PANELS(pack_panels_f16, ushort, ushort8, panel_block_f16) /* f16 bits, moved unconverted */

/* The PM rows r0 .. of column y (rows of them valid) from lo and hi. */
static void store_panel(__global float *y, int r0, int rows, float8 lo, float8 hi,
                        __global const float *bias, int bias_off, int flags) {
    if (r0 + PM <= rows) {
        if (flags & F_BIAS) {
            lo += vload8(0, bias + bias_off + r0);
            hi += vload8(1, bias + bias_off + r0);
        }
        if (flags & F_ACCUMULATE) {
            lo += vload8(0, y + r0);
            hi += vload8(1, y + r0);
        }
        vstore8(lo, 0, y + r0);
        vstore8(hi, 1, y + r0);
        return;
    }
    float v[PM];
    vstore8(lo, 0, v);
    vstore8(hi, 1, v);
    for (int i = 0; r0 + i < rows; i++)
        store_out(y, r0 + i, v[i], bias, bias_off, flags);
}

/* gemm_panels' accumulators: PH vectors floatF (f32_lanes.clh) per PM rows and column: with
 * AVX-512 the 16 rows in one float16, one FMA instruction; on AVX2 two float8 halves, 12 of its
 * 16 registers at 16 x 6. PV_LO / PV_HI: rows 0..7 and 8..15 of column j. */
#define PH (16 / F32_LANES)
#if F32_LANES == 16
#define PV_PART(v, h) (v)
#define PV_LO(a, j) (a)[0][j].lo
#define PV_HI(a, j) (a)[0][j].hi
#else
#define PV_PART(v, h) ((h) ? (v).hi : (v).lo)
#define PV_LO(a, j) (a)[0][j]
#define PV_HI(a, j) (a)[1][j]
#endif

/* Panels a work-item runs side by side, of the PR it takes: each x value loaded then serves the
 * rows of all of them. x comes from L2 or further for every panel, and one panel gives it only
 * 32 flops per 4 bytes (1B F16 pp256 took 1.15-1.7x the CPU time, alternated). AVX-512's 32
 * registers hold two panels' 2 x PN float16 accumulators, AVX2's 16 one panel's 2 x PN float8. */
#if F32_LANES == 16
#define PSIDE 2
#else
#define PSIDE 1
#endif

#define LOAD16_F32(p) vload16(0, p)
#define LOAD16_F16(p) vload_half16(0, (__global const half *)(p))
#define GEMM_PANELS(name, T, LOAD16)                                                               \
    __kernel void name(__global const T *p, int k, int rows, int n, __global const float *x,       \
                       int x_off, int ldx, __global float *y, int y_off, int ldy,                  \
                       __global const float *bias, int bias_off, int flags) {                      \
        int c0 = get_global_id(1) * (PN * PT), p0 = get_global_id(0) * PR;                         \
        int panels = (rows + PM - 1) / PM;                                                         \
        if (c0 >= n) return;                                                                       \
        int tiles = min(PT, (n - c0 + PN - 1) / PN);                                               \
        for (int q0 = p0; q0 < min(p0 + PR, panels); q0 += PSIDE) {                                \
            floatF part[PT][PSIDE][PH][PN];                                                        \
            float wf[PSIDE][KC * PM] __attribute__((aligned(64))); /* the block as f32 */          \
            for (int kb = 0; kb < k; kb += KC) {                                                   \
                int ke = min(k, kb + KC);                                                          \
                for (int s = 0; s < PSIDE; s++) { /* past the last panel: the last again */        \
                    __global const T *pw = p + (size_t)min(q0 + s, panels - 1) * PM * k;           \
                    for (int e = kb; e < ke; e++)                                                  \
                        vstore16(LOAD16(pw + (size_t)e * PM), e - kb, wf[s]);                      \
                }                                                                                  \
                for (int t = 0; t < tiles; t++) {                                                  \
                    __global const float *xc[PN];                                                  \
                    floatF acc[PSIDE][PH][PN];                                                     \
                    _Pragma("unroll") for (int j = 0; j < PN; j++) {                               \
                        xc[j] = x + x_off + (size_t)min(c0 + t * PN + j, n - 1) * ldx + kb;        \
                        _Pragma("unroll") for (int s = 0; s < PSIDE; s++)                          \
                            _Pragma("unroll") for (int h = 0; h < PH; h++) acc[s][h][j] =          \
                                kb ? part[t][s][h][j] : 0.0f;                                      \
                    }                                                                              \
                    for (int e = 0; e < ke - kb; e++) {                                            \
                        float16 wv[PSIDE];                                                         \
                        _Pragma("unroll") for (int s = 0; s < PSIDE; s++) wv[s] =                  \
                            vload16(e, wf[s]);                                                     \
                        _Pragma("unroll") for (int j = 0; j < PN; j++) {                           \
                            floatF xv = xc[j][e];                                                  \
                            _Pragma("unroll") for (int s = 0; s < PSIDE; s++)                      \
                                _Pragma("unroll") for (int h = 0; h < PH; h++) acc[s][h][j] =      \
                                    fma(PV_PART(wv[s], h), xv, acc[s][h][j]);                      \
                        }                                                                          \
                    }                                                                              \
                    _Pragma("unroll") for (int j = 0; j < PN; j++)                                 \
                        _Pragma("unroll") for (int s = 0; s < PSIDE; s++)                          \
                            _Pragma("unroll") for (int h = 0; h < PH; h++) part[t][s][h][j] =      \
                                acc[s][h][j];                                                      \
                }                                                                                  \
            }                                                                                      \
            for (int s = 0; s < PSIDE && q0 + s < panels; s++)                                     \
                for (int t = 0; t < tiles; t++)                                                    \
                    for (int j = 0; j < PN && c0 + t * PN + j < n; j++)                            \
                        store_panel(y + y_off + (size_t)(c0 + t * PN + j) * ldy, (q0 + s) * PM,    \
                                    rows, PV_LO(part[t][s], j), PV_HI(part[t][s], j), bias,        \
                                    bias_off, flags);                                              \
        }                                                                                          \
    }
GEMM_PANELS(gemm_panels, float, LOAD16_F32)
GEMM_PANELS(gemm_panels_f16, ushort, LOAD16_F16)

__kernel __attribute__((reqd_work_group_size(TS, TS, 1))) void
gemm_tiled(__global const float *w, int w_off, int k, int rows, int n, __global const float *x,
           int x_off, int ldx, __global float *y, int y_off, int ldy, __global const float *bias,
           int bias_off, int flags) {
    __local float wt[TS][TS + 1], xt[TS][TS + 1];
    int lr = get_local_id(0), lc = get_local_id(1);
    int r = get_group_id(0) * TS + lr, c = get_group_id(1) * TS + lc;
    /* Loads: item (lr, lc) fetches element lc of row lr of the w tile and of column lr of the x
     * tile, so consecutive items read consecutive addresses. */
    int wrow = min((int)get_group_id(0) * TS + lr, rows - 1);
    int xcol = min((int)get_group_id(1) * TS + lr, n - 1);
    float s = 0.0f;
    for (int e0 = 0; e0 < k; e0 += TS) {
        int e = e0 + lc;
        wt[lr][lc] = e < k ? w[w_off + (size_t)wrow * k + e] : 0.0f;
        xt[lr][lc] = e < k ? x[x_off + (size_t)xcol * ldx + e] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < TS; t++)
            s = fma(wt[lr][t], xt[lc][t], s);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < rows && c < n) store_out(y + y_off + (size_t)c * ldy, r, s, bias, bias_off, flags);
}

__kernel void bias_fill(__global float *y, int y_off, int ldy, int rows, __global const float *bias,
                        int bias_off, int flags) {
    int r = get_global_id(0), c = get_global_id(1);
    if (r >= rows) return;
    __global float *yc = y + y_off + (size_t)c * ldy;
    float s = (flags & F_ACCUMULATE) ? yc[r] : 0.0f;
    if (flags & F_BIAS) s += bias[bias_off + r];
    yc[r] = s;
}
