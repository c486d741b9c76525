/* Activations rounded to 8 bits: the ROUND_Q8 op, whose 8-bit form x_q8 matmuls read, as
 * round_q8.clh states. Rows of k % 32 == 0 elements are whole blocks, so blocks are numbered
 * across the whole tensor.
 *
 * quantize_q8_act is ROUND_Q8 alone. rmsnorm_q8_act and glu_q8_act are an RMSNORM, SWIGLU,
 * GEGLU or SWIGLU_OAI fused with the ROUND_Q8 of its output: one launch instead of two. They
 * compute what norm.cl's and elementwise.cl's kernels do, up to float rounding. */

#include "glu.clh"
#include "round_q8.clh"

/* Global size: the rounding blocks of x (x_off onwards), each span blocks of 32 with one scale
 * (round_span: 1, or QK_SPAN for a K-quant's x, which also writes xo). */
__kernel void quantize_q8_act(__global const float *x, int x_off, __global char *xq,
                              __global float2 *xd, __global float *xf, int want_f, int span,
                              __global int *xo) {
    round_span(x + x_off, get_global_id(0) * span, span, xq, xd, xf, want_f, XO_FOR(span, xo));
}

/* Global size (d / (32 span), n): item (b, r) writes blocks span b .. span b + span - 1 of row r
 * of y = x / sqrt(mean(x^2) + eps) * w (has_w) and rounds them with one scale (round_span, from
 * y as written); each item sums its row's squares itself (rows are short). Global size (1, n):
 * item (0, r) writes all of row r (rmsnorm_row: the same arithmetic), which saves the items of a
 * row summing its squares again where rows are many (CPUs, prefill). */
__kernel void rmsnorm_q8_act(__global const float *x, ulong x_off, __global const float *w,
                             ulong w_off, int has_w, __global float *y, ulong y_off, int d,
                             float eps, __global char *xq, __global float2 *xd, __global float *xf,
                             int want_f, int span, __global int *xo) {
    int b = get_global_id(0), r = get_global_id(1);
    __global const float *xr = x + x_off + (size_t)r * d;
    __global float *yr = y + y_off + (size_t)r * d;
    size_t e = (size_t)r * d; /* xf is written only with want_f */
    xq += e, xd += e / 32, xf += e;
    xo = XO_FOR(span, xo + e / 16);
    if (get_global_size(0) == 1) {
        rmsnorm_row(xr, d, w + w_off, has_w, yr, eps, 0, xq, xd, xf, want_f);
        for (int s = 0; s < d / 32; s += span)
            round_span(yr, s, span, xq, xd, xf, want_f, xo);
        return;
    }
    float inv = inv_rms(xr, d, eps);
    for (size_t c = 4 * (size_t)span * b; c < 4 * (size_t)span * (b + 1); c++) /* in float8s */
        vstore8(has_w ? vload8(c, xr) * inv * vload8(c, w + w_off) : vload8(c, xr) * inv, c, yr);
    round_span(yr, (size_t)span * b, span, xq, xd, xf, want_f, xo);
}

/* Global size: the spans of y (count / (32 span)): y = GLU(a, b, fn) (glu.clh: silu(a) * b,
 * gelu(a) * b, gpt-oss's clamped SwiGLU), each span rounded with one scale (round_span, from y as
 * written). */
__kernel void glu_q8_act(__global const float *a, ulong a_off, __global const float *b, ulong b_off,
                         __global float *y, ulong y_off, int fn, __global char *xq,
                         __global float2 *xd, __global float *xf, int want_f, int span,
                         __global int *xo) {
    size_t i = get_global_id(0) * span;
    y += y_off;
    for (size_t c = 4 * i; c < 4 * (i + span); c++) /* in float8s */
        vstore8(GLU(vload8(c, a + a_off), vload8(c, b + b_off), fn), c, y);
    round_span(y, i, span, xq, xd, xf, want_f, XO_FOR(span, xo));
}
