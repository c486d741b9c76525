/* clinfer serve: POST /v1/chat/completions and /v1/completions. A connection's thread parses the
 * body, tokenizes the prompt and queues a job per choice; it then waits for the jobs' text (a
 * whole JSON answer here, or server-sent events as they come: serve_stream.c) and watches its
 * socket, so that a client that leaves cancels its generation at once. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_common.h"
#include "serve_generation.h"

/* ---- whole answers ------------------------------------------------------------------------- */

static enum MHD_Result answer_whole(request *r, struct MHD_Connection *c, serve_generation *g) {
    char buf[CHUNK_BYTES];
    for (size_t left = g->n; left > 0;) {
        bool any = false;
        left = 0;
        for (size_t i = 0; i < g->n; i++) {
            if (g->c[i].finished) continue;
            long n =
                serve_gen_take_text(g, i, any ? 0 : serve_gen_wait_ms(g), true, buf, sizeof buf);
            if (n < 0) FAIL(500, "server_error", "out of memory");
            any = any || n > 0 || g->c[i].finished;
            left += !g->c[i].finished;
        }
        if (left && !any && serve_client_gone(g->fd)) {
            serve_gen_cancel_all(g);
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
                                    .logprobs = serve_gen_take_logprobs(g, i, g->c[i].seen, true)};
        if (serve_gen_read_calls(g, i, &out[i]) < 0) {
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
    serve_gen_usage(g, &n_prompt, &n_generated);
    serve_ollama_out o = serve_gen_ollama_out(g, &out[0]);
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
    return stream ? serve_answer_stream(r, c) : answer_whole(r, c, g);
}
