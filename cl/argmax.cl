/* ids[r] = the first index of the maximum of x[r][0..d) (greedy sampling on the device, so only
 * one int per row crosses back to the host). Ties keep the lowest index, as the host sampler does.
 * Variants, chosen by kernel path:
 *   argmax_rows  one work-item per row, no barriers (CPU devices)
 *   argmax_wg    one work-group of OPS_WG items per row, local-memory reduction of
 *                (value, index) pairs (GPUs); exactly n groups run, so it never tests n
 *                (see norm.cl) */

#ifndef OPS_WG
#define OPS_WG 64
#endif

__kernel void argmax_rows(__global const float *x, ulong x_off, __global int *ids, ulong ids_off,
                          int n, int d) {
    int r = get_global_id(0);
    if (r >= n) return;
    __global const float *xr = x + x_off + (size_t)r * d;
    float best = xr[0];
    int best_i = 0;
    for (int c = 1; c < d; c++)
        if (xr[c] > best) {
            best = xr[c];
            best_i = c;
        }
    ids[ids_off + r] = best_i;
}

__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
argmax_wg(__global const float *x, ulong x_off, __global int *ids, ulong ids_off, int n, int d) {
    __local float best_v[OPS_WG];
    __local int best_i[OPS_WG];
    int r = get_group_id(0), lid = get_local_id(0);
    __global const float *xr = x + x_off + (size_t)r * d;
    /* Each item scans its strided columns in increasing order, so strict > keeps its first max. */
    float v = -INFINITY;
    int vi = d;
    for (int c = lid; c < d; c += OPS_WG)
        if (xr[c] > v || vi == d) {
            v = xr[c];
            vi = c;
        }
    best_v[lid] = v;
    best_i[lid] = vi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = OPS_WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float ov = best_v[lid + s];
            int oi = best_i[lid + s];
            if (oi < d &&
                (best_i[lid] == d || ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid]))) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) ids[ids_off + r] = best_i[0];
}
