/* clinfer serve: a completion streamed as server-sent events (ollama's: JSON lines), each
 * choice's chunks carrying its index; tool calls are sent as they are read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_generation.h"

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
    serve_ollama_out o = serve_gen_ollama_out(g, c);
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
        out.logprobs = serve_gen_take_logprobs(g, i, g->c[i].seen, true);
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
        rest.logprobs = serve_gen_take_logprobs(g, i, g->c[i].seen, true);
        ok = (!rest.len && !rest.logprobs) || add_chunk(g, &rest);
    } else {
        out.logprobs = serve_gen_take_logprobs(g, i, g->c[i].seen, true);
    }
    char prefix[CALL_PREFIX];
    serve_gen_call_id_prefix(g, i, prefix, sizeof prefix);
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
    serve_gen_call_id_prefix(g, i, prefix, sizeof prefix);
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
        long n =
            serve_gen_take_text(g, i, any ? 0 : serve_gen_wait_ms(g), g->tools, buf, sizeof buf);
        if (n < 0) return -1;
        if (n && !g->tools) {
            serve_choice_out out = {.index = i, .text = buf, .len = (size_t)n};
            out.logprobs = serve_gen_take_logprobs(g, i, g->c[i].seen, false);
            if (!add_chunk(g, &out)) return -1;
        }
        size_t safe = n && g->tools ? content_safe(g, ch) : 0;
        if (safe > ch->sent) {
            serve_choice_out out = {
                .index = i, .text = ch->text + ch->sent, .len = safe - ch->sent};
            out.logprobs = serve_gen_take_logprobs(g, i, safe, false);
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
            serve_gen_cancel_all(g);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        break;
    }
    case PHASE_USAGE: {
        g->phase = PHASE_DONE;
        size_t n_prompt, n_generated;
        serve_gen_usage(g, &n_prompt, &n_generated);
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

enum MHD_Result serve_answer_stream(request *r, struct MHD_Connection *c) {
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
