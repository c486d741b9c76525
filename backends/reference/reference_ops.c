/* The arithmetic of every op, on host pointers that reference.c has validated. Each function is
 * the plain textbook formula of the op as backend.h states it; statistics that sum many terms
 * (norms) accumulate in double so the oracle's own rounding stays far below test tolerances. */
#include <math.h>
#include <string.h>

#include "reference.h"

float ref_dot(const float *a, const float *b, size_t n) {
    /* Eight independent partial sums: breaks the add dependency chain and lets the compiler
     * keep them in one vector register. */
    float s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

/* Row r of a weight as f32: f32 rows are used in place, others are dequantized into row. */
static const float *weight_row(const clinfer_buffer *w, int r, float *row) {
    const uint8_t *src = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    if (w->type == CLINFER_DT_F32) return (const float *)src;
    dequantize_row(w->type, src, row, (size_t)w->head.k);
    return row;
}

void ref_round_q8(const float *x, float *xq, size_t count, size_t block) {
    /* block by block, so the 8-bit values need no buffer of their own */
    int8_t q[CLINFER_Q8_ACT_SUPER];
    float d;
    for (size_t b = 0; b < count; b += block) {
        quant_q8_act(x + b, block, block, q, &d);
        for (size_t i = 0; i < block; i++)
            xq[b + i] = d * (float)q[i];
    }
}

void ref_matmul(const clinfer_buffer *w, int row0, int rows, const float *x, float *y,
                const float *bias, int n, bool accumulate, float *row) {
    size_t m = (size_t)rows, k = (size_t)w->head.k;
    /* Weight-row outer loop: each row is dequantized once and used for all n inputs. */
    for (size_t i = 0; i < m; i++) {
        const float *wr = weight_row(w, row0 + (int)i, row);
        float b = bias ? bias[i] : 0.0f;
        for (size_t r = 0; r < (size_t)n; r++) {
            float v = ref_dot(x + r * k, wr, k) + b;
            y[r * m + i] = accumulate ? y[r * m + i] + v : v;
        }
    }
}

void ref_embed(const clinfer_buffer *w, const int32_t *ids, float *y, int n, float scale) {
    size_t k = (size_t)w->head.k;
    for (size_t i = 0; i < (size_t)n; i++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)ids[i] * w->row_bytes;
        dequantize_row(w->type, src, y + i * k, k);
        if (scale != 0.0f)
            for (size_t e = 0; e < k; e++)
                y[i * k + e] *= scale;
    }
}

void ref_rmsnorm(const float *x, const float *w, float *y, int n, int d, float eps) {
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *xr = x + r * (size_t)d;
        float *yr = y + r * (size_t)d;
        double ss = 0.0;
        for (int i = 0; i < d; i++)
            ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / d + eps));
        for (int i = 0; i < d; i++)
            yr[i] = xr[i] * inv * (w ? w[i] : 1.0f);
    }
}

void ref_layernorm(const float *x, const float *w, const float *b, float *y, int n, int d,
                   float eps) {
    for (size_t r = 0; r < (size_t)n; r++) {
        const float *xr = x + r * (size_t)d;
        float *yr = y + r * (size_t)d;
        double sum = 0.0;
        for (int i = 0; i < d; i++)
            sum += xr[i];
        double mean = sum / d, var = 0.0;
        for (int i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double inv = 1.0 / sqrt(var / d + eps);
        for (int i = 0; i < d; i++)
            yr[i] = (float)((xr[i] - mean) * inv) * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

void ref_rope(float *x, int n, int n_heads, int head_dim, int n_rot, int pos0, float freq_base,
              float freq_scale, bool neox, const float *factors, float mscale) {
    int half = n_rot / 2;
    double mag = mscale == 0.0f ? 1.0 : mscale;
    for (int i = 0; i < n; i++) {
        double pos = (double)pos0 + i;
        float *xt = x + (size_t)i * n_heads * head_dim;
        for (int j = 0; j < half; j++) {
            /* theta = pos * freq_scale * freq_base^(-2j / n_rot) / factors[j], in double for an
             * exact angle */
            double theta = pos * freq_scale * pow(freq_base, -2.0 * j / n_rot);
            if (factors) theta /= factors[j];
            float c = (float)(mag * cos(theta)), s = (float)(mag * sin(theta));
            int i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
            for (int h = 0; h < n_heads; h++) {
                float *xh = xt + (size_t)h * head_dim;
                float a = xh[i0], b = xh[i1];
                xh[i0] = a * c - b * s;
                xh[i1] = a * s + b * c;
            }
        }
    }
}

void ref_store(const float *src, void *dst, clinfer_dtype dst_type, size_t count) {
    if (dst_type == CLINFER_DT_F32) {
        memmove(dst, src, count * sizeof(float));
        return;
    }
    uint16_t *h = dst;
    for (size_t i = 0; i < count; i++)
        h[i] = f32_to_f16(src[i]);
}

/* Cache row `index` (a head_dim vector) as f32: in place for f32 caches, converted into tmp for
 * f16 ones. */
static const float *cache_row(const void *cache, clinfer_dtype type, size_t index, int head_dim,
                              float *tmp) {
    if (type == CLINFER_DT_F32) return (const float *)cache + index * (size_t)head_dim;
    const uint16_t *h = (const uint16_t *)cache + index * (size_t)head_dim;
    for (int i = 0; i < head_dim; i++)
        tmp[i] = f16_to_f32(h[i]);
    return tmp;
}

void ref_attention(const float *q, const void *k_cache, const void *v_cache, float *out,
                   clinfer_dtype kv_type, int n, int n_head, int n_kv_head, int head_dim, int pos0,
                   int window, float scale, float softcap, const float *sinks, float *scratch) {
    /* scratch: scores[pos0 + n], then a converted cache row and the output accumulator */
    float *scores = scratch, *tmp = scratch + pos0 + n, *acc = tmp + head_dim;
    int group = n_head / n_kv_head;
    for (int i = 0; i < n; i++) {
        int n_pos = pos0 + i + 1; /* causal: token i sees cache positions 0 .. pos0 + i */
        int first = window > 0 && n_pos > window ? n_pos - window : 0; /* the window's first */
        for (int h = 0; h < n_head; h++) {
            const float *qh = q + ((size_t)i * n_head + h) * head_dim;
            int kvh = h / group;
            float max = -INFINITY;
            for (int t = first; t < n_pos; t++) {
                size_t idx = (size_t)t * n_kv_head + kvh;
                const float *kt = cache_row(k_cache, kv_type, idx, head_dim, tmp);
                scores[t] = ref_dot(qh, kt, (size_t)head_dim) * scale;
                if (softcap > 0.0f) scores[t] = softcap * tanhf(scores[t] / softcap);
                max = fmaxf(max, scores[t]);
            }
            /* a sink joins the softmax's maximum and sum, and weighs no value */
            if (sinks) max = fmaxf(max, sinks[h]);
            float sum = sinks ? expf(sinks[h] - max) : 0.0f;
            for (int t = first; t < n_pos; t++) {
                scores[t] = expf(scores[t] - max);
                sum += scores[t];
            }
            memset(acc, 0, (size_t)head_dim * sizeof *acc);
            for (int t = first; t < n_pos; t++) {
                size_t idx = (size_t)t * n_kv_head + kvh;
                const float *vt = cache_row(v_cache, kv_type, idx, head_dim, tmp);
                float p = scores[t] / sum;
                for (int e = 0; e < head_dim; e++)
                    acc[e] += p * vt[e];
            }
            memcpy(out + ((size_t)i * n_head + h) * head_dim, acc, (size_t)head_dim * sizeof *acc);
        }
    }
}

static float silu(float x) {
    return x / (1.0f + expf(-x));
}

static float swiglu_oai(float a, float b) {
    const float limit = CLINFER_SWIGLU_OAI_LIMIT;
    float g = fminf(a, limit), u = fminf(fmaxf(b, -limit), limit);
    return g / (1.0f + expf(-CLINFER_SWIGLU_OAI_ALPHA * g)) * (u + 1.0f);
}

static float gelu(float x) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

void ref_eltwise(clinfer_op_kind kind, const float *a, const float *b, float *y, size_t count,
                 size_t b_count) {
    size_t j = 0; /* i % b_count, without a division per element */
    for (size_t i = 0; i < count; i++) {
        float x = a[i];
        switch (kind) {
        case CLINFER_OP_ADD:
            y[i] = x + b[j];
            break;
        case CLINFER_OP_GELU:
            y[i] = gelu(x);
            break;
        case CLINFER_OP_SWIGLU:
            y[i] = silu(x) * b[i];
            break;
        case CLINFER_OP_GEGLU:
            y[i] = gelu(x) * b[i];
            break;
        case CLINFER_OP_SWIGLU_OAI:
            y[i] = swiglu_oai(x, b[i]);
            break;
        default: /* reference.c only routes the kinds above here */
            break;
        }
        if (b_count && ++j == b_count) j = 0;
    }
}

void ref_scale(const float *a, float *y, size_t count, float scale, float cap) {
    for (size_t i = 0; i < count; i++) {
        float v = a[i] * scale;
        y[i] = cap > 0.0f ? cap * tanhf(v / cap) : v;
    }
}
