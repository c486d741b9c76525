/* A run of ops in one launch (CPU devices): the host (graph_cl.c) encodes each op as a record
 * of G_INTS ints and splits it into tasks; the work-groups (one work-item each, one per compute
 * unit) then take tasks in order from a ticket counter. A task waits until every task of the
 * record before it has finished, so records run one after the other as the ops would, without a
 * launch between them: on PoCL a launch costs 5-8 us of two cores' time, which is what a decode
 * step of 180 launches lost to llama.cpp's spinning thread pool.
 *
 * Nothing can deadlock however many work-groups run at once, one included: a task is taken only
 * by a running work-group, which finishes it before taking another, so the oldest unfinished
 * task never waits on a task not yet taken. Waiting spins on counters that tasks raise with
 * atomic_inc (sequentially consistent on PoCL, so the waiter sees every output of the record),
 * which is why the host uses this kernel on CPU devices only.
 *
 * ctl holds the counters, G_LINE ints apart (one cache line each): the ticket, the work-groups
 * that have left, and per record the tasks finished. The last work-group to leave zeroes them
 * for the next launch. Buffers reach the kernel as 64 arguments (N_SLOTS in graph_cl.c); a record
 * names an operand by slot and element offset. The program is built for one weight type (weights.clh's -DWT_)
 * and one KV cache type (-DKV_F16 or not); every op computes exactly what the per-op kernels do,
 * through the same functions, so a graph gives the same bits as the launches it replaces. */

#include "rope.clh"
#include "round_q8.clh"
#include "weights.clh"
#include "attention.clh"

#define G_INTS 32
#define G_LINE 16

/* Record kinds and their fields (graph_cl.c writes them; every record starts with kind, tasks,
 * and ends with the q8 fields at Q8_AT; an operand is a slot then an offset in elements, floats
 * are stored as their bits):
 *   G_EMBED      w (q, s: byte offsets), il, k, m, ids, y: a task per row, y[i] = W[ids[i]]
 *   G_RMSNORM    x, w, has_w, y, d, eps, want_q: a task per row
 *   G_QUANTIZE   x, count, per_task
 *   G_MATMUL     w (q, s), il, k, r0, rows, x, y, bias, flags, variant, per_task
 *   G_ATTENTION  q, k, v, out, part, k_src, v_src, n_head, n_kv_head, head_dim, pos0, chunk,
 *                n_chunks, scale, n_rot, neox, freq_base, freq_scale, round_q8
 *   G_MERGE      as G_ATTENTION: combines its chunks
 *   G_SWIGLU     a, b, y, count, want_q, per_task */
#define G_EMBED 1
#define G_RMSNORM 2
#define G_QUANTIZE 3
#define G_MATMUL 4
#define G_ATTENTION 5
#define G_MERGE 6
#define G_SWIGLU 7

/* matmul variants: f32 x (row_dot), 8-bit x over rows interleaved by 16 (il_rows), 8-bit x
 * row-major (q8_row_dot) */
#define MM_ROWS 0
#define MM_IL 1
#define MM_Q8 2

/* The rounded activations of a record that writes or reads them: slots of xq, xd and xf, and
 * want_f, at fields Q8_AT .. Q8_AT + 3 of every record. */
#define Q8_AT 28

typedef __global uchar *slot_t;

#define F32(r, i) ((__global float *)slots[(r)[i]] + (uint)(r)[(i) + 1])
#define BYTES(r, i) (slots[(r)[i]] + (uint)(r)[(i) + 1])
#define XQ(r) ((__global char *)slots[(r)[Q8_AT]])
#define XD(r) ((__global float2 *)slots[(r)[Q8_AT + 1]])
#define XF(r) ((__global float *)slots[(r)[Q8_AT + 2]])
#define WANT_F(r) ((r)[Q8_AT + 3])

static void embed_task(__global const int *r, int task, const slot_t *slots) {
    wq_t wq = BYTES(r, 2);
    ws_t ws = BYTES(r, 4);
    int il = r[6], k = r[7], m = r[8];
    int row = ((__global const int *)slots[r[9]])[(uint)r[10] + task];
    __global float *o = F32(r, 11) + (size_t)task * k;
    if (row < 0 || row >= m) { /* as dequant_rows: ids outside the weight give zeros */
        for (int e = 0; e < k; e++)
            o[e] = 0.0f;
        return;
    }
    for (int b = 0; b <= k / BLK; b++) /* the blocks, then the tail */
        dequant_block(wq, ws, il, row, k, b, o);
}

static void rmsnorm_task(__global const int *r, int task, const slot_t *slots) {
    int d = r[9];
    rmsnorm_row(F32(r, 2) + (size_t)task * d, d, F32(r, 4), r[6], F32(r, 7) + (size_t)task * d,
                as_float(r[10]), r[11], XQ(r) + (size_t)task * d,
                XD(r) + (size_t)task * (d / 32), XF(r) + (size_t)task * d, WANT_F(r));
}

/* Blocks task * per_task .. of x rounded, as quantize_q8_act does. */
static void quantize_task(__global const int *r, int task, const slot_t *slots) {
    __global const float *x = F32(r, 2);
    int blocks = r[4] / 32, per_task = r[5];
    for (int i = task * per_task; i < min(blocks, (task + 1) * per_task); i++) {
        float8 v[4];
        for (int j = 0; j < 4; j++)
            v[j] = vload8(4 * i + j, x);
        round_block(v, i, XQ(r), XD(r), XF(r), WANT_F(r));
    }
}

static void matmul_task(__global const int *r, int task, const slot_t *slots) {
    wq_t wq = BYTES(r, 2);
    ws_t ws = BYTES(r, 4);
    int il = r[6], k = r[7], r0 = r[8], rows = r[9], flags = r[16], variant = r[17];
    int per_task = r[18];
    __global const float *x = F32(r, 10);
    __global float *y = F32(r, 12);
    __global const float *bias = F32(r, 14);
#ifdef IL_DOTS
    if (variant == MM_IL) { /* per_task groups of 16 rows, from the group holding row r0 */
        int g_end = (r0 + rows - 1) / 16 + 1;
        for (int g = r0 / 16 + task * per_task; g < min(g_end, r0 / 16 + (task + 1) * per_task);
             g++)
            il_rows(wq, ws, k, r0, rows, g, 0, 1, XQ(r), XD(r), y, 0, rows, bias, 0, flags);
        return;
    }
#endif
    for (int i = task * per_task; i < min(rows, (task + 1) * per_task); i++) {
#ifdef Q8_DOTS
        float s = variant == MM_Q8 ? q8_row_dot(wq, ws, k, r0 + i, XQ(r), XD(r))
                                   : row_dot(wq, ws, il, r0 + i, k, x);
#else
        float s = row_dot(wq, ws, il, r0 + i, k, x);
#endif
        store_y(y, i, s, bias, 0, flags);
    }
}

static attn_args attention_of(__global const int *r, const slot_t *slots) {
    return (attn_args){F32(r, 2),
                       (__global kv_t *)slots[r[4]] + (uint)r[5],
                       (__global kv_t *)slots[r[6]] + (uint)r[7],
                       F32(r, 8),
                       F32(r, 10),
                       F32(r, 12),
                       F32(r, 14),
                       XQ(r),
                       XD(r),
                       XF(r),
                       1,
                       r[16],
                       r[17],
                       r[18],
                       r[19],
                       r[20],
                       r[21],
                       as_float(r[22]),
                       r[23],
                       r[24],
                       as_float(r[25]),
                       as_float(r[26]),
                       WANT_F(r),
                       r[27]};
}

/* y = silu(a) * b over elements task * per_task * 32 ..: in blocks of 32 rounded (want_q) as
 * swiglu_q8_act does, or as elementwise.cl's swiglu does, 8 at a time and the rest one by one. */
static void swiglu_task(__global const int *r, int task, const slot_t *slots) {
    __global const float *a = F32(r, 2), *b = F32(r, 4);
    __global float *y = F32(r, 6);
    int count = r[8], want_q = r[9], per_task = r[10];
    int end = min(count, (task + 1) * per_task * 32);
    for (int i = task * per_task; 32 * i < end; i++) {
        float8 v[4];
        for (int j = 0; j < 4; j++) {
            int e = 32 * i + 8 * j;
            if (e + 8 <= count) {
                float8 s = vload8(0, a + e);
                v[j] = s / (1.0f + exp(-s)) * vload8(0, b + e);
                vstore8(v[j], 0, y + e);
            } else {
                for (; e < count; e++) {
                    float s = a[e];
                    y[e] = s / (1.0f + exp(-s)) * b[e];
                }
            }
        }
        if (want_q) round_block(v, i, XQ(r), XD(r), XF(r), WANT_F(r));
    }
}

/* A work-group's angles of the rotation, computed once per position: every attention of a
 * decode step rotates by the same ones. */
typedef struct {
    int pos, n_rot; /* n_rot 0: none yet */
    float freq_base, freq_scale;
    float cs[ROPE_TABLE], ss[ROPE_TABLE];
} rope_cache;

static void run_task(__global const int *r, int task, const slot_t *slots, rope_cache *rope) {
    switch (r[0]) {
    case G_EMBED:
        embed_task(r, task, slots);
        break;
    case G_RMSNORM:
        rmsnorm_task(r, task, slots);
        break;
    case G_QUANTIZE:
        quantize_task(r, task, slots);
        break;
    case G_MATMUL:
        matmul_task(r, task, slots);
        break;
    case G_ATTENTION: {
        attn_args a = attention_of(r, slots);
        if (a.n_rot && (rope->n_rot != a.n_rot || rope->pos != a.pos0 ||
                        rope->freq_base != a.freq_base || rope->freq_scale != a.freq_scale)) {
            rope_table(a.pos0, a.n_rot, a.freq_base, a.freq_scale, rope->cs, rope->ss);
            rope->pos = a.pos0;
            rope->n_rot = a.n_rot;
            rope->freq_base = a.freq_base;
            rope->freq_scale = a.freq_scale;
        }
        attention_item(&a, task / a.n_chunks, 0, task % a.n_chunks, rope->cs, rope->ss);
        break;
    }
    case G_MERGE: {
        attn_args a = attention_of(r, slots);
        attention_merge_item(&a, task, 0);
        break;
    }
    case G_SWIGLU:
        swiglu_task(r, task, slots);
        break;
    }
}

/* Spins until *counter reaches want, then takes a full barrier (an atomic read-modify-write), so
 * nothing after it is read before the tasks that counted were done. */
static void wait_for(__global volatile int *counter, int want) {
    while (*counter < want) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    atomic_add(counter, 0);
}

#define SLOT_PARAM(i) , __global uchar *s##i
#define SLOT_VALUE(i) s##i,
#define SLOTS_8(X, a) X(a##0) X(a##1) X(a##2) X(a##3) X(a##4) X(a##5) X(a##6) X(a##7)
#define SLOTS_64(X)                                                                                \
    SLOTS_8(X, ) SLOTS_8(X, 1) SLOTS_8(X, 2) SLOTS_8(X, 3) SLOTS_8(X, 4) SLOTS_8(X, 5)             \
        SLOTS_8(X, 6) SLOTS_8(X, 7)

/* Global size: any number of work-groups of one item (the host takes the compute units). */
__kernel void run_graph(__global const int *recs, int n_recs,
                        __global volatile int *ctl SLOTS_64(SLOT_PARAM)) {
    slot_t slots[64] = {SLOTS_64(SLOT_VALUE)};
    rope_cache rope = {.n_rot = 0};
    int rec = 0, first = 0; /* the record of the last ticket and its first ticket */
    int ready = 0;          /* records before this one are known to be done */
    for (;;) {
        int ticket = atomic_inc(ctl);
        while (rec < n_recs && ticket >= first + recs[rec * G_INTS + 1])
            first += recs[rec++ * G_INTS + 1];
        if (rec >= n_recs) break;
        if (rec > ready) {
            wait_for(ctl + G_LINE * (rec + 1), recs[(rec - 1) * G_INTS + 1]);
            ready = rec;
        }
        run_task(recs + rec * G_INTS, ticket - first, slots, &rope);
        atomic_inc(ctl + G_LINE * (rec + 2));
    }
    if (atomic_inc(ctl + G_LINE) != (int)get_num_groups(0) - 1) return;
    for (int i = 0; i < n_recs + 2; i++)
        ctl[G_LINE * i] = 0;
}
