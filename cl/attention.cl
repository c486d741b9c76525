/* Causal grouped-query attention over a KV cache.
 *   q, out  [n][n_head][head_dim] f32
 *   k, v    caches [pos][n_kv_head][head_dim], f32, or f16 when built with -DKV_F16 (read with
 *           vload_half, so no cl_khr_fp16 is needed)
 * Token i sits at position pos0 + i and attends to cache positions 0 .. pos0 + i, or with a
 * sliding window (window > 0) to the last window of them; query head h reads kv head
 * h / (n_head / n_kv_head). Softmax is computed online (running max and sum), so
 * one pass over the cache suffices. The host guarantees head_dim % 8 == 0 and
 * head_dim <= MAX_HEAD_DIM.
 * Variants, chosen by kernel path:
 *   attention_rows  one work-item per (head, token, chunk of positions), or in prefill per
 *                   (head, eight tokens), with private float8 accumulators (AVX width) and no
 *                   barriers (CPU devices). Global size n_head x n (or n / 8) x n_chunks.
 *   attention_wg    one work-group of OPS_WG items per (head, token, chunk): items score OPS_WG
 *                   positions at a time, reduce max and sum in local memory, then each item
 *                   accumulates its own output dimensions (GPUs). Global OPS_WG*n_head x n x
 *                   n_chunks: exactly one group per triple, so it never tests n (see norm.cl).
 * With more than one chunk both write partial results that attention_merge combines.
 * In decode (n == 1) attention_rows can also do the ATTENTION op's rotation and cache write
 * (n_rot > 0): every item rotates its query head and its kv head's new key from the raw k_src
 * itself (cheap) and takes the new position's key and value from those private copies, read
 * back as the cache would give them, while exactly one item per kv head writes the cache slot:
 * no item reads a slot that another item of the launch writes. With round_q8 the kernel that
 * writes out (attention_rows with one chunk, else attention_merge) also rounds it for the next
 * matmul (round_q8.clh; the host guarantees head_dim % 32 == 0 then). */

#include "common.clh"
#include "glu.clh"
#include "rope.clh"
#include "round_q8.clh"
#include "attention.clh"
#include "attention_wg.clh"
#include "transpose8.clh"

/* Prefill without windows or chunks: tokens i0 .. i0 + nt - 1 (nt <= 8) of head h in one item,
 * each against positions 0 .. its own. Per block of 8 positions the keys are transposed once
 * (lanes = positions), so each token's 8 scores are head_dim FMAs with q broadcast and no
 * horizontal sums, and each chunk of the 8 values is converted once for the 8 tokens, whose
 * chains are independent. attention_item (per token) took 1.7x the time: 1B Q4_0 pp512,
 * CLINFER_PROFILE, 21-22 against 37 GFLOP/s. Positions past a token's own but within the item's
 * enter its scores as -inf, so their weight is 0. */
static void attention_item8(const attn_args *a, int h, int i0, int nt) {
    int head_dim = a->head_dim, pos0 = a->pos0, d8 = head_dim / 8;
    int group = a->n_head / a->n_kv_head, kvh = h / group;
    size_t stride = (size_t)a->n_kv_head * head_dim;
    __global const kv_t *kp = a->k + (size_t)kvh * head_dim, *vp = a->v + (size_t)kvh * head_dim;
    float q[8][MAX_HEAD_DIM];
    float8 acc[8][MAX_HEAD_DIM / 8];
    float m[8], l[8], e[8][8];
    for (int t = 0; t < 8; t++) {
        int tt = min(t, nt - 1);
        __global const float *qr = a->q + ((size_t)(i0 + tt) * a->n_head + h) * head_dim;
        for (int d = 0; d < head_dim; d++)
            q[t][d] = qr[d] * a->scale;
        for (int c = 0; c < d8; c++)
            acc[t][c] = 0.0f;
        m[t] = -INFINITY;
        l[t] = 0.0f;
    }
    int last = pos0 + i0 + nt - 1;
    for (int p0 = 0; p0 <= last; p0 += 8) {
        uint8 kt[MAX_HEAD_DIM]; /* element d of the 8 keys, as bits */
        for (int c = 0; c < d8; c++) {
            uint8 rows[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                rows[j] = as_uint8(LOAD_KV8(kp + (size_t)min(p0 + j, last) * stride + 8 * c));
            transpose8(rows, kt + 8 * c);
        }
        float8 s[8];
#pragma unroll
        for (int t = 0; t < 8; t++)
            s[t] = 0.0f;
        for (int d = 0; d < head_dim; d++) {
            float8 k = as_float8(kt[d]);
#pragma unroll
            for (int t = 0; t < 8; t++)
                s[t] = fma((float8)q[t][d], k, s[t]);
        }
        const int8 lane = (int8)(0, 1, 2, 3, 4, 5, 6, 7);
#pragma unroll
        for (int t = 0; t < 8; t++) {
            int lim = pos0 + i0 + min(t, nt - 1) - p0; /* lanes up to lim are valid */
            float8 st = select((float8)(-INFINITY), SOFTCAP(s[t], a->softcap), lane <= lim);
            vstore8(softmax_block(st, &m[t], &l[t], acc[t], d8), 0, e[t]);
        }
        for (int c = 0; c < d8; c++) {
            float8 v[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = LOAD_KV8(vp + (size_t)min(p0 + j, last) * stride + 8 * c);
#pragma unroll
            for (int t = 0; t < 8; t++) {
                float8 x = acc[t][c];
#pragma unroll
                for (int j = 0; j < 8; j++)
                    x = fma((float8)e[t][j], v[j], x);
                acc[t][c] = x;
            }
        }
    }
    for (int t = 0; t < nt; t++)
        attn_out_row(a, (size_t)(i0 + t) * a->n_head + h, acc[t], l[t], m[t]);
}

/* With by8 (prefill without a window in one chunk, chosen by the host) work-item (h, i) takes
 * tokens 8 i .. 8 i + 7 of head h (attention_item8). Otherwise work-item (h, i, c) is
 * attention_item (h, i, c) of attention.clh: one chunk of positions of one (head, token).
 * Splitting the positions keeps every core busy in decode, where n_head x 1 items would not. */
__kernel void attention_rows(__global const float *q, ulong q_off, __global kv_t *k, ulong k_off,
                             __global kv_t *v, ulong v_off, __global float *out, ulong out_off,
                             int n, int n_head, int n_kv_head, int head_dim, int pos0, int window,
                             float scale, float softcap, __global const float *sinks,
                             ulong sinks_off, int has_sinks, int chunk, __global float *part,
                             __global const float *k_src, ulong k_src_off,
                             __global const float *v_src, ulong v_src_off,
                             int n_rot, float freq_base, float freq_scale, int neox,
                             __global const float *factors, ulong factors_off, int has_factors,
                             float mscale, __global char *xq, __global float2 *xd, __global float *xf,
                             int want_f, int round_q8, int by8) {
    int h = get_global_id(0), i = get_global_id(1);
    if (h >= n_head || i >= (by8 ? (n + 7) / 8 : n)) return;
    attn_args a = {q + q_off, k + k_off, v + v_off, out + out_off, part, k_src + k_src_off,
                   v_src + v_src_off, xq, xd, xf, n, n_head, n_kv_head, head_dim, pos0, chunk,
                   (int)get_global_size(2), window, scale, softcap, n_rot, neox, freq_base,
                   freq_scale, want_f, round_q8, sinks + sinks_off, has_sinks};
    if (by8) {
        attention_item8(&a, h, 8 * i, min(8, n - 8 * i));
        return;
    }
    float cs[ROPE_TABLE], ss[ROPE_TABLE];
    if (n_rot)
        rope_table(pos0, n_rot, freq_base, freq_scale, has_factors ? factors + factors_off : 0,
                   mscale, cs, ss);
    attention_item(&a, h, i, get_global_id(2), cs, ss);
}

/* Combines the chunks of attention_rows (attention_merge_item): work-item (h, i). */
__kernel void attention_merge(__global float *part, int n_chunks, __global float *out,
                              ulong out_off, int n, int n_head, int head_dim, __global char *xq,
                              __global float2 *xd, __global float *xf, int want_f, int round_q8,
                              __global const float *sinks, ulong sinks_off, int has_sinks) {
    int h = get_global_id(0), i = get_global_id(1);
    if (h >= n_head || i >= n) return;
    attn_args a = {.out = out + out_off, .part = part, .xq = xq, .xd = xd, .xf = xf, .n = n,
                   .n_head = n_head, .head_dim = head_dim, .n_chunks = n_chunks,
                   .want_f = want_f, .round_q8 = round_q8, .sinks = sinks + sinks_off,
                   .has_sinks = has_sinks};
    attention_merge_item(&a, h, i);
}

#define DIMS_PER_ITEM ((MAX_HEAD_DIM + OPS_WG - 1) / OPS_WG)

/* Group (h, i, c) covers the positions of attn_span, OPS_WG at a time, and writes out or a
 * partial result exactly as attention_rows does. */
__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void attention_wg(WG_ATTN_PARAMS) {
    __local wg_attn_mem sh;
    int lid = get_local_id(0);
    wg_attn w = wg_attn_begin(q, q_off, k, k_off, v, v_off, out, out_off, n_head, n_kv_head,
                              head_dim, pos0, window, scale, chunk, part, &sh);
    float acc[DIMS_PER_ITEM];
    for (int a = 0; a < DIMS_PER_ITEM; a++)
        acc[a] = 0.0f;

    for (int p0 = w.first; p0 <= w.last; p0 += OPS_WG) {
        float shrink = wg_attn_block(&w, &sh, p0, head_dim, softcap);
        for (int a = 0; a < DIMS_PER_ITEM; a++) {
            int d = lid + a * OPS_WG;
            if (d < head_dim) {
                float sum = acc[a] * shrink;
                __global const kv_t *vd = w.vp + p0 * w.stride + d;
                for (int j = 0; j < w.count; j++)
                    sum += sh.probs[j] * LOAD_KV(vd + j * w.stride);
                acc[a] = sum;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* probs is rewritten by the next block */
    }
    wg_attn_end(&w, sinks + sinks_off, has_sinks);
    for (int a = 0; a < DIMS_PER_ITEM; a++) {
        int d = lid + a * OPS_WG;
        if (d < head_dim) {
            if (w.n_chunks == 1)
                w.o[d] = acc[a] / w.l;
            else
                w.pr[2 + d] = acc[a];
        }
    }
}
