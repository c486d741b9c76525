/* Row-wise softmax of x[rows][cols] * scale into y (in place allowed), numerically stable (the
 * row maximum is subtracted). mask_offset >= 0 applies a causal mask: in row r, columns
 * c > r + mask_offset count as -inf and come out as 0. mask_offset < 0: no mask.
 * Variants, chosen by kernel path:
 *   softmax_rows  one work-item per row, three passes over the row, no barriers (CPU devices)
 *   softmax_wg    one work-group of OPS_WG items per row, local-memory reductions (GPUs);
 *                 exactly `rows` groups run, so it never tests rows (see norm.cl) */

#include "common.clh"

static int valid_cols(int r, int cols, int mask_offset) {
    return mask_offset >= 0 ? min(cols, r + mask_offset + 1) : cols;
}

__kernel void softmax_rows(__global const float *x, ulong x_off, __global float *y, ulong y_off,
                           int rows, int cols, float scale, int mask_offset) {
    int r = get_global_id(0);
    if (r >= rows) return;
    __global const float *xr = x + x_off + (size_t)r * cols;
    __global float *yr = y + y_off + (size_t)r * cols;
    int valid = valid_cols(r, cols, mask_offset);
    float m = -INFINITY;
    for (int c = 0; c < valid; c++)
        m = fmax(m, xr[c] * scale);
    float sum = 0.0f;
    for (int c = 0; c < valid; c++)
        sum += exp(xr[c] * scale - m);
    float inv = 1.0f / sum;
    for (int c = 0; c < valid; c++)
        yr[c] = exp(xr[c] * scale - m) * inv;
    for (int c = valid; c < cols; c++)
        yr[c] = 0.0f;
}

__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
softmax_wg(__global const float *x, ulong x_off, __global float *y, ulong y_off, int rows, int cols,
           float scale, int mask_offset) {
    __local float scratch[OPS_WG];
    int r = get_group_id(0), lid = get_local_id(0);
    __global const float *xr = x + x_off + (size_t)r * cols;
    __global float *yr = y + y_off + (size_t)r * cols;
    int valid = valid_cols(r, cols, mask_offset);
    float m = -INFINITY;
    for (int c = lid; c < valid; c += OPS_WG)
        m = fmax(m, xr[c] * scale);
    m = wg_reduce(m, 1, scratch);
    float sum = 0.0f;
    for (int c = lid; c < valid; c += OPS_WG)
        sum += exp(xr[c] * scale - m);
    float inv = 1.0f / wg_reduce(sum, 0, scratch);
    for (int c = lid; c < cols; c += OPS_WG)
        yr[c] = c < valid ? exp(xr[c] * scale - m) * inv : 0.0f;
}
