/* GEMM for prefill: y[c][r] (+)= sum_i x[c][i] * w[r][i] (+ bias[r]) over f32 weights, for
 * r < rows, c < n; row-major x[n][ldx], w[rows][k], y[n][ldy] with element offsets. Quantized
 * and f16 weights arrive here as f32 row chunks staged by matvec.cl's dequant_rows.
 *
 * Variants, chosen by kernel path:
 *   gemm_rows   register-blocked: one work-item computes GM rows x GN columns with float8
 *               accumulators along k and no local memory (cpu-rows). Global size
 *               (ceil(n/GN), ceil(rows/GM)); a work-group walks columns for one row tile so the
 *               GM weight rows stay in L1. The tile loops carry `#pragma unroll`: without it
 *               PoCL kept the accumulators in memory and ran 4-6x slower (measured).
 *   gemm_tiled  TS x TS outputs per work-group, one per item, TS x TS tiles of x and w staged in
 *               local memory (gpu-local-reduce, gpu-subgroup).
 *   bias_fill   y[c][r] = (accumulate ? y[c][r] : 0) + bias[r], before a CLBlast SGEMM with
 *               beta = 1.
 * flags: bit 0 accumulate, bit 1 bias (as in matvec.cl). Edge tiles clamp their loads to the
 * last valid row/column and skip the stores, so no size has to be a multiple of a tile. */

#ifndef GM
#define GM 6
#endif
#ifndef GN
#define GN 2
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

static float hsum8(float8 v) {
    float4 a = v.lo + v.hi;
    float2 b = a.lo + a.hi;
    return b.x + b.y;
}

__kernel void gemm_rows(__global const float *w, int w_off, int k, int rows, int n,
                        __global const float *x, int x_off, int ldx, __global float *y, int y_off,
                        int ldy, __global const float *bias, int bias_off, int flags) {
    int c0 = get_global_id(0) * GN, r0 = get_global_id(1) * GM;
    if (c0 >= n || r0 >= rows) return;
    __global const float *wr[GM], *xc[GN];
    for (int i = 0; i < GM; i++)
        wr[i] = w + w_off + (size_t)min(r0 + i, rows - 1) * k;
    for (int j = 0; j < GN; j++)
        xc[j] = x + x_off + (size_t)min(c0 + j, n - 1) * ldx;
    float8 acc[GM][GN];
    for (int i = 0; i < GM; i++)
        for (int j = 0; j < GN; j++)
            acc[i][j] = 0.0f;
    int e = 0;
    for (; e + 8 <= k; e += 8) {
        float8 xv[GN];
#pragma unroll
        for (int j = 0; j < GN; j++)
            xv[j] = vload8(0, xc[j] + e);
#pragma unroll
        for (int i = 0; i < GM; i++) {
            float8 wv = vload8(0, wr[i] + e);
#pragma unroll
            for (int j = 0; j < GN; j++)
                acc[i][j] = fma(wv, xv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < GM; i++)
        for (int j = 0; j < GN; j++) {
            float s = hsum8(acc[i][j]);
            for (int t = e; t < k; t++)
                s = fma(wr[i][t], xc[j][t], s);
            if (r0 + i < rows && c0 + j < n)
                store_out(y + y_off + (size_t)(c0 + j) * ldy, r0 + i, s, bias, bias_off, flags);
        }
}

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
