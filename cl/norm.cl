/* Row normalisations over x[n][d] -> y[n][d] (in place allowed).
 *   rmsnorm    y = x / sqrt(mean(x^2) + eps) * w
 *   layernorm  y = (x - mean) / sqrt(var + eps) * w + b   (variance from a second pass)
 * w and b are optional: has_w / has_b say whether their buffer argument means anything.
 * Variants, chosen by kernel path:
 *   *_rows  one work-item per row, no barriers (CPU devices); rmsnorm_rows is round_q8.clh's
 *           rmsnorm_row, as the CPU kernels that round or fuse the norm compute it, and
 *           layernorm_rows layernorm.clh's layernorm_row, as graph.cl computes it
 *   *_wg    one work-group of OPS_WG items per row, local-memory tree reduction (GPUs)
 * OPS_WG is a power of two set by the host. Both variants take the same arguments; the _wg ones
 * run exactly n groups, so they never test n (PoCL miscompiles an early return before a barrier,
 * even a uniform one). */

#include "common.clh"
#include "round_q8.clh"
#include "layernorm.clh"

/* ---- cpu-rows ---- */

__kernel void rmsnorm_rows(__global const float *x, ulong x_off, __global const float *w,
                           ulong w_off, int has_w, __global float *y, ulong y_off, int n, int d,
                           float eps) {
    int r = get_global_id(0);
    if (r >= n) return;
    rmsnorm_row(x + x_off + (size_t)r * d, d, w + w_off, has_w, y + y_off + (size_t)r * d, eps, 0,
                (__global char *)y, (__global float2 *)y, y, 0);
}

__kernel void layernorm_rows(__global const float *x, ulong x_off, __global const float *w,
                             ulong w_off, int has_w, __global const float *b, ulong b_off,
                             int has_b, __global float *y, ulong y_off, int n, int d, float eps) {
    int r = get_global_id(0);
    if (r >= n) return;
    layernorm_row(x + x_off + (size_t)r * d, d, w + w_off, has_w, b + b_off, has_b,
                  y + y_off + (size_t)r * d, eps);
}

/* ---- gpu-local-reduce / gpu-subgroup ---- */

static float wg_row_sum(__global const float *x, int d, float shift, int square,
                        __local float *scratch) {
    float acc = 0.0f;
    for (int c = get_local_id(0); c < d; c += OPS_WG) {
        float v = x[c] - shift;
        acc += square ? v * v : v;
    }
    return wg_reduce(acc, 0, scratch);
}

__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
rmsnorm_wg(__global const float *x, ulong x_off, __global const float *w, ulong w_off, int has_w,
           __global float *y, ulong y_off, int n, int d, float eps) {
    __local float scratch[OPS_WG];
    int r = get_group_id(0);
    __global const float *xr = x + x_off + (size_t)r * d;
    __global float *yr = y + y_off + (size_t)r * d;
    float inv = 1.0f / sqrt(wg_row_sum(xr, d, 0.0f, 1, scratch) / d + eps);
    for (int c = get_local_id(0); c < d; c += OPS_WG)
        yr[c] = finish_row(xr[c] * inv, c, w + w_off, has_w, w, 0);
}

__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
layernorm_wg(__global const float *x, ulong x_off, __global const float *w, ulong w_off, int has_w,
             __global const float *b, ulong b_off, int has_b, __global float *y, ulong y_off, int n,
             int d, float eps) {
    __local float scratch[OPS_WG];
    int r = get_group_id(0);
    __global const float *xr = x + x_off + (size_t)r * d;
    __global float *yr = y + y_off + (size_t)r * d;
    float mean = wg_row_sum(xr, d, 0.0f, 0, scratch) / d;
    float inv = 1.0f / sqrt(wg_row_sum(xr, d, mean, 1, scratch) / d + eps);
    for (int c = get_local_id(0); c < d; c += OPS_WG)
        yr[c] = finish_row((xr[c] - mean) * inv, c, w + w_off, has_w, b + b_off, has_b);
}
