#include "serve_slots.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"

typedef struct {
    serve_pool *pool;
    clinfer_context *ctx;
    pthread_t thread;
    bool started;
} slot;

struct serve_pool {
    pthread_mutex_t lock; /* guards the queue, every job's output and the stats */
    pthread_cond_t work;  /* a job was queued, or the pool is stopping */
    serve_job *head, *tail;
    size_t queued, queue_cap, active;
    bool stopping;
    slot *slots;
    size_t n_slots;
    serve_pool_stats stats;
};

/* ---- jobs ---------------------------------------------------------------------------------- */

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void job_free(serve_job *job) {
    free(job->tokens);
    free(job->ends);
    free(job->embeddings);
    for (size_t i = 0; i < job->n_stop; i++)
        free(job->stop[i]);
    free(job->text);
    pthread_cond_destroy(&job->changed);
    free(job);
}

serve_job *serve_job_create(serve_pool *pool, const int32_t *tokens, size_t n_tokens,
                            const serve_request *req, uint64_t seed) {
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_cond_init(&job->changed, NULL);
    job->pool = pool;
    job->refs = 1;
    job->tokens = malloc(n_tokens * sizeof *tokens); /* n_tokens >= 1: the caller checks */
    bool ok = job->tokens != NULL;
    if (ok) memcpy(job->tokens, tokens, n_tokens * sizeof *tokens);
    job->n_tokens = n_tokens;
    job->n_predict = req->max_tokens;
    job->sampling = req->sampling;
    if (!req->seed_given) job->sampling.seed = seed;
    for (size_t i = 0; ok && i < req->n_stop; i++)
        ok = (job->stop[job->n_stop++] = dup_string(req->stop[i])) != NULL;
    job->submitted_ms = cli_now_ms();
    if (!ok) {
        job_free(job);
        return NULL;
    }
    return job;
}

serve_job *serve_job_create_embed(serve_pool *pool, const int32_t *tokens, const size_t *ends,
                                  size_t n_inputs, size_t n_embd) {
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_cond_init(&job->changed, NULL);
    job->pool = pool;
    job->refs = 1;
    job->n_tokens = ends[n_inputs - 1]; /* n_inputs >= 1 and each input non-empty: the caller */
    job->tokens = malloc(job->n_tokens * sizeof *tokens);
    job->ends = malloc(n_inputs * sizeof *ends);
    job->embeddings = malloc(n_inputs * n_embd * sizeof *job->embeddings);
    job->n_inputs = n_inputs;
    job->n_embd = n_embd;
    job->submitted_ms = cli_now_ms();
    if (!job->tokens || !job->ends || !job->embeddings) {
        job_free(job);
        return NULL;
    }
    memcpy(job->tokens, tokens, job->n_tokens * sizeof *tokens);
    memcpy(job->ends, ends, n_inputs * sizeof *ends);
    return job;
}

/* Under the pool's lock. */
static void unref_locked(serve_job *job) {
    if (--job->refs == 0) job_free(job);
}

static void unlink_locked(serve_pool *p, serve_job *job) {
    serve_job **at = &p->head, *prev = NULL;
    while (*at && *at != job) {
        prev = *at;
        at = &(*at)->next;
    }
    if (!*at) return;
    *at = job->next;
    if (p->tail == job) p->tail = prev;
    job->queued = false;
    p->queued--;
}

static void cancel_locked(serve_job *job) {
    serve_pool *p = job->pool;
    if (job->done || job->cancelled || !job->submitted) return;
    job->cancelled = true;
    p->stats.jobs_cancelled++;
    if (job->queued) {
        /* never started: done now, and the queue's reference goes */
        unlink_locked(p, job);
        job->done = true;
        pthread_cond_broadcast(&job->changed);
        unref_locked(job);
    }
}

void serve_job_cancel(serve_job *job) {
    /* the lock is named before cancel_locked may drop the queue's reference to job */
    pthread_mutex_t *lock = &job->pool->lock;
    pthread_mutex_lock(lock);
    cancel_locked(job);
    pthread_mutex_unlock(lock);
}

void serve_job_release(serve_job *job) {
    if (!job) return;
    pthread_mutex_t *lock = &job->pool->lock;
    pthread_mutex_lock(lock);
    cancel_locked(job);
    unref_locked(job);
    pthread_mutex_unlock(lock);
}

bool serve_pool_submit(serve_pool *p, serve_job *job) {
    pthread_mutex_lock(&p->lock);
    bool ok = !p->stopping && p->queued < p->queue_cap;
    if (ok) {
        job->refs++;
        job->submitted = job->queued = true;
        job->next = NULL;
        if (p->tail)
            p->tail->next = job;
        else
            p->head = job;
        p->tail = job;
        p->queued++;
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    return ok;
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

bool serve_job_wait(serve_job *job, size_t *seen, char *out, size_t size, size_t *n,
                    int timeout_ms) {
    pthread_mutex_t *lock = &job->pool->lock;
    pthread_mutex_lock(lock);
    if (job->ready == *seen && !job->done) {
        struct timespec ts;
        deadline_in(&ts, timeout_ms);
        pthread_cond_timedwait(&job->changed, lock, &ts);
    }
    size_t take = job->ready - *seen;
    if (take > size) {
        take = size;
        while (take > 0 && (job->text[*seen + take] & 0xC0) == 0x80) /* whole characters */
            take--;
    }
    if (take) memcpy(out, job->text + *seen, take);
    *seen += take;
    *n = take;
    bool finished = job->done && *seen == job->ready;
    pthread_mutex_unlock(lock);
    return finished;
}

/* ---- the workers --------------------------------------------------------------------------- */

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

/* clinfer_generate's callback: appends the text, finds stop strings, stops a cancelled job. */
static bool on_text(const char *text, size_t len, void *user) {
    serve_job *job = user;
    serve_pool *p = job->pool;
    pthread_mutex_lock(&p->lock);
    bool go_on = !job->cancelled;
    if (go_on && job->len + len > job->cap) {
        size_t cap = 2 * (job->len + len) + 64;
        char *grown = realloc(job->text, cap);
        if (!grown) {
            job->status = CLINFER_ERR_OUT_OF_MEMORY;
            snprintf(job->error, sizeof job->error, "no memory for %zu bytes of text", cap);
            go_on = false;
        } else {
            job->text = grown;
            job->cap = cap;
        }
    }
    if (go_on) {
        memcpy(job->text + job->len, text, len);
        job->len += len;
        if (find_stop(job)) {
            job->finish = SERVE_FINISH_STOP;
            go_on = false;
        }
        if (job->ready && !job->first_text_ms) job->first_text_ms = cli_now_ms();
        pthread_cond_broadcast(&job->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return go_on;
}

/* The slot context's abort callback: a cancelled job (the client left) stops its eval at the
 * next chunk of the prompt. */
static bool job_cancelled(void *user) {
    serve_job *job = user;
    pthread_mutex_lock(&job->pool->lock);
    bool cancelled = job->cancelled;
    pthread_mutex_unlock(&job->pool->lock);
    return cancelled;
}

/* Each input evaluated alone on the slot's context, then pooled; stops at a cancel. */
static clinfer_status run_embed(slot *s, serve_job *job, clinfer_generate_stats *stats) {
    clinfer_status st = CLINFER_OK;
    double t0 = cli_now_ms();
    for (size_t i = 0, start = 0; i < job->n_inputs && st == CLINFER_OK; start = job->ends[i++]) {
        clinfer_context_reset(s->ctx);
        st = clinfer_eval(s->ctx, job->tokens + start, job->ends[i] - start);
        if (st == CLINFER_OK)
            st =
                clinfer_get_embeddings_pooled(s->ctx, CLINFER_POOLING_MEAN, true,
                                              job->embeddings + i * job->n_embd, job->n_embd, NULL);
        if (st == CLINFER_OK) stats->n_prompt += job->ends[i] - start;
    }
    stats->prefill_ms = cli_now_ms() - t0;
    return st;
}

static clinfer_status run_generate(slot *s, serve_job *job, clinfer_generate_stats *stats) {
    clinfer_sampler *sampler = NULL;
    clinfer_status st = clinfer_sampler_create(&job->sampling, &sampler);
    if (st == CLINFER_OK)
        st = clinfer_generate(s->ctx, job->tokens, job->n_tokens, job->n_predict, sampler, on_text,
                              job, stats);
    clinfer_sampler_free(sampler);
    return st;
}

static void run_job(slot *s, serve_job *job) {
    clinfer_context_reset(s->ctx);
    clinfer_context_set_abort(s->ctx, job_cancelled, job);
    clinfer_generate_stats stats = {0};
    clinfer_status st = job->n_inputs ? run_embed(s, job, &stats) : run_generate(s, job, &stats);
    const char *msg = clinfer_last_error();
    clinfer_context_set_abort(s->ctx, NULL, NULL);
    if (st == CLINFER_ERR_ABORTED) st = CLINFER_OK; /* the client left: nobody to tell */

    serve_pool *p = s->pool;
    pthread_mutex_lock(&p->lock);
    job->stats = stats;
    if (st != CLINFER_OK && job->status == CLINFER_OK) {
        job->status = st;
        snprintf(job->error, sizeof job->error, "%s", msg);
    }
    if (job->finish == SERVE_FINISH_NONE) {
        job->ready = job->len; /* no stop string can complete any more */
        bool full = clinfer_context_n_past(s->ctx) >= clinfer_context_n_ctx(s->ctx);
        job->finish = (job->n_predict >= 0 && stats.n_generated >= (size_t)job->n_predict) || full
                          ? SERVE_FINISH_LENGTH
                          : SERVE_FINISH_STOP;
    }
    job->done = true;
    p->stats.jobs_done++;
    p->stats.prompt_tokens += stats.n_prompt;
    p->stats.generated_tokens += stats.n_generated;
    p->stats.prefill_ms += stats.prefill_ms;
    p->stats.decode_ms += stats.decode_ms;
    if (job->first_text_ms > 0) {
        p->stats.ttft_ms += job->first_text_ms - job->submitted_ms;
        p->stats.ttft_jobs++;
    }
    pthread_cond_broadcast(&job->changed);
    unref_locked(job);
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg) {
    slot *s = arg;
    serve_pool *p = s->pool;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->work, &p->lock);
        if (!p->head) break; /* stopping, and the queue is drained */
        serve_job *job = p->head;
        unlink_locked(p, job);
        p->active++;
        pthread_mutex_unlock(&p->lock);
        run_job(s, job);
        pthread_mutex_lock(&p->lock);
        p->active--;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------------ */

clinfer_status serve_pool_create(clinfer_model *model, size_t n_slots, uint32_t n_ctx,
                                 size_t queue_cap, serve_pool **out) {
    *out = NULL;
    serve_pool *p = calloc(1, sizeof *p);
    slot *slots = calloc(n_slots, sizeof *slots);
    if (!p || !slots) {
        free(p);
        free(slots);
        return CLINFER_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    p->slots = slots;
    p->queue_cap = queue_cap;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.embeddings = true; /* a read of n_embd floats per token beside the logits */
    clinfer_status st = CLINFER_OK;
    for (size_t i = 0; i < n_slots && st == CLINFER_OK; i++) {
        slots[i].pool = p;
        st = clinfer_context_create(model, &cp, &slots[i].ctx);
        if (st == CLINFER_OK) p->n_slots++;
    }
    for (size_t i = 0; i < p->n_slots && st == CLINFER_OK; i++) {
        if (pthread_create(&slots[i].thread, NULL, worker, &slots[i])) {
            st = CLINFER_ERR_OUT_OF_MEMORY;
            break;
        }
        slots[i].started = true;
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
    for (size_t i = 0; i < p->n_slots; i++) {
        if (p->slots[i].started) pthread_join(p->slots[i].thread, NULL);
        clinfer_context_free(p->slots[i].ctx);
    }
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->slots);
    free(p);
}

uint32_t serve_pool_n_ctx(const serve_pool *p) {
    return clinfer_context_n_ctx(p->slots[0].ctx);
}

void serve_pool_get_stats(serve_pool *p, serve_pool_stats *out) {
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    out->queued = p->queued;
    out->active = p->active;
    out->slots = p->n_slots;
    out->queue_cap = p->queue_cap;
    pthread_mutex_unlock(&p->lock);
}
