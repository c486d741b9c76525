/* Activations rounded to 8 bits per block of 32 (the MATMUL op's x_q8), exactly as
 * clinfer_quantize_q8_act in src/quant.c: d = max |x| / 127, q = round(x / d) through id = 1 / d,
 * halves away from zero; a block with a NaN or an infinity gets d = NaN and q = 0. Built with
 * -cl-fp32-correctly-rounded-divide-sqrt so 1 / d rounds as the host's does.
 *
 * Global size (k / 32, n): item (b, c) rounds block b of row c of x (rows of k elements at
 * x + x_off) into xq[c][b * 32 ..] (char) and xd[c][b] = (d, d * sum q) (float2), and, when
 * want_f is set, the f32 values d * q into xf[c][..] for the kernels that take f32 x. */
__kernel void quantize_q8_act(__global const float *x, int x_off, int k, __global char *xq,
                              __global float2 *xd, __global float *xf, int want_f) {
    int b = get_global_id(0), c = get_global_id(1);
    size_t at = (size_t)c * k + (size_t)b * 32;
    __global const float *xb = x + x_off + at;
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
        amax = fmax(amax, fabs(xb[i]));
        finite = finite && isfinite(xb[i]);
    }
    float d = finite ? amax / 127.0f : NAN, id = finite && d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; i++) {
        char q = finite ? (char)round(xb[i] * id) : 0;
        xq[at + i] = q;
        sum += q;
        if (want_f) xf[at + i] = d * (float)q;
    }
    xd[(size_t)c * (k / 32) + b] = (float2)(d, d * (float)sum);
}
