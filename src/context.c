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
/* CL_DEVICE_MAX_MEM_ALLOC_SIZE is at least this on every OpenCL device */
#define KV_GROUP_BYTES ((size_t)128 << 20)

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

static size_t kv_elem_bytes(bool kv_f32) {
    return kv_f32 ? sizeof(float) : sizeof(uint16_t);
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
    exec_buffer_sizes(hp, n_ctx, n_batch, logit_rows(params->logits_all, n_seq, n_batch), sizes);
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

/* A context that cannot fit the device's memory beside the weights is refused with the largest
 * n_ctx that would, rather than allocated into overcommitted memory. */
static clinfer_status check_fits(const clinfer_model *m, const clinfer_memory_plan *plan) {
    const clinfer_backend *be = m->backend;
    uint64_t memory = be->i->memory ? be->i->memory(be->ctx) : 0;
    uint64_t need = plan->weight_bytes + plan->kv_bytes + plan->scratch_bytes;
    if (!memory || need <= memory) return CLINFER_OK;
    uint64_t per_token = plan->kv_bytes / plan->n_ctx;
    uint64_t room = memory > plan->weight_bytes + plan->scratch_bytes
                        ? memory - plan->weight_bytes - plan->scratch_bytes
                        : 0;
    return err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                    "context: n_ctx %u needs a %.1f MiB KV cache and %.1f MiB of scratch beside "
                    "%.1f MiB of weights, more than the device's %.1f MiB; n_ctx %llu at most "
                    "would fit",
                    plan->n_ctx, plan->kv_bytes / 1048576.0, plan->scratch_bytes / 1048576.0,
                    plan->weight_bytes / 1048576.0, memory / 1048576.0,
                    (unsigned long long)(per_token ? room / per_token : 0));
}

static clinfer_status alloc(clinfer_context *c, size_t bytes, clinfer_buffer **out) {
    const clinfer_backend *be = c->backend;
    return be->i->buffer_alloc(be->ctx, bytes, out);
}

static clinfer_status create_buffers(clinfer_context *c, bool kv_f32) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &c->model->hp;
    exec_state *s = &c->state;
    int32_t *positions = NULL;
    size_t sizes[EXEC_COUNT];
    exec_buffer_sizes(hp, c->n_ctx, c->n_batch, c->n_logit_rows, sizes);
    for (int i = 0; i < EXEC_COUNT; i++)
        if (sizes[i]) CHECK(alloc(c, sizes[i], &s->buf[i]));

    s->kv_type = kv_f32 ? CLINFER_DT_F32 : CLINFER_DT_F16;
    /* elements per layer: each sequence's n_ctx rows after the one before */
    size_t cache = (size_t)c->n_seq * c->n_ctx * hp->n_head_kv * hp->head_dim;
    size_t cache_bytes = cache * kv_elem_bytes(kv_f32);
    /* Layers share buffers of at most KV_GROUP_BYTES: few buffers (a graph launch names every
     * buffer of a decode step), none past what every OpenCL device can allocate. */
    uint32_t per_buf = cache_bytes < KV_GROUP_BYTES ? (uint32_t)(KV_GROUP_BYTES / cache_bytes) : 1;
    if (per_buf > hp->n_layer) per_buf = hp->n_layer;
    c->n_kv_bufs = (hp->n_layer + per_buf - 1) / per_buf;
    s->k_cache = calloc(hp->n_layer, sizeof *s->k_cache);
    s->v_cache = calloc(hp->n_layer, sizeof *s->v_cache);
    c->kv_bufs = calloc(2 * (size_t)c->n_kv_bufs, sizeof *c->kv_bufs);
    if (!s->k_cache || !s->v_cache || !c->kv_bufs) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context: no memory for %u cache handles",
                      hp->n_layer);
        goto cleanup;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint32_t g = il / per_buf, in_buf = il - g * per_buf;
        if (in_buf == 0) {
            uint32_t layers = hp->n_layer - il < per_buf ? hp->n_layer - il : per_buf;
            CHECK(alloc(c, layers * cache_bytes, &c->kv_bufs[2 * g]));
            CHECK(alloc(c, layers * cache_bytes, &c->kv_bufs[2 * g + 1]));
        }
        s->k_cache[il] = (clinfer_ref){c->kv_bufs[2 * g], in_buf * cache};
        s->v_cache[il] = (clinfer_ref){c->kv_bufs[2 * g + 1], in_buf * cache};
    }

    if (s->buf[EXEC_POS_IDS]) {
        positions = malloc((size_t)c->n_ctx * sizeof *positions);
        if (!positions) {
            st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context: no memory for %u positions",
                          c->n_ctx);
            goto cleanup;
        }
        for (uint32_t i = 0; i < c->n_ctx; i++)
            positions[i] = (int32_t)i;
        const clinfer_backend *be = c->backend;
        CHECK(be->i->buffer_write(be->ctx, s->buf[EXEC_POS_IDS], 0,
                                  (size_t)c->n_ctx * sizeof *positions, positions));
    }
cleanup:
    free(positions);
    return st;
}

static clinfer_status plan_for(clinfer_context *c, size_t n, exec_plan **out);

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
    CHECK(check_fits(model, &plan));
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
    CHECK(model->backend->i->instance(model->backend->ctx, &c->backend));
    CHECK(create_buffers(c, params->kv_f32));
    CHECK(exec_profile_create(model->profile, &c->profile));
    /* A decode step's plan now, prepared by the backend: what its walk needs (a graph program)
     * compiles here rather than while the first answer streams. */
    exec_plan *decode;
    CHECK(plan_for(c, 1, &decode));
    CHECK(exec_plan_prepare(c->backend, decode, true));
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
    const clinfer_backend *be = c->backend;
    exec_state *s = &c->state;
    FILE *out;
    clinfer_log_stream *log = log_stream_begin(&out);
    exec_profile_free(c->profile, out);
    log_stream_end(log, CLINFER_LOG_INFO);
    for (int i = 0; be && i < EXEC_COUNT; i++)
        if (s->buf[i]) be->i->buffer_free(be->ctx, s->buf[i]);
    for (uint32_t i = 0; be && c->kv_bufs && i < 2 * c->n_kv_bufs; i++)
        if (c->kv_bufs[i]) be->i->buffer_free(be->ctx, c->kv_bufs[i]);
    for (uint32_t n = 0; c->plans && n <= c->n_batch; n++)
        exec_plan_free(c->plans[n]); /* before the backend: they may hold plans of its own */
    free(c->plans);
    backend_free(c->backend);
    free(c->kv_bufs);
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
static clinfer_status plan_for(clinfer_context *c, size_t n, exec_plan **out) {
    clinfer_status st = CLINFER_OK;
    if (!c->plans[n]) {
        CHECK(exec_plan_build(c->model, &c->state, (int)n, &c->plans[n]));
        clinfer_dev_options dev;
        dev_options_get(&dev);
        FILE *out;
        clinfer_log_stream *log = dev.print_plan ? log_stream_begin(&out) : NULL;
        if (log) exec_plan_print(c->plans[n], out);
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
    const clinfer_backend *be = c->backend;
    c->n_logits = 0;
    c->from_batch = false;
    CHECK(be->i->buffer_write(be->ctx, c->state.buf[EXEC_IDS], c->seq_len[0] * sizeof(int32_t),
                              n * sizeof(int32_t), tokens));
    *out = (context_batch){.backend = be, .state = &c->state, .pos0 = (int)c->seq_len[0]};
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
