/* Contexts: one sequence's KV cache and activation buffers on the model's backend, and the
 * evaluation of token batches through executor plans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

#include "arch.h"
#include "error.h"
#include "log.h"
#include "options.h"
#include "placement.h"
#include "split_plan.h"

#define DEFAULT_N_BATCH 256
/* CLINFER_ACT_DEFAULT: f32 activations below this many parameters, 8-bit ones from it on where
 * the backend has integer dots for them (int8_dots).
 * Measured on SmolLM2-135M Q4_1 (docs/PERFORMANCE.md, bench/activations.sh): 8-bit activations
 * cost a mean KLD of 0.0029 against exact products and turn the README's demo answer into
 * nonsense; f32 ones answer it right at about 0.6x the decode speed, which a small model can
 * spare. Large models keep llama.cpp's 8-bit activations and their speed; a device without
 * integer dots (GPUs) reads them back as f32 and would only pay for the rounding. */
#define SMALL_MODEL_PARAMS 1000000000ull
#define MAX_N_CTX (1u << 24)
#define MAX_N_SEQ 4096u

const char *clinfer_activations_name(clinfer_activations a) {
    static const char *const names[] = {[CLINFER_ACT_DEFAULT] = "default",
                                        [CLINFER_ACT_Q8] = "q8",
                                        [CLINFER_ACT_F32_HEAD] = "f32-head",
                                        [CLINFER_ACT_F32_ENDS] = "f32-ends",
                                        [CLINFER_ACT_F32] = "f32"};
    return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : NULL;
}

clinfer_status clinfer_activations_parse(const char *name, clinfer_activations *out) {
    if (!name || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "activations: NULL");
    char known[64] = "";
    const char *n;
    for (int a = 0; (n = clinfer_activations_name((clinfer_activations)a)); a++) {
        if (!strcmp(name, n)) {
            *out = (clinfer_activations)a;
            return CLINFER_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", a ? ", " : "", n);
    }
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "'%.64s' is not an activations mode (%s)", name,
                    known);
}

void clinfer_context_params_default(clinfer_context_params *params) {
    *params = (clinfer_context_params){0};
}

/* EXEC_LOGITS' rows: every token of a batch with logits_all, else one per sequence (a decode
 * step of every sequence). */
static size_t logit_rows(bool logits_all, uint32_t n_seq, uint32_t n_batch) {
    return logits_all ? n_batch : n_seq < n_batch ? n_seq : n_batch;
}

clinfer_status clinfer_model_memory_plan(const clinfer_model *m,
                                         const clinfer_context_params *params,
                                         clinfer_memory_plan *out) {
    clinfer_context_params defaults;
    if (!m || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "memory_plan: NULL argument");
    if (!m->backend)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "memory_plan: the model was loaded vocab_only (no weights)");
    if (!params) {
        clinfer_context_params_default(&defaults);
        params = &defaults;
    }
    const clinfer_hparams *hp = &m->hp;
    uint32_t n_ctx = params->n_ctx ? params->n_ctx : hp->n_ctx_train;
    if (n_ctx > MAX_N_CTX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "context: n_ctx %u exceeds %u", n_ctx,
                        MAX_N_CTX);
    /* Learned positions exist only for the first n_ctx_train tokens. */
    if (hp->arch->learned_positions && n_ctx > hp->n_ctx_train)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "context: n_ctx %u exceeds the %u positions %s models learned", n_ctx,
                        hp->n_ctx_train, hp->arch->name);
    uint32_t n_batch = params->n_batch ? params->n_batch : DEFAULT_N_BATCH;
    if (n_batch > n_ctx) n_batch = n_ctx;
    uint32_t n_seq = params->n_seq_max ? params->n_seq_max : 1;
    if (n_seq > MAX_N_SEQ)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "context: n_seq_max %u exceeds %u", n_seq,
                        MAX_N_SEQ);

    size_t sizes[EXEC_COUNT];
    /* the default may take 8-bit activations: counted as it will if so */
    exec_buffer_sizes(hp, n_ctx, n_batch, logit_rows(params->logits_all, n_seq, n_batch),
                      params->activations != CLINFER_ACT_F32, sizes);
    uint64_t scratch = 0;
    for (int i = 0; i < EXEC_COUNT; i++)
        scratch += sizes[i];
    *out = (clinfer_memory_plan){
        .weight_bytes = m->weight_bytes,
        .kv_bytes = 2ull * hp->n_layer * n_seq * n_ctx * hp->n_head_kv * hp->head_dim *
                    kv_elem_bytes(params->kv_f32),
        .scratch_bytes = scratch,
        .n_ctx = n_ctx,
        .n_batch = n_batch,
        .n_seq_max = n_seq,
    };
    return CLINFER_OK;
}

static clinfer_status plan_for(clinfer_context *c, size_t n, split_plan **out);

clinfer_status clinfer_context_create(clinfer_model *model, const clinfer_context_params *params,
                                      clinfer_context **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_context_params defaults;
    clinfer_memory_plan plan = {0};
    clinfer_context *c = NULL;
    if (!model || !out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "context_create: NULL argument");
    *out = NULL;
    if (!params) {
        clinfer_context_params_default(&defaults);
        params = &defaults;
    }
    if (!clinfer_activations_name(params->activations))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "context_create: activations %d unknown",
                        (int)params->activations);
    CHECK(clinfer_model_memory_plan(model, params, &plan));
    CHECK(context_check_fits(model, &plan));
    c = calloc(1, sizeof *c);
    if (!c) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context_create: no memory");
    c->model = model;
    c->n_ctx = plan.n_ctx;
    c->n_batch = plan.n_batch;
    c->n_seq = plan.n_seq_max;
    c->n_logit_rows = logit_rows(params->logits_all, c->n_seq, c->n_batch);
    c->state.activations = params->activations;
    if (params->activations == CLINFER_ACT_DEFAULT) {
        const clinfer_backend *be = model->backend;
        bool int8 = !be->i->int8_dots || be->i->int8_dots(be->ctx);
        c->state.activations =
            model->n_params < SMALL_MODEL_PARAMS || !int8 ? CLINFER_ACT_F32 : CLINFER_ACT_Q8;
    }
    c->state.logits_all = params->logits_all;
    c->state.embeddings = params->embeddings;
    c->plans = calloc((size_t)c->n_batch + 1, sizeof *c->plans);
    c->logits = malloc((size_t)model->hp.n_vocab * sizeof *c->logits);
    c->logits_cap = 1;
    c->seq_len = calloc(c->n_seq, sizeof *c->seq_len);
    if (!c->plans || !c->logits || !c->seq_len) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context_create: no memory for %u logits",
                      model->hp.n_vocab);
        goto cleanup;
    }
    CHECK(context_devices_create(c, params->kv_f32));
    CHECK(exec_profile_create(model->profile, &c->profile));
    /* A decode step's plan now, prepared by the backend: what its walk needs (a graph program)
     * compiles here rather than while the first answer streams. */
    split_plan *decode;
    CHECK(plan_for(c, 1, &decode));
    CHECK(split_plan_prepare(c, decode, true));
    if (model->verbose)
        log_msg(CLINFER_LOG_INFO,
                "context n_ctx %u, n_batch %u: KV cache (%s) %.1f MiB, "
                "scratch %.1f MiB, activations %s",
                c->n_ctx, c->n_batch, dtype_name(c->state.kv_type), plan.kv_bytes / 1048576.0,
                plan.scratch_bytes / 1048576.0, clinfer_activations_name(c->state.activations));
    *out = c;
cleanup:
    if (st != CLINFER_OK) {
        err_prefix("context_create (n_ctx %u, n_batch %u)", plan.n_ctx, plan.n_batch);
        clinfer_context_free(c);
    }
    return st;
}

void clinfer_context_free(clinfer_context *c) {
    if (!c) return;
    exec_state *s = &c->state;
    FILE *out;
    clinfer_log_stream *log = log_stream_begin(&out);
    exec_profile_free(c->profile, out);
    log_stream_end(log, CLINFER_LOG_INFO);
    context_devices_free(c);
    for (uint32_t n = 0; c->plans && n <= c->n_batch; n++)
        split_plan_free(c->plans[n]); /* before the backends: they may hold plans of their own */
    free(c->plans);
    backend_free(c->backend);
    for (uint32_t d = 1; c->more && d < model_n_devices(c->model); d++)
        backend_free(c->more[d - 1].backend);
    free(c->more);
    free(c->hidden);
    free(c->kv_bufs);
    free(c->kv_buf_dev);
    free(s->k_cache);
    free(s->v_cache);
    free(c->logits);
    free(c->embd);
    free(c->seq_len);
    free(c->entry_row);
    free(c);
}

void clinfer_context_reset(clinfer_context *c) {
    if (!c) return;
    memset(c->seq_len, 0, c->n_seq * sizeof *c->seq_len);
    c->n_logits = 0;
    c->n_eval = 0;
    c->from_batch = false;
}

const clinfer_model *context_model(const clinfer_context *c) {
    return c ? c->model : NULL;
}

void clinfer_context_set_abort(clinfer_context *c, clinfer_abort_callback callback, void *user) {
    if (!c) return;
    c->should_stop = callback;
    c->should_stop_user = user;
}

uint32_t clinfer_context_n_past(const clinfer_context *c) {
    return c ? c->seq_len[0] : 0;
}
uint32_t clinfer_context_n_ctx(const clinfer_context *c) {
    return c ? c->n_ctx : 0;
}
clinfer_activations clinfer_context_activations(const clinfer_context *c) {
    return c ? c->state.activations : CLINFER_ACT_DEFAULT;
}

/* The plan for n tokens, built on first use. */
static clinfer_status plan_for(clinfer_context *c, size_t n, split_plan **out) {
    clinfer_status st = CLINFER_OK;
    if (!c->plans[n]) {
        CHECK(split_plan_build(c, (int)n, NULL, &c->plans[n]));
        clinfer_dev_options dev;
        dev_options_get(&dev);
        FILE *out;
        clinfer_log_stream *log = dev.print_plan ? log_stream_begin(&out) : NULL;
        for (size_t i = 0; log && i < c->plans[n]->n_seg; i++)
            exec_plan_print(c->plans[n]->seg[i].plan, out);
        log_stream_end(log, CLINFER_LOG_DEBUG);
    }
    *out = c->plans[n];
cleanup:
    return st;
}

/* Room for rows of hidden states on the host. */
static clinfer_status reserve_embd(clinfer_context *c, size_t rows) {
    if (rows <= c->embd_cap) return CLINFER_OK;
    float *p = realloc(c->embd, rows * c->model->hp.n_embd * sizeof *p);
    if (!p)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "eval: no memory for %zu rows of hidden states",
                        rows);
    c->embd = p;
    c->embd_cap = rows;
    return CLINFER_OK;
}

/* Whether n tokens fit after what c holds and are ids of its vocabulary. */
static clinfer_status check_tokens(const clinfer_context *c, const int32_t *tokens, size_t n) {
    if (!c || (!tokens && n)) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "eval: NULL argument");
    if (n == 0) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "eval: no tokens");
    if (n > c->n_ctx - c->seq_len[0])
        return err_fail(CLINFER_ERR_CONTEXT_FULL,
                        "eval: %zu tokens after %u do not fit the context of %u", n, c->seq_len[0],
                        c->n_ctx);
    uint32_t n_vocab = c->model->hp.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "eval: token %zu is %d, outside the vocabulary of %u", i, tokens[i],
                            n_vocab);
    return CLINFER_OK;
}

/* Batch steps of sequence 0, n_batch tokens at most each: the last token asks for logits, or
 * every token with logits_all, whose rows follow each other in c->logits; with embeddings every
 * token's hidden state goes to c->embd. */
static clinfer_status eval_steps(clinfer_context *c, const int32_t *tokens, size_t n,
                                 clinfer_batch_entry *e) {
    clinfer_status st = CLINFER_OK;
    bool all = c->state.logits_all, embd = c->state.embeddings;
    size_t n_vocab = c->model->hp.n_vocab, n_embd = c->model->hp.n_embd, n_out = 0;
    CHECK(context_reserve_logits(c, all ? n : 1));
    if (embd) CHECK(reserve_embd(c, n));
    for (size_t done = 0, nb; done < n; done += nb) {
        nb = n - done < c->n_batch ? n - done : c->n_batch;
        if (c->should_stop && c->should_stop(c->should_stop_user)) {
            st = err_fail(CLINFER_ERR_ABORTED,
                          "eval: the abort callback stopped it after %zu of %zu tokens", done, n);
            goto cleanup;
        }
        for (size_t i = 0; i < nb; i++)
            e[i] = (clinfer_batch_entry){.token = tokens[done + i],
                                         .pos = c->seq_len[0] + (uint32_t)i,
                                         .logits = all || done + i == n - 1};
        CHECK(context_step(c, e, nb, c->logits + (all ? done : 0) * n_vocab,
                           embd ? c->embd + done * n_embd : NULL, &n_out));
    }
cleanup:
    return st;
}

clinfer_status clinfer_eval(clinfer_context *c, const int32_t *tokens, size_t n) {
    clinfer_status st = check_tokens(c, tokens, n);
    if (st != CLINFER_OK) return st;
    c->n_logits = 0;
    c->from_batch = false;
    uint32_t held = c->seq_len[0];
    size_t n_entries = n < c->n_batch ? n : c->n_batch;
    clinfer_batch_entry *e = malloc(n_entries * sizeof *e);
    st = e ? eval_steps(c, tokens, n, e)
           : err_fail(CLINFER_ERR_OUT_OF_MEMORY, "eval: no memory for %zu entries", n_entries);
    free(e);
    if (st != CLINFER_OK) {
        c->seq_len[0] = held; /* chunks already run are forgotten: the context holds what it held */
        err_prefix("eval of %zu tokens at position %u", n, held);
        return st;
    }
    c->n_logits = c->state.logits_all ? n : 1;
    c->n_eval = n;
    return CLINFER_OK;
}

clinfer_status context_stage(clinfer_context *c, const int32_t *tokens, size_t n,
                             context_batch *out) {
    clinfer_status st = check_tokens(c, tokens, n);
    if (st == CLINFER_OK && n > c->n_batch)
        st = err_fail(CLINFER_ERR_INVALID_ARGUMENT, "stage: %zu tokens exceed n_batch %u", n,
                      c->n_batch);
    if (st != CLINFER_OK) return st;
    uint32_t embed = model_part_device(c->model, -1);
    const clinfer_backend *be = context_backend(c, embed);
    c->n_logits = 0;
    c->from_batch = false;
    CHECK(be->i->buffer_write(be->ctx, context_state(c, embed)->buf[EXEC_IDS],
                              c->seq_len[0] * sizeof(int32_t), n * sizeof(int32_t), tokens));
    *out = (context_batch){.ctx = c, .pos0 = (int)c->seq_len[0]};
    CHECK(plan_for(c, n, &out->plan));
cleanup:
    return st;
}

void context_advance(clinfer_context *c, size_t n) {
    c->seq_len[0] += (uint32_t)n;
}

clinfer_status clinfer_get_logits(clinfer_context *c, const float **logits, size_t *n_vocab) {
    return clinfer_get_logits_ith(c, -1, logits, n_vocab);
}

/* Token i of the last eval (i < 0 from its end) as an index from its start, for caller's error
 * messages. */
static clinfer_status eval_token(const clinfer_context *c, int32_t i, const char *caller,
                                 int64_t *at) {
    if (!c->n_logits && !c->from_batch)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: nothing evaluated since create or reset",
                        caller);
    int64_t n_eval = (int64_t)c->n_eval;
    *at = i < 0 ? n_eval + i : i;
    if (*at < 0 || *at >= n_eval)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "%s: token %d is outside the last eval's %lld", caller, i,
                        (long long)n_eval);
    return CLINFER_OK;
}

clinfer_status clinfer_get_logits_ith(clinfer_context *c, int32_t i, const float **logits,
                                      size_t *n_vocab) {
    if (!c || !logits) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "get_logits: NULL argument");
    int64_t n_eval = (int64_t)c->n_eval, at = 0;
    clinfer_status st = eval_token(c, i, "get_logits", &at);
    if (st != CLINFER_OK) return st;
    /* without logits_all the one row held is the last token's */
    int64_t row = c->from_batch ? c->entry_row[at] : c->state.logits_all ? at : at - (n_eval - 1);
    if (row < 0 && c->from_batch)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "get_logits: entry %d of the last batch did not ask for logits", i);
    if (row < 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "get_logits: token %d of %lld: only the last token's logits are kept "
                        "(make the context with logits_all for the others)",
                        i, (long long)n_eval);
    *logits = c->logits + (size_t)row * c->model->hp.n_vocab;
    if (n_vocab) *n_vocab = c->model->hp.n_vocab;
    return CLINFER_OK;
}

clinfer_status clinfer_get_embeddings_ith(clinfer_context *c, int32_t i, const float **embd,
                                          size_t *n_embd) {
    if (!c || !embd) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "get_embeddings: NULL argument");
    if (!c->state.embeddings)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "get_embeddings: the context was made without embeddings");
    if (c->from_batch)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "get_embeddings: the last evaluation was a batch; hidden states are "
                        "kept by clinfer_eval only");
    int64_t at = 0;
    clinfer_status st = eval_token(c, i, "get_embeddings", &at);
    if (st != CLINFER_OK) return st;
    *embd = c->embd + (size_t)at * c->model->hp.n_embd;
    if (n_embd) *n_embd = c->model->hp.n_embd;
    return CLINFER_OK;
}

size_t context_n_eval(const clinfer_context *c) {
    return c && c->n_logits ? c->n_eval : 0;
}
