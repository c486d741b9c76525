/* A run of ops in one launch (CPU devices): the host (graph_cl.c) encodes each op as a record
 * of G_INTS ints and splits it into tasks; the work-groups (one work-item each, one per compute
 * unit) then take tasks in order from a ticket counter. A task waits until every task of the
 * records it depends on has finished (G_AFTER: the host groups the records of ops that touch
 * nothing the others write, such as a layer's matmuls of one x or a batch's attentions, into a
 * stage, and each waits on the stage before its own), so records run as the ops would, without a
 * launch between them: on PoCL a launch costs 5-8 us of two cores' time, which is what a decode
 * step of 180 launches lost to llama.cpp's spinning thread pool.
 *
 * Nothing can deadlock however many work-groups run at once, one included: a work-group takes a
 * task only once every task it depends on has finished, and then runs it to the end, so a taken
 * task never waits and a waiting work-group holds none. Waiting spins on counters that tasks
 * raise with atomic_inc (sequentially consistent on PoCL, so the waiter sees every output of the
 * record), which is why the host uses this kernel on CPU devices only.
 *
 * ctl holds the counters, G_LINE ints apart (one cache line each): the ticket, the work-groups
 * that have left, and per record the tasks finished. The last work-group to leave zeroes them
 * for the next launch. Buffers reach the kernel as G_SLOTS arguments; a record names an operand
 * by slot and offset (graph_record.clh lays the records out for both sides). The program is
 * built for the weight types of the run (each record of a weight names its type, and each type
 * has its own readers, see graph_typed.clh) and one KV cache type (-DKV_F16 or not); every
 * op computes exactly what the per-op kernels do, through the same functions, so a graph gives
 * the same bits as the launches it replaces. */

#include "glu.clh"
#include "layernorm.clh"
#include "rope.clh"
#include "round_q8.clh"
#include "transpose8.clh"
#include "attention.clh"
#include "graph_record.clh"
#include "f32_lanes.clh"

typedef __global uchar *slot_t;

#define F32(r, i) ((__global float *)slots[(r)[i]] + (uint)(r)[(i) + 1])
#define BYTES(r, i) (slots[(r)[i]] + (uint)(r)[(i) + 1])
#define XQ(r) ((__global char *)slots[(r)[G_Q8]])
#define XD(r) ((__global float2 *)slots[(r)[G_Q8 + 1]])
#define XF(r) ((__global float *)slots[(r)[G_Q8 + 2]])
#define WANT_F(r) ((r)[G_Q8 + 3])
#define XO(r) ((__global int *)slots[(r)[G_Q8 + 4]])

/* The readers and weight task of each weight type the program is built for: graph_cl.c passes
 * -DGT_<i>=<code> for its i-th type (in weight_types.clh's order; the code is the records'
 * G_WTYPE) and -DWT_<type>=(GT_CODE==<code>), which picks that type's readers, included here under
 * names suffixed with the code (graph_typed.clh). A type without readers is refused by the host:
 * graph launches are then off for its models. 14 slots: every type of weight_types.clh. */
#define GT_CAT2(a, b) a##_##b
#define GT_CAT(a, b) GT_CAT2(a, b)
#define GT_NAME(name) GT_CAT(name, GT_CODE)
#ifdef GT_0
#define GT_CODE GT_0
#include "graph_typed.clh"
#endif
#ifdef GT_1
#define GT_CODE GT_1
#include "graph_typed.clh"
#endif
#ifdef GT_2
#define GT_CODE GT_2
#include "graph_typed.clh"
#endif
#ifdef GT_3
#define GT_CODE GT_3
#include "graph_typed.clh"
#endif
#ifdef GT_4
#define GT_CODE GT_4
#include "graph_typed.clh"
#endif
#ifdef GT_5
#define GT_CODE GT_5
#include "graph_typed.clh"
#endif
#ifdef GT_6
#define GT_CODE GT_6
#include "graph_typed.clh"
#endif
#ifdef GT_7
#define GT_CODE GT_7
#include "graph_typed.clh"
#endif
#ifdef GT_8
#define GT_CODE GT_8
#include "graph_typed.clh"
#endif
#ifdef GT_9
#define GT_CODE GT_9
#include "graph_typed.clh"
#endif
#ifdef GT_10
#define GT_CODE GT_10
#include "graph_typed.clh"
#endif
#ifdef GT_11
#define GT_CODE GT_11
#include "graph_typed.clh"
#endif
#ifdef GT_12
#define GT_CODE GT_12
#include "graph_typed.clh"
#endif
#ifdef GT_13
#define GT_CODE GT_13
#include "graph_typed.clh"
#endif
#ifdef GT_14
#error "graph.cl has slots for 14 weight types"
#endif

#define WEIGHT_CASE(code)                                                                          \
    case code:                                                                                     \
        GT_CAT(weight_task, code)(r, task, slots);                                                 \
        break;

/* An EMBED or MATMUL task, by the weight's type. */
static void weight_task(__global const int *r, int task, const slot_t *slots) {
    switch (r[G_WTYPE]) {
#ifdef GT_0
        WEIGHT_CASE(GT_0)
#endif
#ifdef GT_1
        WEIGHT_CASE(GT_1)
#endif
#ifdef GT_2
        WEIGHT_CASE(GT_2)
#endif
#ifdef GT_3
        WEIGHT_CASE(GT_3)
#endif
#ifdef GT_4
        WEIGHT_CASE(GT_4)
#endif
#ifdef GT_5
        WEIGHT_CASE(GT_5)
#endif
#ifdef GT_6
        WEIGHT_CASE(GT_6)
#endif
#ifdef GT_7
        WEIGHT_CASE(GT_7)
#endif
#ifdef GT_8
        WEIGHT_CASE(GT_8)
#endif
#ifdef GT_9
        WEIGHT_CASE(GT_9)
#endif
#ifdef GT_10
        WEIGHT_CASE(GT_10)
#endif
#ifdef GT_11
        WEIGHT_CASE(GT_11)
#endif
#ifdef GT_12
        WEIGHT_CASE(GT_12)
#endif
#ifdef GT_13
        WEIGHT_CASE(GT_13)
#endif
    }
}

static void rmsnorm_task(__global const int *r, int task, const slot_t *slots) {
    int d = r[RMSNORM_D];
    rmsnorm_row(F32(r, RMSNORM_X) + (size_t)task * d, d, F32(r, RMSNORM_W), r[RMSNORM_HAS_W],
                F32(r, RMSNORM_Y) + (size_t)task * d, as_float(r[RMSNORM_EPS]),
                r[RMSNORM_WANT_Q], XQ(r) + (size_t)task * d,
                XD(r) + (size_t)task * (d / 32), XF(r) + (size_t)task * d, WANT_F(r));
}

/* Rounding blocks task * per_task .. of x rounded, as quantize_q8_act does. */
static void quantize_task(__global const int *r, int task, const slot_t *slots) {
    int span = r[QUANTIZE_SPAN], blocks = r[QUANTIZE_COUNT] / (32 * span);
    int per_task = r[QUANTIZE_PER_TASK];
    for (int i = task * per_task; i < min(blocks, (task + 1) * per_task); i++)
        round_span(F32(r, QUANTIZE_X), (size_t)i * span, span, XQ(r), XD(r), XF(r), WANT_F(r),
                   XO_FOR(span, XO(r)));
}

static attn_args attention_of(__global const int *r, const slot_t *slots) {
    return (attn_args){F32(r, ATT_Q),
                       (__global kv_t *)slots[r[ATT_K]] + (uint)r[ATT_K + 1],
                       (__global kv_t *)slots[r[ATT_V]] + (uint)r[ATT_V + 1],
                       F32(r, ATT_OUT),
                       F32(r, ATT_PART),
                       F32(r, ATT_K_SRC),
                       F32(r, ATT_V_SRC),
                       XQ(r),
                       XD(r),
                       XF(r),
                       1,
                       r[ATT_N_HEAD],
                       r[ATT_N_KV_HEAD],
                       r[ATT_HEAD_DIM],
                       r[ATT_POS0],
                       r[ATT_CHUNK],
                       r[ATT_N_CHUNKS],
                       r[ATT_WINDOW],
                       as_float(r[ATT_SCALE]),
                       as_float(r[ATT_SOFTCAP]),
                       r[ATT_N_ROT],
                       r[ATT_NEOX],
                       as_float(r[ATT_FREQ_BASE]),
                       as_float(r[ATT_FREQ_SCALE]),
                       WANT_F(r),
                       r[ATT_ROUND_Q8],
                       F32(r, ATT_SINKS),
                       r[ATT_HAS_SINKS]};
}

/* Function fn (ELT_*) of the float or float8 a and b; ELT_SCALE's scale k and cap c. */
#define ELT(fn, a, b, k, c)                                                                        \
    ((fn) == ELT_ADD     ? (a) + (b)                                                               \
     : (fn) == ELT_GELU  ? GELU(a)                                                                 \
     : (fn) == ELT_SCALE ? SOFTCAP((a) * (k), c)                                                   \
                         : GLU(a, b, fn))

/* y = fn(a, b) over elements task * per_task * 32 .., as elementwise.cl's kernels do them: 8 at a
 * time, and element by element where the 8 run past the end (of y, or for ADD of b's repeat);
 * with want_q each block of 32 rounded, as glu_q8_act does (the host asks for it only where
 * every 8 take the first way). */
static void eltwise_task(__global const int *r, int task, const slot_t *slots) {
    __global const float *a = F32(r, ELT_A), *b = F32(r, ELT_B);
    __global float *y = F32(r, ELT_Y);
    int count = r[ELT_COUNT], want_q = r[ELT_WANT_Q], per_task = r[ELT_PER_TASK];
    int fn = r[ELT_FN], b_count = r[ELT_B_COUNT];
    float k = as_float(r[ELT_SCALE_BY]), c = as_float(r[ELT_CAP]);
    int end = min(count, (task + 1) * per_task * 32);
    for (int i = task * per_task; 32 * i < end; i++) {
        float8 v[4];
        for (int j = 0; j < 4; j++) {
            int e = 32 * i + 8 * j, be = e % b_count;
            if (e + 8 <= count && be + 8 <= b_count) {
                float8 s = vload8(0, a + e);
                v[j] = ELT(fn, s, vload8(0, b + be), k, c);
                vstore8(v[j], 0, y + e);
            } else {
                for (int stop = min(e + 8, count); e < stop; e++) {
                    float s = a[e];
                    y[e] = ELT(fn, s, b[be], k, c);
                    be = be + 1 == b_count ? 0 : be + 1;
                }
            }
        }
        if (want_q) round_block(v, i, XQ(r), XD(r), XF(r), WANT_F(r));
    }
}

/* Row task of a LAYERNORM as layernorm_rows does it; with want_q its blocks rounded after. */
static void layernorm_task(__global const int *r, int task, const slot_t *slots) {
    int d = r[LAYERNORM_D];
    __global float *y = F32(r, LAYERNORM_Y) + (size_t)task * d;
    layernorm_row(F32(r, LAYERNORM_X) + (size_t)task * d, d, F32(r, LAYERNORM_W),
                  r[LAYERNORM_HAS_W], F32(r, LAYERNORM_B), r[LAYERNORM_HAS_B], y,
                  as_float(r[LAYERNORM_EPS]));
    if (!r[LAYERNORM_WANT_Q]) return;
    for (int b = 0; b < d / 32; b++) {
        float8 v[4];
        for (int j = 0; j < 4; j++)
            v[j] = vload8(4 * b + j, y);
        round_block(v, (size_t)task * (d / 32) + b, XQ(r), XD(r), XF(r), WANT_F(r));
    }
}

/* Values task * per_task * 8 .. of src into the cache, as store_f32 and store_f16 write them. */
static void store_task(__global const int *r, int task, const slot_t *slots) {
    __global const float *src = F32(r, STORE_SRC);
    __global kv_t *dst = (__global kv_t *)slots[r[STORE_DST]] + (uint)r[STORE_DST + 1];
    int count = r[STORE_COUNT], per_task = r[STORE_PER_TASK];
    int end = min(count, (task + 1) * per_task * 8);
    for (int e = task * per_task * 8; e < end; e += 8) {
        if (e + 8 <= count)
            STORE_KV8(vload8(0, src + e), 0, dst + e);
        else
            for (int i = e; i < count; i++)
                STORE_KV(src[i], dst + i);
    }
}

/* A work-group's angles of the rotation, computed once per position: every attention of a
 * decode step rotates by the same ones. */
typedef struct {
    int pos, n_rot; /* n_rot 0: none yet */
    float freq_base, freq_scale, mscale;
    __global const float *factors;
    float cs[ROPE_TABLE], ss[ROPE_TABLE];
} rope_cache;

static void run_task(__global const int *r, int task, const slot_t *slots, rope_cache *rope) {
    switch (r[G_KIND]) {
    case G_EMBED:
    case G_MATMUL:
        weight_task(r, task, slots);
        break;
    case G_RMSNORM:
        rmsnorm_task(r, task, slots);
        break;
    case G_QUANTIZE:
        quantize_task(r, task, slots);
        break;
    case G_ATTENTION: {
        attn_args a = attention_of(r, slots);
        __global const float *factors = r[ATT_HAS_FACTORS] ? F32(r, ATT_FACTORS) : 0;
        float mscale = as_float(r[ATT_MSCALE]);
        if (a.n_rot && (rope->n_rot != a.n_rot || rope->pos != a.pos0 ||
                        rope->freq_base != a.freq_base || rope->freq_scale != a.freq_scale ||
                        rope->factors != factors || rope->mscale != mscale)) {
            rope_table(a.pos0, a.n_rot, a.freq_base, a.freq_scale, factors, mscale, rope->cs,
                       rope->ss);
            rope->pos = a.pos0;
            rope->n_rot = a.n_rot;
            rope->freq_base = a.freq_base;
            rope->freq_scale = a.freq_scale;
            rope->factors = factors;
            rope->mscale = mscale;
        }
        attention_item(&a, task / a.n_chunks, 0, task % a.n_chunks, rope->cs, rope->ss);
        break;
    }
    case G_MERGE: {
        attn_args a = attention_of(r, slots);
        attention_merge_item(&a, task, 0);
        break;
    }
    case G_ELTWISE:
        eltwise_task(r, task, slots);
        break;
    case G_LAYERNORM:
        layernorm_task(r, task, slots);
        break;
    case G_STORE:
        store_task(r, task, slots);
        break;
    }
}

/* Spins until every task of records first .. last has finished, then takes a full barrier (an
 * atomic read-modify-write), so nothing after it is read before what they wrote. A wait that
 * spins past SPIN_LIMIT (seconds; OpenCL C has no clock), or finds another one did, raises
 * ctl's G_STALLED and returns false: the work-groups then leave with tasks undone, and the host
 * reports the stall (a device that does not run the launch's work-groups at once), never a
 * hang. */
#if defined(__x86_64__) || defined(__i386__)
#define SPIN_LIMIT (1L << 24) /* pauses of 40-140 cycles each: 0.3-1 s on a quiet CPU */
#else
#define SPIN_LIMIT (1L << 28)
#endif
static bool wait_for(__global volatile int *ctl, __global const int *recs, int first, int last) {
    for (int k = first; k <= last; k++)
        for (long spins = 0; ctl[G_LINE * (k + 2)] < recs[k * G_INTS + G_TASKS]; spins++) {
            if (spins == SPIN_LIMIT || ctl[G_STALLED]) {
                atomic_xchg(ctl + G_STALLED, 1);
                return false;
            }
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    atomic_add(ctl + G_LINE * (last + 2), 0);
    return true;
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
    slot_t slots[G_SLOTS] = {SLOTS_64(SLOT_VALUE)};
    rope_cache rope = {.n_rot = 0};
    int rec = 0, first = 0; /* the record of the last ticket and its first ticket */
    int waited = -1;        /* the record whose wait this work-group has done */
    /* The next ticket is waited for before it is taken (atomic_cmpxchg: another work-group may
     * take it meanwhile, then the one after it is tried): a work-group that waits holds no task,
     * so one that the OS deschedules while it spins stalls no other. Taking first and waiting
     * after made every stage wait for every work-group to be running at once, which a loaded
     * CPU rarely grants: 120-500 ms a decode step against 21-28 with per-op launches. */
    for (int ticket = ctl[0];;) {
        while (rec < n_recs && ticket >= first + recs[rec * G_INTS + G_TASKS])
            first += recs[rec++ * G_INTS + G_TASKS];
        if (rec >= n_recs) break;
        if (rec > waited) {
            __global const int *r = recs + rec * G_INTS;
            if (r[G_AFTER] <= r[G_AFTER + 1] && !wait_for(ctl, recs, r[G_AFTER], r[G_AFTER + 1]))
                break;
            waited = rec;
        }
        int seen = atomic_cmpxchg(ctl, ticket, ticket + 1);
        if (seen != ticket) {
            ticket = seen;
            continue;
        }
        run_task(recs + rec * G_INTS, ticket - first, slots, &rope);
        atomic_inc(ctl + G_LINE * (rec + 2));
        ticket++;
    }
    if (atomic_inc(ctl + G_LINE) != (int)get_num_groups(0) - 1) return;
    for (int i = 0; i < n_recs + 2; i++)
        ctl[G_LINE * i] = 0;
}
