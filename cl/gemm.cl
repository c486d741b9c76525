/* GEMM for prefill: y[c][r] (+)= sum_i x[c][i] * w[r][i] (+ bias[r]) for r < rows, c < n;
 * row-major x[n][ldx], y[n][ldy] with element offsets.
 *
 * Variants, chosen by kernel path and n:
 *   gemm_panels(_f16)   cpu-rows, every GEMM (more than MATVEC_MAX_N columns; panels beat
 *               per-row dot products from 9 columns: 1B F16 pp9 1.3x, pp16 1.15x) over weight
 *               rows (f32, or f16; quantized types arrive as f32 rows staged by matvec.cl's
 *               dequant_rows): an outer product per element of k over panels of PM rows. A
 *               work-item takes PR panels and PN * PT columns. Per block of KC elements of k it
 *               converts its panels' block to f32 in panel order (k-major: element e's PM rows
 *               side by side) in private memory once (panel_fill: f16 by vcvtph2ps) for
 *               all its tiles, then per tile of PN columns and element of k loads one PM-row
 *               vector of each panel and broadcasts PN values of x into PM x PN accumulators
 *               per panel (AVX2: 2 x PN float8, 12 of its 16 registers at 16 x 6; AVX-512: two
 *               panels side by side, PSIDE below, 2 x PN float16), where a dot product along k
 *               (one float8 per row and column) needs a vector load per row and per column.
 *               The accumulators wait in private memory between blocks. Global size
 *               (ceil(rows / (PM * PR)), ceil(n / (PN * PT))). PoCL's AVX-512 inner loop: 2
 *               vmovaps of the block and 6 vbroadcastss feeding 12 vfmadd231ps zmm. The panels
 *               were once packed by a kernel of their own, which read and wrote the whole
 *               weight again per GEMM (a fifth of a 1B F16 pp64).
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
#define PT 32
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

/* Elements kb .. ke - 1 of weight rows r0 .. r0 + PM - 1 (f32, or f16 bits) as f32 in panel
 * order: element e's 16 rows at wf[(e - kb) * PM]. A full panel goes 8 elements at a time, each
 * 16 x 8 block transposed in registers by transpose8.clh as two halves of 8 rows, since a vector
 * gathered lane by lane compiles to extracts and stack stores. A panel past the last row reads
 * that row again (its outputs are never stored), and the tail of k goes element by element. */
#define PANEL_FILL(name, T, LOAD8, ELEM)                                                           \
    static void name(__global const T *w, int k, int r0, int rows, int kb, int ke, float *wf) {    \
        int e = kb;                                                                                \
        if (r0 + PM <= rows) {                                                                     \
            __global const T *src = w + (size_t)r0 * k;                                            \
            for (; e + 8 <= ke; e += 8) {                                                          \
                uint8 v[PM], lo[8], hi[8];                                                         \
                _Pragma("unroll") for (int i = 0; i < PM; i++) v[i] =                              \
                    as_uint8(LOAD8(src + (size_t)i * k + e));                                      \
                transpose8(v, lo);                                                                 \
                transpose8(v + 8, hi);                                                             \
                _Pragma("unroll") for (int j = 0; j < 8; j++)                                      \
                    vstore16(as_float16((uint16)(lo[j], hi[j])), e - kb + j, wf);                  \
            }                                                                                      \
        }                                                                                          \
        for (; e < ke; e++)                                                                        \
            for (int i = 0; i < PM; i++)                                                           \
                wf[(e - kb) * PM + i] = ELEM(w + (size_t)min(r0 + i, rows - 1) * k, e);            \
    }
#define LOAD8_F32(p) vload8(0, p)
#define LOAD8_F16(p) vload_half8(0, (__global const half *)(p))
#define ELEM_F32(row, e) (row)[e]
#define ELEM_F16(row, e) vload_half(e, (__global const half *)(row))
PANEL_FILL(panel_fill, float, LOAD8_F32, ELEM_F32)
PANEL_FILL(panel_fill_f16, ushort, LOAD8_F16, ELEM_F16)

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

#define GEMM_PANELS(name, T, FILL)                                                                 \
    __kernel void name(__global const T *w, int w_off, int k, int rows, int n,                     \
                       __global const float *x, int x_off, int ldx, __global float *y, int y_off,  \
                       int ldy, __global const float *bias, int bias_off, int flags) {             \
        int c0 = get_global_id(1) * (PN * PT), p0 = get_global_id(0) * PR;                         \
        int panels = (rows + PM - 1) / PM;                                                         \
        if (c0 >= n) return;                                                                       \
        int tiles = min(PT, (n - c0 + PN - 1) / PN);                                               \
        for (int q0 = p0; q0 < min(p0 + PR, panels); q0 += PSIDE) {                                \
            floatF part[PT][PSIDE][PH][PN];                                                        \
            float wf[PSIDE][KC * PM] __attribute__((aligned(64))); /* the block as f32 */          \
            for (int kb = 0; kb < k; kb += KC) {                                                   \
                int ke = min(k, kb + KC);                                                          \
                for (int s = 0; s < PSIDE; s++) /* past the last panel: the last again */          \
                    FILL(w + w_off, k, min(q0 + s, panels - 1) * PM, rows, kb, ke, wf[s]);         \
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
GEMM_PANELS(gemm_panels, float, panel_fill)
GEMM_PANELS(gemm_panels_f16, ushort, panel_fill_f16)

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
