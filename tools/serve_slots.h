/* clinfer serve: the slots. One context holds a sequence per slot, and one scheduler thread
 * (serve_sched.c) runs them all: each step is one clinfer_batch_eval with a token of every
 * generating slot and as many prompt tokens of starting slots as fit. Requests wait for a free
 * slot in a bounded queue. A job is one request's generation: its input, and the text it
 * produced so far, which the HTTP side reads while the scheduler writes. */
#ifndef CLINFER_SERVE_SLOTS_H
#define CLINFER_SERVE_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "serve_request.h"

typedef struct serve_pool serve_pool;

typedef enum {
    SERVE_FINISH_NONE,
    SERVE_FINISH_STOP,
    SERVE_FINISH_LENGTH,
    SERVE_FINISH_TOOL_CALLS /* the answer, read after it stopped, was tool calls */
} serve_finish;

#define SERVE_MAX_TOP_LOGPROBS 20 /* as OpenAI allows */

typedef struct {
    int32_t token;
    float logprob;
} serve_token_prob;

/* A generated token's log-probability in the model's distribution (the log-softmax of its
 * logits, before temperature, penalties and grammar), and the n_top most likely tokens. */
typedef struct {
    serve_token_prob chosen;
    size_t end; /* bytes the job generated, once this token's are in (whole and pending) */
    uint32_t n_top;
    serve_token_prob top[SERVE_MAX_TOP_LOGPROBS]; /* the most likely first */
} serve_logprob;

typedef struct serve_job {
    /* input, fixed once submitted */
    int32_t *tokens;
    size_t n_tokens;
    int32_t n_predict; /* -1: until end of generation or of the context */
    clinfer_sampler_params sampling;
    clinfer_sampler *sampler; /* made with the job, its grammar set; the slot takes it */
    char *stop[SERVE_MAX_STOP];
    size_t n_stop;
    int32_t n_top_logprobs; /* -1: no log-probabilities; else how many top tokens each */
    /* the choices of one request (n > 1): n_group jobs of one prompt, queued together and
     * started together; the others copy the lead's evaluated prompt (clinfer_seq_copy_prefix) */
    uint64_t group; /* 0: alone */
    size_t n_group;
    bool group_lead;
    /* an embeddings job (n_inputs > 0): input i's tokens end at ends[i]; each is evaluated alone
     * (between steps, on a context of its own) and its mean hidden state, normalized, written
     * to embeddings[i * n_embd] */
    size_t *ends, n_inputs, n_embd;
    float *embeddings;

    /* output, under the pool's lock; `changed` is signalled on each change */
    pthread_cond_t changed;
    char *text; /* everything generated so far */
    size_t len, cap;
    serve_logprob *lp; /* one per generated token, with n_top_logprobs >= 0 */
    size_t n_lp, cap_lp;
    size_t ready;   /* text[0, ready) is final: no stop string can start in it */
    bool done;      /* the scheduler is done with it: ready, finish, stats, status are final */
    bool cancelled; /* the client went away: stop at the next token */
    serve_finish finish;
    clinfer_generate_stats stats;
    clinfer_status status;
    char error[256];                    /* the library's message when status is not CLINFER_OK */
    double submitted_ms, first_text_ms; /* first_text_ms: 0 until text arrived */

    /* the pool's */
    struct serve_job *next; /* in the queue */
    bool submitted, queued;
    int refs;
    serve_pool *pool;
} serve_job;

typedef struct {
    uint64_t jobs_done, jobs_cancelled;
    uint64_t prompt_tokens, generated_tokens; /* evaluated / sampled so far (counted each step) */
    uint64_t steps, batch_tokens;             /* batches evaluated, and their tokens */
    double prefill_ms, decode_ms; /* time of the steps with prompt tokens / with decode tokens */
    double ttft_ms;               /* queued to first text, summed over the jobs with text */
    uint64_t ttft_jobs;
    size_t queued, active, slots, queue_cap;
} serve_pool_stats;

/* Creates a context of n_slots sequences of cp->n_ctx tokens each (0: the model's) whose steps
 * take up to cp->n_batch tokens (at least n_slots), a context of one sequence for embeddings
 * jobs, and the scheduler thread (cp's other fields as given; n_seq_max and embeddings are set
 * here). queue_cap: how many jobs may wait for a slot. Prints nothing; on failure
 * clinfer_last_error() says why. */
clinfer_status serve_pool_create(clinfer_model *model, size_t n_slots,
                                 const clinfer_context_params *cp, size_t queue_cap,
                                 serve_pool **out);
/* Finishes the queued and running jobs, stops the scheduler, frees the contexts. */
void serve_pool_free(serve_pool *pool);
/* Ends every queued and running job before the next step, as failed with why (the server is
 * stopping): each stream then ends with an error event saying so. */
void serve_pool_stop_jobs(serve_pool *pool, const char *why);
uint32_t serve_pool_n_ctx(const serve_pool *pool);   /* tokens per slot */
uint32_t serve_pool_n_batch(const serve_pool *pool); /* tokens per step */

/* A job holding tokens (copied), the request's stop strings (copied) and its sampler, made here
 * so that a grammar that does not parse is refused (400) before the job queues, and its
 * vocabulary trie is built on the caller's thread, not the scheduler's. seed: the sampler's
 * unless the request gives one; index: the choice, whose seed is that one moved on by index.
 * 0 with *out (the caller holds one reference), or -1 with *err set. */
int serve_job_create(serve_pool *pool, const int32_t *tokens, size_t n_tokens,
                     const serve_request *req, uint64_t seed, size_t index, serve_job **out,
                     serve_error *err);
/* An embeddings job of n_inputs inputs whose tokens lie one after another in tokens (copied),
 * input i's ending at ends[i]; n_embd: the model's. NULL on out of memory. */
serve_job *serve_job_create_embed(serve_pool *pool, const int32_t *tokens, const size_t *ends,
                                  size_t n_inputs, size_t n_embd);
/* Queues a job (the pool takes its own reference): false when the queue is full. */
bool serve_pool_submit(serve_pool *pool, serve_job *job);
/* Queues n jobs of one prompt as a group (the choices of one request): all of them, or none
 * when the queue has no room for n. They start when n slots are free, and jobs queued after
 * them wait till then; the first evaluates the prompt, the others copy its sequence. */
bool serve_pool_submit_group(serve_pool *pool, serve_job **jobs, size_t n, uint64_t group);
/* Drops the caller's reference; a job not done yet is cancelled first (the client left). */
void serve_job_release(serve_job *job);

/* Waits until the job has text beyond *seen or is done, or until timeout_ms passed. Copies
 * what became final into out (up to size bytes; *n receives the count) and advances *seen;
 * returns whether the job is done and all its text was taken. */
bool serve_job_wait(serve_job *job, size_t *seen, char *out, size_t size, size_t *n,
                    int timeout_ms);
/* Cancels the job: a queued job leaves the queue, a running one leaves its slot before the next
 * step (its sequence cleared). */
void serve_job_cancel(serve_job *job);

void serve_pool_get_stats(serve_pool *pool, serve_pool_stats *out);

/* ---- log-probabilities (serve_logprobs.c) ---- */

/* The chosen token's log-probability under logits and the k most likely tokens'. */
void serve_logprob_compute(const float *logits, size_t n_vocab, int32_t chosen, uint32_t k,
                           serve_logprob *out);
/* Under the pool's lock: appends lp to the job's. false on out of memory. */
bool serve_job_push_logprob_locked(serve_job *job, const serve_logprob *lp);
/* The job's log-probabilities from *next on of the tokens whose bytes all lie before upto (all:
 * the job is done, and every token that starts before upto counts), copied into *out
 * (malloc'ed, NULL when none or out of memory); advances *next. Returns the count. */
size_t serve_job_take_logprobs(serve_job *job, size_t *next, size_t upto, bool all,
                               serve_logprob **out);

#endif
