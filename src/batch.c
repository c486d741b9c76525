/* Batches of tokens of several sequences, and the sequences' KV cache regions.
 *
 * Each sequence owns a fixed region of n_ctx cache rows (sequence s: rows s * n_ctx ..). That
 * keeps every attention op as it is for one sequence: a run of a sequence's tokens attends to a
 * contiguous cache range from its region's start, so every backend's attention kernels (and the
 * decode graph launches) serve batches unchanged, and clearing or truncating a sequence is only
 * its length. The cost is memory: n_seq_max full-length regions, however short the sequences. */
#include <stdlib.h>
#include <string.h>

#include "context.h"

#include "error.h"
#include "placement.h"
#include "split_plan.h"

uint32_t clinfer_context_n_seq_max(const clinfer_context *c) {
    return c ? c->n_seq : 0;
}

uint32_t clinfer_seq_len(const clinfer_context *c, uint32_t seq) {
    return c && seq < c->n_seq ? c->seq_len[seq] : 0;
}

uint32_t clinfer_seq_room(const clinfer_context *c, uint32_t seq) {
    return c && seq < c->n_seq ? c->n_ctx - c->seq_len[seq] : 0;
}

static clinfer_status check_seq(const clinfer_context *c, const char *what, uint32_t seq) {
    if (!c) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: NULL context", what);
    if (seq >= c->n_seq)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: sequence %u is outside the context's %u (n_seq_max)", what, seq,
                        c->n_seq);
    return CLINFER_OK;
}

clinfer_status clinfer_seq_clear(clinfer_context *c, uint32_t seq) {
    clinfer_status st = check_seq(c, "seq_clear", seq);
    if (st == CLINFER_OK) c->seq_len[seq] = 0;
    return st;
}

clinfer_status clinfer_seq_truncate(clinfer_context *c, uint32_t seq, uint32_t n_keep) {
    clinfer_status st = check_seq(c, "seq_truncate", seq);
    if (st == CLINFER_OK && n_keep < c->seq_len[seq]) c->seq_len[seq] = n_keep;
    return st;
}

/* Copies cache rows [0, n) of region src to region dst in every layer's K and V, on the
 * device. */
static clinfer_status copy_rows(clinfer_context *c, uint32_t src, uint32_t dst, uint32_t n) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &c->model->hp;
    const exec_state *s = &c->state;
    size_t elem = s->kv_type == CLINFER_DT_F32 ? sizeof(float) : sizeof(uint16_t);
    size_t row = (size_t)hp->n_head_kv * hp->head_dim * elem, region = row * c->n_ctx;
    for (uint32_t il = 0; il < hp->n_layer && n && st == CLINFER_OK; il++) {
        const clinfer_backend *be = context_backend(c, model_part_device(c->model, (int)il));
        const clinfer_ref caches[2] = {s->k_cache[il], s->v_cache[il]};
        for (int i = 0; i < 2 && st == CLINFER_OK; i++) {
            size_t base = caches[i].offset * elem;
            st = be->i->buffer_copy(be->ctx, caches[i].buf, base + src * region, caches[i].buf,
                                    base + dst * region, row * n);
        }
    }
    return st;
}

clinfer_status clinfer_seq_copy_prefix(clinfer_context *c, uint32_t src, uint32_t dst, uint32_t n) {
    clinfer_status st = check_seq(c, "seq_copy_prefix", src);
    if (st == CLINFER_OK) st = check_seq(c, "seq_copy_prefix", dst);
    if (st != CLINFER_OK) return st;
    if (src == dst)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "seq_copy_prefix: source and destination are both sequence %u", src);
    if (n > c->seq_len[src])
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "seq_copy_prefix: %u tokens asked of sequence %u, which holds %u", n, src,
                        c->seq_len[src]);
    c->seq_len[dst] = 0; /* a failed copy leaves dst empty rather than half written */
    st = copy_rows(c, src, dst, n);
    if (st == CLINFER_OK) c->seq_len[dst] = n;
    return st;
}

/* Checks the entries and cuts them into runs (consecutive entries of one sequence at
 * consecutive positions) and the rows asking for logits. next[] is scratch: each sequence's next
 * position. */
static clinfer_status layout_of(const clinfer_context *c, const clinfer_batch_entry *e, size_t n,
                                uint32_t *next, exec_run *runs, int *out_rows, exec_layout *out) {
    uint32_t n_vocab = c->model->hp.n_vocab;
    size_t max_out = c->state.logits_all ? n : c->n_logit_rows;
    int n_runs = 0, n_out = 0;
    memcpy(next, c->seq_len, c->n_seq * sizeof *next);
    for (size_t i = 0; i < n; i++) {
        uint32_t s = e[i].seq;
        if (s >= c->n_seq)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "batch: entry %zu is of sequence %u, outside the context's %u "
                            "(n_seq_max)",
                            i, s, c->n_seq);
        if (e[i].token < 0 || (uint32_t)e[i].token >= n_vocab)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "batch: entry %zu's token is %d, outside the vocabulary of %u", i,
                            e[i].token, n_vocab);
        if (e[i].pos >= c->n_ctx)
            return err_fail(CLINFER_ERR_CONTEXT_FULL,
                            "batch: entry %zu is at position %u, past the context of %u "
                            "tokens per sequence",
                            i, e[i].pos, c->n_ctx);
        if (e[i].pos != next[s])
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "batch: entry %zu is at position %u of sequence %u, which "
                            "continues at %u",
                            i, e[i].pos, s, next[s]);
        next[s]++;
        exec_run *last = n_runs ? &runs[n_runs - 1] : NULL;
        if (last && (size_t)last->cache_row0 == (size_t)s * c->n_ctx &&
            last->pos0 + last->n == (int)e[i].pos) {
            last->n++;
        } else {
            runs[n_runs++] = (exec_run){(int)i, 1, (int)e[i].pos, (size_t)s * c->n_ctx};
        }
        if (e[i].logits) {
            if ((size_t)n_out == max_out)
                return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "batch: more than %zu entries ask for logits (at most "
                                "n_seq_max without logits_all)",
                                max_out);
            out_rows[n_out++] = (int)i;
        }
    }
    *out = (exec_layout){runs, n_runs, out_rows, n_out};
    return CLINFER_OK;
}

/* Runs a checked batch: its ids, the plan of its layout, the logits it asked for (into logits),
 * every entry's hidden state where embd is not NULL. */
static clinfer_status run_batch(clinfer_context *c, const clinfer_batch_entry *e, size_t n,
                                const exec_layout *layout, int32_t *ids, float *logits,
                                float *embd) {
    clinfer_status st = CLINFER_OK;
    uint32_t first = model_part_device(c->model, -1),
             last = model_part_device(c->model, (int)c->model->hp.n_layer);
    const clinfer_backend *be = context_backend(c, first);
    split_plan *plan = NULL;
    size_t row_bytes = (size_t)c->model->hp.n_vocab * sizeof(float);
    for (size_t i = 0; i < n; i++)
        ids[i] = e[i].token;
    /* queued: the waits below end with the first device's queue done (the crossing's read or
     * the read of the output), as does cleanup's on a failure, before the caller frees ids */
    CHECK(
        backend_write_queued(be, context_state(c, first)->buf[EXEC_IDS], 0, n * sizeof *ids, ids));
    CHECK(split_plan_build(c, (int)n, layout, &plan));
    bool head = layout->n_out > 0 || embd;
    CHECK(split_plan_run(c, plan, 0, head));
    /* what the last segment that ran wrote is read, or waited for, on its device: the head's,
     * or without it the one before where the head runs alone */
    const split_segment *ran = &plan->seg[plan->n_seg - 1];
    if (!head && exec_plan_len(ran->plan, false) == 0) ran--;
    be = context_backend(c, ran->dev);
    const exec_state *s = context_state(c, last);
    if (embd)
        CHECK(be->i->buffer_read(be->ctx, s->buf[EXEC_XN], 0,
                                 n * c->model->hp.n_embd * sizeof(float), embd));
    if (layout->n_out)
        CHECK(
            be->i->buffer_read(be->ctx, s->buf[EXEC_LOGITS], 0, layout->n_out * row_bytes, logits));
    else if (!embd)
        CHECK(be->i->sync(be->ctx));
cleanup:
    if (st != CLINFER_OK) {
        be = context_backend(c, first);
        be->i->sync(be->ctx);
    }
    split_plan_free(plan);
    return st;
}

clinfer_status context_reserve_logits(clinfer_context *c, size_t rows) {
    if (rows <= c->logits_cap) return CLINFER_OK;
    size_t n_vocab = c->model->hp.n_vocab;
    float *p = realloc(c->logits, rows * n_vocab * sizeof *p);
    if (!p)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "eval: no memory for %zu rows of logits", rows);
    c->logits = p;
    c->logits_cap = rows;
    return CLINFER_OK;
}

clinfer_status context_step(clinfer_context *c, const clinfer_batch_entry *e, size_t n,
                            float *logits, float *embd, size_t *n_out) {
    clinfer_status st = CLINFER_OK;
    uint32_t *next = malloc(c->n_seq * sizeof *next);
    exec_run *runs = malloc(n * sizeof *runs);
    int *out_rows = malloc(n * sizeof *out_rows);
    int32_t *ids = malloc(n * sizeof *ids);
    if (!next || !runs || !out_rows || !ids) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "batch: no memory for %zu entries", n);
        goto cleanup;
    }
    exec_layout layout;
    CHECK(layout_of(c, e, n, next, runs, out_rows, &layout));
    CHECK(run_batch(c, e, n, &layout, ids, logits, embd));
    memcpy(c->seq_len, next, c->n_seq * sizeof *next);
    *n_out = (size_t)layout.n_out;
cleanup:
    free(next);
    free(runs);
    free(out_rows);
    free(ids);
    return st;
}

clinfer_status clinfer_batch_eval(clinfer_context *c, const clinfer_batch_entry *e, size_t n) {
    if (!c || (!e && n)) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "batch: NULL argument");
    if (n == 0) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "batch: no entries");
    if (n > c->n_batch)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "batch: %zu entries exceed the context's n_batch of %u", n, c->n_batch);
    c->n_logits = 0;
    c->from_batch = false;
    size_t max_out = c->state.logits_all || n < c->n_logit_rows ? n : c->n_logit_rows, n_out = 0;
    if (n > c->entry_cap) {
        int32_t *p = realloc(c->entry_row, n * sizeof *p);
        if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "batch: no memory for %zu entries", n);
        c->entry_row = p;
        c->entry_cap = n;
    }
    clinfer_status st = context_reserve_logits(c, max_out);
    if (st == CLINFER_OK) st = context_step(c, e, n, c->logits, NULL, &n_out);
    if (st != CLINFER_OK) {
        err_prefix("batch of %zu entries", n);
        return st;
    }
    for (size_t i = 0, j = 0; i < n; i++)
        c->entry_row[i] = e[i].logits ? (int32_t)j++ : -1;
    c->from_batch = true;
    c->n_eval = n;
    c->n_logits = n_out;
    return CLINFER_OK;
}
