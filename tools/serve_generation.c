/* clinfer serve: what a completion's generation takes from its jobs (text, log-probabilities,
 * counts, tool calls), for its whole answer and its stream alike. */
#include "serve_generation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void serve_gen_cancel_all(serve_generation *g) {
    for (size_t i = 0; i < g->n; i++)
        serve_job_cancel(g->c[i].job);
}

int serve_gen_wait_ms(const serve_generation *g) {
    int ms = SERVE_WAIT_MS / (int)g->n;
    return ms > 1 ? ms : 1;
}

long serve_gen_take_text(serve_generation *g, size_t i, int ms, bool keep, char *buf, size_t size) {
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

cJSON *serve_gen_take_logprobs(serve_generation *g, size_t i, size_t upto, bool all) {
    gen_choice *ch = &g->c[i];
    if (g->logprobs < 0) return NULL;
    serve_logprob *lp;
    size_t n = serve_job_take_logprobs(ch->job, &ch->lp_next, upto, all, &lp);
    cJSON *j = n ? serve_json_logprobs(g->s->model, g->kind, lp, n, &ch->lp_bytes) : NULL;
    free(lp);
    return j;
}

void serve_gen_usage(const serve_generation *g, size_t *n_prompt, size_t *n_generated) {
    *n_prompt = g->c[0].job->stats.n_prompt;
    *n_generated = 0;
    for (size_t i = 0; i < g->n; i++)
        *n_generated += g->c[i].job->stats.n_generated;
}

/* ---- tool calls ---------------------------------------------------------------------------- */

void serve_gen_call_id_prefix(const serve_generation *g, size_t i, char *prefix, size_t size) {
    const char *serial = strchr(g->id, '-'); /* the response id's own part */
    snprintf(prefix, size, "call_%s_%zu_", serial ? serial + 1 : g->id, i);
}

int serve_gen_read_calls(serve_generation *g, size_t i, serve_choice_out *out) {
    gen_choice *ch = &g->c[i];
    out->text = ch->text ? ch->text : "";
    out->len = ch->len;
    if (!g->tools || ch->job->status != CLINFER_OK) return 0;
    serve_tool_call *calls;
    size_t n, content;
    int rc = serve_tool_calls_parse(g->fmt, &g->req, out->text, out->len, &calls, &n, &content);
    if (rc <= 0) return rc;
    char prefix[CALL_PREFIX];
    serve_gen_call_id_prefix(g, i, prefix, sizeof prefix);
    out->len = content;
    out->finish = SERVE_FINISH_TOOL_CALLS;
    out->tool_calls = serve_tool_calls_json(calls, n, prefix);
    serve_tool_calls_free(calls, n);
    return out->tool_calls ? 1 : -1;
}

serve_ollama_out serve_gen_ollama_out(const serve_generation *g, const serve_choice_out *c) {
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
