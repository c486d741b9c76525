/* Causal grouped-query attention over a KV cache.
 *   q, out  [n][n_head][head_dim] f32
 *   k, v    caches [pos][n_kv_head][head_dim], f32, or f16 when built with -DKV_F16 (read with
 *           vload_half, so no cl_khr_fp16 is needed)
 * Token i sits at position pos0 + i and attends to cache positions 0 .. pos0 + i; query head h
 * reads kv head h / (n_head / n_kv_head). Softmax is computed online (running max and sum), so
 * one pass over the cache suffices. The host guarantees head_dim % 8 == 0 and
 * head_dim <= MAX_HEAD_DIM.
 * Variants, chosen by kernel path:
 *   attention_rows  one work-item per (head, token, chunk of positions) with private float8
 *                   accumulators (AVX width), no barriers (CPU devices). Global size n_head x n x
 * n_chunks. attention_wg    one work-group of OPS_WG items per (head, token, chunk): items score
 * OPS_WG positions at a time, reduce max and sum in local memory, then each item accumulates its
 * own output dimensions (GPUs). Global OPS_WG*n_head x n x n_chunks: exactly one group per triple,
 * so it never tests n (see norm.cl). With more than one chunk both write partial results that
 * attention_merge combines. */

#include "common.clh"
#ifndef MAX_HEAD_DIM
#define MAX_HEAD_DIM 256
#endif

#ifdef KV_F16
typedef half kv_t;
#define LOAD_KV4(p) vload_half4(0, p)
#define LOAD_KV8(p) vload_half8(0, p)
#define LOAD_KV(p) vload_half(0, p)
#else
typedef float kv_t;
#define LOAD_KV4(p) vload4(0, p)
#define LOAD_KV8(p) vload8(0, p)
#define LOAD_KV(p) (*(p))
#endif

/* Online softmax over cache positions p_begin .. p_end (inclusive) of one (head, token): m, l
 * and acc carry the running maximum, the sum of exponentials and the weighted sum of values.
 * Positions go in blocks of 8: their scores form one float8, so the exponentials are one vector
 * exp and the new-maximum test runs once per block (1.8x faster on PoCL than per position). */
static void attend_range(const float8 *qs, __global const kv_t *kp, __global const kv_t *vp,
                         size_t stride, int p_begin, int p_end, int d8, float *m_io, float *l_io,
                         float8 *acc) {
    float m = *m_io, l = *l_io;
    for (int p0 = p_begin; p0 <= p_end; p0 += 8) {
        int count = min(8, p_end - p0 + 1);
        float sc[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = -INFINITY;
            if (j < count) {
                __global const kv_t *kr = kp + (p0 + j) * stride;
                float8 dot8 = (float8)(0.0f);
                for (int c = 0; c < d8; c++)
                    dot8 += qs[c] * LOAD_KV8(kr + 8 * c);
                float4 h4 = dot8.lo + dot8.hi;
                sc[j] = (h4.x + h4.y) + (h4.z + h4.w);
            }
        }
        float8 s8 = vload8(0, sc);
        float4 m4 = fmax(s8.lo, s8.hi);
        float bm = fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
        if (bm > m) { /* a new maximum rescales what was summed so far */
            float shrink = exp(m - bm);
            l *= shrink;
            for (int c = 0; c < d8; c++)
                acc[c] *= shrink;
            m = bm;
        }
        float8 e8 = exp(s8 - m);
        float4 e4 = e8.lo + e8.hi;
        l += (e4.x + e4.y) + (e4.z + e4.w);
        vstore8(e8, 0, sc);
        for (int j = 0; j < count; j++) {
            __global const kv_t *vr = vp + (p0 + j) * stride;
            for (int c = 0; c < d8; c++)
                acc[c] += sc[j] * LOAD_KV8(vr + 8 * c);
        }
    }
    *m_io = m;
    *l_io = l;
}

/* Work-item (h, i, c) attends over positions c*chunk .. min((c+1)*chunk, pos0+i+1) - 1. With one
 * chunk it writes out directly; otherwise it writes (m, l, acc[head_dim]) to
 * part[((i * n_head + h) * n_chunks + c) * (head_dim + 2)] for attention_merge. Splitting the
 * positions keeps every core busy in decode, where n_head x 1 items would not. */
__kernel void attention_rows(__global const float *q, ulong q_off, __global const kv_t *k,
                             ulong k_off, __global const kv_t *v, ulong v_off, __global float *out,
                             ulong out_off, int n, int n_head, int n_kv_head, int head_dim,
                             int pos0, float scale, int chunk, __global float *part) {
    int h = get_global_id(0), i = get_global_id(1), c = get_global_id(2);
    int n_chunks = get_global_size(2);
    if (h >= n_head || i >= n) return;
    int kvh = h / (n_head / n_kv_head);
    int d8 = head_dim / 8;
    size_t stride = (size_t)n_kv_head * head_dim;
    __global const float *qr = q + q_off + ((size_t)i * n_head + h) * head_dim;
    float8 qs[MAX_HEAD_DIM / 8], acc[MAX_HEAD_DIM / 8];
    for (int d = 0; d < d8; d++) {
        qs[d] = vload8(d, qr) * scale;
        acc[d] = (float8)(0.0f);
    }
    float m = -INFINITY, l = 0.0f;
    attend_range(qs, k + k_off + (size_t)kvh * head_dim, v + v_off + (size_t)kvh * head_dim, stride,
                 c * chunk, min((c + 1) * chunk, pos0 + i + 1) - 1, d8, &m, &l, acc);
    if (n_chunks == 1) {
        __global float *o = out + out_off + ((size_t)i * n_head + h) * head_dim;
        float inv = 1.0f / l;
        for (int d = 0; d < d8; d++)
            vstore8(acc[d] * inv, d, o);
        return;
    }
    __global float *pr = part + (((size_t)i * n_head + h) * n_chunks + c) * (head_dim + 2);
    pr[0] = m; /* -inf with l = 0 for chunks past this token's last position */
    pr[1] = l;
    for (int d = 0; d < d8; d++)
        vstore8(acc[d], d, pr + 2);
}

/* Combines the chunks of attention_rows: out = sum_c acc_c e^(m_c - M) / sum_c l_c e^(m_c - M)
 * with M the largest m_c (chunk 0 always holds position 0, so M is finite). */
__kernel void attention_merge(__global const float *part, int n_chunks, __global float *out,
                              ulong out_off, int n, int n_head, int head_dim) {
    int h = get_global_id(0), i = get_global_id(1);
    if (h >= n_head || i >= n) return;
    size_t width = head_dim + 2;
    __global const float *pr = part + ((size_t)i * n_head + h) * n_chunks * width;
    float big = -INFINITY;
    for (int c = 0; c < n_chunks; c++)
        big = fmax(big, pr[c * width]);
    float l = 0.0f;
    for (int c = 0; c < n_chunks; c++)
        l += pr[c * width + 1] * exp(pr[c * width] - big);
    __global float *o = out + out_off + ((size_t)i * n_head + h) * head_dim;
    for (int d = 0; d < head_dim / 4; d++) {
        float4 sum = (float4)(0.0f);
        for (int c = 0; c < n_chunks; c++)
            sum += vload4(d, pr + c * width + 2) * exp(pr[c * width] - big);
        vstore4(sum / l, d, o);
    }
}

#define DIMS_PER_ITEM ((MAX_HEAD_DIM + OPS_WG - 1) / OPS_WG)

/* Group (h, i, c) covers positions c*chunk .. min((c+1)*chunk, pos0+i+1) - 1, OPS_WG at a time,
 * and writes out or a partial result exactly as attention_rows does. */
__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
attention_wg(__global const float *q, ulong q_off, __global const kv_t *k, ulong k_off,
             __global const kv_t *v, ulong v_off, __global float *out, ulong out_off, int n,
             int n_head, int n_kv_head, int head_dim, int pos0, float scale, int chunk,
             __global float *part) {
    __local float qs[MAX_HEAD_DIM];
    __local float probs[OPS_WG];
    __local float scratch[OPS_WG];
    int h = get_group_id(0), i = get_group_id(1), c = get_group_id(2), lid = get_local_id(0);
    int n_chunks = get_num_groups(2);
    int kvh = h / (n_head / n_kv_head);
    int last = min((c + 1) * chunk, pos0 + i + 1) - 1;
    size_t stride = (size_t)n_kv_head * head_dim;
    __global const float *qr = q + q_off + ((size_t)i * n_head + h) * head_dim;
    __global const kv_t *kp = k + k_off + (size_t)kvh * head_dim;
    __global const kv_t *vp = v + v_off + (size_t)kvh * head_dim;

    for (int d = lid; d < head_dim; d += OPS_WG)
        qs[d] = qr[d] * scale;
    float acc[DIMS_PER_ITEM];
    for (int a = 0; a < DIMS_PER_ITEM; a++)
        acc[a] = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    float m = -INFINITY, l = 0.0f;
    for (int p0 = c * chunk; p0 <= last; p0 += OPS_WG) {
        int p = p0 + lid;
        float s = -INFINITY;
        if (p <= last) {
            __global const kv_t *kr = kp + p * stride;
            float4 dot4 = (float4)(0.0f);
            for (int d = 0; d < head_dim; d += 4)
                dot4 += vload4(0, qs + d) * LOAD_KV4(kr + d);
            s = (dot4.x + dot4.y) + (dot4.z + dot4.w);
        }
        /* Position p0 is always valid, so the block maximum is finite. */
        float m_new = fmax(m, wg_reduce(s, 1, scratch));
        float e = p <= last ? exp(s - m_new) : 0.0f;
        probs[lid] = e; /* visible after the barriers inside wg_reduce */
        float shrink = exp(m - m_new);
        l = l * shrink + wg_reduce(e, 0, scratch);
        m = m_new;
        int count = min(OPS_WG, last - p0 + 1);
        for (int a = 0; a < DIMS_PER_ITEM; a++) {
            int d = lid + a * OPS_WG;
            if (d < head_dim) {
                float sum = acc[a] * shrink;
                __global const kv_t *vd = vp + p0 * stride + d;
                for (int j = 0; j < count; j++)
                    sum += probs[j] * LOAD_KV(vd + j * stride);
                acc[a] = sum;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* probs is rewritten by the next block */
    }
    __global float *o = out + out_off + ((size_t)i * n_head + h) * head_dim;
    __global float *pr = part + (((size_t)i * n_head + h) * n_chunks + c) * (head_dim + 2);
    if (n_chunks > 1 && lid == 0) {
        pr[0] = m; /* -inf with l = 0 for chunks past this token's last position */
        pr[1] = l;
    }
    for (int a = 0; a < DIMS_PER_ITEM; a++) {
        int d = lid + a * OPS_WG;
        if (d < head_dim) {
            if (n_chunks == 1)
                o[d] = acc[a] / l;
            else
                pr[2 + d] = acc[a];
        }
    }
}
