/* Rotary position embedding, in place on x[n][n_heads][head_dim]. One work-item per (token,
 * pair) computes the angle once and turns that pair in every head (1D global size
 * n * n_rot/2, rounded up to the local size: few work-groups, as PoCL wants). Token t sits at
 * position pos0 + t; pair j turns by
 *   theta = pos * freq_scale * freq_base^(-2j / n_rot) / factors[j]
 * (rope.clh; has_factors 0: none), its cosine and sine multiplied by mscale (0: not).
 * Normal pairing rotates (2j, 2j+1) (llama/GPT-J); NeoX pairing rotates (j, j + n_rot/2).
 * Dimensions from n_rot to head_dim stay as they are.
 *
 * With kv_heads > 0 the same launch also fills the KV caches (saving two store launches): the
 * last kv_heads heads of token t (its keys, after rotating) go to k_dst + t * kv_dim and
 * v_src + t * kv_dim to v_dst + t * kv_dim, kv_dim = kv_heads * head_dim. A work-item writes its
 * own rotated pair of each key head, then copies with stride n_rot/2 from its j: the key
 * dimensions n_rot + j, ... below head_dim and the value elements j, ... below kv_dim, so every
 * element is written exactly once for any head_dim and n_rot. kv_f16 stores halves through
 * vstore_half_rte (no cl_khr_fp16 needed; k_dst and v_dst then point at halves), as
 * elementwise.cl's store_f16 does; offsets count cache elements. */

#include "rope.clh"

static void kv_put(__global float *dst, size_t i, float value, int f16) {
    if (f16)
        vstore_half_rte(value, i, (__global half *)dst);
    else
        dst[i] = value;
}

__kernel void rope(__global float *x, ulong x_off, int n, int n_heads, int head_dim, int n_rot,
                   int pos0, float freq_base, float freq_scale, int neox,
                   __global const float *factors, ulong factors_off, int has_factors, float mscale,
                   __global float *k_dst,
                   ulong k_off, __global const float *v_src, ulong v_src_off, __global float *v_dst,
                   ulong v_dst_off, int kv_heads, int kv_f16) {
    int half_rot = n_rot / 2;
    size_t id = get_global_id(0);
    if (id >= (size_t)n * half_rot) return;
    int t = id / half_rot, j = id % half_rot;
    __global const float *ff = has_factors ? factors + factors_off : 0;
    float8 c8, s8 = rope_sincos8(pos0 + t, j - j % 8, n_rot, freq_base, freq_scale, ff, mscale, &c8);
    float cs[8], ss[8];
    vstore8(c8, 0, cs);
    vstore8(s8, 0, ss);
    float c = cs[j % 8], s = ss[j % 8];
    int i0 = neox ? j : 2 * j;
    int i1 = neox ? j + half_rot : 2 * j + 1;
    int first_key = n_heads - kv_heads;
    size_t kv_dim = (size_t)kv_heads * head_dim;
    size_t k_row = k_off + t * kv_dim;
    __global float *row = x + x_off + (size_t)t * n_heads * head_dim;
    for (int h = 0; h < n_heads; h++, row += head_dim) {
        float2 y = rope_turn(row[i0], row[i1], c, s);
        float y0 = y.x, y1 = y.y;
        row[i0] = y0;
        row[i1] = y1;
        if (h < first_key) continue;
        size_t k = k_row + (size_t)(h - first_key) * head_dim;
        kv_put(k_dst, k + i0, y0, kv_f16);
        kv_put(k_dst, k + i1, y1, kv_f16);
        for (int d = n_rot + j; d < head_dim; d += half_rot)
            kv_put(k_dst, k + d, row[d], kv_f16);
    }
    __global const float *v = v_src + v_src_off + t * kv_dim;
    for (size_t e = j; e < kv_dim; e += half_rot)
        kv_put(v_dst, v_dst_off + t * kv_dim + e, v[e], kv_f16);
}
