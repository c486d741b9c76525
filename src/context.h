/* What the core needs of a context beyond the public API: clinfer_eval runs its chunks as batch
 * steps of sequence 0; verification (src/verify.c) walks the plan of a batch itself, op by op,
 * instead of clinfer_eval running it; pooling (src/embed.c) counts the last eval's tokens. */
#ifndef CLINFER_CONTEXT_H
#define CLINFER_CONTEXT_H

#include "executor.h"

typedef struct split_plan split_plan; /* split_plan.h */

/* A device of a split model's context: its instance of the device's backend and the buffers on
 * it (state.k_cache and v_cache are the context's arrays; its layers' entries point here). */
typedef struct {
    clinfer_backend *backend;
    exec_state state;
} context_device;

/* Shared by context.c (one sequence: clinfer_eval) and batch.c (several: the batch call and the
 * sequence operations). */
struct clinfer_context {
    clinfer_model *model;
    /* An instance of the model's backend (backend.h): contexts on one model run at once, each
     * on its own queue and scratch, reading the shared weights. */
    clinfer_backend *backend;
    uint32_t n_ctx, n_batch; /* n_ctx: per sequence */
    uint32_t n_seq;          /* sequences, each with n_ctx rows of KV cache of its own */
    uint32_t *seq_len;       /* [n_seq] tokens each holds; clinfer_eval's sequence is 0 */
    exec_state state;
    /* A model split across devices (model->split): devices 1 .. of it, as backend and state
     * are device 0's (context_backend, context_state); and the host's copy of the hidden state
     * crossing from one to the next ([n_batch][n_embd]). NULL: one device. */
    context_device *more;
    float *hidden;
    clinfer_buffer **kv_bufs; /* [2 * n_kv_bufs]: K then V of each group of layers */
    uint32_t *kv_buf_dev;     /* [n_kv_bufs]: the device of each group */
    uint32_t n_kv_bufs;
    split_plan **plans; /* [n_batch + 1]: verify's plan for n tokens, built on first use */
    float *logits;      /* [n_logits][n_vocab]: the last eval's last token, or all (logits_all) */
    size_t n_logits, logits_cap; /* rows held (0: none since create or reset), allocated */
    size_t n_logit_rows;         /* EXEC_LOGITS' rows: what one batch may ask for */
    size_t n_eval;               /* tokens of the last eval, or entries of the last batch */
    /* from_batch: the last evaluation was clinfer_batch_eval, whose entry i's row of logits is
     * entry_row[i] (-1: it asked for none) */
    bool from_batch;
    int32_t *entry_row;
    size_t entry_cap;
    float *embd; /* [n_eval][n_embd] with embeddings: hidden states after the output norm;
                  * embd_cap rows allocated */
    size_t embd_cap;
    exec_profile *profile;              /* when profiling is on or CLINFER_TRACE is set */
    clinfer_abort_callback should_stop; /* asked before each chunk (NULL: never) */
    void *should_stop_user;
};

static inline clinfer_backend *context_backend(const clinfer_context *c, uint32_t dev) {
    return dev ? c->more[dev - 1].backend : c->backend;
}
static inline exec_state *context_state(const clinfer_context *c, uint32_t dev) {
    return dev ? &c->more[dev - 1].state : (exec_state *)&c->state;
}

static inline size_t kv_elem_bytes(bool kv_f32) {
    return kv_f32 ? sizeof(float) : sizeof(uint16_t);
}

/* src/context_devices.c: a context of plan fits each device's memory beside the weights there
 * (else the refusal names the largest n_ctx that would); the instances of the model's devices
 * and every buffer of c on them (c's n_ctx, n_batch, n_seq, n_logit_rows and state set); their
 * release. */
clinfer_status context_check_fits(const clinfer_model *m, const clinfer_memory_plan *plan);
clinfer_status context_devices_create(clinfer_context *c, bool kv_f32);
void context_devices_free(clinfer_context *c);

/* Room for rows of logits on the host (src/batch.c). */
clinfer_status context_reserve_logits(clinfer_context *c, size_t rows);

/* One evaluation step of both public calls (src/batch.c): checks n entries (1 <= n <= n_batch)
 * as clinfer_batch_eval documents and runs them; the logits of the entries that ask for them go
 * to logits (*n_out rows), every entry's hidden state to embd where it is not NULL (a context
 * made with embeddings), and each sequence's length moves past its entries. On failure no
 * length changes. */
clinfer_status context_step(clinfer_context *c, const clinfer_batch_entry *e, size_t n,
                            float *logits, float *embd, size_t *n_out);

typedef struct {
    split_plan *plan;     /* for the batch's n tokens */
    clinfer_context *ctx; /* which runs it: each segment on context_backend(ctx, its device) */
    int pos0;             /* the position of its first token */
} context_batch;

/* Checks n tokens as clinfer_eval does (and n <= n_batch), writes their ids after what c holds
 * and fills out; nothing runs. context_advance(c, n) once the plan has been walked. */
clinfer_status context_stage(clinfer_context *c, const int32_t *tokens, size_t n,
                             context_batch *out);
void context_advance(clinfer_context *c, size_t n);

/* Tokens of the last eval (0: none since create or reset). */
size_t context_n_eval(const clinfer_context *c);

#endif
