/* The records of graph launches (graph_encode_cl.h): what graph_cl.c's banner says of them. */
#include <stdint.h>
#include <string.h>

#include "graph_encode_cl.h"
#include "ops_cl.h"

/* What cl/graph.cl assumes of graph_record.clh's layout, which the enum alone does not hold. */
_Static_assert(G_SLOTS == 64, "run_graph takes 64 slot arguments (graph.cl's SLOTS_64)");
_Static_assert(G_Q8 + 5 <= G_INTS, "graph.cl reads xq, xd, xf, want_f and xo at G_Q8 .. G_Q8 + 4");
_Static_assert(G_AFTER + 2 <= G_WTYPE && G_WTYPE < G_Q8, "G_AFTER's two ints, G_WTYPE, G_Q8");
_Static_assert(EMBED_SCALE < G_AFTER && RMSNORM_WANT_Q < G_AFTER && QUANTIZE_SPAN < G_AFTER &&
                   MATMUL_N < G_AFTER && ATT_WINDOW < G_AFTER && ELT_CAP < G_AFTER &&
                   LAYERNORM_WANT_Q < G_AFTER && STORE_PER_TASK < G_AFTER,
               "every kind's fields lie below the fields every record has");

/* ---- buffers and records --------------------------------------------------------------- */

/* The slot of mem, added when there is room; -1 when the launch's arguments are used up, or
 * when offsets into mem would not fit the records' 32 bits. */
static int slot_of(encoder *e, cl_mem mem) {
    for (int i = 0; i < e->n_slots; i++)
        if (e->slots[i] == mem) return i;
    size_t size = 0;
    if (e->n_slots == G_SLOTS ||
        clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS ||
        size > UINT32_MAX)
        return -1;
    e->slots[e->n_slots] = mem;
    return e->n_slots++;
}

/* Whether the buffers of an op (up to 8) fit in the slots left, taking them if so. */
static bool take_slots(encoder *e, const cl_mem *mems, int n) {
    int before = e->n_slots;
    for (int i = 0; i < n; i++)
        if (slot_of(e, mems[i]) < 0) {
            e->n_slots = before;
            return false;
        }
    return true;
}

/* A new record of kind split into tasks, in the last record's stage, waiting on records first
 * .. last; its rounding fields name the reserved slot until put_q8 names an 8-bit form. */
static int32_t *record_after(encoder *e, int kind, size_t tasks, int first, int last) {
    int32_t *r = e->recs + e->n_recs++ * G_INTS;
    memset(r, 0, G_INTS * sizeof *r);
    r[G_KIND] = kind;
    r[G_TASKS] = (int32_t)tasks;
    r[G_AFTER] = first;
    r[G_AFTER + 1] = last;
    e->roundable.want_q = NULL;
    return r;
}

static void put_attention(encoder *e, int32_t *r, const clinfer_op *op, size_t chunk,
                          size_t n_chunks, int round_q8, size_t part);

/* The stage's merges, each waiting on its attention only: the attentions of the other sequences
 * run first, and by then most of them have nothing to wait for. */
void cl_graph_put_merges(encoder *e) {
    for (int i = 0; i < e->n_merges; i++) {
        const clinfer_op *op = e->merges[i].op;
        int32_t *r = record_after(e, G_MERGE, (size_t)op->attention.n_head, e->merges[i].at,
                                  e->merges[i].at);
        put_attention(e, r, op, e->merges[i].chunk, e->merges[i].n_chunks, e->merges[i].round_q8,
                      e->merges[i].part);
        memcpy(r + G_Q8, e->merges[i].q8, sizeof e->merges[i].q8);
    }
    e->n_merges = 0;
}

/* What op touches: the n_reads regions at reads (counts elements each), then what it writes. */
static op_span span_of(const clinfer_op *op, const clinfer_ref *reads, const size_t *counts,
                       int n_reads) {
    op_span span = {.n = n_reads, .writes = n_reads};
    for (int i = 0; i < n_reads; i++) {
        span.at[i] = reads[i];
        span.count[i] = counts[i];
    }
    clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS];
    for (size_t i = 0, n_out = op_outputs(op, out); i < n_out; i++) {
        span.at[span.n] = out[i].ref;
        span.count[span.n++] = out[i].count;
    }
    return span;
}

/* Whether neither of x and y writes what the other touches. */
static bool apart(const op_span *x, const op_span *y) {
    for (int i = 0; i < x->n; i++)
        for (int j = y->writes; j < y->n; j++)
            if (refs_overlap(x->at[i], x->count[i], y->at[j], y->count[j])) return false;
    for (int i = 0; i < y->n; i++)
        for (int j = x->writes; j < x->n; j++)
            if (refs_overlap(y->at[i], y->count[i], x->at[j], x->count[j])) return false;
    return true;
}

/* A new record that starts a stage of its own, after the whole of the last one. */
static int32_t *record(encoder *e, int kind, size_t tasks) {
    cl_graph_put_merges(e);
    e->after[0] = e->stage;
    e->after[1] = (int)e->n_recs - 1;
    e->stage = (int)e->n_recs;
    e->n_spans = 0;
    e->part_used = 0;
    return record_after(e, kind, tasks, e->after[0], e->after[1]);
}

/* A new record of an op that touches span: in the last record's stage where that is one of ops
 * apart from it, else in a stage of its own. */
static int32_t *record_op(encoder *e, int kind, size_t tasks, const op_span *span) {
    bool joins = e->n_spans > 0 && e->n_spans < MAX_STAGE;
    for (int i = 0; joins && i < e->n_spans; i++)
        joins = apart(&e->spans[i], span);
    int32_t *r =
        joins ? record_after(e, kind, tasks, e->after[0], e->after[1]) : record(e, kind, tasks);
    e->spans[e->n_spans++] = *span;
    return r;
}

/* Fields at, at + 1 of r: the operand ref (its buffer already has a slot). */
static void put_ref(encoder *e, int32_t *r, int at, clinfer_ref ref) {
    r[at] = slot_of(e, ref.buf->mem);
    r[at + 1] = (int32_t)ref.offset;
}

/* Fields at, at + 1 of r: bytes from offset of mem (which already has a slot). */
static void put_mem(encoder *e, int32_t *r, int at, cl_mem mem, size_t offset) {
    r[at] = slot_of(e, mem);
    r[at + 1] = (int32_t)offset;
}

static int32_t float_bits(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

/* How work items of unit_bytes each are split: *per_task of them per task, the task count
 * returned. */
static size_t split(const encoder *e, size_t work, size_t unit_bytes, size_t *per_task) {
    size_t units = e->b->info.compute_units ? e->b->info.compute_units : 1;
    size_t tasks = work * unit_bytes / TASK_BYTES;
    if (tasks < 2 * units) tasks = 2 * units;
    if (tasks > MAX_TASKS * units) tasks = MAX_TASKS * units;
    if (tasks > work) tasks = work;
    *per_task = (work + tasks - 1) / tasks;
    return (work + *per_task - 1) / *per_task;
}

/* ---- ops ------------------------------------------------------------------------------- */

/* The code of a weight type in records and program options (cl/graph_typed.clh): 2 * type,
 * plus 1 where its matmuls take 8-bit x. */
int32_t cl_graph_type_code(clinfer_dtype type) {
    return 2 * (int32_t)type + (dtype_takes_q8_act(type) ? 1 : 0);
}

/* Whether the kernel has readers for the op's weight type, adding it to the run's set. */
static bool take_type(encoder *e, clinfer_dtype type) {
    if (!dtype_valid(type) || (unsigned)type >= 64) return false;
    e->types |= (uint64_t)1 << type;
    return true;
}

/* The record r just made can round y (count values) at its want_q field. */
static void may_round(encoder *e, int32_t *r, int32_t *want_q, clinfer_ref y, size_t count) {
    e->roundable.want_q = want_q;
    e->roundable.rec = r;
    e->roundable.y = y;
    e->roundable.count = count;
    e->roundable.merge = -1;
}

/* Record r's G_Q8 fields: the 8-bit form q, d (and xo) and f32 values f that it writes or, for a
 * matmul, reads (their buffers have slots already). */
static void put_q8(encoder *e, int32_t *r, cl_mem q, cl_mem d, cl_mem f, cl_mem xo) {
    r[G_Q8] = slot_of(e, q);
    r[G_Q8 + 1] = slot_of(e, d);
    r[G_Q8 + 2] = slot_of(e, f);
    r[G_Q8 + 3] = 1; /* want_f: f is the ROUND_Q8's y */
    r[G_Q8 + 4] = slot_of(e, xo);
}

static bool encode_matmul(encoder *e, const clinfer_op *op) {
    cl_weight_view w;
    int n = op->matmul.n;
    if (n > MAX_N || cl_weight_view_of(e->b, op, &w) != CLINFER_OK || w.parts != 1) return false;
    /* Several columns through the per-op kernels' own functions (matvec_q8_il's and
     * matvec_il_n's column walks, gemm_q8's tiles), so the bits are theirs; f32 x over row-major
     * weights (matvec_rows_n) keeps one column. */
    bool il = w.variant == CL_MM_IL || w.variant == CL_MM_IL_F32;
    bool tiles = w.variant == CL_MM_Q8 && n > 1; /* GEMM_Q8_MIN_N: gemm_q8 from 2 columns */
    if ((n > 1 && !il && !tiles) || !take_type(e, w.type)) return false;
    clinfer_ref x = op->matmul.x, y = op->matmul.y, bias = op->matmul.bias;
    int k = op->matmul.k, m = op->matmul.m, x_q8 = op->matmul.x_q8;
    const cl_q8_side *xq = x.buf->q8; /* x_q8: the form a ROUND_Q8 made (cl_q8_check_walk) */
    if (x_q8 && (!xq || !xq->q.mem || !xq->d.mem)) return false;
    cl_mem none = y.buf->mem;
    cl_mem mems[8] = {w.q,
                      w.s,
                      x.buf->mem,
                      y.buf->mem,
                      bias.buf ? bias.buf->mem : y.buf->mem,
                      x_q8 ? xq->q.mem : none,
                      x_q8 ? xq->d.mem : none,
                      x_q8 && xq->xo.mem ? xq->xo.mem : none};
    if (!take_slots(e, mems, 8)) return false;
    size_t count = (size_t)n * (size_t)k;
    /* the units a task takes: rows, groups of 16 over interleaved weights, or gemm_q8's tiles'
     * rows (counted as rows from the op's first) */
    int variant = w.variant, r0 = op->matmul.row0, unit = il ? 16 : tiles ? GEMM_Q8_M : 1;
    int work = tiles ? (m + unit - 1) / unit : (r0 + m - 1) / unit + 1 - r0 / unit;
    size_t per_task,
        tasks = split(e, (size_t)work, w.row_bytes * (size_t)unit * (size_t)n, &per_task);
    if (tiles) per_task *= (size_t)unit;
    /* the matmuls of one x (q, k and v; gate and up) run at once */
    clinfer_ref reads[2] = {x, bias};
    size_t counts[2] = {count, (size_t)m};
    op_span touched = span_of(op, reads, counts, bias.buf ? 2 : 1);
    int32_t *r = record_op(e, G_MATMUL, tasks, &touched);
    r[G_WTYPE] = cl_graph_type_code(w.type);
    put_mem(e, r, MATMUL_Q, w.q, w.q_off);
    put_mem(e, r, MATMUL_S, w.s, w.s_off);
    r[MATMUL_IL] = w.il;
    r[MATMUL_K] = k;
    r[MATMUL_R0] = r0;
    r[MATMUL_ROWS] = m;
    put_ref(e, r, MATMUL_X, x); /* f32 kernels read x_q8's x as it is: d * q */
    if (x_q8) put_q8(e, r, mems[5], mems[6], x.buf->mem, mems[7]);
    put_ref(e, r, MATMUL_Y, y);
    put_ref(e, r, MATMUL_BIAS, bias.buf ? bias : y);
    r[MATMUL_FLAGS] = (op->matmul.accumulate ? 1 : 0) | (bias.buf ? 2 : 0);
    r[MATMUL_VARIANT] = variant;
    r[MATMUL_PER_TASK] = (int32_t)per_task;
    r[MATMUL_N] = n;
    return true;
}

static bool encode_embed(encoder *e, const clinfer_op *op) {
    cl_weight_view w;
    if (cl_weight_view_of(e->b, op, &w) != CLINFER_OK || w.parts != 1 || !take_type(e, w.type))
        return false;
    cl_mem mems[4] = {w.q, w.s, op->embed.ids.buf->mem, op->embed.y.buf->mem};
    if (!take_slots(e, mems, 4)) return false;
    int32_t *r = record(e, G_EMBED, (size_t)op->embed.n);
    r[G_WTYPE] = cl_graph_type_code(w.type);
    put_mem(e, r, EMBED_Q, w.q, w.q_off);
    put_mem(e, r, EMBED_S, w.s, w.s_off);
    r[EMBED_IL] = w.il;
    r[EMBED_K] = op->embed.k;
    r[EMBED_M] = op->embed.m;
    put_ref(e, r, EMBED_IDS, op->embed.ids);
    put_ref(e, r, EMBED_Y, op->embed.y);
    r[EMBED_SCALE] = float_bits(op->embed.scale);
    return true;
}

static bool encode_rmsnorm(encoder *e, const clinfer_op *op) {
    clinfer_ref x = op->norm.x, w = op->norm.w, y = op->norm.y;
    cl_mem mems[3] = {x.buf->mem, w.buf ? w.buf->mem : x.buf->mem, y.buf->mem};
    if (!take_slots(e, mems, 3)) return false;
    int32_t *r = record(e, G_RMSNORM, (size_t)op->norm.n);
    put_ref(e, r, RMSNORM_X, x);
    put_ref(e, r, RMSNORM_W, w.buf ? w : x);
    r[RMSNORM_HAS_W] = w.buf != NULL;
    put_ref(e, r, RMSNORM_Y, y);
    r[RMSNORM_D] = op->norm.d;
    r[RMSNORM_EPS] = float_bits(op->norm.eps);
    /* not in place, as cl_round_fusable */
    if (op->norm.d % 32 == 0 && y.buf != x.buf)
        may_round(e, r, r + RMSNORM_WANT_Q, y, (size_t)op->norm.n * (size_t)op->norm.d);
    return true;
}

/* ADD, GELU, SWIGLU, GEGLU, SWIGLU_OAI and SCALE: y = fn(a, b), in blocks of 32 a task. */
static bool encode_eltwise(encoder *e, const clinfer_op *op) {
    static const int32_t fns[] = {[CLINFER_OP_ADD] = ELT_ADD,
                                  [CLINFER_OP_GELU] = ELT_GELU,
                                  [CLINFER_OP_SWIGLU] = ELT_SWIGLU,
                                  [CLINFER_OP_GEGLU] = ELT_GEGLU,
                                  [CLINFER_OP_SWIGLU_OAI] = ELT_SWIGLU_OAI,
                                  [CLINFER_OP_SCALE] = ELT_SCALE};
    size_t count = op->eltwise.count;
    size_t b_count = op->kind == CLINFER_OP_ADD ? op->eltwise.b_count : count;
    if (count == 0 || count > INT32_MAX || b_count > INT32_MAX) return false;
    clinfer_ref a = op->eltwise.a, y = op->eltwise.y;
    bool no_b = op->kind == CLINFER_OP_GELU || op->kind == CLINFER_OP_SCALE;
    clinfer_ref b = no_b ? a : op->eltwise.b;
    cl_mem mems[3] = {a.buf->mem, b.buf->mem, y.buf->mem};
    if (!take_slots(e, mems, 3)) return false;
    size_t per_task, tasks = split(e, (count + 31) / 32, 32 * 12, &per_task);
    int32_t *r = record(e, G_ELTWISE, tasks);
    put_ref(e, r, ELT_A, a);
    put_ref(e, r, ELT_B, b);
    put_ref(e, r, ELT_Y, y);
    r[ELT_COUNT] = (int32_t)count;
    r[ELT_PER_TASK] = (int32_t)per_task;
    r[ELT_FN] = fns[op->kind];
    r[ELT_B_COUNT] = (int32_t)b_count;
    r[ELT_SCALE_BY] = float_bits(op->kind == CLINFER_OP_SCALE ? op->eltwise.scale : 0.0f);
    r[ELT_CAP] = float_bits(op->kind == CLINFER_OP_SCALE ? op->eltwise.cap : 0.0f);
    /* every 8 values in the vector form: the task can round y for a matmul after it */
    if (count % 32 == 0 && b_count % 8 == 0) may_round(e, r, r + ELT_WANT_Q, y, count);
    return true;
}

static bool encode_layernorm(encoder *e, const clinfer_op *op) {
    clinfer_ref x = op->norm.x, w = op->norm.w, b = op->norm.b, y = op->norm.y;
    cl_mem mems[4] = {x.buf->mem, w.buf ? w.buf->mem : x.buf->mem, b.buf ? b.buf->mem : x.buf->mem,
                      y.buf->mem};
    if (!take_slots(e, mems, 4)) return false;
    int32_t *r = record(e, G_LAYERNORM, (size_t)op->norm.n);
    put_ref(e, r, LAYERNORM_X, x);
    put_ref(e, r, LAYERNORM_W, w.buf ? w : x);
    r[LAYERNORM_HAS_W] = w.buf != NULL;
    put_ref(e, r, LAYERNORM_B, b.buf ? b : x);
    r[LAYERNORM_HAS_B] = b.buf != NULL;
    put_ref(e, r, LAYERNORM_Y, y);
    r[LAYERNORM_D] = op->norm.d;
    r[LAYERNORM_EPS] = float_bits(op->norm.eps);
    if (op->norm.d % 32 == 0 && y.buf != x.buf) /* rows rounded after they are written */
        may_round(e, r, r + LAYERNORM_WANT_Q, y, (size_t)op->norm.n * (size_t)op->norm.d);
    return true;
}

/* A KV cache write, of the program's cache type (as an attention's). */
static bool encode_store(encoder *e, const clinfer_op *op) {
    size_t count = op->store.count;
    int f16 = op->store.dst_type == CLINFER_DT_F16;
    if (count == 0 || count > INT32_MAX || (e->kv_f16 >= 0 && e->kv_f16 != f16)) return false;
    clinfer_ref src = op->store.src, dst = op->store.dst;
    cl_mem mems[2] = {src.buf->mem, dst.buf->mem};
    if (!take_slots(e, mems, 2)) return false;
    e->kv_f16 = f16;
    size_t per_task,
        tasks = split(e, (count + 7) / 8, 8 * (sizeof(float) + (f16 ? 2 : 4)), &per_task);
    int32_t *r = record(e, G_STORE, tasks);
    put_ref(e, r, STORE_SRC, src);
    put_ref(e, r, STORE_DST, dst);
    r[STORE_COUNT] = (int32_t)count;
    r[STORE_PER_TASK] = (int32_t)per_task;
    return true;
}

/* The attention record's fields, its chunks' results at part (floats into the scratch); the merge
 * record repeats them. */
static void put_attention(encoder *e, int32_t *r, const clinfer_op *op, size_t chunk,
                          size_t n_chunks, int round_q8, size_t part) {
    int rope = op->attention.rope.n_rot != 0;
    put_ref(e, r, ATT_Q, op->attention.q);
    put_ref(e, r, ATT_K, op->attention.k);
    put_ref(e, r, ATT_V, op->attention.v);
    put_ref(e, r, ATT_OUT, op->attention.out);
    r[ATT_PART] = SLOT_PART, r[ATT_PART + 1] = (int32_t)part;
    put_ref(e, r, ATT_K_SRC, rope ? op->attention.rope.k_src : op->attention.out);
    put_ref(e, r, ATT_V_SRC, rope ? op->attention.rope.v_src : op->attention.out);
    r[ATT_N_HEAD] = op->attention.n_head;
    r[ATT_N_KV_HEAD] = op->attention.n_kv_head;
    r[ATT_HEAD_DIM] = op->attention.head_dim;
    r[ATT_POS0] = op->attention.pos0;
    r[ATT_CHUNK] = (int32_t)chunk;
    r[ATT_N_CHUNKS] = (int32_t)n_chunks;
    r[ATT_SCALE] = float_bits(op->attention.scale);
    r[ATT_N_ROT] = op->attention.rope.n_rot;
    r[ATT_NEOX] = op->attention.rope.neox;
    r[ATT_FREQ_BASE] = float_bits(op->attention.rope.freq_base);
    r[ATT_FREQ_SCALE] = float_bits(op->attention.rope.freq_scale);
    clinfer_ref factors = op->attention.rope.factors;
    put_ref(e, r, ATT_FACTORS, rope && factors.buf ? factors : op->attention.out);
    r[ATT_HAS_FACTORS] = rope && factors.buf;
    r[ATT_MSCALE] = float_bits(op->attention.rope.mscale);
    r[ATT_SOFTCAP] = float_bits(op->attention.softcap);
    r[ATT_ROUND_Q8] = round_q8;
    r[ATT_WINDOW] = op->attention.window;
    put_ref(e, r, ATT_SINKS, op->attention.sinks.buf ? op->attention.sinks : op->attention.out);
    r[ATT_HAS_SINKS] = op->attention.sinks.buf != NULL;
}

/* What an attention touches: it reads q, the new key and value, and the caches up to its last
 * position (its own rows written there too). */
static op_span attention_span(const clinfer_op *op) {
    int head_dim = op->attention.head_dim;
    size_t q = (size_t)op->attention.n_head * head_dim,
           kv = (size_t)op->attention.n_kv_head * head_dim;
    size_t cached = ((size_t)op->attention.pos0 + (size_t)op->attention.n) * kv;
    clinfer_ref k_new = op->attention.rope.k_src, v_new = op->attention.rope.v_src;
    if (!op->attention.rope.n_rot) k_new = v_new = op->attention.q; /* the stores wrote them */
    clinfer_ref reads[SPAN_READS] = {op->attention.q, k_new, v_new, op->attention.k,
                                     op->attention.v};
    size_t counts[SPAN_READS] = {q, kv, kv, cached, cached};
    return span_of(op, reads, counts, SPAN_READS);
}

static bool encode_attention(encoder *e, const clinfer_op *op) {
    size_t q_total = (size_t)op->attention.n_head * (size_t)op->attention.head_dim, chunk, n_chunks;
    int f16 = op->attention.kv_type == CLINFER_DT_F16, rope = op->attention.rope.n_rot != 0;
    if (op->attention.n != 1 || cl_attention_limits(op) != CLINFER_OK ||
        (e->kv_f16 >= 0 && e->kv_f16 != f16))
        return false;
    clinfer_ref out = op->attention.out;
    clinfer_buffer *factors = rope ? op->attention.rope.factors.buf : NULL;
    clinfer_buffer *sinks = op->attention.sinks.buf;
    cl_mem mems[8] = {op->attention.q.buf->mem,
                      op->attention.k.buf->mem,
                      op->attention.v.buf->mem,
                      out.buf->mem,
                      rope ? op->attention.rope.k_src.buf->mem : out.buf->mem,
                      rope ? op->attention.rope.v_src.buf->mem : out.buf->mem,
                      factors ? factors->mem : out.buf->mem,
                      sinks ? sinks->mem : out.buf->mem};
    if (!take_slots(e, mems, 8)) return false;
    e->kv_f16 = f16;
    cl_attention_chunks(e->b, op, &chunk, &n_chunks);
    int head_dim = op->attention.head_dim, n_head = op->attention.n_head;
    /* the sequences of a batch attend at once, each to chunks of its own scratch */
    op_span span = attention_span(op);
    size_t tasks = (size_t)n_head * n_chunks;
    int32_t *r = record_op(e, G_ATTENTION, tasks, &span);
    size_t part = e->part_used;
    if (n_chunks > 1) {
        e->part_used += (size_t)n_head * n_chunks * ((size_t)head_dim + 2);
        if (e->part_used * sizeof(float) > e->part_bytes)
            e->part_bytes = e->part_used * sizeof(float);
    }
    put_attention(e, r, op, chunk, n_chunks, 0, part);
    if (n_chunks > 1)
        e->merges[e->n_merges++] = (att_merge){
            .op = op, .chunk = chunk, .n_chunks = n_chunks, .part = part, .at = (int)e->n_recs - 1};
    /* whole blocks per head, as cl_attention_rounds asks; alone in its stage, so that nothing
     * beside it reads what it would round into */
    if (head_dim % 32 == 0 && e->stage == (int)e->n_recs - 1) {
        may_round(e, r, r + ATT_ROUND_Q8, out, q_total);
        e->roundable.merge = n_chunks > 1 ? e->n_merges - 1 : -1;
    }
    return true;
}

/* A ROUND_Q8 (into the first element of its y: graph.cl writes d * q from there) by the record
 * before it where that wrote x and rounds per 32 as well, else by a rounding record, into the
 * 8-bit form beside y that the matmuls over y read. */
static bool encode_round(encoder *e, const clinfer_op *op) {
    clinfer_ref x = op->round_q8.x, y = op->round_q8.y;
    size_t count = (size_t)op->round_q8.n * (size_t)op->round_q8.k;
    int span = op->round_q8.block / CLINFER_Q8_ACT_BLOCK;
    cl_q8_out o;
    if (y.offset || count > INT32_MAX || cl_q8_out_begin(e->b, op, &o) != CLINFER_OK) return false;
    cl_mem mems[5] = {x.buf->mem, y.buf->mem, o.q, o.d, o.xo};
    int32_t *roundable = e->roundable.want_q; /* take_slots keeps it; records end it */
    if (!take_slots(e, mems, 5)) return false;
    if (span == 1 && roundable && e->roundable.y.buf == x.buf &&
        e->roundable.y.offset == x.offset && e->roundable.count == count) {
        *roundable = 1;
        put_q8(e, e->roundable.rec, o.q, o.d, o.f, o.xo);
        if (e->roundable.merge >= 0) { /* the merge writes out, and rounds it */
            att_merge *m = &e->merges[e->roundable.merge];
            m->round_q8 = 1;
            memcpy(m->q8, e->roundable.rec + G_Q8, sizeof m->q8);
        }
        e->roundable.want_q = NULL;
        e->n_spans = 0; /* what reads y waits for the whole stage */
        return true;
    }
    size_t per_task,
        tasks = split(e, count / (32 * (size_t)span), 32 * 5 * (size_t)span, &per_task);
    int32_t *r = record(e, G_QUANTIZE, tasks);
    put_ref(e, r, QUANTIZE_X, x);
    r[QUANTIZE_COUNT] = (int32_t)count;
    r[QUANTIZE_PER_TASK] = (int32_t)per_task;
    r[QUANTIZE_SPAN] = span;
    put_q8(e, r, o.q, o.d, o.f, o.xo);
    return true;
}

/* Adds op to the run; false where the kernel cannot take it (or its check failed). */
bool cl_graph_encode(encoder *e, const clinfer_op *op) {
    /* room for its records, and a valid record */
    if (e->n_recs + (size_t)e->n_merges + 3 > MAX_RECS || op_check_operands(op) != CLINFER_OK)
        return false;
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        return encode_matmul(e, op);
    case CLINFER_OP_EMBED:
        return encode_embed(e, op);
    case CLINFER_OP_RMSNORM:
        return encode_rmsnorm(e, op);
    case CLINFER_OP_LAYERNORM:
        return encode_layernorm(e, op);
    CLINFER_OP_ELTWISE_CASES:
        return encode_eltwise(e, op);
    case CLINFER_OP_STORE:
        return encode_store(e, op);
    case CLINFER_OP_ATTENTION:
        return encode_attention(e, op);
    case CLINFER_OP_ROUND_Q8:
        return encode_round(e, op);
    default:
        return false;
    }
}
