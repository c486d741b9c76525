/* clinfer serve: jobs and their queue (the scheduler that runs them: serve_sched.c). */
#include "serve_pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"

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
    free(job->lp);
    clinfer_sampler_free(job->sampler);
    pthread_cond_destroy(&job->changed);
    free(job);
}

int serve_job_create(serve_pool *pool, const int32_t *tokens, size_t n_tokens,
                     const serve_request *req, uint64_t seed, size_t index, serve_job **out,
                     serve_error *err) {
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return serve_error_set(err, 500, "server_error", "out of memory");
    pthread_cond_init(&job->changed, NULL);
    job->pool = pool;
    job->refs = 1;
    job->tokens = malloc(n_tokens * sizeof *tokens); /* n_tokens >= 1: the caller checks */
    bool ok = job->tokens != NULL;
    if (ok) memcpy(job->tokens, tokens, n_tokens * sizeof *tokens);
    job->n_tokens = n_tokens;
    job->n_predict = req->max_tokens;
    job->sampling = req->sampling;
    job->n_top_logprobs = req->logprobs;
    if (!req->seed_given) job->sampling.seed = seed;
    job->sampling.seed += index * 0x9E3779B97F4A7C15ull; /* choices of one request differ */
    for (size_t i = 0; ok && i < req->n_stop; i++)
        ok = (job->stop[job->n_stop++] = dup_string(req->stop[i])) != NULL;
    job->submitted_ms = cli_now_ms();
    if (!ok) {
        job_free(job);
        return serve_error_set(err, 500, "server_error", "out of memory");
    }
    clinfer_status st = clinfer_sampler_create(&job->sampling, &job->sampler);
    if (st == CLINFER_OK && req->grammar)
        st = clinfer_sampler_set_grammar(job->sampler, pool->model, req->grammar);
    if (st != CLINFER_OK) {
        if (st == CLINFER_ERR_OUT_OF_MEMORY)
            serve_error_set(err, 500, "server_error", "%s", clinfer_last_error());
        else if (job->sampler) /* the grammar */
            serve_error_set(err, 400, "invalid_request_error", "'%s': %s", req->grammar_field,
                            clinfer_last_error());
        else
            serve_error_set(err, 400, "invalid_request_error", "%s", clinfer_last_error());
        job_free(job);
        return -1;
    }
    *out = job;
    return 0;
}

serve_job *serve_job_create_embed(serve_pool *pool, const int32_t *tokens, const size_t *ends,
                                  size_t n_inputs, size_t n_embd) {
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_cond_init(&job->changed, NULL);
    job->pool = pool;
    job->refs = 1;
    job->n_top_logprobs = -1;
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
void serve_job_unref_locked(serve_job *job) {
    if (--job->refs == 0) job_free(job);
}

void serve_job_unlink_locked(serve_pool *p, serve_job *job) {
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
        /* never started: done now, and the queue's reference goes (never the last: the
         * caller holds one) */
        serve_job_unlink_locked(p, job);
        job->done = true;
        pthread_cond_broadcast(&job->changed);
        job->refs--;
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
    serve_job_unref_locked(job);
    pthread_mutex_unlock(lock);
}

/* Under the lock: appends job to the queue. */
static void enqueue_locked(serve_pool *p, serve_job *job) {
    job->refs++;
    job->submitted = job->queued = true;
    job->next = NULL;
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    p->queued++;
}

bool serve_pool_submit(serve_pool *p, serve_job *job) {
    return serve_pool_submit_group(p, &job, 1, 0);
}

bool serve_pool_submit_group(serve_pool *p, serve_job **jobs, size_t n, uint64_t group) {
    pthread_mutex_lock(&p->lock);
    /* room for queue_cap waiting beyond the slots: a burst that arrives before the scheduler
     * takes any fills the free slots first */
    bool ok = !p->stopping && p->active + p->queued + n <= p->n_slots + p->queue_cap;
    for (size_t i = 0; ok && i < n; i++) {
        jobs[i]->group = n > 1 ? group : 0;
        jobs[i]->n_group = n;
        jobs[i]->group_lead = i == 0;
        enqueue_locked(p, jobs[i]);
    }
    if (ok) pthread_cond_signal(&p->work);
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

void serve_pool_get_stats(serve_pool *p, serve_pool_stats *out) {
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    out->queued = p->queued;
    out->active = p->active;
    out->slots = p->n_slots;
    out->queue_cap = p->queue_cap;
    pthread_mutex_unlock(&p->lock);
}
