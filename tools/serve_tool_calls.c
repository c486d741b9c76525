/* clinfer serve: the tool calls in a model's answer, in its family's format (serve_tools.h), and
 * OpenAI's message.tool_calls for them. Whatever the model wrote is read safely: a call is only
 * taken when it is whole JSON naming one of the request's functions; otherwise the answer is
 * plain content. A call's arguments are the text the model wrote for them (as OpenAI gives
 * them), found by a scan of the JSON's structure that also reads an answer still being written,
 * so that a stream sends them as they come. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_tools.h"

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *find(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(hay + i, needle, k)) return hay + i;
    return NULL;
}

static bool known_tool(const serve_request *req, const char *name) {
    for (size_t i = 0; i < req->n_tools; i++)
        if (!strcmp(req->tools[i].name, name)) return true;
    return false;
}

typedef struct {
    serve_tool_call *v;
    size_t n;
    bool failed; /* out of memory */
} call_list;

/* Takes {"name": ..., "arguments" (or "parameters"): {...}} as a call; false when it is not one
 * of req's functions in that shape. */
static bool add_call(call_list *l, const serve_request *req, const cJSON *o) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !known_tool(req, name->valuestring) ||
        !(cJSON_IsObject(args) || cJSON_IsString(args)) || l->n == SERVE_MAX_TOOL_CALLS)
        return false;
    serve_tool_call *grown = realloc(l->v, (l->n + 1) * sizeof *grown);
    if (!grown) return !(l->failed = true);
    l->v = grown;
    serve_tool_call *c = &l->v[l->n];
    size_t nl = strlen(name->valuestring) + 1;
    c->name = malloc(nl);
    c->arguments = cJSON_IsString(args) ? NULL : cJSON_PrintUnformatted(args);
    if (cJSON_IsString(args) && (c->arguments = malloc(strlen(args->valuestring) + 1)))
        strcpy(c->arguments, args->valuestring);
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        return !(l->failed = true);
    }
    memcpy(c->name, name->valuestring, nl);
    c->object_arguments = cJSON_IsObject(args);
    l->n++;
    return true;
}

/* The JSON value of text[0, len) with nothing but whitespace around it; NULL when it is not. */
static cJSON *whole_json(const char *text, size_t len) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!v) return NULL;
    for (const char *p = end; p < text + len; p++)
        if (!is_space(*p)) {
            cJSON_Delete(v);
            return NULL;
        }
    return v;
}

/* A value that is a call, or an array of calls: all of them taken, or none. */
static bool add_calls(call_list *l, const serve_request *req, const cJSON *v) {
    if (!cJSON_IsArray(v)) return add_call(l, req, v);
    if (!v->child) return false;
    for (const cJSON *c = v->child; c; c = c->next)
        if (!add_call(l, req, c)) return false;
    return true;
}

/* HERMES: each <tool_call>JSON</tool_call> (the last one may lack its closing tag); the text
 * before the first is content. */
static bool hermes(call_list *l, const serve_request *req, const char *text, size_t len,
                   size_t *content_len) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const char *at = find(text, len, open), *end = text + len;
    if (!at) return false;
    *content_len = (size_t)(at - text);
    while (at) {
        const char *body = at + sizeof open - 1;
        const char *stop = find(body, (size_t)(end - body), close);
        cJSON *v = whole_json(body, (size_t)((stop ? stop : end) - body));
        bool ok = v && add_call(l, req, v);
        cJSON_Delete(v);
        if (!ok) return false;
        if (!stop) break;
        at = stop + sizeof close - 1;
        while (at < end && is_space(*at))
            at++;
        if (at == end) break;
        if ((size_t)(end - at) < sizeof open - 1 || memcmp(at, open, sizeof open - 1))
            return false; /* text after a call: not a call answer */
    }
    return true;
}

/* LLAMA3, MISTRAL, GENERIC: the whole answer is the call (after an optional marker). */
static bool whole(call_list *l, const serve_request *req, serve_tool_format fmt, const char *text,
                  size_t len) {
    const char *marker = fmt == SERVE_TOOL_FORMAT_LLAMA3    ? "<|python_tag|>"
                         : fmt == SERVE_TOOL_FORMAT_MISTRAL ? "[TOOL_CALLS]"
                                                            : NULL;
    while (len && is_space(*text)) {
        text++;
        len--;
    }
    if (marker && len >= strlen(marker) && !memcmp(text, marker, strlen(marker))) {
        text += strlen(marker);
        len -= strlen(marker);
    }
    cJSON *v = whole_json(text, len);
    if (!v) return false;
    const cJSON *list = fmt == SERVE_TOOL_FORMAT_GENERIC && cJSON_IsObject(v)
                            ? cJSON_GetObjectItemCaseSensitive(v, "tool_calls")
                            : NULL;
    bool ok = add_calls(l, req, list ? list : v);
    cJSON_Delete(v);
    return ok;
}

/* ---- the calls' text, whole or as far as it has come ----------------------------------------- */

static const char *skip_space(const char *p, const char *end) {
    while (p < end && is_space(*p))
        p++;
    return p;
}

/* Past the string at p, or NULL when it is not whole (yet). */
static const char *string_end(const char *p, const char *end) {
    if (p >= end || *p != '"') return NULL;
    for (p++; p < end; p++)
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    return NULL;
}

/* Past the JSON value at p, or NULL when it is not whole yet (a number or literal is whole at the
 * byte after it). Only the structure is followed: cJSON reads the values. */
static const char *value_end(const char *p, const char *end) {
    if (p >= end) return NULL;
    if (*p == '"') return string_end(p, end);
    if (*p != '{' && *p != '[') {
        while (p < end && !is_space(*p) && *p != ',' && *p != '}' && *p != ']')
            p++;
        return p < end ? p : NULL;
    }
    for (int depth = 0; p < end; p++) {
        if (*p == '"') {
            if (!(p = string_end(p, end))) return NULL;
            p--;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if ((*p == '}' || *p == ']') && --depth == 0) {
            return p + 1;
        }
    }
    return NULL;
}

static bool key_is(const char *k, const char *k_end, const char *word) {
    size_t n = strlen(word);
    return (size_t)(k_end - k) == n + 2 && !memcmp(k + 1, word, n);
}

/* The call object at p: its name, and its arguments object as far as it has come. Past the
 * object, or NULL when it is not whole (yet). */
static const char *call_span(const char *text, const char *p, const char *end, serve_tool_span *s) {
    *s = (serve_tool_span){0};
    if (p >= end || *p != '{') return NULL;
    for (p++;;) {
        p = skip_space(p, end);
        if (p < end && *p == '}') return p + 1;
        const char *k = p, *k_end = string_end(p, end);
        if (!k_end) return NULL;
        p = skip_space(k_end, end);
        if (p >= end || *p != ':') return NULL;
        const char *v = skip_space(p + 1, end), *v_end = value_end(v, end);
        if (v >= end) return NULL;
        if (key_is(k, k_end, "name") && *v == '"' && v_end) {
            s->name_at = (size_t)(v + 1 - text);
            s->name_len = (size_t)(v_end - v - 2);
            s->named = true;
        } else if ((key_is(k, k_end, "arguments") || key_is(k, k_end, "parameters")) && *v == '{') {
            s->args_at = (size_t)(v - text);
            s->args_len = (size_t)((v_end ? v_end : end) - v);
            s->args = true;
            s->args_whole = v_end != NULL;
        }
        if (!v_end) return NULL;
        p = skip_space(v_end, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        return p < end && *p == '}' ? p + 1 : NULL;
    }
}

/* The calls of the array at p (its '['), added to out[*n < max]. */
static void call_array(const char *text, const char *p, const char *end, serve_tool_span *out,
                       size_t *n, size_t max) {
    for (p++; *n < max;) {
        p = skip_space(p, end);
        if (p >= end || *p != '{') return;
        p = call_span(text, p, end, &out[(*n)++]);
        if (!p) return;
        p = skip_space(p, end);
        if (p >= end || *p != ',') return;
        p++;
    }
}

size_t serve_tool_calls_scan(serve_tool_format fmt, const char *text, size_t len,
                             serve_tool_span *out, size_t max) {
    const char *p = text, *end = text + len;
    size_t n = 0;
    if (fmt == SERVE_TOOL_FORMAT_HERMES) {
        static const char open[] = "<tool_call>";
        while (n < max && (p = find(p, (size_t)(end - p), open))) {
            p = skip_space(p + sizeof open - 1, end);
            if (p >= end || *p != '{' || !(p = call_span(text, p, end, &out[n++]))) break;
        }
        return n;
    }
    const char *marker = fmt == SERVE_TOOL_FORMAT_LLAMA3    ? "<|python_tag|>"
                         : fmt == SERVE_TOOL_FORMAT_MISTRAL ? "[TOOL_CALLS]"
                                                            : NULL;
    p = skip_space(p, end);
    if (marker && (size_t)(end - p) >= strlen(marker) && !memcmp(p, marker, strlen(marker)))
        p = skip_space(p + strlen(marker), end);
    if (p < end && *p == '{' && fmt == SERVE_TOOL_FORMAT_GENERIC) { /* {"tool_calls": [...]} */
        const char *k = skip_space(p + 1, end), *k_end = string_end(k, end);
        if (k_end && key_is(k, k_end, "tool_calls")) {
            const char *colon = skip_space(k_end, end);
            if (colon >= end || *colon != ':') return 0;
            p = skip_space(colon + 1, end);
            if (p >= end || *p != '[') return 0;
        }
    }
    if (p < end && *p == '[')
        call_array(text, p, end, out, &n, max);
    else if (p < end && *p == '{' && max)
        call_span(text, p, end, &out[n++]);
    return n;
}

/* The calls' arguments (those given as objects) as the model wrote them, when a scan finds the
 * same calls in text as cJSON did. */
static void raw_arguments(serve_tool_format fmt, const char *text, size_t len, call_list *l) {
    serve_tool_span spans[SERVE_MAX_TOOL_CALLS];
    size_t n = serve_tool_calls_scan(fmt, text, len, spans, SERVE_MAX_TOOL_CALLS);
    bool same = n == l->n;
    for (size_t i = 0; same && i < n; i++)
        same = spans[i].named && spans[i].name_len == strlen(l->v[i].name) &&
               !memcmp(text + spans[i].name_at, l->v[i].name, spans[i].name_len);
    for (size_t i = 0; same && i < n; i++) {
        if (!spans[i].args_whole || !l->v[i].object_arguments) continue;
        char *raw = malloc(spans[i].args_len + 1);
        if (!raw) continue; /* cJSON's printing of them stands */
        memcpy(raw, text + spans[i].args_at, spans[i].args_len);
        raw[spans[i].args_len] = '\0';
        free(l->v[i].arguments);
        l->v[i].arguments = raw;
    }
}

int serve_tool_calls_parse(serve_tool_format fmt, const serve_request *req, const char *text,
                           size_t len, serve_tool_call **calls, size_t *n, size_t *content_len) {
    call_list l = {0};
    *calls = NULL;
    *n = 0;
    *content_len = 0;
    bool found = fmt == SERVE_TOOL_FORMAT_HERMES ? hermes(&l, req, text, len, content_len)
                                                 : whole(&l, req, fmt, text, len);
    if (found && !l.failed && l.n) {
        raw_arguments(fmt, text, len, &l);
        *calls = l.v;
        *n = l.n;
        while (*content_len && is_space(text[*content_len - 1]))
            (*content_len)--;
        return 1;
    }
    serve_tool_calls_free(l.v, l.n);
    *content_len = len;
    return l.failed ? -1 : 0;
}

void serve_tool_calls_free(serve_tool_call *calls, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

static void add_call_json(cJSON *list, size_t index, const char *id_prefix, const char *name,
                          const char *args, size_t args_len, bool delta) {
    cJSON *c = cJSON_CreateObject(), *f;
    if (!c) return;
    if (delta) cJSON_AddNumberToObject(c, "index", (double)index);
    if (name) {
        char id[128];
        snprintf(id, sizeof id, "%s%zu", id_prefix, index);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
    }
    f = cJSON_AddObjectToObject(c, "function");
    if (name) cJSON_AddStringToObject(f, "name", name);
    char *a = malloc(args_len + 1);
    if (a) {
        memcpy(a, args, args_len);
        a[args_len] = '\0';
        cJSON_AddStringToObject(f, "arguments", a);
        free(a);
    }
    cJSON_AddItemToArray(list, c);
}

cJSON *serve_tool_calls_json(const serve_tool_call *calls, size_t n, const char *id_prefix) {
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; list && i < n; i++)
        add_call_json(list, i, id_prefix, calls[i].name, calls[i].arguments,
                      strlen(calls[i].arguments), false);
    return list;
}

cJSON *serve_tool_call_delta(size_t index, const char *id_prefix, const char *name,
                             const char *args, size_t args_len) {
    cJSON *list = cJSON_CreateArray();
    if (list) add_call_json(list, index, id_prefix, name, args, args_len, true);
    return list;
}
