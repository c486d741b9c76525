/* clinfer serve: a completion's generation, shared by its whole answer (serve_generate.c) and
 * its stream (serve_stream.c): its choices' jobs and what of their text and log-probabilities
 * was taken (serve_generation.c). */
#ifndef CLINFER_SERVE_GENERATION_H
#define CLINFER_SERVE_GENERATION_H

#include <cjson/cJSON.h>

#include "serve_http.h"
#include "serve_ollama.h"

#define CHUNK_BYTES 4096 /* text taken from a job at once */
#define CALL_PREFIX 96   /* "call_", the response id's serial, "_", the choice, "_" */

typedef struct {
    serve_job *job;
    size_t seen;              /* of the job's text, taken */
    size_t lp_next, lp_bytes; /* log-probabilities taken, and the bytes of text before them */
    char *text;               /* what was taken, where kept (whole answers) */
    size_t len;
    size_t sent;    /* streams that may hold tool calls: the bytes of text sent as content */
    size_t n_calls; /* ... the calls announced (id and name sent) */
    size_t args_at[SERVE_MAX_TOOL_CALLS];   /* where their arguments start in text */
    size_t args_sent[SERVE_MAX_TOOL_CALLS]; /* and the bytes of them sent */
    bool finished;                          /* the job is done and all its text taken */
    bool ended;                             /* streams: its last chunk went out */
} gen_choice;

typedef enum { PHASE_ROLE, PHASE_TEXT, PHASE_USAGE, PHASE_DONE, PHASE_END } phase;

struct serve_generation {
    serve_server *s;
    serve_kind kind;
    bool include_usage;
    int32_t logprobs; /* the request's: -1 none */
    char id[48];
    long created;
    int fd;
    size_t n; /* choices */
    gen_choice *c;
    bool tools;            /* the answers may be tool calls: read whole before they are sent */
    bool call_required;    /* tool_choice required or a function named: the answer is a call */
    serve_tool_format fmt; /* how the model writes them */
    serve_request req;     /* its tools, for reading the calls */
    int ollama;            /* 0: OpenAI's API; 1: ollama's /api/chat; 2: its /api/generate */
    double start_ms;       /* when the request came (ollama's total_duration) */
    /* streams */
    phase phase;
    char *out; /* events not yet handed to libmicrohttpd */
    size_t out_len, out_at, out_cap;
};

/* Cancels every choice's job: the client left. */
void serve_gen_cancel_all(serve_generation *g);

/* How long to wait for one choice's text when none came: the choices' steps are one batch, so
 * a wait on each in turn is a wait for the step. */
int serve_gen_wait_ms(const serve_generation *g);

/* Takes what became final of choice i's text (waiting up to ms when there is none) into buf;
 * keep: appends it to the choice's text as well. Returns the bytes taken; -1 on out of memory. */
long serve_gen_take_text(serve_generation *g, size_t i, int ms, bool keep, char *buf, size_t size);

/* The log-probabilities of choice i's tokens within its first upto bytes (all: the rest of
 * them, the job being done); NULL when none were asked for or none are new. */
cJSON *serve_gen_take_logprobs(serve_generation *g, size_t i, size_t upto, bool all);

/* The usage counts: the prompt once, the tokens of every choice. */
void serve_gen_usage(const serve_generation *g, size_t *n_prompt, size_t *n_generated);

/* The id prefix of choice i's tool calls (CALL_PREFIX bytes): "call_", the response id's serial,
 * "_", the choice, "_". */
void serve_gen_call_id_prefix(const serve_generation *g, size_t i, char *prefix, size_t size);

/* Choice i's whole answer read for tool calls: *out gets its content and, when it holds calls,
 * their tool_calls and finish "tool_calls". -1 on out of memory. */
int serve_gen_read_calls(serve_generation *g, size_t i, serve_choice_out *out);

/* ollama's line of choice c (its only one: ollama has no n and no logprobs here): its text and
 * tool calls, or with a finish the last line, done, with the counts. */
serve_ollama_out serve_gen_ollama_out(const serve_generation *g, const serve_choice_out *c);

/* serve_stream.c: r->gen's answer as server-sent events (ollama's: JSON lines), which the
 * stream takes. */
enum MHD_Result serve_answer_stream(request *r, struct MHD_Connection *c);

#endif
