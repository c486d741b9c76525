/* clinfer serve: the scheduler. One thread drives one context that holds a sequence per slot
 * (continuous batching). Each step it
 *   - takes queued jobs into free slots (a slot keeps the tokens of its last request: a new
 *     prompt that starts with them evaluates only the rest, as llama-server's cache_prompt),
 *     and drops the jobs whose client left (their sequence cleared);
 *   - evaluates one batch: a token of each generating slot first, then as many prompt tokens
 *     of starting slots as the rest of n_batch holds, first come first served, so that a long
 *     prompt is spread over several steps and never holds up the running streams for more than
 *     a step of n_batch tokens;
 *   - samples each slot whose logits came back, with its own sampler, and streams the text;
 *   - evaluates one input of a waiting embeddings job on a context of its own (hidden states
 *     are read only after clinfer_eval, and the generation context saves their read).
 * Everything on the device runs on this one thread, one launch after another. */
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "serve_pool.h"

/* ---- text ---------------------------------------------------------------------------------- */

/* How much of the text is final: up to the first stop string, or else all but the longest tail
 * that could still grow into one. Returns whether a stop string was found. */
static bool find_stop(serve_job *job) {
    size_t final = job->len, cut = SIZE_MAX;
    for (size_t s = 0; s < job->n_stop; s++) {
        const char *stop = job->stop[s];
        size_t n = strlen(stop);
        /* no stop string starts before `ready`: that is what keeps text from being final */
        for (size_t i = job->ready; i + n <= job->len && i < cut; i++)
            if (!memcmp(job->text + i, stop, n)) {
                cut = i; /* the earliest match of all the stop strings */
                break;
            }
        for (size_t k = n - 1; k > 0; k--) /* the longest tail that is a prefix of stop */
            if (k <= job->len && !memcmp(job->text + job->len - k, stop, k)) {
                if (job->len - k < final) final = job->len - k;
                break;
            }
    }
    if (cut != SIZE_MAX) {
        job->ready = job->len = cut;
        return true;
    }
    while (final > job->ready && final < job->len && (job->text[final] & 0xC0) == 0x80)
        final--;
    if (final > job->ready) job->ready = final;
    return false;
}

/* Under the lock: appends whole characters to the job's text and looks for stop strings.
 * Returns whether the generation goes on. */
static bool append_text(serve_job *job, const char *text, size_t len) {
    if (job->len + len > job->cap) {
        size_t cap = 2 * (job->len + len) + 64;
        char *grown = realloc(job->text, cap);
        if (!grown) {
            job->status = CLINFER_ERR_OUT_OF_MEMORY;
            snprintf(job->error, sizeof job->error, "no memory for %zu bytes of text", cap);
            return false;
        }
        job->text = grown;
        job->cap = cap;
    }
    memcpy(job->text + job->len, text, len);
    job->len += len;
    bool stop = find_stop(job);
    if (stop) job->finish = SERVE_FINISH_STOP;
    if (job->ready && !job->first_text_ms) job->first_text_ms = cli_now_ms();
    pthread_cond_broadcast(&job->changed);
    return !stop;
}

/* Adds a sampled token's piece to the slot's pending bytes and hands on the whole characters,
 * and its log-probabilities (lp, unless NULL). Returns whether the generation goes on. */
static bool stream_token(serve_pool *p, serve_slot *s, int32_t token, serve_logprob *lp) {
    serve_job *job = s->job;
    size_t need = 0;
    clinfer_status st = CLINFER_ERR_BUFFER_TOO_SMALL;
    for (int attempt = 0; attempt < 2 && st == CLINFER_ERR_BUFFER_TOO_SMALL; attempt++) {
        if (attempt) {
            size_t cap = 2 * (s->n_pending + need) + 64;
            char *grown = realloc(s->pending, cap);
            if (!grown) break;
            s->pending = grown;
            s->cap_pending = cap;
        }
        st = clinfer_token_to_piece(p->model, token, s->pending + s->n_pending,
                                    s->cap_pending - s->n_pending, &need);
    }
    pthread_mutex_lock(&p->lock);
    bool go_on = st == CLINFER_OK && !job->cancelled;
    if (st != CLINFER_OK) {
        job->status = st == CLINFER_ERR_BUFFER_TOO_SMALL ? CLINFER_ERR_OUT_OF_MEMORY : st;
        snprintf(job->error, sizeof job->error, "token %d has no text: %s", token,
                 st == CLINFER_ERR_BUFFER_TOO_SMALL ? "no memory" : clinfer_last_error());
    }
    if (go_on) {
        s->n_pending += need;
        size_t whole = clinfer_utf8_complete(s->pending, s->n_pending);
        if (whole) go_on = append_text(job, s->pending, whole);
        memmove(s->pending, s->pending + whole, s->n_pending - whole);
        s->n_pending -= whole;
    }
    if (st == CLINFER_OK && lp) {
        lp->end = job->len + s->n_pending;
        if (!serve_job_push_logprob_locked(job, lp)) {
            job->status = CLINFER_ERR_OUT_OF_MEMORY;
            snprintf(job->error, sizeof job->error, "no memory for log-probabilities");
            go_on = false;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return go_on;
}

/* ---- jobs in slots ------------------------------------------------------------------------- */

/* Under the lock: the job is finished (st: CLINFER_OK, or why it failed, with msg). */
static void job_done_locked(serve_pool *p, serve_job *job, clinfer_status st, const char *msg,
                            bool full) {
    if (st != CLINFER_OK && job->status == CLINFER_OK) {
        job->status = st;
        snprintf(job->error, sizeof job->error, "%s", msg);
    }
    if (job->finish == SERVE_FINISH_NONE) {
        job->ready = job->len; /* no stop string can complete any more */
        bool all = job->n_predict >= 0 && job->stats.n_generated >= (size_t)job->n_predict;
        job->finish = all || full ? SERVE_FINISH_LENGTH : SERVE_FINISH_STOP;
    }
    job->done = true;
    p->stats.jobs_done++;
    if (job->first_text_ms > 0) {
        p->stats.ttft_ms += job->first_text_ms - job->submitted_ms;
        p->stats.ttft_jobs++;
    }
    pthread_cond_broadcast(&job->changed);
    serve_job_unref_locked(job);
}

/* Ends slot i's job: full says the context ran out. A job that failed or was cancelled leaves
 * its sequence empty; a finished one leaves it for the prompt cache. */
static void slot_finish(serve_pool *p, size_t i, clinfer_status st, const char *msg, bool full) {
    serve_slot *s = &p->slots[i];
    serve_job *job = s->job;
    pthread_mutex_lock(&p->lock);
    static const char replacement[] = "\xEF\xBF\xBD"; /* an unfinished last character */
    if (s->n_pending && st == CLINFER_OK && !job->cancelled && job->finish == SERVE_FINISH_NONE)
        append_text(job, replacement, sizeof replacement - 1);
    double now = cli_now_ms();
    job->stats.n_prompt = job->n_tokens;
    job->stats.n_generated = s->n_generated;
    job->stats.prefill_ms = (s->decoding ? s->first_ms : now) - s->start_ms;
    job->stats.decode_ms = s->decoding ? now - s->first_ms : 0;
    bool dropped = st != CLINFER_OK || job->cancelled;
    job_done_locked(p, job, st, msg, full);
    s->job = NULL;
    p->active--;
    pthread_mutex_unlock(&p->lock);
    if (dropped) {
        clinfer_seq_clear(p->ctx, (uint32_t)i);
        s->n_held = 0;
    }
    clinfer_sampler_free(s->sampler);
    s->sampler = NULL;
    s->decoding = false;
    s->n_pending = 0;
}

/* The tokens the slot's sequence and the job's prompt start with alike. */
static size_t common_start(const serve_slot *s, const serve_job *job) {
    size_t n = 0;
    while (n < s->n_held && n < job->n_tokens && s->held[n] == job->tokens[n])
        n++;
    return n;
}

/* Under the lock: starts job on free slot i, keeping what its sequence holds of the prompt. */
static void slot_start_locked(serve_pool *p, size_t i, serve_job *job) {
    serve_slot *s = &p->slots[i];
    size_t keep = common_start(s, job);
    if (keep == job->n_tokens) keep--; /* the last prompt token again, for its logits */
    clinfer_seq_truncate(p->ctx, (uint32_t)i, (uint32_t)keep);
    *s = (serve_slot){.held = s->held,
                      .n_held = keep,
                      .n_fed = keep,
                      .pending = s->pending,
                      .cap_pending = s->cap_pending,
                      .order = ++p->order, /* 0: never used */
                      .start_ms = cli_now_ms(),
                      .job = job};
    p->active++;
    s->sampler = job->sampler; /* the slot's from now on */
    job->sampler = NULL;
    for (size_t t = 0; t < job->n_tokens; t++) /* the penalties' window takes in the prompt */
        clinfer_sampler_accept(s->sampler, job->tokens[t]);
}

/* The free slot whose sequence shares the longest start with the job's prompt, of equals the
 * one used longest ago (so a new conversation displaces the oldest cache); n_slots when none is
 * free. */
static size_t pick_slot(const serve_pool *p, const serve_job *job) {
    size_t best = p->n_slots, best_len = 0;
    for (size_t i = 0; i < p->n_slots; i++) {
        const serve_slot *s = &p->slots[i];
        if (s->job) continue;
        size_t n = common_start(s, job);
        if (best == p->n_slots || n > best_len ||
            (n == best_len && s->order < p->slots[best].order)) {
            best = i;
            best_len = n;
        }
    }
    return best;
}

static size_t free_slots(const serve_pool *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->n_slots; i++)
        n += !p->slots[i].job;
    return n;
}

/* Under the lock: a group's lead (first in the queue) and the rest of its jobs that are still
 * queued, into free slots; the others follow the lead's slot. Returns the job queued after the
 * group. */
static serve_job *admit_group_locked(serve_pool *p, serve_job *lead) {
    serve_job *after = lead->next;
    while (after && after->group == lead->group)
        after = after->next;
    size_t l = pick_slot(p, lead);
    for (serve_job *job = lead, *next; job != after; job = next) {
        next = job->next;
        size_t i = job == lead ? l : pick_slot(p, job);
        serve_job_unlink_locked(p, job);
        slot_start_locked(p, i, job);
        if (job != lead) {
            p->slots[i].following = true;
            p->slots[i].lead = l;
        }
    }
    return after;
}

/* Under the lock: queued jobs into free slots (and an embeddings job into its runner), in
 * queue order; a group that does not fit yet holds up the jobs behind it. */
static void admit_locked(serve_pool *p) {
    for (serve_job *job = p->head, *next; job; job = next) {
        next = job->next;
        if (job->n_inputs) {
            if (p->embed_job) continue;
            serve_job_unlink_locked(p, job);
            p->embed_job = job;
            p->embed_next = 0;
            continue;
        }
        if (job->group) {
            if (free_slots(p) < job->n_group) break; /* first come, first served */
            next = admit_group_locked(p, job);
            continue;
        }
        size_t i = pick_slot(p, job);
        if (i == p->n_slots) continue;
        serve_job_unlink_locked(p, job);
        slot_start_locked(p, i, job);
    }
}

/* The slots that follow a group's lead: once the lead's prompt is in, each copies the lead's
 * sequence but for the last prompt token, which it evaluates itself for its own logits. A lead
 * whose sequence does not hold the prompt (it failed or left) leaves them to evaluate it. */
static void copy_from_leads(serve_pool *p) {
    for (size_t i = 0; i < p->n_slots; i++) {
        serve_slot *s = &p->slots[i];
        if (!s->job || !s->following) continue;
        const serve_slot *l = &p->slots[s->lead];
        if (l->job && l->job->group == s->job->group && l->job->group_lead &&
            l->n_fed < l->job->n_tokens)
            continue; /* the lead's prompt is not in yet */
        s->following = false;
        size_t n = s->job->n_tokens - 1;
        if (n <= s->n_fed || l->n_held < n || memcmp(l->held, s->job->tokens, n * sizeof *l->held))
            continue;
        clinfer_status st =
            clinfer_seq_copy_prefix(p->ctx, (uint32_t)s->lead, (uint32_t)i, (uint32_t)n);
        if (st != CLINFER_OK) {
            s->n_held = s->n_fed = 0; /* a failed copy leaves the sequence empty */
            slot_finish(p, i, st, clinfer_last_error(), false);
            continue;
        }
        memcpy(s->held, l->held, n * sizeof *s->held);
        s->n_held = s->n_fed = n;
    }
}

/* ---- steps --------------------------------------------------------------------------------- */

/* Slot i's logits are entry e's: samples its next token and streams it, or ends its job. */
static void slot_sample(serve_pool *p, size_t i, size_t e) {
    serve_slot *s = &p->slots[i];
    serve_job *job = s->job;
    if (!s->decoding) {
        s->decoding = true;
        s->first_ms = cli_now_ms();
    }
    if (job->n_predict >= 0 && s->n_generated >= (size_t)job->n_predict)
        return slot_finish(p, i, CLINFER_OK, NULL, false);
    if (s->n_held >= p->n_ctx) return slot_finish(p, i, CLINFER_OK, NULL, true);
    const float *logits;
    size_t n_vocab;
    int32_t tok = 0;
    clinfer_status st = clinfer_get_logits_ith(p->ctx, (int32_t)e, &logits, &n_vocab);
    if (st == CLINFER_OK) st = clinfer_sampler_sample(s->sampler, logits, n_vocab, &tok);
    if (st != CLINFER_OK) return slot_finish(p, i, st, clinfer_last_error(), false);
    if (clinfer_token_is_eog(p->model, tok)) return slot_finish(p, i, CLINFER_OK, NULL, false);
    clinfer_sampler_accept(s->sampler, tok);
    s->n_generated++;
    pthread_mutex_lock(&p->lock);
    p->stats.generated_tokens++;
    pthread_mutex_unlock(&p->lock);
    s->next = tok;
    serve_logprob lp;
    if (job->n_top_logprobs >= 0)
        serve_logprob_compute(logits, n_vocab, tok, (uint32_t)job->n_top_logprobs, &lp);
    if (!stream_token(p, s, tok, job->n_top_logprobs >= 0 ? &lp : NULL))
        /* a stop string, a client gone, or no memory */
        return slot_finish(p, i, CLINFER_OK, NULL, false);
    if (job->n_predict >= 0 && s->n_generated >= (size_t)job->n_predict)
        return slot_finish(p, i, CLINFER_OK, NULL, false);
    /* tok would fill the context: what could follow it has no room (as clinfer_generate) */
    if (s->n_held + 1 >= p->n_ctx) slot_finish(p, i, CLINFER_OK, NULL, true);
}

/* The started slot with the earliest job still prefilling; n_slots when none. */
static size_t next_prefill(const serve_pool *p, uint64_t after) {
    size_t best = p->n_slots;
    for (size_t i = 0; i < p->n_slots; i++) {
        const serve_slot *s = &p->slots[i];
        if (!s->job || s->decoding || s->following || s->order < after) continue;
        if (best == p->n_slots || s->order < p->slots[best].order) best = i;
    }
    return best;
}

/* Builds and evaluates one batch, then samples the slots whose logits came back. */
static void step(serve_pool *p) {
    clinfer_batch_entry *b = p->batch;
    size_t n = 0, n_decode = 0;
    copy_from_leads(p);
    for (size_t i = 0; i < p->n_slots && n < p->n_batch; i++) {
        serve_slot *s = &p->slots[i];
        if (!s->job || !s->decoding) continue;
        b[n] = (clinfer_batch_entry){s->next, (uint32_t)s->n_held, (uint32_t)i, true};
        p->entry_slot[n++] = (uint32_t)i;
    }
    n_decode = n;
    for (uint64_t after = 0; n < p->n_batch;) {
        size_t i = next_prefill(p, after);
        if (i == p->n_slots) break;
        serve_slot *s = &p->slots[i];
        after = s->order + 1;
        size_t take = s->job->n_tokens - s->n_fed;
        if (take > p->n_batch - n) take = p->n_batch - n;
        for (size_t k = 0; k < take; k++) {
            size_t t = s->n_fed + k;
            b[n] = (clinfer_batch_entry){s->job->tokens[t], (uint32_t)(s->n_held + k), (uint32_t)i,
                                         t + 1 == s->job->n_tokens};
            p->entry_slot[n++] = (uint32_t)i;
        }
    }
    if (n == 0) return;
    double t0 = cli_now_ms();
    clinfer_status st = clinfer_batch_eval(p->ctx, b, n);
    double ms = cli_now_ms() - t0;
    if (st != CLINFER_OK) { /* every job of the batch fails, with the library's reason */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", clinfer_last_error());
        for (size_t e = 0; e < n; e++) {
            size_t i = p->entry_slot[e];
            if (p->slots[i].job) slot_finish(p, i, st, msg, false);
        }
        return;
    }
    for (size_t e = 0; e < n; e++) {
        serve_slot *s = &p->slots[p->entry_slot[e]];
        s->held[s->n_held++] = b[e].token;
        if (e >= n_decode) s->n_fed++;
    }
    pthread_mutex_lock(&p->lock);
    p->stats.steps++;
    p->stats.batch_tokens += n;
    p->stats.prompt_tokens += n - n_decode;
    if (n_decode) p->stats.decode_ms += ms;
    if (n > n_decode) p->stats.prefill_ms += ms;
    pthread_mutex_unlock(&p->lock);
    for (size_t e = 0; e < n; e++)
        if (b[e].logits && p->slots[p->entry_slot[e]].job) slot_sample(p, p->entry_slot[e], e);
}

/* One input of the running embeddings job, or its end. */
static void embed_step(serve_pool *p) {
    serve_job *job = p->embed_job;
    pthread_mutex_lock(&p->lock);
    bool cancelled = job->cancelled;
    pthread_mutex_unlock(&p->lock);
    clinfer_status st = CLINFER_OK;
    const char *msg = NULL;
    size_t i = p->embed_next;
    if (!cancelled && i < job->n_inputs) {
        size_t start = i ? job->ends[i - 1] : 0, n = job->ends[i] - start;
        double t0 = cli_now_ms();
        clinfer_context_reset(p->embed_ctx);
        st = clinfer_eval(p->embed_ctx, job->tokens + start, n);
        if (st == CLINFER_OK)
            st =
                clinfer_get_embeddings_pooled(p->embed_ctx, CLINFER_POOLING_MEAN, true,
                                              job->embeddings + i * job->n_embd, job->n_embd, NULL);
        job->stats.prefill_ms += cli_now_ms() - t0;
        if (st == CLINFER_OK) {
            job->stats.n_prompt += n;
            if (++p->embed_next < job->n_inputs) return;
        }
        msg = clinfer_last_error();
    }
    pthread_mutex_lock(&p->lock);
    p->stats.prompt_tokens += job->stats.n_prompt;
    p->stats.prefill_ms += job->stats.prefill_ms;
    job_done_locked(p, job, st, msg, false);
    p->embed_job = NULL;
    pthread_mutex_unlock(&p->lock);
}

/* Under the lock: whether a job runs. */
static bool busy_locked(const serve_pool *p) {
    return p->active || p->embed_job;
}

static void *scheduler(void *arg) {
    serve_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->head && !busy_locked(p) && !p->stopping)
            pthread_cond_wait(&p->work, &p->lock);
        if (!p->head && !busy_locked(p)) { /* stopping, and nothing is left */
            pthread_mutex_unlock(&p->lock);
            break;
        }
        admit_locked(p);
        pthread_mutex_unlock(&p->lock);
        for (size_t i = 0; i < p->n_slots; i++) { /* the jobs whose client left go now */
            serve_slot *s = &p->slots[i];
            pthread_mutex_lock(&p->lock);
            bool gone = s->job && s->job->cancelled;
            pthread_mutex_unlock(&p->lock);
            if (gone) slot_finish(p, i, CLINFER_OK, NULL, false);
        }
        step(p);
        if (p->embed_job) embed_step(p);
    }
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------------ */

clinfer_status serve_pool_create(clinfer_model *model, size_t n_slots,
                                 const clinfer_context_params *params, size_t queue_cap,
                                 serve_pool **out) {
    *out = NULL;
    serve_pool *p = calloc(1, sizeof *p);
    serve_slot *slots = calloc(n_slots, sizeof *slots);
    if (!p || !slots) {
        free(p);
        free(slots);
        return CLINFER_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    p->model = model;
    p->slots = slots;
    p->n_slots = n_slots;
    p->queue_cap = queue_cap;
    clinfer_context_params cp = *params;
    cp.embeddings = false; /* the generation context saves the hidden states' read */
    cp.n_seq_max = (uint32_t)n_slots;
    clinfer_memory_plan plan; /* n_batch resolved: 0 is the library's default */
    clinfer_status st = clinfer_model_memory_plan(model, &cp, &plan);
    if (st == CLINFER_OK) {
        cp.n_batch = plan.n_batch < n_slots ? (uint32_t)n_slots : plan.n_batch; /* a token each */
        st = clinfer_context_create(model, &cp, &p->ctx);
    }
    if (st == CLINFER_OK) {
        p->n_ctx = clinfer_context_n_ctx(p->ctx);
        st = clinfer_model_memory_plan(model, &cp, &plan); /* n_batch again: capped at n_ctx */
        p->n_batch = plan.n_batch;
    }
    if (st == CLINFER_OK) {
        cp.n_seq_max = 1;
        cp.embeddings = true;
        st = clinfer_context_create(model, &cp, &p->embed_ctx);
    }
    p->batch = st == CLINFER_OK ? malloc(p->n_batch * sizeof *p->batch) : NULL;
    p->entry_slot = st == CLINFER_OK ? malloc(p->n_batch * sizeof *p->entry_slot) : NULL;
    if (st == CLINFER_OK && (!p->batch || !p->entry_slot)) st = CLINFER_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n_slots && st == CLINFER_OK; i++) {
        slots[i].held = malloc(p->n_ctx * sizeof *slots[i].held);
        slots[i].cap_pending = 64;
        slots[i].pending = malloc(slots[i].cap_pending);
        if (!slots[i].held || !slots[i].pending) st = CLINFER_ERR_OUT_OF_MEMORY;
    }
    if (st == CLINFER_OK) {
        if (pthread_create(&p->thread, NULL, scheduler, p))
            st = CLINFER_ERR_OUT_OF_MEMORY;
        else
            p->started = true;
    }
    if (st != CLINFER_OK) {
        serve_pool_free(p);
        return st;
    }
    *out = p;
    return CLINFER_OK;
}

void serve_pool_free(serve_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    if (p->started) pthread_join(p->thread, NULL);
    for (size_t i = 0; i < p->n_slots; i++) {
        free(p->slots[i].held);
        free(p->slots[i].pending);
    }
    clinfer_context_free(p->ctx);
    clinfer_context_free(p->embed_ctx);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->batch);
    free(p->entry_slot);
    free(p->slots);
    free(p);
}

/* Under the lock: a job not done yet ends before the scheduler's next step, failed with why. */
static void stop_locked(serve_job *job, const char *why) {
    if (!job || job->done) return;
    if (job->status == CLINFER_OK) {
        job->status = CLINFER_ERR_ABORTED;
        snprintf(job->error, sizeof job->error, "%s", why);
    }
    job->cancelled = true; /* a queued one is taken into a slot, then ended there at once */
}

void serve_pool_stop_jobs(serve_pool *p, const char *why) {
    if (!p) return; /* the model never loaded: no jobs */
    pthread_mutex_lock(&p->lock);
    for (serve_job *job = p->head; job; job = job->next)
        stop_locked(job, why);
    for (size_t i = 0; i < p->n_slots; i++)
        stop_locked(p->slots[i].job, why);
    stop_locked(p->embed_job, why);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
}

uint32_t serve_pool_n_ctx(const serve_pool *p) {
    return p->n_ctx;
}

uint32_t serve_pool_n_batch(const serve_pool *p) {
    return p->n_batch;
}
