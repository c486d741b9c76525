/* Roofline probes for `clinfer bench-ops`: what the device can do at best, measured in the same
 * run as the kernels it is compared with.
 *   stream_sum  read bandwidth: each work-item sums its own contiguous chunk of per_item floats
 *               (a multiple of 64) with float16 loads into four accumulators, the access
 *               pattern of matvec_rows; one float written per item
 *   fma_peak    f32 FMA rate: CHAINS independent float16 fma chains per item, iters deep
 *               (2 * 16 * CHAINS * iters flops per item), enough to hide FMA latency */

#define CHAINS 6

__kernel void stream_sum(__global const float *x, int per_item, __global float *out) {
    size_t i = get_global_id(0);
    __global const float *p = x + i * (size_t)per_item;
    float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int e = 0; e < per_item; e += 64) {
        a0 += vload16(0, p + e);
        a1 += vload16(1, p + e);
        a2 += vload16(2, p + e);
        a3 += vload16(3, p + e);
    }
    float16 s = (a0 + a1) + (a2 + a3);
    float8 h = s.lo + s.hi;
    float4 q = h.lo + h.hi;
    out[i] = q.x + q.y + q.z + q.w;
}

__kernel void fma_peak(__global float *out, int iters, float a, float b) {
    float16 v[CHAINS]; /* unrolled loops keep the chains in registers (PoCL does not by itself) */
#pragma unroll
    for (int c = 0; c < CHAINS; c++)
        v[c] = (float16)((float)get_global_id(0) + (float)c);
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++)
            v[c] = fma(v[c], (float16)a, (float16)b);
    float16 s = v[0];
#pragma unroll
    for (int c = 1; c < CHAINS; c++)
        s += v[c];
    out[get_global_id(0)] = s.s0 + s.s5 + s.sa + s.sf;
}
