/* clinfer serve: ollama's request bodies read into the server's own. Each body is checked
 * member by member (what ollama documents and this server does, or a 400 naming the member),
 * then written as the OpenAI body of the same request and parsed by serve_request_parse, so
 * that ranges, stop strings, messages and schemas are checked in one place; an error from there
 * names the ollama field (options.num_predict, not max_tokens). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_ollama.h"

#define BAD(...) serve_error_set(err, 400, "invalid_request_error", __VA_ARGS__)
#define NO_MEMORY() serve_error_set(err, 500, "server_error", "out of memory")

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* A member that must hold its default ("", [], false) when given: ollama documents it, this
 * server does not do it. */
static int empty_only(const cJSON *o, const char *name, const char *where, serve_error *err) {
    const cJSON *f = field(o, name);
    bool empty = !f || cJSON_IsFalse(f) || (cJSON_IsString(f) && !f->valuestring[0]) ||
                 (cJSON_IsArray(f) && !f->child);
    return empty ? 0 : BAD("'%s%s' is not supported by this server (only empty)", where, name);
}

static int string_or_absent(const cJSON *o, const char *name, serve_error *err) {
    const cJSON *f = field(o, name);
    return !f || cJSON_IsString(f) ? 0 : BAD("'%s' must be a string", name);
}

/* Copies member name of from into to as to_name (absent: nothing). false on out of memory. */
static bool copy(cJSON *to, const char *to_name, const cJSON *from, const char *name) {
    const cJSON *f = field(from, name);
    return !f || cJSON_AddItemToObject(to, to_name, cJSON_Duplicate(f, true));
}

/* options: the sampling fields under OpenAI's names, num_ctx into x. */
static int parse_options(const cJSON *opt, cJSON *o, serve_ollama_extra *x, serve_error *err) {
    static const char *const same[] = {"temperature",
                                       "top_k",
                                       "top_p",
                                       "min_p",
                                       "seed",
                                       "stop",
                                       "repeat_penalty",
                                       "presence_penalty",
                                       "frequency_penalty"};
    if (!cJSON_IsObject(opt)) return BAD("'options' must be an object");
    if (serve_only_members(
            opt,
            " temperature top_k top_p min_p seed stop repeat_penalty presence_penalty"
            " frequency_penalty num_predict num_ctx ",
            "options.", err))
        return -1;
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!copy(o, same[i], opt, same[i])) return NO_MEMORY();
    const cJSON *np = field(opt, "num_predict");
    if (np) { /* -1: no limit; -2: until the context is full, the same here */
        double v = cJSON_IsNumber(np) ? np->valuedouble : 0;
        cJSON *n = v == -2 ? cJSON_CreateNumber(-1) : cJSON_Duplicate(np, true);
        if (!cJSON_AddItemToObject(o, "max_tokens", n)) return NO_MEMORY();
    }
    const cJSON *nc = field(opt, "num_ctx");
    if (nc) {
        double v = cJSON_IsNumber(nc) ? nc->valuedouble : 0;
        if (!(v >= 1 && v <= UINT32_MAX && v == floor(v)))
            return BAD("'options.num_ctx' must be a whole number >= 1");
        x->num_ctx = (uint32_t)v;
    }
    return 0;
}

/* format: "json" (any JSON object), a JSON schema, or "" (free text). */
static int parse_format(const cJSON *f, cJSON *o, serve_error *err) {
    if (!f || (cJSON_IsString(f) && !f->valuestring[0])) return 0;
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json")) {
        cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
        return rf && cJSON_AddStringToObject(rf, "type", "json_object") ? 0 : NO_MEMORY();
    }
    if (!cJSON_IsObject(f)) return BAD("'format' must be \"json\" or a JSON schema (an object)");
    return cJSON_AddItemToObject(o, "json_schema", cJSON_Duplicate(f, true)) ? 0 : NO_MEMORY();
}

/* /api/chat's messages: role and content (a string), an assistant's tool_calls (arguments as an
 * object, as ollama writes them; read as OpenAI's) and a tool result's tool_name; images
 * refused. */
static int parse_messages(const cJSON *ms, cJSON *o, serve_ollama_extra *x, serve_error *err) {
    if (ms && !cJSON_IsArray(ms)) return BAD("'messages' must be an array");
    if (!ms || !ms->child) return (x->load_only = true), 0;
    cJSON *out = cJSON_AddArrayToObject(o, "messages");
    if (!out) return NO_MEMORY();
    size_t i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "messages[%zu].", i);
        if (!cJSON_IsObject(m)) return BAD("messages[%zu] must be an object", i);
        if (serve_only_members(m, " role content images tool_calls tool_name thinking ", where,
                               err) ||
            empty_only(m, "images", where, err) || empty_only(m, "thinking", where, err))
            return -1;
        const cJSON *c = field(m, "content"), *calls = field(m, "tool_calls");
        if (c && !cJSON_IsString(c)) return BAD("messages[%zu].content must be a string", i);
        cJSON *one = cJSON_CreateObject();
        if (!cJSON_AddItemToArray(out, one) || !copy(one, "role", m, "role") ||
            !copy(one, "content", m, "content") || !copy(one, "name", m, "tool_name") ||
            (cJSON_IsArray(calls) && calls->child && !copy(one, "tool_calls", m, "tool_calls")))
            return NO_MEMORY();
        if (calls && !cJSON_IsArray(calls))
            return BAD("messages[%zu].tool_calls must be an array", i);
    }
    return 0;
}

/* /api/generate's prompt: through the chat template after system (unless raw), else as is. */
static int parse_prompt(const cJSON *root, cJSON *o, serve_kind *kind, serve_ollama_extra *x,
                        serve_error *err) {
    const cJSON *p = field(root, "prompt"), *sys = field(root, "system"), *raw = field(root, "raw");
    if (raw && !cJSON_IsBool(raw)) return BAD("'raw' must be true or false");
    if (string_or_absent(root, "prompt", err) || string_or_absent(root, "system", err)) return -1;
    if (cJSON_IsTrue(raw) && sys && sys->valuestring[0])
        return BAD("'system' is not used with 'raw': true; put it in the prompt");
    if (!p || !p->valuestring[0]) return (x->load_only = true), 0;
    if (cJSON_IsTrue(raw)) {
        *kind = SERVE_COMPLETION;
        return copy(o, "prompt", root, "prompt") ? 0 : NO_MEMORY();
    }
    cJSON *ms = cJSON_AddArrayToObject(o, "messages"), *m;
    if (!ms) return NO_MEMORY();
    if (sys && sys->valuestring[0] &&
        (!cJSON_AddItemToArray(ms, m = cJSON_CreateObject()) ||
         !cJSON_AddStringToObject(m, "role", "system") || !copy(m, "content", root, "system")))
        return NO_MEMORY();
    if (!cJSON_AddItemToArray(ms, m = cJSON_CreateObject()) ||
        !cJSON_AddStringToObject(m, "role", "user") || !copy(m, "content", root, "prompt"))
        return NO_MEMORY();
    return 0;
}

/* The members every generating body takes. */
static int parse_common(const cJSON *root, cJSON *o, serve_ollama_extra *x, serve_error *err) {
    const cJSON *st = field(root, "stream"), *think = field(root, "think");
    const cJSON *ka = field(root, "keep_alive"), *opt = field(root, "options");
    if (string_or_absent(root, "model", err)) return -1;
    if (st && !cJSON_IsBool(st)) return BAD("'stream' must be true or false");
    if (!cJSON_AddBoolToObject(o, "stream", !cJSON_IsFalse(st))) return NO_MEMORY();
    if (think && !cJSON_IsFalse(think))
        return BAD("'think' is not supported by this server (only false)");
    const cJSON *lp = field(root, "logprobs"), *top = field(root, "top_logprobs");
    if ((lp && !cJSON_IsFalse(lp)) || (top && !(cJSON_IsNumber(top) && top->valuedouble == 0)))
        return BAD("'%s' is not supported on ollama's API here (use /v1/chat/completions)",
                   lp && !cJSON_IsFalse(lp) ? "logprobs" : "top_logprobs");
    if (ka && !cJSON_IsString(ka) && !cJSON_IsNumber(ka))
        return BAD("'keep_alive' must be a duration string or a number of seconds");
    if (opt && parse_options(opt, o, x, err)) return -1;
    return parse_format(field(root, "format"), o, err);
}

/* /api/generate's own members (every one it may hold is read here or in parse_common). */
static int generate_members(const cJSON *root, cJSON *o, serve_kind *kind, serve_ollama_extra *x,
                            serve_error *err) {
    if (serve_only_members(
            root,
            " model prompt suffix images system template context raw format options stream"
            " keep_alive think logprobs top_logprobs ",
            "", err))
        return -1;
    if (empty_only(root, "suffix", "", err) || empty_only(root, "images", "", err) ||
        empty_only(root, "template", "", err) || empty_only(root, "context", "", err))
        return -1;
    return parse_prompt(root, o, kind, x, err);
}

static int chat_members(const cJSON *root, cJSON *o, serve_ollama_extra *x, serve_error *err) {
    if (serve_only_members(root,
                           " model messages tools format options stream keep_alive think logprobs"
                           " top_logprobs ",
                           "", err))
        return -1;
    const cJSON *tools = field(root, "tools"); /* OpenAI's shape; the model calls them at will */
    if (cJSON_IsArray(tools) && tools->child && !copy(o, "tools", root, "tools"))
        return NO_MEMORY();
    if (tools && !cJSON_IsArray(tools)) return BAD("'tools' must be an array");
    return parse_messages(field(root, "messages"), o, x, err);
}

/* An error of serve_request_parse about an OpenAI member, renamed to the ollama one. */
static void rename_field(serve_error *err) {
    static const char *const names[][2] = {{"'max_tokens'", "'options.num_predict'"},
                                           {"'stop'", "'options.stop'"},
                                           {"a 'stop'", "an 'options.stop'"},
                                           {"'json_schema'", "'format'"},
                                           {"'temperature'", "'options.temperature'"},
                                           {"'top_k'", "'options.top_k'"},
                                           {"'top_p'", "'options.top_p'"},
                                           {"'min_p'", "'options.min_p'"},
                                           {"'seed'", "'options.seed'"},
                                           {"'repeat_penalty'", "'options.repeat_penalty'"},
                                           {"'presence_penalty'", "'options.presence_penalty'"},
                                           {"'frequency_penalty'", "'options.frequency_penalty'"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i][0]);
        if (strncmp(err->message, names[i][0], n)) continue;
        char rest[sizeof err->message];
        snprintf(rest, sizeof rest, "%s", err->message + n);
        snprintf(err->message, sizeof err->message, "%s%s", names[i][1], rest);
        return;
    }
}

int serve_ollama_request_parse(const char *body, size_t len, bool generate, serve_request *req,
                               serve_ollama_extra *x, serve_error *err) {
    *req = (serve_request){0};
    *x = (serve_ollama_extra){.generate = generate};
    cJSON *root = serve_parse_strict(body, len, err), *o = cJSON_CreateObject();
    serve_kind kind = SERVE_CHAT;
    int rc = -1;
    if (!root || !o) {
        if (root) NO_MEMORY();
    } else if (!cJSON_IsObject(root)) {
        BAD("the body must be a JSON object");
    } else if (generate ? generate_members(root, o, &kind, x, err)
                        : chat_members(root, o, x, err)) {
        /* *err is set */
    } else if (!parse_common(root, o, x, err)) {
        rc = 0;
    }
    if (rc == 0 && !x->load_only) {
        char *json = cJSON_PrintUnformatted(o);
        rc = json ? serve_request_parse(json, strlen(json), kind, req, err) : NO_MEMORY();
        cJSON_free(json);
        if (rc) rename_field(err);
    }
    cJSON_Delete(root);
    cJSON_Delete(o);
    return rc;
}

int serve_ollama_embed_body(const char *body, size_t len, bool legacy, char **out,
                            serve_error *err) {
    *out = NULL;
    cJSON *root = serve_parse_strict(body, len, err), *o = cJSON_CreateObject();
    const char *in = legacy ? "prompt" : "input";
    int rc = -1;
    const cJSON *ka = root ? field(root, "keep_alive") : NULL, *tr = NULL;
    if (!root || !o) {
        if (root) NO_MEMORY();
    } else if (!cJSON_IsObject(root)) {
        BAD("the body must be a JSON object");
    } else if (serve_only_members(root,
                                  legacy ? " model prompt options keep_alive "
                                         : " model input truncate options keep_alive dimensions ",
                                  "", err) ||
               string_or_absent(root, "model", err) || empty_only(root, "options", "", err)) {
        /* *err is set */
    } else if (ka && !cJSON_IsString(ka) && !cJSON_IsNumber(ka)) {
        BAD("'keep_alive' must be a duration string or a number of seconds");
    } else if ((tr = field(root, "truncate")) && !cJSON_IsBool(tr)) {
        BAD("'truncate' must be true or false");
    } else if (!field(root, in) || (legacy && !cJSON_IsString(field(root, in)))) {
        BAD(legacy ? "'prompt' must be a string" : "'input' is required");
    } else if (!copy(o, "input", root, in) || !copy(o, "dimensions", root, "dimensions")) {
        NO_MEMORY();
    } else {
        rc = (*out = cJSON_PrintUnformatted(o)) ? 0 : NO_MEMORY();
    }
    cJSON_Delete(root);
    cJSON_Delete(o);
    return rc;
}
