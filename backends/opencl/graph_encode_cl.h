/* How graph_cl.c's runs are put together (graph_encode_cl.c): each op of a run as a record of
 * cl/graph_record.clh, its operands as slots of the launch's buffer arguments, split into tasks
 * and stages. */
#ifndef CLINFER_CL_GRAPH_ENCODE_H
#define CLINFER_CL_GRAPH_ENCODE_H

#include "matmul_cl.h"

enum {
    MAX_RECS = 512, /* records per launch */
    /* Columns of a matmul: a decode step of up to 8 sequences, or a prompt of up to 8 tokens.
     * A 16-token prompt in a graph launch was 7% faster, but its first one loads the graph
     * program before the first token instead of after it (time to first token 240 -> 270 ms,
     * SmolLM2-135M, `clinfer bench -p 0`); longer prompts are GEMMs. */
    MAX_N = MATVEC_MAX_N,
    /* Tasks per op: one per TASK_BYTES of weights or activations read, at least two and at
     * most MAX_TASKS per compute unit (every task costs two atomic operations on lines the other
     * units share; the last one decides how long the others wait) */
    TASK_BYTES = 256 << 10,
    MAX_TASKS = 32,
    /* the reserved slot: attention's chunk results (records that round name the 8-bit form
     * beside the ROUND_Q8's y: act_q8_cl.h) */
    SLOT_PART = 0,
    FIRST_FREE_SLOT,
    MAX_STAGE = 64, /* records of ops in one stage */
};

/* The operands an op touches as element ranges of buffers: those it reads, then those it writes
 * (op_outputs). Two ops where neither writes what the other touches may run at once. */
enum { SPAN_READS = 5 }; /* an attention's */
typedef struct {
    clinfer_ref at[SPAN_READS + CLINFER_OP_MAX_OUTPUTS];
    size_t count[SPAN_READS + CLINFER_OP_MAX_OUTPUTS];
    int n, writes; /* at[writes .. n - 1] are written */
} op_span;

/* The merge record an attention split into chunks needs: its fields, the attention's record, and
 * where it rounds (the G_Q8 fields). */
typedef struct {
    const clinfer_op *op;
    size_t chunk, n_chunks, part;
    int round_q8, at;
    int32_t q8[5];
} att_merge;

/* One run being put together: records, the buffers they name. */
typedef struct {
    cl_backend_ctx *b;
    uint64_t types; /* of the run's weights: bit t for clinfer_dtype t */
    int kv_f16;     /* -1 until an attention fixes it */
    cl_mem slots[G_SLOTS];
    int n_slots;
    int32_t *recs;
    size_t n_recs;
    size_t part_bytes; /* the most any attention needs of its scratch */
    /* The stage of the last record: records of ops that depend on none of each other (a
     * layer's matmuls of one x; the attentions of a batch's sequences, each with its merge),
     * which start at `stage`, each waiting on the records from after[0] to after[1]; a record
     * after the stage waits on all of it. */
    int stage, after[2];
    op_span spans[MAX_STAGE]; /* of the stage's ops (none: a stage of one record) */
    int n_spans;
    size_t part_used;            /* floats of attention's scratch the stage's chunks take */
    att_merge merges[MAX_STAGE]; /* of its chunked attentions, put after them all */
    int n_merges;
    /* The last record, where it could round its output y (count values, per 32) as it writes
     * it: its want_q field (NULL: it cannot), set when a ROUND_Q8 of y follows, and the merge
     * of a chunked attention (-1: none), which then rounds instead. */
    struct {
        int32_t *want_q, *rec;
        clinfer_ref y;
        size_t count;
        int merge;
    } roundable;
} encoder;

/* Appends op's records to e where the kernel can run op (false: the run ends before it). */
bool cl_graph_encode(encoder *e, const clinfer_op *op);
/* Puts the merge records of the last stage's chunked attentions after it. */
void cl_graph_put_merges(encoder *e);
/* The code graph.cl's GT_<type> defines give a weight type. */
int32_t cl_graph_type_code(clinfer_dtype type);

#endif
