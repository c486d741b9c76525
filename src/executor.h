/* The forward pass, written once for every architecture over the backend interface.
 *
 * A plan is the flat list of op records that evaluates n tokens: embeddings, every layer, and at
 * the end the output norm and LM head over the last token only. It is built once per
 * (context, n) and walked per batch; the few fields that depend on where the batch sits in the
 * sequence (rope and attention pos0, the KV cache row written, the position ids read) are bound
 * while walking. */
#ifndef CLINFER_EXECUTOR_H
#define CLINFER_EXECUTOR_H

#include <stdio.h>

#include "model.h"
#include "profile.h"

/* Activation buffers of one context, sized for n_batch tokens, and the sequence's ids. */
typedef enum {
    EXEC_X,       /* [n][n_embd] the residual stream */
    EXEC_XN,      /* [n][n_embd] normalised input of a sub-layer (gpt2: token rows first); after
                   * the output norm its rows are the hidden states the LM head reads */
    EXEC_POS,     /* [n][n_embd] gpt2's position rows; unused otherwise */
    EXEC_QKV,     /* [n][n_head][head_dim] queries, then [n][n_head_kv][head_dim] keys, then
                   * values the same (keys and values before they are stored in the cache) */
    EXEC_ATT,     /* [n][n_head][head_dim] attention output */
    EXEC_FF_A,    /* [n][n_ff] gate, then [n][n_ff] up (gpt2: up only); for one token both
                   * are one row, which one matmul over the stacked weight writes. The
                   * activation overwrites the gate rows (gpt2: the up rows), which the down
                   * matmul then reads: the element-wise ops allow y == a */
    EXEC_LOGITS,  /* [n_vocab] of the last token; with logits_all [n][n_vocab], every token's;
                   * a layout plan's [n_out][n_vocab] */
    EXEC_IDS,     /* [n_ctx] int32: the sequence's token ids, written once per eval */
    EXEC_POS_IDS, /* [n_ctx] int32 0 .. n_ctx - 1: gpt2's position_embd rows; unused otherwise */
    /* With 8-bit activations, the x_q8 matmuls' x as ROUND_Q8 writes it, from its first
     * element: EXEC_XN's rows (q, k and v; gate and up; the head), EXEC_ATT's, EXEC_FF_A's */
    EXEC_XQ,    /* [n][n_embd] */
    EXEC_ATT_Q, /* [n][n_head][head_dim] */
    EXEC_FF_Q,  /* [n][n_ff] */
    /* A mixture of experts' (src/moe.c; EXEC_FF_A and EXEC_FF_Q hold [n][n_used][moe.n_ff]
     * rows there): the router's logits [n][n_expert], the chosen experts [n][n_used] (int32)
     * and their gates, the experts' outputs [n][n_used][n_embd] */
    EXEC_MOE_LOGITS,
    EXEC_MOE_IDS,
    EXEC_MOE_W,
    EXEC_MOE_OUT,
    EXEC_COUNT
} exec_buffer_id;

/* Bytes of each activation buffer (0: not needed by this architecture, or without q8 by f32
 * activations); logit_rows: the rows of logits one batch may ask for (1: the last token's only). */
void exec_buffer_sizes(const clinfer_hparams *hp, uint32_t n_ctx, uint32_t n_batch,
                       size_t logit_rows, bool q8, size_t bytes[EXEC_COUNT]);

/* What a plan reads and writes besides the model's weights. */
typedef struct {
    clinfer_buffer *buf[EXEC_COUNT];
    clinfer_ref *k_cache, *v_cache;  /* n_layer each: [n_seq][n_ctx][n_head_kv][head_dim] */
    clinfer_dtype kv_type;           /* CLINFER_DT_F16 or CLINFER_DT_F32 */
    uint32_t n_ctx;                  /* positions per sequence: picks longrope's table */
    clinfer_activations activations; /* which matmuls take x_q8 (clinfer_context_params) */
    bool logits_all;                 /* the head runs over every token (clinfer_context_params) */
    bool embeddings; /* the output norm runs over every token: EXEC_XN keeps their hidden states */
    /* The model's vectors on this state's device, where the rotation's factors are read (a
     * split model's devices each have a copy: src/placement.h); NULL: model->vectors */
    clinfer_buffer *vectors;
} exec_state;

typedef struct exec_plan exec_plan;

clinfer_status exec_plan_build(const clinfer_model *model, const exec_state *state, int n,
                               exec_plan **out);
void exec_plan_free(exec_plan *plan);

/* A batch of tokens of several sequences (src/batch.c): batch rows [row, row + n) are tokens of
 * one sequence at positions pos0 .. pos0 + n - 1, whose KV cache rows start at cache_row0 (each
 * sequence owns n_ctx rows). Matmuls and norms run over all the batch's rows at once; rotation,
 * cache writes and attention once per run. */
typedef struct {
    int row, n, pos0;
    size_t cache_row0;
} exec_run;
typedef struct {
    const exec_run *runs;
    int n_runs;
    const int *out_rows; /* ascending batch rows whose logits the head computes, into
                          * EXEC_LOGITS rows 0 .. n_out - 1 */
    int n_out;
} exec_layout;

/* A plan for exactly this layout, its positions bound: exec_plan_run's pos0 is not looked at,
 * and with_logits runs the head over out_rows (none where n_out is 0). */
clinfer_status exec_plan_build_layout(const clinfer_model *model, const exec_state *state, int n,
                                      const exec_layout *layout, exec_plan **out);

/* A plan of the parts [first, end) of the forward pass alone (-1 the embeddings, il layer il,
 * n_layer the output norm and head), for a model split across devices: the part of the state on
 * one device. exec_plan_build_layout builds all parts, [-1, n_layer + 1). */
clinfer_status exec_plan_build_parts(const clinfer_model *model, const exec_state *state, int n,
                                     const exec_layout *layout, int first, int end,
                                     exec_plan **out);

/* Enqueues the plan on be (the context's backend, holding the state's buffers) for a batch whose
 * first token sits at position pos0; with_logits adds the output norm and LM head (the last
 * chunk of an eval). Before a walk's first run its ops are checked against the backend's
 * supports_op, and a backend with plan_run makes its plan of the walk (a walk of one token with
 * its logits is a decode step to it), which then runs it. Waits for the device where profile is
 * given (NULL: no profiling; see profile.h; a profiled walk runs op by op, through op_run) or
 * where the backend's plan_run does. */
clinfer_status exec_plan_run(const clinfer_backend *be, exec_plan *plan, int pos0, bool with_logits,
                             exec_profile *profile);
/* What exec_plan_run does before a walk's first run, done now (at position 0), running nothing. */
clinfer_status exec_plan_prepare(const clinfer_backend *be, exec_plan *plan, bool with_logits);

/* Verification (src/verify.c) walks a plan op by op instead, on two backends in step. */

/* The ops a walk runs: the layers' (the body), with_logits also the output norm and LM head. */
size_t exec_plan_len(const exec_plan *plan, bool with_logits);
/* The tokens (batch rows) it evaluates. */
int exec_plan_rows(const exec_plan *plan);

/* Step i of a walk, bound to position pos0 as exec_plan_run binds it. */
typedef struct {
    clinfer_op op;
    int layer;            /* -1: before the first layer (embeddings); n_layer: the head */
    int first_row;        /* the batch row of its first output row: the head's is the last token */
    clinfer_dtype w_type; /* MATMUL and EMBED's weight type */
} exec_step;
exec_step exec_plan_at(const exec_plan *plan, size_t i, int pos0);

/* Runs step i alone at pos0 (the backend's op: never in a run of ops with others, so that each
 * op's output can be read by itself) and waits for it; but a step whose output the next one, a
 * ROUND_Q8, rounds runs with it as a walk's op_run would (its output is the one walks get), and
 * that ROUND_Q8 then runs again alone as step i + 1. */
clinfer_status exec_plan_step(const clinfer_backend *be, const exec_plan *plan, size_t i, int pos0);

/* One line per op (the environment variable CLINFER_PRINT_PLAN prints each plan as it is
 * built). */
void exec_plan_print(const exec_plan *plan, FILE *out);

#endif
