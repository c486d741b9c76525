/* Attention on the GPU paths (gpu-local-reduce): flash-decoding. The positions each (head,
 * token) sees (attn_span, attention.clh) are cut into chunks, one work-group of OPS_WG items
 * per (head h, token i, chunk c), so that a decode step with few heads still fills the device;
 * attention_merge_wg then combines the chunks' partial results, one work-group per (h, i).
 * Prompts take attention_tiled (at the end): tiles of tokens against tiles of positions.
 * Layout, GQA, sliding windows, soft-capping and the partial results are attention.cl's
 * (attention_wg, which CLINFER_GPU_LEGACY keeps): this file changes only who does what.
 *
 * attention_split walks its chunk in blocks of OPS_WG positions as attention_wg does (both through
 * attention_wg.clh):
 *   scores   item p scores position p0 + p against q (scaled, in local memory);
 *   softmax  the block's maximum and sum of exponentials through local memory (wg_reduce), the
 *            running maximum rescaling what was summed so far;
 *   values   the items as rows x lanes: lane j holds head dimensions 4j .. 4j + 3 (and 4(j +
 *            lanes) .. where the head has more than 4 x OPS_WG), row r the positions p0 + r,
 *            p0 + r + rows, ...: the lanes of a row read one value vector's consecutive 16-byte
 *            words, and every item works on every block (attention_wg's value loop ran one
 *            position after another in head_dim items of the group);
 * and at its end the rows' sums are added in local memory (a tree over rows). */

#include "common.clh"
#include "glu.clh"
#include "rope.clh"
#include "round_q8.clh"
#include "attention.clh"
#include "attention_wg.clh"

/* float4 accumulators per item: lanes cover head_dim / 4 vectors, at most OPS_WG at a time */
#define SPLIT_VECS ((MAX_HEAD_DIM / 4 + OPS_WG - 1) / OPS_WG)

/* The smallest power of two >= v, at most OPS_WG. */
static int lanes_for(int v) {
    int p = 1;
    while (p < v && p < OPS_WG)
        p *= 2;
    return p;
}

/* Group (h, i, c): partial result (m, l, acc) of chunk c, or out directly with one chunk. */
__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void attention_split(WG_ATTN_PARAMS) {
    __local wg_attn_mem sh;
    __local float4 red[OPS_WG];
    int lid = get_local_id(0);
    wg_attn w = wg_attn_begin(q, q_off, k, k_off, v, v_off, out, out_off, n_head, n_kv_head,
                              head_dim, pos0, window, scale, chunk, part, &sh);
    int vecs = head_dim / 4, lanes = lanes_for(vecs), rows = OPS_WG / lanes;
    int lane = lid % lanes, row = lid / lanes, n_vecs = (vecs + lanes - 1) / lanes;
    float4 acc[SPLIT_VECS];
    for (int u = 0; u < SPLIT_VECS; u++)
        acc[u] = (float4)(0.0f);

    for (int p0 = w.first; p0 <= w.last; p0 += OPS_WG) {
        float shrink = wg_attn_block(&w, &sh, p0, head_dim, softcap);
        for (int u = 0; u < n_vecs; u++) {
            int j = lane + u * lanes;
            float4 a = acc[u] * shrink;
            if (j < vecs)
                for (int t = row; t < w.count; t += rows)
                    a += sh.probs[t] * LOAD_KV4(w.vp + (size_t)(p0 + t) * w.stride + 4 * j);
            acc[u] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* probs is rewritten by the next block */
    }
    wg_attn_end(&w, sinks + sinks_off, has_sinks);
    for (int u = 0; u < n_vecs; u++) {
        red[lid] = acc[u];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = rows / 2; s > 0; s >>= 1) {
            if (row < s) red[lid] += red[lid + s * lanes];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        int j = lane + u * lanes;
        if (row == 0 && j < vecs) {
            if (w.n_chunks == 1)
                vstore4(red[lane] / w.l, j, w.o);
            else
                vstore4(red[lane], j, w.pr + 2);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is rewritten by the next vector */
    }
}

/* Group (h, i): out = sum_c acc_c e^(m_c - M) / sum_c l_c e^(m_c - M), M the largest m_c (the
 * token's own position is in some chunk, so M is finite; the head's sink joins the sum), the
 * items over the head's dimensions. */
__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
attention_merge_wg(__global const float *part, int n_chunks, __global float *out, ulong out_off,
                   int n_head, int head_dim, __global const float *sinks, ulong sinks_off,
                   int has_sinks) {
    int h = get_group_id(0), i = get_group_id(1), lid = get_local_id(0);
    size_t width = head_dim + 2, row = (size_t)i * n_head + h;
    __global const float *pr = part + row * n_chunks * width;
    float big = -INFINITY;
    for (int c = 0; c < n_chunks; c++)
        big = fmax(big, pr[c * width]);
    float l = 0.0f;
    for (int c = 0; c < n_chunks; c++)
        l += pr[c * width + 1] * exp(pr[c * width] - big);
    l = sink_sum(sinks + sinks_off, has_sinks, h, big, l);
    __global float *o = out + out_off + row * head_dim;
    for (int d = lid; d < head_dim; d += OPS_WG) {
        float acc = 0.0f;
        for (int c = 0; c < n_chunks; c++)
            acc += pr[c * width + 2 + d] * exp(pr[c * width] - big);
        o[d] = acc / l;
    }
}

/* Prompts: tiled flash attention. Group (h, t) takes tokens TILE_Q t .. TILE_Q t + TILE_Q - 1
 * of head h and walks the positions any of them sees in tiles of TILE_P, each tile's keys and
 * values loaded into local memory once for the group's TILE_Q tokens (attention_wg read them
 * again for every token). Per tile: the TILE_Q x TILE_P scores, one per item (the causal mask,
 * the window and the soft-cap applied), then per token the online softmax (items < TILE_Q),
 * then each item's outputs (token, dimension), rescaled and added to. */
#define TILE_Q 8
#define TILE_P 8
#define TILE_OUT ((TILE_Q * MAX_HEAD_DIM + OPS_WG - 1) / OPS_WG)
#define KS_STRIDE (MAX_HEAD_DIM + 1) /* a pad float: the items of one token read 8 rows */

__kernel __attribute__((reqd_work_group_size(OPS_WG, 1, 1))) void
attention_tiled(__global const float *q, ulong q_off, __global const kv_t *k, ulong k_off,
                __global const kv_t *v, ulong v_off, __global float *out, ulong out_off, int n,
                int n_head, int n_kv_head, int head_dim, int pos0, int window, float scale,
                float softcap, __global const float *sinks, ulong sinks_off, int has_sinks) {
    __local float qs[TILE_Q * MAX_HEAD_DIM];
    __local float ks[TILE_P * KS_STRIDE];
    __local float vs[TILE_P * MAX_HEAD_DIM];
    __local float ps[TILE_Q * TILE_P];
    __local float row_m[TILE_Q], row_l[TILE_Q], row_shrink[TILE_Q];
    int h = get_group_id(0), i0 = get_group_id(1) * TILE_Q, lid = get_local_id(0);
    int kvh = h / (n_head / n_kv_head), nt = min(TILE_Q, n - i0);
    size_t stride = (size_t)n_kv_head * head_dim;
    __global const kv_t *kp = k + k_off + (size_t)kvh * head_dim;
    __global const kv_t *vp = v + v_off + (size_t)kvh * head_dim;
    for (int e = lid; e < TILE_Q * head_dim; e += OPS_WG) {
        int t = e / head_dim, d = e % head_dim;
        qs[t * MAX_HEAD_DIM + d] =
            t < nt ? q[q_off + ((size_t)(i0 + t) * n_head + h) * head_dim + d] * scale : 0.0f;
    }
    if (lid < TILE_Q) {
        row_m[lid] = -INFINITY;
        row_l[lid] = 0.0f;
    }
    float acc[TILE_OUT];
    for (int j = 0; j < TILE_OUT; j++)
        acc[j] = 0.0f;
    /* from the window's start of the first token to the last token's own position */
    int p_lo = window > 0 ? max(0, pos0 + i0 + 1 - window) : 0, p_hi = pos0 + i0 + nt - 1;
    for (int p0 = p_lo; p0 <= p_hi; p0 += TILE_P) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the last tile's reads are done */
        for (int e = lid; e < TILE_P * head_dim; e += OPS_WG) {
            int j = e / head_dim, d = e % head_dim, p = min(p0 + j, p_hi);
            ks[j * KS_STRIDE + d] = LOAD_KV(kp + (size_t)p * stride + d);
            vs[j * MAX_HEAD_DIM + d] = LOAD_KV(vp + (size_t)p * stride + d);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = lid; s < TILE_Q * TILE_P; s += OPS_WG) {
            int t = s / TILE_P, j = s % TILE_P, p = p0 + j, own = pos0 + i0 + t;
            bool seen = t < nt && p <= own && (window <= 0 || p > own - window);
            float dot = 0.0f;
            for (int d = 0; d < head_dim; d++)
                dot = fma(qs[t * MAX_HEAD_DIM + d], ks[j * KS_STRIDE + d], dot);
            ps[s] = seen ? SOFTCAP(dot, softcap) : -INFINITY;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < TILE_Q) {
            float m = row_m[lid], bm = -INFINITY;
            for (int j = 0; j < TILE_P; j++)
                bm = fmax(bm, ps[lid * TILE_P + j]);
            float m_new = fmax(m, bm), sum = 0.0f;
            for (int j = 0; j < TILE_P; j++) { /* -inf scores weigh 0 */
                float s = ps[lid * TILE_P + j];
                float e = s == -INFINITY ? 0.0f : exp(s - m_new);
                ps[lid * TILE_P + j] = e;
                sum += e;
            }
            float shrink = m == -INFINITY ? 0.0f : exp(m - m_new); /* nothing summed yet */
            row_shrink[lid] = shrink;
            row_l[lid] = row_l[lid] * shrink + sum;
            row_m[lid] = m_new;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < TILE_OUT; j++) {
            int o = lid + j * OPS_WG, t = o / head_dim, d = o % head_dim;
            if (t < TILE_Q) {
                float a = acc[j] * row_shrink[t];
                for (int jj = 0; jj < TILE_P; jj++)
                    a = fma(ps[t * TILE_P + jj], vs[jj * MAX_HEAD_DIM + d], a);
                acc[j] = a;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < TILE_Q)
        row_l[lid] = sink_sum(sinks + sinks_off, has_sinks, h, row_m[lid], row_l[lid]);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = 0; j < TILE_OUT; j++) {
        int o = lid + j * OPS_WG, t = o / head_dim, d = o % head_dim;
        if (t < nt)
            out[out_off + ((size_t)(i0 + t) * n_head + h) * head_dim + d] = acc[j] / row_l[t];
    }
}
