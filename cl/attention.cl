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
 * attention_merge combines.
 * In decode (n == 1) attention_rows can also do the ATTENTION op's rotation and cache write
 * (n_rot > 0): every item rotates its query head and its kv head's new key from the raw k_src
 * itself (cheap) and takes the new position's key and value from those private copies, read
 * back as the cache would give them, while exactly one item per kv head writes the cache slot:
 * no item reads a slot that another item of the launch writes. With round_q8 the kernel that
 * writes out (attention_rows with one chunk, else attention_merge) also rounds it for the next
 * matmul (round_q8.clh; the host guarantees head_dim % 32 == 0 then). */

#include "common.clh"
#include "rope.clh"
#include "round_q8.clh"
#ifndef MAX_HEAD_DIM
#define MAX_HEAD_DIM 256
#endif

#ifdef KV_F16
typedef half kv_t;
#define LOAD_KV4(p) vload_half4(0, p)
#define LOAD_KV8(p) vload_half8(0, p)
#define LOAD_KV(p) vload_half(0, p)
#define STORE_KV8(x, d, p) vstore_half8_rte(x, d, p) /* as rope.cl's cache write rounds */
/* x as it reads back from the cache (rounded to half); the private ushorts only hold the bits */
static float8 as_cached(float8 x) {
    ushort bits[8];
    vstore_half8_rte(x, 0, (half *)bits);
    return vload_half8(0, (const half *)bits);
}
#else
typedef float kv_t;
#define LOAD_KV4(p) vload4(0, p)
#define LOAD_KV8(p) vload8(0, p)
#define LOAD_KV(p) (*(p))
#define STORE_KV8(x, d, p) vstore8(x, d, p)
#define as_cached(x) (x)
#endif

/* Online softmax over cache positions p_begin .. p_end (inclusive) of one (head, token): m, l
 * and acc carry the running maximum, the sum of exponentials and the weighted sum of values.
 * Position p_cur (-1: none) takes its key and value from k_cur and v_cur instead of the cache.
 * Positions go in blocks of 8: their scores form one float8, so the exponentials are one vector
 * exp and the new-maximum test runs once per block (1.8x faster on PoCL than per position). */
static void attend_range(const float8 *qs, __global const kv_t *kp, __global const kv_t *vp,
                         size_t stride, int p_begin, int p_end, int d8, const float8 *k_cur,
                         const float8 *v_cur, int p_cur, float *m_io, float *l_io, float8 *acc) {
    float m = *m_io, l = *l_io;
    for (int p0 = p_begin; p0 <= p_end; p0 += 8) {
        int count = min(8, p_end - p0 + 1);
        float sc[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = -INFINITY;
            if (j < count) {
                __global const kv_t *kr = kp + (p0 + j) * stride;
                float8 dot8 = (float8)(0.0f);
                if (p0 + j == p_cur)
                    for (int c = 0; c < d8; c++)
                        dot8 += qs[c] * k_cur[c];
                else
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
            if (p0 + j == p_cur)
                for (int c = 0; c < d8; c++)
                    acc[c] += sc[j] * v_cur[c];
            else
                for (int c = 0; c < d8; c++)
                    acc[c] += sc[j] * LOAD_KV8(vr + 8 * c);
        }
    }
    *m_io = m;
    *l_io = l;
}

/* The heads of head_dim values at q_src and k_src rotated as rope.cl rotates them at position
 * pos, into xq and xk: one set of angles for both. */
static void rope_heads(__global const float *q_src, __global const float *k_src, float *xq,
                       float *xk, int head_dim, int n_rot, int pos, float freq_base,
                       float freq_scale, int neox) {
    for (int d = 0; d < head_dim; d++) {
        xq[d] = q_src[d];
        xk[d] = k_src[d];
    }
    int half_rot = n_rot / 2;
    float cs[8], ss[8];
    for (int j = 0; j < half_rot; j++) {
        if (j % 8 == 0) {
            float8 c8, s8 = rope_sincos8(pos, j, n_rot, freq_base, freq_scale, &c8);
            vstore8(c8, 0, cs);
            vstore8(s8, 0, ss);
        }
        float c = cs[j % 8], s = ss[j % 8];
        int i0 = neox ? j : 2 * j, i1 = neox ? j + half_rot : 2 * j + 1;
        float2 y = rope_turn(xq[i0], xq[i1], c, s);
        xq[i0] = y.x;
        xq[i1] = y.y;
        y = rope_turn(xk[i0], xk[i1], c, s);
        xk[i0] = y.x;
        xk[i1] = y.y;
    }
}

/* Work-item (h, i, c) attends over positions c*chunk .. min((c+1)*chunk, pos0+i+1) - 1. With one
 * chunk it writes out directly; otherwise it writes (m, l, acc[head_dim]) to
 * part[((i * n_head + h) * n_chunks + c) * (head_dim + 2)] for attention_merge. Splitting the
 * positions keeps every core busy in decode, where n_head x 1 items would not.
 * With n_rot > 0 (n == 1 only) q and the keys at k_src are the unrotated projections, and
 * k_src, v_src ([n_kv_head][head_dim] f32) go to the caches at position pos0. */
__kernel void attention_rows(__global const float *q, ulong q_off, __global kv_t *k, ulong k_off,
                             __global kv_t *v, ulong v_off, __global float *out, ulong out_off,
                             int n, int n_head, int n_kv_head, int head_dim, int pos0, float scale,
                             int chunk, __global float *part, __global const float *k_src,
                             ulong k_src_off, __global const float *v_src, ulong v_src_off,
                             int n_rot, float freq_base, float freq_scale, int neox,
                             __global char *xq, __global float2 *xd, __global float *xf,
                             int want_f, int round_q8) {
    int h = get_global_id(0), i = get_global_id(1), c = get_global_id(2);
    int n_chunks = get_global_size(2);
    if (h >= n_head || i >= n) return;
    int group = n_head / n_kv_head, kvh = h / group;
    int d8 = head_dim / 8;
    size_t stride = (size_t)n_kv_head * head_dim;
    __global const float *qr = q + q_off + ((size_t)i * n_head + h) * head_dim;
    float8 qs[MAX_HEAD_DIM / 8], acc[MAX_HEAD_DIM / 8];
    float8 k_cur[MAX_HEAD_DIM / 8], v_cur[MAX_HEAD_DIM / 8];
    int p_cur = -1;
    if (n_rot) {
        float xq[MAX_HEAD_DIM], x[MAX_HEAD_DIM];
        size_t kv_at = (size_t)kvh * head_dim;
        rope_heads(qr, k_src + k_src_off + kv_at, xq, x, head_dim, n_rot, pos0, freq_base,
                   freq_scale, neox);
        for (int d = 0; d < d8; d++)
            qs[d] = vload8(d, xq) * scale;
        __global const float *vr = v_src + v_src_off + kv_at;
        bool writer = h % group == 0 && c == 0;
        size_t slot = (size_t)pos0 * stride + kv_at;
        for (int d = 0; d < d8; d++) {
            float8 kd = vload8(d, x), vd = vload8(d, vr);
            k_cur[d] = as_cached(kd);
            v_cur[d] = as_cached(vd);
            if (writer) {
                STORE_KV8(kd, d, k + k_off + slot);
                STORE_KV8(vd, d, v + v_off + slot);
            }
        }
        p_cur = pos0;
    } else {
        for (int d = 0; d < d8; d++)
            qs[d] = vload8(d, qr) * scale;
    }
    for (int d = 0; d < d8; d++)
        acc[d] = (float8)(0.0f);
    float m = -INFINITY, l = 0.0f;
    attend_range(qs, k + k_off + (size_t)kvh * head_dim, v + v_off + (size_t)kvh * head_dim, stride,
                 c * chunk, min((c + 1) * chunk, pos0 + i + 1) - 1, d8, k_cur, v_cur, p_cur, &m,
                 &l, acc);
    if (n_chunks == 1) {
        size_t row = (size_t)i * n_head + h;
        __global float *o = out + out_off + row * head_dim;
        float inv = 1.0f / l;
        for (int d = 0; d < d8; d++) {
            acc[d] *= inv;
            vstore8(acc[d], d, o);
        }
        if (round_q8)
            for (int b = 0; b < d8 / 4; b++)
                round_block(acc + 4 * b, row * (head_dim / 32) + b, xq, xd, xf, want_f);
        return;
    }
    __global float *pr = part + (((size_t)i * n_head + h) * n_chunks + c) * (head_dim + 2);
    pr[0] = m; /* -inf with l = 0 for chunks past this token's last position */
    pr[1] = l;
    for (int d = 0; d < d8; d++)
        vstore8(acc[d], d, pr + 2);
}

/* Combines the chunks of attention_rows: out = sum_c acc_c e^(m_c - M) / sum_c l_c e^(m_c - M)
 * with M the largest m_c (chunk 0 always holds position 0, so M is finite); round_q8 as in
 * attention_rows. */
__kernel void attention_merge(__global const float *part, int n_chunks, __global float *out,
                              ulong out_off, int n, int n_head, int head_dim, __global char *xq,
                              __global float2 *xd, __global float *xf, int want_f, int round_q8) {
    int h = get_global_id(0), i = get_global_id(1);
    if (h >= n_head || i >= n) return;
    size_t width = head_dim + 2, row = (size_t)i * n_head + h;
    __global const float *pr = part + row * n_chunks * width;
    float big = -INFINITY;
    for (int c = 0; c < n_chunks; c++)
        big = fmax(big, pr[c * width]);
    float l = 0.0f;
    for (int c = 0; c < n_chunks; c++)
        l += pr[c * width + 1] * exp(pr[c * width] - big);
    __global float *o = out + out_off + row * head_dim;
    float8 block[4]; /* the last four float8s: one rounding block */
    for (int d = 0; d < head_dim / 8; d++) {
        float8 sum = (float8)(0.0f);
        for (int c = 0; c < n_chunks; c++)
            sum += vload8(d, pr + c * width + 2) * exp(pr[c * width] - big);
        block[d % 4] = sum / l;
        vstore8(block[d % 4], d, o);
        if (round_q8 && d % 4 == 3)
            round_block(block, row * (head_dim / 32) + d / 4, xq, xd, xf, want_f);
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
