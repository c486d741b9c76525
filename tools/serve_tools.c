/* clinfer serve: a chat request's tools, tool_choice and the tool calls in its history, and the
 * grammar of a call (serve_tools.h). */
#include "serve_tools.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) serve_error_set(err, 400, "invalid_request_error", __VA_ARGS__)
#define NO_MEMORY() serve_error_set(err, 500, "server_error", "out of memory")

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* OpenAI's function names: 1 to 64 of letters, digits, '_' and '-'. */
static bool good_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static int parse_tool(const cJSON *t, size_t i, serve_tool *out, serve_error *err) {
    if (!cJSON_IsObject(t)) return BAD("'tools[%zu]' must be an object", i);
    const cJSON *type = field(t, "type"), *f = field(t, "function");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return BAD("'tools[%zu].type' must be \"function\"", i);
    if (!cJSON_IsObject(f)) return BAD("'tools[%zu].function' must be an object", i);
    const cJSON *name = field(f, "name"), *desc = field(f, "description");
    const cJSON *params = field(f, "parameters"), *strict = field(f, "strict");
    if (!cJSON_IsString(name) || !good_name(name->valuestring))
        return BAD("'tools[%zu].function.name' must be 1 to 64 letters, digits, '_' or '-'", i);
    if (desc && !cJSON_IsString(desc))
        return BAD("'tools[%zu].function.description' must be a string", i);
    if (params && !cJSON_IsObject(params))
        return BAD("'tools[%zu].function.parameters' must be an object (a JSON schema)", i);
    if (strict && !cJSON_IsBool(strict))
        return BAD("'tools[%zu].function.strict' must be true or false", i);
    out->name = dup_string(name->valuestring);
    out->description = dup_string(desc ? desc->valuestring : "");
    out->parameters = params ? cJSON_PrintUnformatted(params) : NULL;
    if (!out->name || !out->description || (params && !out->parameters)) return NO_MEMORY();
    return 0;
}

static int parse_choice(const cJSON *tc, serve_request *req, serve_error *err) {
    req->tool_choice = req->n_tools ? SERVE_TOOLS_AUTO : SERVE_TOOLS_NONE;
    if (!tc) return 0;
    const char *named = NULL;
    if (cJSON_IsString(tc)) {
        const char *v = tc->valuestring;
        if (!strcmp(v, "none")) {
            req->tool_choice = SERVE_TOOLS_NONE;
            return 0;
        }
        if (!strcmp(v, "auto")) return 0;
        if (strcmp(v, "required"))
            return BAD("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        req->tool_choice = SERVE_TOOLS_REQUIRED;
    } else if (cJSON_IsObject(tc)) {
        const cJSON *type = field(tc, "type"), *f = field(tc, "function");
        const cJSON *name = f ? field(f, "name") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(f) ||
            !cJSON_IsString(name))
            return BAD("'tool_choice' as an object must be {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
        named = name->valuestring;
        req->tool_choice = SERVE_TOOLS_NAMED;
    } else {
        return BAD("'tool_choice' must be a string or an object");
    }
    if (!req->n_tools) return BAD("'tool_choice' asks for a call, but there are no 'tools'");
    for (size_t i = 0; named && i < req->n_tools; i++)
        if (!strcmp(req->tools[i].name, named)) {
            req->tool_named = i;
            named = NULL;
        }
    if (named) return BAD("'tool_choice' names '%.64s', which is not in 'tools'", named);
    return 0;
}

/* With a call required, each allowed function's parameters must become a grammar. */
static int check_schemas(const serve_request *req, serve_error *err) {
    for (size_t i = 0; i < req->n_tools; i++) {
        if (req->tool_choice == SERVE_TOOLS_NAMED && i != req->tool_named) continue;
        if (!req->tools[i].parameters) continue;
        char *gbnf = NULL;
        clinfer_status st = clinfer_json_schema_to_grammar(req->tools[i].parameters, &gbnf);
        clinfer_free(gbnf);
        if (st == CLINFER_ERR_OUT_OF_MEMORY) return NO_MEMORY();
        if (st != CLINFER_OK)
            return BAD("'tools[%zu].function.parameters': %s", i, clinfer_last_error());
    }
    return 0;
}

int serve_tools_parse(const cJSON *root, serve_request *req, serve_error *err) {
    const cJSON *tools = field(root, "tools"), *tc = field(root, "tool_choice");
    const cJSON *ptc = field(root, "parallel_tool_calls");
    if (ptc && !cJSON_IsBool(ptc)) return BAD("'parallel_tool_calls' must be true or false");
    if (req->kind != SERVE_CHAT && (tools || tc))
        return BAD("'%s' is a chat field: /v1/completions takes none",
                   tools ? "tools" : "tool_choice");
    if (tools && !cJSON_IsArray(tools)) return BAD("'tools' must be an array");
    int n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n > SERVE_MAX_TOOLS) return BAD("'tools' has %d entries; at most %d", n, SERVE_MAX_TOOLS);
    if (n && !(req->tools = calloc((size_t)n, sizeof *req->tools))) return NO_MEMORY();
    const cJSON *t = tools ? tools->child : NULL;
    for (size_t i = 0; t; t = t->next, i++) {
        req->n_tools = i + 1; /* freed from here on */
        if (parse_tool(t, i, &req->tools[i], err)) return -1;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(req->tools[k].name, req->tools[i].name))
                return BAD("'tools[%zu].function.name' '%s' is also tools[%zu]'s", i,
                           req->tools[i].name, k);
    }
    if (parse_choice(tc, req, err)) return -1;
    if (req->tool_choice == SERVE_TOOLS_REQUIRED || req->tool_choice == SERVE_TOOLS_NAMED) {
        if (req->grammar)
            return BAD("'tool_choice' and '%s' both constrain the output; give one of them",
                       req->grammar_field);
        return check_schemas(req, err);
    }
    return 0;
}

/* One entry of an assistant's tool_calls as {"name", "arguments"}: arguments as the JSON they
 * hold, or as the string when it is not JSON. */
static cJSON *history_call(const cJSON *c, size_t i, size_t k, serve_error *err) {
    const cJSON *f = cJSON_IsObject(c) ? field(c, "function") : NULL;
    const cJSON *type = cJSON_IsObject(c) ? field(c, "type") : NULL, *id = field(c, "id");
    const cJSON *name = f ? field(f, "name") : NULL, *args = f ? field(f, "arguments") : NULL;
    if (!cJSON_IsObject(f) || !cJSON_IsString(name) || (type && !cJSON_IsString(type)) ||
        (id && !cJSON_IsString(id)) || (args && !cJSON_IsString(args) && !cJSON_IsObject(args))) {
        BAD("'messages[%zu].tool_calls[%zu]' must be {\"id\": ..., \"type\": \"function\", "
            "\"function\": {\"name\": ..., \"arguments\": \"JSON\"}}",
            i, k);
        return NULL;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "name", name->valuestring);
    cJSON *value = NULL;
    if (cJSON_IsString(args)) value = cJSON_Parse(args->valuestring);
    if (!value) value = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    cJSON_AddItemToObject(out, "arguments", value);
    return out;
}

int serve_tools_parse_message(const cJSON *m, size_t i, size_t n, serve_request *req,
                              serve_error *err) {
    const cJSON *id = field(m, "tool_call_id"), *name = field(m, "name");
    if (id && !cJSON_IsString(id)) return BAD("'messages[%zu].tool_call_id' must be a string", i);
    if (name && !cJSON_IsString(name)) return BAD("'messages[%zu].name' must be a string", i);
    const cJSON *calls = field(m, "tool_calls");
    if (!calls) return 0;
    if (strcmp(req->messages[i].role, "assistant"))
        return BAD("'messages[%zu].tool_calls': only an assistant message has them", i);
    if (!cJSON_IsArray(calls)) return BAD("'messages[%zu].tool_calls' must be an array", i);
    if (!req->calls && !(req->calls = calloc(n, sizeof *req->calls))) return NO_MEMORY();
    cJSON *list = cJSON_CreateArray();
    size_t k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        cJSON *one = history_call(c, i, k, err);
        if (!one) {
            cJSON_Delete(list);
            return -1;
        }
        cJSON_AddItemToArray(list, one);
    }
    req->calls[i] = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    return req->calls[i] ? 0 : NO_MEMORY();
}

void serve_tools_free(serve_request *req) {
    for (size_t i = 0; i < req->n_tools; i++) {
        free(req->tools[i].name);
        free(req->tools[i].description);
        cJSON_free(req->tools[i].parameters);
    }
    free(req->tools);
    for (size_t i = 0; req->calls && i < req->n_messages; i++)
        cJSON_free(req->calls[i]);
    free(req->calls);
    req->tools = NULL;
    req->calls = NULL;
    req->n_tools = 0;
}

/* ---- the grammar of a call ----------------------------------------------------------------- */

/* {"name": NAME, ARGS_KEY: parameters} as a schema; the parameters' $defs move into defs, where
 * the combined schema's references find them. */
static cJSON *call_schema(const serve_tool *t, const char *args_key, cJSON *defs) {
    cJSON *params = t->parameters ? cJSON_Parse(t->parameters) : NULL;
    if (!params) params = cJSON_Parse("{\"type\": \"object\", \"additionalProperties\": false}");
    cJSON *own = cJSON_DetachItemFromObjectCaseSensitive(params, "$defs");
    for (cJSON *d = own ? own->child : NULL; d; d = d->next)
        if (!cJSON_GetObjectItemCaseSensitive(defs, d->string))
            cJSON_AddItemToObject(defs, d->string, cJSON_Duplicate(d, true));
    cJSON_Delete(own);
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "object");
    cJSON_AddStringToObject(name, "const", t->name);
    cJSON_AddItemToObject(props, "name", name);
    cJSON_AddItemToObject(props, args_key, params);
    cJSON_AddItemToObject(s, "properties", props);
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString(args_key));
    cJSON_AddFalseToObject(s, "additionalProperties");
    return s;
}

/* An array of exactly one of item. */
static cJSON *one_of_array(cJSON *item) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "type", "array");
    cJSON_AddItemToObject(a, "items", item);
    cJSON_AddNumberToObject(a, "minItems", 1);
    cJSON_AddNumberToObject(a, "maxItems", 1);
    return a;
}

/* The schema of the answer in fmt (HERMES: of the call inside the tags). */
static cJSON *answer_schema(const serve_request *req, serve_tool_format fmt) {
    cJSON *defs = cJSON_CreateObject(), *any = cJSON_CreateArray();
    const char *key = fmt == SERVE_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments";
    for (size_t i = 0; i < req->n_tools; i++)
        if (req->tool_choice != SERVE_TOOLS_NAMED || i == req->tool_named)
            cJSON_AddItemToArray(any, call_schema(&req->tools[i], key, defs));
    cJSON *call = any->child;
    if (cJSON_GetArraySize(any) == 1) {
        call = cJSON_DetachItemViaPointer(any, any->child);
        cJSON_Delete(any);
    } else {
        call = cJSON_CreateObject();
        cJSON_AddItemToObject(call, "anyOf", any);
    }
    cJSON *root = call;
    if (fmt == SERVE_TOOL_FORMAT_MISTRAL) root = one_of_array(call);
    if (fmt == SERVE_TOOL_FORMAT_GENERIC) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "type", "object");
        cJSON_AddItemToObject(cJSON_AddObjectToObject(root, "properties"), "tool_calls",
                              one_of_array(call));
        cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "required"),
                             cJSON_CreateString("tool_calls"));
        cJSON_AddFalseToObject(root, "additionalProperties");
    }
    if (defs->child)
        cJSON_AddItemToObject(root, "$defs", defs);
    else
        cJSON_Delete(defs);
    return root;
}

int serve_tools_grammar(const serve_request *req, serve_tool_format fmt, char **gbnf,
                        serve_error *err) {
    *gbnf = NULL;
    cJSON *schema = answer_schema(req, fmt);
    char *json = schema ? cJSON_PrintUnformatted(schema) : NULL;
    cJSON_Delete(schema);
    if (!json) return NO_MEMORY();
    char *g = NULL;
    clinfer_status st = clinfer_json_schema_to_grammar(json, &g);
    cJSON_free(json);
    if (st == CLINFER_ERR_OUT_OF_MEMORY) return NO_MEMORY();
    if (st != CLINFER_OK) return BAD("'tools': %s", clinfer_last_error());
    /* HERMES: the call's rule is root's, renamed, inside the tags */
    static const char wrap[] = "root ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n";
    const char *at = fmt == SERVE_TOOL_FORMAT_HERMES ? strstr(g, "\nroot ::= ") : NULL;
    size_t n = strlen(g);
    char *out = malloc(n + sizeof wrap + 16);
    if (out && at) {
        size_t head = (size_t)(at - g) + 1;
        memcpy(out, g, head);
        sprintf(out + head, "tool-call%s%s", at + 5, wrap);
    } else if (out) {
        memcpy(out, g, n + 1);
    }
    clinfer_free(g);
    if (!out) return NO_MEMORY();
    *gbnf = out;
    return 0;
}
