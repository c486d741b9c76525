/* clinfer serve: tools shown to the model as its chat template family expects (serve_tools.h's
 * formats), and the history's tool calls and tool results written the same way, as messages
 * the chat template renders:
 *   HERMES   the tools in <tools></tools> in the system prompt, how to call them in
 *            <tool_call></tool_call>; results as user turns in <tool_response></tool_response>
 *   LLAMA3   the tools as JSON in the system prompt, a call as {"name", "parameters"}; results
 *            as "ipython" turns
 *   MISTRAL  [AVAILABLE_TOOLS] [...] [/AVAILABLE_TOOLS] before the last user message, calls
 *            after [TOOL_CALLS], results in [TOOL_RESULTS] ... [/TOOL_RESULTS]
 *   GENERIC  the tools as JSON and how to answer with {"tool_calls": [...]} in the system
 *            prompt; results as user turns. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "serve_tools.h"

serve_tool_format serve_tools_format_of(serve_server *s) {
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    const char *f = s->chat_template && *s->chat_template ? s->chat_template : info.chat_format;
    if (!strcmp(f, "llama3")) return SERVE_TOOL_FORMAT_LLAMA3;
    if (!strcmp(f, "llama2") || !strcmp(f, "gemma")) {
        int32_t ids[4];
        size_t n = 0; /* Mistral's vocabularies have [TOOL_CALLS] as one special token */
        if (!strcmp(f, "llama2") &&
            clinfer_tokenize(s->model, "[TOOL_CALLS]", 12, false, true, ids, 4, &n) == CLINFER_OK &&
            n == 1)
            return SERVE_TOOL_FORMAT_MISTRAL;
        return SERVE_TOOL_FORMAT_GENERIC;
    }
    return SERVE_TOOL_FORMAT_HERMES; /* ChatML, also the default without a template */
}

typedef struct {
    char *s;
    size_t len, cap;
    bool failed;
} text;

static void put(text *t, const char *s) {
    size_t n = strlen(s);
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = 2 * (t->len + n + 1);
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
}

static void put_json(text *t, cJSON *v) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!s) t->failed = true;
    if (s) put(t, s);
    cJSON_free(s);
    cJSON_Delete(v);
}

/* {"type": "function", "function": {"name", "description", "parameters"}} */
static cJSON *tool_json(const serve_tool *tool) {
    cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddStringToObject(f, "name", tool->name);
    if (tool->description[0]) cJSON_AddStringToObject(f, "description", tool->description);
    cJSON *p = tool->parameters ? cJSON_Parse(tool->parameters) : NULL;
    if (p) cJSON_AddItemToObject(f, "parameters", p);
    cJSON_AddItemToObject(o, "function", f);
    return o;
}

/* What the system prompt gains: the tools and how to call them. */
static void tools_text(text *t, const serve_request *req, serve_tool_format fmt) {
    const char *sep = fmt == SERVE_TOOL_FORMAT_LLAMA3 ? "\n\n" : "\n";
    if (fmt == SERVE_TOOL_FORMAT_HERMES)
        put(t, "# Tools\n\nYou can call functions to help with the user's request. Their "
               "signatures, as JSON, are within <tools></tools> tags:\n<tools>\n");
    else if (fmt == SERVE_TOOL_FORMAT_LLAMA3)
        put(t, "You can call functions. To call one, answer with only a JSON object of the form "
               "{\"name\": function name, \"parameters\": object of argument names and values}, "
               "without variables. The functions:\n\n");
    else
        put(t, "You can call functions, described by these JSON schemas:\n");
    for (size_t i = 0; i < req->n_tools; i++) {
        if (i) put(t, sep);
        put_json(t, tool_json(&req->tools[i]));
    }
    if (fmt == SERVE_TOOL_FORMAT_HERMES)
        put(t, "\n</tools>\n\nTo call a function, answer with a JSON object of its name and "
               "arguments within <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": "
               "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    else if (fmt == SERVE_TOOL_FORMAT_GENERIC)
        put(t, "\n\nTo call one or more of them, answer with only a JSON object {\"tool_calls\": "
               "[{\"name\": \"<function name>\", \"arguments\": {<its arguments>}}]}. Otherwise "
               "answer in plain text.");
}

/* An assistant message's calls (calls: [{"name", "arguments"}]) after its content. */
static void calls_text(text *t, const char *content, const char *calls, serve_tool_format fmt) {
    put(t, content);
    if (content[0]) put(t, "\n");
    cJSON *list = cJSON_Parse(calls);
    if (!list) t->failed = true;
    if (fmt == SERVE_TOOL_FORMAT_MISTRAL) {
        put(t, "[TOOL_CALLS] ");
        put_json(t, list);
        return;
    }
    if (fmt == SERVE_TOOL_FORMAT_GENERIC) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "tool_calls", list);
        put_json(t, o);
        return;
    }
    for (cJSON *c = list ? list->child : NULL; c; c = c->next) {
        if (c != list->child) put(t, "\n");
        if (fmt == SERVE_TOOL_FORMAT_LLAMA3) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "name",
                                  cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "name"), 1));
            cJSON_AddItemToObject(
                o, "parameters",
                cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "arguments"), 1));
            put_json(t, o);
            continue;
        }
        put(t, "<tool_call>\n");
        put_json(t, cJSON_Duplicate(c, 1));
        put(t, "\n</tool_call>");
    }
    cJSON_Delete(list);
}

/* A tool's result, as the turn it becomes: its role and text. */
static const char *result_text(text *t, const char *content, serve_tool_format fmt) {
    switch (fmt) {
    case SERVE_TOOL_FORMAT_HERMES:
        put(t, "<tool_response>\n");
        put(t, content);
        put(t, "\n</tool_response>");
        return "user";
    case SERVE_TOOL_FORMAT_LLAMA3:
        put(t, content);
        return "ipython";
    case SERVE_TOOL_FORMAT_MISTRAL: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "content", content);
        put(t, "[TOOL_RESULTS] ");
        put_json(t, o);
        put(t, "[/TOOL_RESULTS]");
        return "user";
    }
    default:
        put(t, "The function returned:\n");
        put(t, content);
        return "user";
    }
}

void serve_tools_messages_free(clinfer_chat_message *m, size_t n) {
    for (size_t i = 0; m && i < n; i++)
        free((char *)m[i].content);
    free(m);
}

int serve_tools_messages(const serve_request *req, serve_tool_format fmt,
                         clinfer_chat_message **out, size_t *n_out, serve_error *err) {
    bool show = req->tool_choice != SERVE_TOOLS_NONE && req->n_tools;
    bool system = show && fmt != SERVE_TOOL_FORMAT_MISTRAL;
    bool merge = system && !strcmp(req->messages[0].role, "system");
    size_t n = req->n_messages + (system && !merge), last_user = SIZE_MAX;
    for (size_t i = 0; i < req->n_messages; i++)
        if (!strcmp(req->messages[i].role, "user")) last_user = i;
    clinfer_chat_message *m = calloc(n, sizeof *m);
    if (!m) return serve_error_set(err, 500, "server_error", "out of memory");
    size_t k = 0;
    bool failed = false;
    if (system && !merge) {
        text t = {0};
        tools_text(&t, req, fmt);
        m[k++] = (clinfer_chat_message){"system", t.s};
        failed = t.failed;
    }
    for (size_t i = 0; i < req->n_messages && !failed; i++, k++) {
        const clinfer_chat_message *src = &req->messages[i];
        text t = {0};
        const char *role = src->role;
        if (merge && i == 0) {
            put(&t, src->content);
            put(&t, "\n\n");
            tools_text(&t, req, fmt);
        } else if (req->calls && req->calls[i]) {
            calls_text(&t, src->content, req->calls[i], fmt);
        } else if (!strcmp(role, "tool")) {
            role = result_text(&t, src->content, fmt);
        } else if (show && fmt == SERVE_TOOL_FORMAT_MISTRAL && i == last_user) {
            put(&t, "[AVAILABLE_TOOLS] ");
            cJSON *list = cJSON_CreateArray();
            for (size_t j = 0; j < req->n_tools; j++)
                cJSON_AddItemToArray(list, tool_json(&req->tools[j]));
            put_json(&t, list);
            put(&t, "[/AVAILABLE_TOOLS]");
            put(&t, src->content);
        } else {
            put(&t, src->content);
        }
        m[k] = (clinfer_chat_message){role, t.s ? t.s : calloc(1, 1)};
        failed = t.failed || !m[k].content;
    }
    if (failed) {
        serve_tools_messages_free(m, k);
        return serve_error_set(err, 500, "server_error", "out of memory");
    }
    *out = m;
    *n_out = n;
    return 0;
}
