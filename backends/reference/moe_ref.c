/* The mixture-of-experts ops on host pointers (backend.h's MOE_ROUTE, MATMUL_ID, MOE_SUM), as
 * plainly as they are stated there: the oracle of the OpenCL kernels (cl/moe.cl). */
#include <math.h>
#include <string.h>

#include "reference.h"

/* llama.cpp's floor under the sum of the chosen gates it divides by */
#define MOE_NORM_MIN 6.103515625e-5f

/* The index of the largest logit not yet taken (ties: the lower index; NaN never wins). */
static int next_expert(const float *logits, int n_expert, const unsigned char *taken) {
    int best = -1;
    for (int e = 0; e < n_expert; e++)
        if (!taken[e] && (best < 0 || logits[e] > logits[best])) best = e;
    return best;
}

void ref_moe_route(const float *logits, int32_t *ids, float *weights, int n, int n_expert,
                   int n_used, int gating, bool norm, float scale) {
    unsigned char taken[CLINFER_MOE_MAX_EXPERTS];
    for (int t = 0; t < n; t++) {
        const float *l = logits + (size_t)t * n_expert;
        int32_t *id = ids + (size_t)t * n_used;
        float *w = weights + (size_t)t * n_used;
        memset(taken, 0, (size_t)n_expert);
        for (int j = 0; j < n_used; j++) {
            id[j] = next_expert(l, n_expert, taken);
            taken[id[j]] = 1;
        }
        /* softmax over all experts: their max and sum; over the chosen: the first is the max */
        float max = l[id[0]], sum = 0.0f;
        if (gating == CLINFER_MOE_SOFTMAX) {
            for (int e = 0; e < n_expert; e++)
                if (l[e] > max) max = l[e];
            for (int e = 0; e < n_expert; e++)
                sum += expf(l[e] - max);
        } else if (gating == CLINFER_MOE_SOFTMAX_CHOSEN) {
            for (int j = 0; j < n_used; j++)
                sum += expf(l[id[j]] - max);
        }
        float chosen = 0.0f;
        for (int j = 0; j < n_used; j++) {
            float v = l[id[j]];
            w[j] = gating == CLINFER_MOE_SIGMOID ? 1.0f / (1.0f + expf(-v)) : expf(v - max) / sum;
            chosen += w[j];
        }
        float div = norm ? (chosen > MOE_NORM_MIN ? chosen : MOE_NORM_MIN) : 1.0f;
        float mul = scale != 0.0f ? scale : 1.0f;
        for (int j = 0; j < n_used; j++)
            w[j] = w[j] / div * mul;
    }
}

void ref_matmul_id(const clinfer_buffer *w, const float *x, const int32_t *ids, const float *bias,
                   float *y, int m, int n, int n_used, int n_expert, int x_rows, float *row) {
    size_t k = (size_t)w->head.k;
    for (int t = 0; t < n; t++)
        for (int j = 0; j < n_used; j++) {
            size_t slot = (size_t)t * n_used + j;
            const float *xr = x + ((size_t)t * x_rows + (x_rows > 1 ? (size_t)j : 0)) * k;
            float *yr = y + slot * (size_t)m;
            int e = ids[slot];
            if (e < 0 || e >= n_expert)
                memset(yr, 0, (size_t)m * sizeof *yr);
            else
                ref_matmul(w, e * m, m, xr, yr, bias ? bias + (size_t)e * m : NULL, 1, false, row);
        }
}

void ref_moe_sum(const float *x, const float *weights, float *y, int n, int n_used, int d,
                 bool accumulate) {
    for (size_t t = 0; t < (size_t)n; t++)
        for (size_t i = 0; i < (size_t)d; i++) {
            float s = 0.0f;
            for (size_t j = 0; j < (size_t)n_used; j++)
                s += weights[t * n_used + j] * x[(t * n_used + j) * d + i];
            y[t * d + i] = accumulate ? y[t * d + i] + s : s;
        }
}
