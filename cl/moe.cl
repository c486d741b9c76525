/* Mixture-of-experts kernels (backends/opencl/moe_cl.c; backend.h states the ops): each token's
 * routing, the rows of one expert's tokens gathered for its matmul and its outputs scattered
 * back, and the gated sum of the experts' outputs. One work-item per token (routing) or element
 * (the rest), the same on every kernel path. */

#define MAX_EXPERTS 1024
#define NORM_MIN 6.103515625e-5f /* llama.cpp's floor under the sum of the chosen gates */
#define SOFTMAX 0
#define SIGMOID 1
#define SOFTMAX_CHOSEN 2

/* The largest logit not taken yet (ties: the lower index; NaN never wins over another). */
static int next_expert(__global const float *l, int n_expert, const uint *taken) {
    int best = -1;
    for (int e = 0; e < n_expert; e++)
        if (!(taken[e / 32] >> (e % 32) & 1u) && (best < 0 || l[e] > l[best])) best = e;
    return best;
}

__kernel void moe_route(__global const float *logits, ulong l_off, __global int *ids, ulong ids_off,
                        __global float *w, ulong w_off, int n, int n_expert, int n_used, int gating,
                        int norm, float scale) {
    int t = get_global_id(0);
    if (t >= n) return;
    __global const float *l = logits + l_off + (size_t)t * n_expert;
    __global int *id = ids + ids_off + (size_t)t * n_used;
    __global float *wt = w + w_off + (size_t)t * n_used;
    uint taken[MAX_EXPERTS / 32];
    for (int i = 0; i < (n_expert + 31) / 32; i++)
        taken[i] = 0;
    for (int j = 0; j < n_used; j++) {
        int e = next_expert(l, n_expert, taken);
        id[j] = e;
        taken[e / 32] |= 1u << (e % 32);
    }
    float max = l[id[0]], sum = 0.0f;
    if (gating == SOFTMAX) {
        for (int e = 0; e < n_expert; e++)
            if (l[e] > max) max = l[e];
        for (int e = 0; e < n_expert; e++)
            sum += exp(l[e] - max);
    } else if (gating == SOFTMAX_CHOSEN) {
        for (int j = 0; j < n_used; j++)
            sum += exp(l[id[j]] - max);
    }
    float chosen = 0.0f;
    for (int j = 0; j < n_used; j++) {
        float v = l[id[j]];
        float g = gating == SIGMOID ? 1.0f / (1.0f + exp(-v)) : exp(v - max) / sum;
        wt[j] = g;
        chosen += g;
    }
    float div = norm ? (chosen > NORM_MIN ? chosen : NORM_MIN) : 1.0f;
    float mul = scale != 0.0f ? scale : 1.0f;
    for (int j = 0; j < n_used; j++)
        wt[j] = wt[j] / div * mul;
}

/* out[i][c] = x[rows[i]][c], i < count, c < k: an expert's input rows side by side. */
__kernel void moe_gather(__global const float *x, ulong x_off, __global const int *rows,
                         int rows_off, int k, __global float *out) {
    int c = get_global_id(0), i = get_global_id(1);
    if (c >= k) return;
    out[(size_t)i * k + c] = x[x_off + (size_t)rows[rows_off + i] * k + c];
}

/* y[rows[i]][c] = src[i][c], i < count, c < m: an expert's outputs where their slots are. */
__kernel void moe_scatter(__global const float *src, __global const int *rows, int rows_off, int m,
                          __global float *y, ulong y_off) {
    int c = get_global_id(0), i = get_global_id(1);
    if (c >= m) return;
    y[y_off + (size_t)rows[rows_off + i] * m + c] = src[(size_t)i * m + c];
}

__kernel void moe_sum(__global const float *x, ulong x_off, __global const float *w, ulong w_off,
                      __global float *y, ulong y_off, int n_used, int d, int accumulate) {
    int i = get_global_id(0), t = get_global_id(1);
    if (i >= d) return;
    __global const float *xt = x + x_off + (size_t)t * n_used * d + i;
    __global const float *wt = w + w_off + (size_t)t * n_used;
    float s = 0.0f;
    for (int j = 0; j < n_used; j++)
        s += wt[j] * xt[(size_t)j * d];
    __global float *yt = y + y_off + (size_t)t * d + i;
    *yt = accumulate ? *yt + s : s;
}
