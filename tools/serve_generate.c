/* clinfer serve: POST /v1/chat/completions and /v1/completions. A connection's thread parses the
 * body, tokenizes the prompt and queues a job per choice; it then waits for the jobs' text (a
 * whole JSON answer, or server-sent events as they come, each choice's chunks carrying its
 * index) and watches its socket, so that a client that leaves cancels its generation at once. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"
#include "serve_http.h"
#include "serve_ollama.h"

#define CHUNK_BYTES 4096 /* text taken from a job at once */

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

void serve_generation_free(serve_generation *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n; i++) {
        serve_job_release(g->c[i].job);
        free(g->c[i].text);
    }
    free(g->c);
    free(g->out);
    serve_request_free(&g->req);
    free(g);
}

static void cancel_all(serve_generation *g) {
    for (size_t i = 0; i < g->n; i++)
        serve_job_cancel(g->c[i].job);
}

/* How long to wait for one choice's text when none came: the choices' steps are one batch, so
 * a wait on each in turn is a wait for the step. */
static int wait_ms(const serve_generation *g) {
    int ms = SERVE_WAIT_MS / (int)g->n;
    return ms > 1 ? ms : 1;
}

/* Takes what became final of choice i's text (waiting up to ms when there is none) into buf;
 * keep: appends it to the choice's text as well. Returns the bytes taken; -1 on out of memory. */
static long take_text(serve_generation *g, size_t i, int ms, bool keep, char *buf, size_t size) {
    gen_choice *ch = &g->c[i];
    size_t n = 0;
    ch->finished = serve_job_wait(ch->job, &ch->seen, buf, size, &n, ms);
    if (keep && n) {
        char *grown = realloc(ch->text, ch->len + n + 1);
        if (!grown) return -1;
        ch->text = grown;
        memcpy(ch->text + ch->len, buf, n);
        ch->len += n;
        ch->text[ch->len] = '\0';
    }
    return (long)n;
}

/* The log-probabilities of choice i's tokens within its first upto bytes (all: the rest of
 * them, the job being done); NULL when none were asked for or none are new. */
static cJSON *take_logprobs(serve_generation *g, size_t i, size_t upto, bool all) {
    gen_choice *ch = &g->c[i];
    if (g->logprobs < 0) return NULL;
    serve_logprob *lp;
    size_t n = serve_job_take_logprobs(ch->job, &ch->lp_next, upto, all, &lp);
    cJSON *j = n ? serve_json_logprobs(g->s->model, g->kind, lp, n, &ch->lp_bytes) : NULL;
    free(lp);
    return j;
}

/* The usage counts: the prompt once, the tokens of every choice. */
static void usage_of(const serve_generation *g, size_t *n_prompt, size_t *n_generated) {
    *n_prompt = g->c[0].job->stats.n_prompt;
    *n_generated = 0;
    for (size_t i = 0; i < g->n; i++)
        *n_generated += g->c[i].job->stats.n_generated;
}

/* ---- tool calls ---------------------------------------------------------------------------- */

#define CALL_PREFIX 96 /* "call_", the response id's serial, "_", the choice, "_" */

static void call_id_prefix(const serve_generation *g, size_t i, char *prefix, size_t size) {
    const char *serial = strchr(g->id, '-'); /* the response id's own part */
    snprintf(prefix, size, "call_%s_%zu_", serial ? serial + 1 : g->id, i);
}

/* Choice i's whole answer read for tool calls: *out gets its content and, when it holds calls,
 * their tool_calls and finish "tool_calls". -1 on out of memory. */
static int read_calls(serve_generation *g, size_t i, serve_choice_out *out) {
    gen_choice *ch = &g->c[i];
    out->text = ch->text ? ch->text : "";
    out->len = ch->len;
    if (!g->tools || ch->job->status != CLINFER_OK) return 0;
    serve_tool_call *calls;
    size_t n, content;
    int rc = serve_tool_calls_parse(g->fmt, &g->req, out->text, out->len, &calls, &n, &content);
    if (rc <= 0) return rc;
    char prefix[CALL_PREFIX];
    call_id_prefix(g, i, prefix, sizeof prefix);
    out->len = content;
    out->finish = SERVE_FINISH_TOOL_CALLS;
    out->tool_calls = serve_tool_calls_json(calls, n, prefix);
    serve_tool_calls_free(calls, n);
    return out->tool_calls ? 1 : -1;
}

/* ollama's line of choice c (its only one: ollama has no n and no logprobs here): its text and
 * tool calls, or with a finish the last line, done, with the counts. */
static serve_ollama_out ollama_out(const serve_generation *g, const serve_choice_out *c) {
    const serve_job *job = g->c[c->index].job;
    serve_ollama_out o = {.generate = g->ollama == 2,
                          .text = c->text,
                          .len = c->len,
                          .done = c->finish != SERVE_FINISH_NONE,
                          .done_reason = job->finish == SERVE_FINISH_LENGTH ? "length" : "stop",
                          .start_ms = g->start_ms,
                          .tool_calls = c->tool_calls};
    o.stats = o.done ? &job->stats : NULL;
    return o;
}

/* ---- whole answers ------------------------------------------------------------------------- */

static enum MHD_Result answer_whole(request *r, struct MHD_Connection *c, serve_generation *g) {
    char buf[CHUNK_BYTES];
    for (size_t left = g->n; left > 0;) {
        bool any = false;
        left = 0;
        for (size_t i = 0; i < g->n; i++) {
            if (g->c[i].finished) continue;
            long n = take_text(g, i, any ? 0 : wait_ms(g), true, buf, sizeof buf);
            if (n < 0) FAIL(500, "server_error", "out of memory");
            any = any || n > 0 || g->c[i].finished;
            left += !g->c[i].finished;
        }
        if (left && !any && serve_client_gone(g->fd)) {
            cancel_all(g);
            return MHD_NO; /* nobody to answer */
        }
    }
    for (size_t i = 0; i < g->n; i++)
        if (g->c[i].job->status != CLINFER_OK)
            FAIL(500, "server_error", "generation failed: %s", g->c[i].job->error);
    serve_choice_out *out = calloc(g->n, sizeof *out);
    if (!out) FAIL(500, "server_error", "out of memory");
    for (size_t i = 0; i < g->n; i++) {
        gen_choice *ch = &g->c[i];
        out[i] = (serve_choice_out){.index = i,
                                    .role = "assistant",
                                    .finish = ch->job->finish,
                                    .logprobs = take_logprobs(g, i, g->c[i].seen, true)};
        if (read_calls(g, i, &out[i]) < 0) {
            for (size_t k = 0; k <= i; k++) {
                cJSON_Delete(out[k].logprobs);
                cJSON_Delete(out[k].tool_calls);
            }
            free(out);
            FAIL(500, "server_error", "out of memory");
        }
        if (g->logprobs >= 0 && !out[i].logprobs) /* no tokens: an empty list */
            out[i].logprobs = serve_json_logprobs(g->s->model, g->kind, NULL, 0, &ch->lp_bytes);
    }
    size_t n_prompt, n_generated;
    usage_of(g, &n_prompt, &n_generated);
    serve_ollama_out o = ollama_out(g, &out[0]);
    char *body = g->ollama ? serve_ollama_json(r->s, &o)
                           : serve_json_completion(r->s, g->kind, g->id, g->created, out, g->n,
                                                   n_prompt, n_generated);
    if (g->ollama) { /* serve_json_completion takes them; ollama's JSON copies */
        cJSON_Delete(out[0].logprobs);
        cJSON_Delete(out[0].tool_calls);
    }
    free(out);
    return serve_send_owned(r, c, 200, body, "application/json");
}

/* ---- streams: server-sent events ----------------------------------------------------------- */

/* Appends "data: JSON\n\n" to the events to send; takes json. false on out of memory. */
static bool add_event(serve_generation *g, char *json) {
    if (!json) return false;
    size_t n = strlen(json);
    if (g->out_len + n + 9 > g->out_cap) {
        size_t cap = 2 * (g->out_len + n + 9);
        char *grown = realloc(g->out, cap);
        if (!grown) {
            free(json);
            return false;
        }
        g->out = grown;
        g->out_cap = cap;
    }
    /* ollama's streams are JSON lines */
    g->out_len += (size_t)sprintf(g->out + g->out_len, g->ollama ? "%s\n" : "data: %s\n\n", json);
    free(json);
    return true;
}

static bool add_chunk(serve_generation *g, const serve_choice_out *c) {
    if (!g->ollama) return add_event(g, serve_json_chunk(g->s, g->kind, g->id, g->created, c));
    serve_ollama_out o = ollama_out(g, c);
    bool ok = add_event(g, serve_ollama_json(g->s, &o));
    cJSON_Delete(c->logprobs);
    cJSON_Delete(c->tool_calls);
    return ok;
}

/* Choice i's last chunk: why it finished (with the log-probabilities not yet sent), or the error
 * that ended it, in band. */
static bool end_choice(serve_generation *g, size_t i) {
    gen_choice *ch = &g->c[i];
    ch->ended = true;
    if (ch->job->status != CLINFER_OK) {
        serve_error e;
        serve_error_set(&e, 500, "server_error", "generation failed: %s", ch->job->error);
        return add_event(g, g->ollama ? serve_json_error_ollama(&e) : serve_json_error(&e));
    }
    serve_choice_out out = {.index = i, .text = "", .finish = ch->job->finish};
    if (!g->tools) {
        out.logprobs = take_logprobs(g, i, g->c[i].seen, true);
        return add_chunk(g, &out);
    }
    /* the content held back, then the calls' rest, then why */
    serve_tool_call *calls = NULL;
    size_t n = 0, content = ch->len;
    const char *text = ch->text ? ch->text : "";
    if (serve_tool_calls_parse(g->fmt, &g->req, text, ch->len, &calls, &n, &content) < 0)
        return false;
    bool ok = true;
    if (!ch->n_calls) { /* nothing of a call went out: the content, all of it if no call */
        serve_choice_out rest = {.index = i,
                                 .text = text + ch->sent,
                                 .len = content > ch->sent ? content - ch->sent : 0};
        rest.logprobs = take_logprobs(g, i, g->c[i].seen, true);
        ok = (!rest.len && !rest.logprobs) || add_chunk(g, &rest);
    } else {
        out.logprobs = take_logprobs(g, i, g->c[i].seen, true);
    }
    char prefix[CALL_PREFIX];
    call_id_prefix(g, i, prefix, sizeof prefix);
    if (g->ollama && n) /* ollama's stream has each call whole */
        ok = add_chunk(
            g, &(serve_choice_out){
                   .index = i, .text = "", .tool_calls = serve_tool_calls_json(calls, n, prefix)});
    for (size_t k = 0; ok && !g->ollama && k < n; k++) {
        const char *args = calls[k].arguments;
        size_t len = strlen(args), sent = 0;
        if (k < ch->n_calls) { /* the rest, when what went out is the start of them */
            sent = ch->args_sent[k];
            if (sent >= len || memcmp(args, text + ch->args_at[k], sent)) continue;
        }
        ok = add_chunk(g, &(serve_choice_out){.index = i,
                                              .text = "",
                                              .tool_calls = serve_tool_call_delta(
                                                  k, prefix, k < ch->n_calls ? NULL : calls[k].name,
                                                  args + sent, len - sent)});
    }
    /* calls sent that the whole answer does not hold (the model broke off) stand as sent */
    if (n || ch->n_calls) out.finish = SERVE_FINISH_TOOL_CALLS;
    serve_tool_calls_free(calls, n);
    return ok && add_chunk(g, &out);
}

static bool is_tool(const serve_request *req, const char *name, size_t len) {
    for (size_t t = 0; t < req->n_tools; t++)
        if (strlen(req->tools[t].name) == len && !memcmp(req->tools[t].name, name, len))
            return true;
    return false;
}

/* The calls choice i's text has begun, sent as they come: each one's id, name and arguments so
 * far once its name is whole (a function of the request) and its arguments object has begun,
 * then more of its arguments as the model writes them. false on out of memory. */
static bool stream_calls(serve_generation *g, size_t i) {
    gen_choice *ch = &g->c[i];
    if (g->ollama) return true; /* ollama's stream has each call whole, at the end */
    serve_tool_span sp[SERVE_MAX_TOOL_CALLS];
    size_t n = serve_tool_calls_scan(g->fmt, ch->text, ch->len, sp, SERVE_MAX_TOOL_CALLS);
    char prefix[CALL_PREFIX], name[SERVE_MAX_TOOL_NAME + 1];
    call_id_prefix(g, i, prefix, sizeof prefix);
    for (size_t k = 0; k < n; k++) {
        const char *args = ch->text + sp[k].args_at;
        size_t from = ch->args_sent[k];
        bool first = k == ch->n_calls;
        if (first) {
            if (!sp[k].named || !sp[k].args || sp[k].name_len > SERVE_MAX_TOOL_NAME ||
                !is_tool(&g->req, ch->text + sp[k].name_at, sp[k].name_len))
                return true;
            memcpy(name, ch->text + sp[k].name_at, sp[k].name_len);
            name[sp[k].name_len] = '\0';
            ch->n_calls++;
            ch->args_at[k] = sp[k].args_at;
        } else if (!sp[k].args || sp[k].args_len <= from) {
            continue;
        }
        ch->args_sent[k] = sp[k].args_len;
        if (!add_chunk(g, &(serve_choice_out){.index = i,
                                              .text = "",
                                              .tool_calls = serve_tool_call_delta(
                                                  k, prefix, first ? name : NULL, args + from,
                                                  sp[k].args_len - from)}))
            return false;
    }
    return true;
}

/* Of a choice that may call tools, the start of its text that is content whatever follows:
 * none when a call is required; else, in Hermes' format, the text before "<tool_call>" (or
 * before a tail that may grow into it), less trailing whitespace; in the others, where a call
 * is the whole answer, all of it once it starts with anything but JSON. */
static size_t content_safe(const serve_generation *g, const gen_choice *ch) {
    static const char tag[] = "<tool_call>";
    const char *t = ch->text;
    size_t n = ch->len, k = 0, tag_len = sizeof tag - 1;
#define IS_SPACE(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')
    if (g->call_required) return 0;
    if (g->fmt != SERVE_TOOL_FORMAT_HERMES) {
        while (k < n && IS_SPACE(t[k]))
            k++;
        return k < n && t[k] != '{' && t[k] != '[' && t[k] != '<' ? n : 0;
    }
    size_t at = 0;
    while (at + tag_len <= n && memcmp(t + at, tag, tag_len))
        at++;
    if (at + tag_len <= n) {
        n = at;
    } else {
        for (k = tag_len - 1; k > 0; k--) /* the longest tail that is a start of the tag */
            if (k <= n && !memcmp(t + n - k, tag, k)) break;
        n -= k;
    }
    while (n && IS_SPACE(t[n - 1]))
        n--;
#undef IS_SPACE
    return n;
}

/* One round over the choices: their new text as chunks, the finished ones' last chunks. 1 when
 * something was added, 0 when nothing was, -1 on out of memory. */
static int text_round(serve_generation *g) {
    char buf[CHUNK_BYTES];
    bool any = false;
    for (size_t i = 0; i < g->n; i++) {
        gen_choice *ch = &g->c[i];
        if (ch->ended) continue;
        long n = take_text(g, i, any ? 0 : wait_ms(g), g->tools, buf, sizeof buf);
        if (n < 0) return -1;
        if (n && !g->tools) {
            serve_choice_out out = {.index = i, .text = buf, .len = (size_t)n};
            out.logprobs = take_logprobs(g, i, g->c[i].seen, false);
            if (!add_chunk(g, &out)) return -1;
        }
        size_t safe = n && g->tools ? content_safe(g, ch) : 0;
        if (safe > ch->sent) {
            serve_choice_out out = {
                .index = i, .text = ch->text + ch->sent, .len = safe - ch->sent};
            out.logprobs = take_logprobs(g, i, safe, false);
            ch->sent = safe;
            if (!add_chunk(g, &out)) return -1;
        }
        if (n && g->tools && !stream_calls(g, i)) return -1;
        if (ch->finished && !end_choice(g, i)) return -1;
        any = any || n || ch->finished;
    }
    return any;
}

/* Adds the next events, if there are any now. 0 to go on; or what stream_read returns to end:
 * the end of the stream, or an error (out of memory, the client left). */
static ssize_t next_events(serve_generation *g) {
    bool ok = true;
    switch (g->phase) {
    case PHASE_ROLE:
        g->phase = PHASE_TEXT;
        for (size_t i = 0; ok && g->kind == SERVE_CHAT && !g->ollama && i < g->n; i++)
            ok = add_chunk(g, &(serve_choice_out){.index = i, .role = "assistant", .text = ""});
        break;
    case PHASE_TEXT: {
        int rc = text_round(g);
        ok = rc >= 0;
        bool left = false;
        for (size_t i = 0; i < g->n; i++)
            left = left || !g->c[i].ended;
        if (!left) {
            g->phase = g->ollama ? PHASE_END : g->include_usage ? PHASE_USAGE : PHASE_DONE;
        } else if (rc == 0 && serve_client_gone(g->fd)) {
            cancel_all(g);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        break;
    }
    case PHASE_USAGE: {
        g->phase = PHASE_DONE;
        size_t n_prompt, n_generated;
        usage_of(g, &n_prompt, &n_generated);
        ok = add_event(
            g, serve_json_usage_chunk(g->s, g->kind, g->id, g->created, n_prompt, n_generated));
        break;
    }
    case PHASE_DONE: {
        g->phase = PHASE_END;
        char *done = malloc(sizeof "[DONE]");
        if (done) strcpy(done, "[DONE]");
        ok = add_event(g, done);
        break;
    }
    case PHASE_END:
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    return ok ? 0 : MHD_CONTENT_READER_END_WITH_ERROR;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    serve_generation *g = cls;
    for (;;) {
        if (g->out_at < g->out_len) {
            size_t n = g->out_len - g->out_at;
            if (n > max) n = max;
            memcpy(buf, g->out + g->out_at, n);
            g->out_at += n;
            if (g->out_at == g->out_len) g->out_at = g->out_len = 0;
            return (ssize_t)n;
        }
        ssize_t end = next_events(g);
        if (end) return end;
    }
}

static void stream_free(void *cls) {
    serve_generation_free(cls);
}

static enum MHD_Result answer_stream(request *r, struct MHD_Connection *c) {
    serve_generation *g = r->gen;
    r->gen = NULL; /* the stream holds it now */
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, CHUNK_BYTES,
                                                                  stream_read, g, stream_free);
    if (!resp) {
        serve_generation_free(g);
        FAIL(500, "server_error", "out of memory");
    }
    MHD_add_response_header(resp, "Content-Type",
                            g->ollama ? "application/x-ndjson" : "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    return serve_queue_response(r, c, 200, resp);
}

/* ---- the request --------------------------------------------------------------------------- */

/* The prompt's tokens, checked against the context. 0, or -1 with *e set. */
static int prompt_of(serve_server *s, const serve_request *req, int32_t **tokens, size_t *n,
                     serve_error *e) {
    uint32_t n_ctx = serve_pool_n_ctx(s->pool);
    if (serve_prompt_tokens(s, req, tokens, n, e)) return -1;
    if (*n == 0) return serve_error_set(e, 400, "invalid_request_error", "the prompt is empty");
    if (*n + (req->max_tokens > 0 ? (size_t)req->max_tokens : 1) <= n_ctx) return 0;
    if (req->max_tokens > 0)
        return serve_error_set(e, 400, "invalid_request_error",
                               "the prompt (%zu tokens) plus max_tokens (%d) exceed the context "
                               "of %u tokens",
                               *n, (int)req->max_tokens, n_ctx);
    return serve_error_set(e, 400, "invalid_request_error",
                           "the prompt (%zu tokens) leaves no room to generate in the context of "
                           "%u tokens",
                           *n, n_ctx);
}

/* The prompt's tokens with the tools shown and the history's calls written as the model's
 * family writes them; with a call required, the grammar of one. 0, or -1 with *e set. */
static int with_tools(serve_server *s, serve_request *req, serve_generation *g, int32_t **tokens,
                      size_t *n, serve_error *e) {
    bool tool_turns = req->calls != NULL;
    for (size_t i = 0; i < req->n_messages; i++)
        tool_turns = tool_turns || !strcmp(req->messages[i].role, "tool");
    if (req->kind != SERVE_CHAT || (!req->n_tools && !tool_turns))
        return prompt_of(s, req, tokens, n, e);
    g->fmt = serve_tools_format_of(s);
    g->tools = req->tool_choice != SERVE_TOOLS_NONE && req->n_tools;
    g->call_required =
        req->tool_choice == SERVE_TOOLS_REQUIRED || req->tool_choice == SERVE_TOOLS_NAMED;
    serve_request view = *req;
    if (serve_tools_messages(req, g->fmt, &view.messages, &view.n_messages, e)) return -1;
    int rc = prompt_of(s, &view, tokens, n, e);
    serve_tools_messages_free(view.messages, view.n_messages);
    if (rc || !g->call_required) return rc;
    if (serve_tools_grammar(req, g->fmt, &req->grammar, e)) return -1;
    req->grammar_field = "tools";
    return 0;
}

/* The generation of req: its jobs made and queued. 0, or -1 with *e set. */
static int start(serve_server *s, const serve_request *req, const int32_t *tokens, size_t n_tok,
                 serve_generation *g, serve_error *e) {
    pthread_mutex_lock(&s->lock);
    uint64_t serial = ++s->ids;
    pthread_mutex_unlock(&s->lock);
    /* a seed per request when none is given: the serial mixed with the start time */
    uint64_t seed = serial * 0x9E3779B97F4A7C15ull ^ (uint64_t)s->start_time;
    g->created = (long)time(NULL);
    snprintf(g->id, sizeof g->id, "%s-%llx%04llx", req->kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)g->created, (unsigned long long)serial);
    for (size_t i = 0; i < g->n; i++)
        if (serve_job_create(s->pool, tokens, n_tok, req, seed, i, &g->c[i].job, e)) return -1;
    serve_job **jobs = calloc(g->n, sizeof *jobs);
    if (!jobs) return serve_error_set(e, 500, "server_error", "out of memory");
    for (size_t i = 0; i < g->n; i++)
        jobs[i] = g->c[i].job;
    bool queued = serve_pool_submit_group(s->pool, jobs, g->n, serial);
    free(jobs);
    if (!queued)
        return serve_error_set(e, 503, "unavailable_error",
                               "the server is busy: all %zu slots run and %zu requests wait; "
                               "retry later",
                               s->n_slots, s->queue_cap);
    return 0;
}

enum MHD_Result serve_answer_generate(request *r, struct MHD_Connection *c, serve_kind kind) {
    serve_server *s = r->s;
    serve_request req;
    serve_error e;
    serve_ollama_extra x = {0};
    const char *b = r->body ? r->body : "";
    bool gen = r->ep == SERVE_EP_ollama_generate;
    if (r->ollama ? serve_ollama_request_parse(b, r->len, gen, &req, &x, &e)
                  : serve_request_parse(b, r->len, kind, &req, &e))
        return serve_send_error(r, c, &e);
    if (x.load_only) /* ollama's "load the model": it is */
        return serve_send_owned(
            r, c, 200,
            serve_ollama_json(
                s, &(serve_ollama_out){.generate = gen, .done = true, .done_reason = "load"}),
            "application/json");
    kind = req.kind; /* /api/generate with raw: a completion */
    if (x.num_ctx > serve_pool_n_ctx(s->pool)) {
        serve_request_free(&req);
        FAIL(400, "invalid_request_error",
             "'options.num_ctx' is %u; this server's slots hold %u tokens each (-c)", x.num_ctx,
             serve_pool_n_ctx(s->pool));
    }
    int32_t *tokens = NULL;
    size_t n = 0;
    serve_generation *g = calloc(1, sizeof *g);
    int rc = g ? 0 : serve_error_set(&e, 500, "server_error", "out of memory");
    if (!rc) {
        *g = (serve_generation){.s = s,
                                .kind = kind,
                                .include_usage = req.include_usage,
                                .logprobs = req.logprobs,
                                .fd = serve_connection_fd(c),
                                .n = (size_t)req.n,
                                .ollama = r->ollama ? 1 + gen : 0,
                                .start_ms = cli_now_ms()};
        g->c = calloc(g->n, sizeof *g->c);
        if (!g->c) rc = serve_error_set(&e, 500, "server_error", "out of memory");
    }
    if (!rc && g->n > s->n_slots)
        rc = serve_error_set(&e, 400, "invalid_request_error",
                             "'n' is %zu; this server runs %zu slots (-np), so at most %zu "
                             "choices",
                             g->n, s->n_slots, s->n_slots);
    if (!rc) rc = with_tools(s, &req, g, &tokens, &n, &e);
    if (!rc) rc = start(s, &req, tokens, n, g, &e);
    free(tokens);
    bool stream = req.stream;
    if (g)
        g->req = req; /* its tools, for reading the answers */
    else
        serve_request_free(&req);
    if (rc) {
        serve_generation_free(g);
        return serve_send_error(r, c, &e);
    }
    r->gen = g;
    return stream ? answer_stream(r, c) : answer_whole(r, c, g);
}
