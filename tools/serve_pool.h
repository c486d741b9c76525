/* clinfer serve: the pool's insides, shared by the job queue (serve_slots.c) and the scheduler
 * that runs the jobs (serve_sched.c). Nothing else looks in here. */
#ifndef CLINFER_SERVE_POOL_H
#define CLINFER_SERVE_POOL_H

#include "serve_slots.h"

/* A slot: one sequence of the pool's context and the generation running on it. Only the
 * scheduler thread touches a slot, except `job`, which changes under the pool's lock. */
typedef struct {
    serve_job *job; /* NULL: free */
    clinfer_sampler *sampler;
    int32_t *held;  /* the tokens its sequence holds (n_ctx of room), for the prompt cache */
    size_t n_held;  /* = clinfer_seq_len of its sequence */
    size_t n_fed;   /* of job->tokens, those in the sequence */
    bool decoding;  /* the prompt is in; `next` is the token to evaluate */
    bool following; /* a group's: waits for the lead's prompt in slot `lead`, to copy it */
    size_t lead;
    int32_t next;  /* the last token sampled */
    char *pending; /* bytes of pieces that are not a whole character yet */
    size_t n_pending, cap_pending;
    uint64_t order;            /* when its last job started (0: never): first come first
                                * served prefill, and the oldest cache goes first */
    double start_ms, first_ms; /* job started, its prompt done */
    size_t n_generated;
} serve_slot;

struct serve_pool {
    pthread_mutex_t lock; /* guards the queue, every job's output, `active`, slots' jobs, stats */
    pthread_cond_t work;  /* a job was queued or cancelled, or the pool is stopping */
    serve_job *head, *tail;
    size_t queued, queue_cap, active;
    bool stopping;
    serve_pool_stats stats;

    /* the scheduler's */
    const clinfer_model *model;
    clinfer_context *ctx;       /* one sequence per slot */
    clinfer_context *embed_ctx; /* embeddings jobs: hidden states, one sequence */
    serve_slot *slots;
    size_t n_slots;
    uint32_t n_ctx, n_batch;
    clinfer_batch_entry *batch; /* n_batch entries, and the slot of each */
    uint32_t *entry_slot;
    serve_job *embed_job; /* the embeddings job running, one input per step */
    size_t embed_next;    /* its next input */
    uint64_t order;
    pthread_t thread;
    bool started;
};

/* Under the pool's lock: drops a reference (the last frees the job). */
void serve_job_unref_locked(serve_job *job);
/* Under the pool's lock: takes a queued job off the queue. */
void serve_job_unlink_locked(serve_pool *pool, serve_job *job);

#endif
