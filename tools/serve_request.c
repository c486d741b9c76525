#include "serve_request.h"
#include "serve_tools.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVE_MAX_TOP 20 /* top_logprobs, as OpenAI allows (serve_slots.h's too) */
#define BAD(...) serve_error_set(err, 400, "invalid_request_error", __VA_ARGS__)

/* A field that is absent or JSON null counts as not given. */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* A number field within [lo, hi] (and whole if integer): 1 read into *out, 0 absent, -1 bad. */
static int number(const cJSON *o, const char *name, double lo, double hi, bool integer, double *out,
                  serve_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsNumber(f)) return BAD("'%s' must be a number", name);
    double v = f->valuedouble;
    if (!isfinite(v) || v < lo || v > hi || (integer && v != floor(v)))
        return BAD("'%s' must be %s in [%g, %g], not %g", name,
                   integer ? "a whole number" : "a number", lo, hi, v);
    *out = v;
    return 1;
}

static int boolean(const cJSON *o, const char *name, bool *out, serve_error *err) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return BAD("'%s' must be true or false", name);
    *out = cJSON_IsTrue(f);
    return 1;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

#define NO_MEMORY() serve_error_set(err, 500, "server_error", "out of memory")

/* A message's content: a string, or an array of parts of which only {"type": "text"} ones are
 * taken (concatenated); null is "" (an assistant turn that called tools). */
static int content_text(const cJSON *c, size_t i, char **out, serve_error *err) {
    if (!c) return (*out = dup_string("")) ? 0 : NO_MEMORY();
    if (cJSON_IsString(c)) return (*out = dup_string(c->valuestring)) ? 0 : NO_MEMORY();
    if (!cJSON_IsArray(c))
        return BAD("messages[%zu].content must be a string or an array of text parts", i);
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text"))
            return BAD("messages[%zu].content: only parts of type \"text\" are supported", i);
        if (!cJSON_IsString(text))
            return BAD("messages[%zu].content: a text part's 'text' must be a string", i);
        len += strlen(text->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s) return NO_MEMORY();
    size_t at = 0;
    cJSON_ArrayForEach(part, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + at, t, n);
        at += n;
    }
    s[at] = '\0';
    *out = s;
    return 0;
}

static bool known_role(const char *role) {
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(role, roles[i])) return true;
    return false;
}

/* A message's members: what is read, and what clients send back of an answer unset (refusal,
 * audio and function_call null, annotations empty); a participant's name only on a tool's. */
static int message_members(const cJSON *m, size_t i, const char *role, serve_error *err) {
    for (const cJSON *v = m->child; v; v = v->next) {
        const char *k = v->string;
        bool ok = !strcmp(k, "role") || !strcmp(k, "content") || !strcmp(k, "tool_calls") ||
                  !strcmp(k, "tool_call_id") || (!strcmp(k, "name") && !strcmp(role, "tool"));
        ok = ok || ((!strcmp(k, "refusal") || !strcmp(k, "audio") || !strcmp(k, "function_call")) &&
                    cJSON_IsNull(v));
        ok = ok || (!strcmp(k, "annotations") && cJSON_IsArray(v) && !v->child);
        if (!ok)
            return BAD("'messages[%zu].%s' is not supported by this server (or not with this "
                       "value)",
                       i, k);
    }
    return 0;
}

static int parse_messages(const cJSON *root, serve_request *req, serve_error *err) {
    const cJSON *ms = field(root, "messages");
    if (!ms) return BAD("'messages' is required");
    if (!cJSON_IsArray(ms)) return BAD("'messages' must be an array");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return BAD("'messages' is empty");
    if (n > SERVE_MAX_MESSAGES)
        return BAD("'messages' has %d entries; at most %d", n, SERVE_MAX_MESSAGES);
    req->messages = calloc((size_t)n, sizeof *req->messages);
    if (!req->messages) return NO_MEMORY();
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        size_t i = req->n_messages;
        if (!cJSON_IsObject(m)) return BAD("messages[%zu] must be an object", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || !role->valuestring[0])
            return BAD("messages[%zu].role must be a non-empty string", i);
        if (!known_role(role->valuestring))
            return BAD("messages[%zu].role '%s' is not one of system, developer, user, "
                       "assistant, tool",
                       i, role->valuestring);
        if (message_members(m, i, role->valuestring, err)) return -1;
        char *content = NULL;
        if (content_text(field(m, "content"), i, &content, err)) return -1;
        /* OpenAI's newer name for the system role */
        char *r = dup_string(strcmp(role->valuestring, "developer") ? role->valuestring : "system");
        if (!r) {
            free(content);
            return NO_MEMORY();
        }
        req->messages[i] = (clinfer_chat_message){r, content};
        req->n_messages++;
        if (serve_tools_parse_message(m, i, (size_t)n, req, err)) return -1;
    }
    return 0;
}

static int parse_prompt(const cJSON *root, serve_request *req, serve_error *err) {
    const cJSON *p = field(root, "prompt");
    if (p && cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
    if (!p) return BAD("'prompt' is required");
    if (!cJSON_IsString(p))
        return BAD("'prompt' must be a string (or an array of one string; token arrays and "
                   "several prompts are not supported)");
    return (req->prompt = dup_string(p->valuestring)) ? 0 : NO_MEMORY();
}

static int parse_stop(const cJSON *root, serve_request *req, serve_error *err) {
    const cJSON *s = field(root, "stop");
    if (!s) return 0;
    const cJSON *one = s;
    if (cJSON_IsArray(s)) {
        if (cJSON_GetArraySize(s) > SERVE_MAX_STOP)
            return BAD("'stop' has %d strings; at most %d", cJSON_GetArraySize(s), SERVE_MAX_STOP);
        one = s->child;
    } else if (!cJSON_IsString(s)) {
        return BAD("'stop' must be a string or an array of strings");
    }
    for (; one; one = s == one ? NULL : one->next) {
        if (!cJSON_IsString(one)) return BAD("'stop' must be a string or an array of strings");
        size_t n = strlen(one->valuestring);
        if (n == 0) return BAD("'stop' strings must not be empty");
        if (n > SERVE_MAX_STOP_BYTES)
            return BAD("a 'stop' string has %zu bytes; at most %d", n, SERVE_MAX_STOP_BYTES);
        if (!(req->stop[req->n_stop++] = dup_string(one->valuestring))) return NO_MEMORY();
    }
    return 0;
}

/* Features a client may ask for that this server does not offer: an error rather than an
 * answer that silently lacks them. */
/* The members of a chat or completions body the parsers below read, each between spaces. */
static const char known[] =
    " model messages prompt temperature top_p top_k min_p presence_penalty frequency_penalty"
    " repeat_penalty seed max_tokens max_completion_tokens stop stream stream_options"
    " response_format grammar json_schema n logprobs top_logprobs tools tool_choice"
    " parallel_tool_calls ";

/* Members that change nothing here when they hold what clients send as their defaults: accepted
 * then, refused otherwise (an OpenAI or llama-server field clinfer does not implement). */
static bool harmless(const cJSON *v) {
    const char *k = v->string;
    if (!strcmp(k, "user") || !strcmp(k, "safety_identifier"))
        return cJSON_IsString(v); /* an end user's id, for abuse reports */
    if (!strcmp(k, "prompt_cache_key")) return cJSON_IsString(v); /* prompts are cached anyway */
    if (!strcmp(k, "modalities"))                                 /* text out, the only one */
        return cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && cJSON_IsString(v->child) &&
               !strcmp(v->child->valuestring, "text");
    if (!strcmp(k, "metadata")) return cJSON_IsObject(v); /* tags for a stored completion */
    if (!strcmp(k, "store") || !strcmp(k, "echo")) return cJSON_IsFalse(v);
    if (!strcmp(k, "logit_bias")) return cJSON_IsObject(v) && !v->child;
    if (!strcmp(k, "best_of")) return cJSON_IsNumber(v) && v->valuedouble == 1;
    if (!strcmp(k, "service_tier"))
        return cJSON_IsString(v) &&
               (!strcmp(v->valuestring, "auto") || !strcmp(v->valuestring, "default"));
    if (!strcmp(k, "cache_prompt")) return cJSON_IsBool(v); /* llama-server: prompts are cached */
    return false;
}

static int unknown_members(const cJSON *root, serve_error *err) {
    for (const cJSON *v = root->child; v; v = v->next) {
        char key[40];
        bool read = snprintf(key, sizeof key, " %s ", v->string) < (int)sizeof key &&
                    strstr(known, key) && !strchr(v->string, ' ');
        if (!read && !harmless(v))
            return BAD("'%s' is not supported by this server (or not with this value)", v->string);
    }
    return 0;
}

/* Chat: logprobs true or false, top_logprobs 0 .. 20 beside it; a completion: logprobs N. */
static int parse_logprobs(const cJSON *root, serve_request *req, serve_error *err) {
    double top = 0;
    req->logprobs = -1;
    int has_top = number(root, "top_logprobs", 0, SERVE_MAX_TOP, true, &top, err);
    if (has_top < 0) return -1;
    const cJSON *lp = field(root, "logprobs");
    if (req->kind == SERVE_CHAT) {
        if (lp && !cJSON_IsBool(lp)) return BAD("'logprobs' must be true or false");
        if (!cJSON_IsTrue(lp)) {
            if (top > 0) return BAD("'top_logprobs' needs 'logprobs': true");
            return 0;
        }
        req->logprobs = (int32_t)top;
        return 0;
    }
    if (top > 0) return BAD("'top_logprobs' is a chat field: completions take 'logprobs': N");
    if (!lp || cJSON_IsFalse(lp)) return 0;
    if (number(root, "logprobs", 0, SERVE_MAX_TOP, true, &top, err) < 0) return -1;
    req->logprobs = (int32_t)top;
    return 0;
}

static int unsupported(const cJSON *root, serve_request *req, serve_error *err) {
    double n = 1;
    if (number(root, "n", 1, SERVE_MAX_CHOICES, true, &n, err) < 0) return -1;
    req->n = (int32_t)n;
    if (unknown_members(root, err)) return -1;
    return 0;
}

/* ---- structured output ---------------------------------------------------------------------
 * At most one field constrains the output: llama-server's 'grammar' (GBNF) and 'json_schema',
 * OpenAI's 'response_format'. A schema becomes GBNF here, so that a keyword the translator lacks
 * is a 400 naming it before anything runs. */

/* Takes gbnf (malloc'ed) as the request's grammar, from field; a second one is an error. */
static int set_grammar(serve_request *req, char *gbnf, const char *field_name, serve_error *err) {
    if (req->grammar) {
        free(gbnf);
        return BAD("'%s' and '%s' both constrain the output; give one of them", req->grammar_field,
                   field_name);
    }
    req->grammar = gbnf;
    req->grammar_field = field_name;
    return 0;
}

/* The grammar of schema (NULL: any JSON object), from field. */
static int schema_grammar(const cJSON *schema, const char *field_name, serve_request *req,
                          serve_error *err) {
    char *json = NULL, *gbnf = NULL;
    if (schema && !cJSON_IsObject(schema)) return BAD("'%s' must be an object", field_name);
    if (schema && !(json = cJSON_PrintUnformatted(schema))) return NO_MEMORY();
    clinfer_status st = clinfer_json_schema_to_grammar(json, &gbnf);
    cJSON_free(json);
    if (st == CLINFER_ERR_OUT_OF_MEMORY) return NO_MEMORY();
    if (st != CLINFER_OK) return BAD("'%s': %s", field_name, clinfer_last_error());
    char *copy = dup_string(gbnf); /* the request's strings are all freed with free */
    clinfer_free(gbnf);
    return copy ? set_grammar(req, copy, field_name, err) : NO_MEMORY();
}

/* OpenAI's {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema",
 * "strict"}}; llama-server's "schema" beside "type" too. strict false constrains all the same. */
static int parse_response_format(const cJSON *rf, serve_request *req, serve_error *err) {
    if (!cJSON_IsObject(rf)) return BAD("'response_format' must be an object");
    if (serve_only_members(rf, " type json_schema schema ", "response_format.", err)) return -1;
    const cJSON *type = field(rf, "type"), *schema = field(rf, "schema");
    if (!cJSON_IsString(type))
        return BAD("'response_format.type' must be \"text\", \"json_object\" or "
                   "\"json_schema\"");
    if (!strcmp(type->valuestring, "text")) return 0;
    if (!strcmp(type->valuestring, "json_object"))
        return schema_grammar(schema, schema ? "response_format.schema" : "response_format", req,
                              err);
    if (strcmp(type->valuestring, "json_schema"))
        return BAD("'response_format.type' \"%.64s\" is not \"text\", \"json_object\" or "
                   "\"json_schema\"",
                   type->valuestring);
    const cJSON *js = field(rf, "json_schema");
    if (!js) {
        if (!schema) return BAD("'response_format' of type json_schema needs 'json_schema'");
        return schema_grammar(schema, "response_format.schema", req, err);
    }
    if (!cJSON_IsObject(js))
        return BAD("'response_format.json_schema' must be an object (name, schema, strict)");
    if (serve_only_members(js, " name schema strict ", "response_format.json_schema.", err))
        return -1;
    const cJSON *name = field(js, "name");
    if (name && !cJSON_IsString(name))
        return BAD("'response_format.json_schema.name' must be a string");
    const cJSON *strict = field(js, "strict");
    if (strict && !cJSON_IsBool(strict))
        return BAD("'response_format.json_schema.strict' must be true or false");
    return schema_grammar(field(js, "schema"), "response_format.json_schema.schema", req, err);
}

static int parse_constraint(const cJSON *root, serve_request *req, serve_error *err) {
    const cJSON *g = field(root, "grammar");
    if (g && !cJSON_IsString(g)) return BAD("'grammar' must be a string (GBNF)");
    if (g && g->valuestring[0]) { /* "" is llama-server's "no grammar" */
        char *gbnf = dup_string(g->valuestring);
        if (!gbnf) return NO_MEMORY();
        if (set_grammar(req, gbnf, "grammar", err)) return -1;
    }
    const cJSON *js = field(root, "json_schema");
    if (js && schema_grammar(js, "json_schema", req, err)) return -1;
    const cJSON *rf = field(root, "response_format");
    return rf ? parse_response_format(rf, req, err) : 0;
}

static int parse_sampling(const cJSON *root, serve_request *req, serve_error *err) {
    clinfer_sampler_params *p = &req->sampling;
    double v;
    int r;
    if ((r = number(root, "temperature", 0, 100, false, &v, err)) < 0) return -1;
    if (r) p->temperature = (float)v;
    if ((r = number(root, "top_p", 1e-6, 1, false, &v, err)) < 0) return -1;
    if (r) p->top_p = (float)v;
    if ((r = number(root, "top_k", 0, INT32_MAX, true, &v, err)) < 0) return -1;
    if (r) p->top_k = (int32_t)v;
    if ((r = number(root, "min_p", 0, 1, false, &v, err)) < 0) return -1;
    if (r) p->min_p = (float)v;
    if ((r = number(root, "presence_penalty", -2, 2, false, &v, err)) < 0) return -1;
    if (r) p->presence_penalty = (float)v;
    if ((r = number(root, "frequency_penalty", -2, 2, false, &v, err)) < 0) return -1;
    if (r) p->frequency_penalty = (float)v;
    if ((r = number(root, "repeat_penalty", 1e-3, 100, false, &v, err)) < 0) return -1;
    if (r) p->repeat_penalty = (float)v;
    /* any whole number a double holds exactly; negative seeds wrap, as C's conversion does */
    if ((r = number(root, "seed", -9007199254740992.0, 9007199254740992.0, true, &v, err)) < 0)
        return -1;
    if (r) p->seed = (uint64_t)(int64_t)v;
    req->seed_given = r;
    /* max_completion_tokens is the newer name; -1 is llama.cpp's "no limit" */
    const char *mt = field(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((r = number(root, mt, -1, INT32_MAX, true, &v, err)) < 0) return -1;
    if (r) req->max_tokens = (int32_t)v;
    return 0;
}

int serve_request_parse(const char *body, size_t len, serve_kind kind, serve_request *req,
                        serve_error *err) {
    *req = (serve_request){.kind = kind, .max_tokens = -1, .logprobs = -1, .n = 1};
    clinfer_sampler_params_default(&req->sampling);
    cJSON *root = serve_parse_strict(body, len, err);
    int rc = -1;
    if (!root) goto done;
    if (!cJSON_IsObject(root)) {
        BAD("the body must be a JSON object");
        goto done;
    }
    const cJSON *model = field(root, "model");
    if (model && !cJSON_IsString(model)) {
        BAD("'model' must be a string");
        goto done;
    }
    if (unsupported(root, req, err) || parse_logprobs(root, req, err) ||
        parse_sampling(root, req, err) || parse_stop(root, req, err) ||
        parse_constraint(root, req, err) || serve_tools_parse(root, req, err) ||
        boolean(root, "stream", &req->stream, err) < 0)
        goto done;
    const cJSON *so = field(root, "stream_options");
    if (so && !cJSON_IsObject(so)) {
        BAD("'stream_options' must be an object");
        goto done;
    }
    if (so &&
        (serve_only_members(so, " include_usage include_obfuscation ", "stream_options.", err) ||
         boolean(so, "include_usage", &req->include_usage, err) < 0))
        goto done;
    /* obfuscation pads events against length side channels: not done here */
    if (so && field(so, "include_obfuscation") &&
        !cJSON_IsFalse(field(so, "include_obfuscation"))) {
        BAD("'stream_options.include_obfuscation' is not supported by this server (only false)");
        goto done;
    }
    if (kind == SERVE_CHAT ? parse_messages(root, req, err) : parse_prompt(root, req, err))
        goto done;
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) serve_request_free(req);
    return rc;
}

void serve_request_free(serve_request *req) {
    serve_tools_free(req);
    for (size_t i = 0; i < req->n_messages; i++) {
        free((char *)req->messages[i].role);
        free((char *)req->messages[i].content);
    }
    free(req->messages);
    free(req->prompt);
    for (size_t i = 0; i < req->n_stop; i++)
        free(req->stop[i]);
    free(req->grammar);
    *req = (serve_request){0};
}

/* Token ids: a non-empty array of whole numbers in [0, INT32_MAX]. */
static int token_array(const cJSON *a, size_t i, serve_input *in, serve_error *err) {
    int n = cJSON_GetArraySize(a);
    if (n == 0) return BAD("input[%zu] is empty", i);
    if (!(in->tokens = malloc((size_t)n * sizeof *in->tokens))) return NO_MEMORY();
    const cJSON *t;
    cJSON_ArrayForEach(t, a) {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(v >= 0 && v <= INT32_MAX && v == floor(v)))
            return BAD("input[%zu][%zu] must be a token id (a whole number >= 0)", i, in->n_tokens);
        in->tokens[in->n_tokens++] = (int32_t)v;
    }
    return 0;
}

static int one_input(const cJSON *v, size_t i, serve_input *in, serve_error *err) {
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return BAD("input[%zu] is an empty string", i);
        return (in->text = dup_string(v->valuestring)) ? 0 : NO_MEMORY();
    }
    if (cJSON_IsArray(v)) return token_array(v, i, in, err);
    return BAD("input[%zu] must be a string or an array of token ids", i);
}

static int parse_inputs(const cJSON *root, serve_embed_request *req, serve_error *err) {
    const cJSON *in = field(root, "input");
    if (!in) return BAD("'input' is required");
    /* one input: a string, or an array of numbers (token ids); else an array of inputs */
    bool single = cJSON_IsString(in) || (cJSON_IsArray(in) && cJSON_IsNumber(in->child));
    if (!single && !cJSON_IsArray(in))
        return BAD("'input' must be a string, an array of strings, an array of token ids or an "
                   "array of such arrays");
    int n = single ? 1 : cJSON_GetArraySize(in);
    if (n == 0) return BAD("'input' is empty");
    if (n > SERVE_MAX_INPUTS) return BAD("'input' has %d entries; at most %d", n, SERVE_MAX_INPUTS);
    if (!(req->inputs = calloc((size_t)n, sizeof *req->inputs))) return NO_MEMORY();
    const cJSON *v = single ? in : in->child;
    for (size_t i = 0; i < (size_t)n; i++, v = v->next) {
        req->n_inputs = i + 1; /* freed from here on, whatever happens */
        if (one_input(v, i, &req->inputs[i], err)) return -1;
    }
    return 0;
}

int serve_embed_request_parse(const char *body, size_t len, serve_embed_request *req,
                              serve_error *err) {
    *req = (serve_embed_request){0};
    cJSON *root = serve_parse_strict(body, len, err);
    int rc = -1;
    double dims = 0;
    const cJSON *model = root ? field(root, "model") : NULL, *format = NULL;
    if (!root)
        rc = -1; /* *err is set */
    else if (!cJSON_IsObject(root))
        BAD("the body must be a JSON object");
    else if (model && !cJSON_IsString(model))
        BAD("'model' must be a string");
    else if (serve_only_members(root, " model input encoding_format dimensions user ", "", err))
        rc = -1; /* *err is set */
    else if (field(root, "user") && !cJSON_IsString(field(root, "user")))
        BAD("'user' must be a string");
    else if ((format = field(root, "encoding_format")) &&
             !(cJSON_IsString(format) &&
               (!strcmp(format->valuestring, "float") || !strcmp(format->valuestring, "base64"))))
        BAD("'encoding_format' must be \"float\" or \"base64\"");
    else if (number(root, "dimensions", 1, INT32_MAX, true, &dims, err) >= 0 &&
             !parse_inputs(root, req, err))
        rc = 0;
    if (rc == 0) {
        req->base64 = format && !strcmp(format->valuestring, "base64");
        req->dimensions = (int32_t)dims;
    }
    cJSON_Delete(root);
    if (rc) serve_embed_request_free(req);
    return rc;
}

void serve_embed_request_free(serve_embed_request *req) {
    for (size_t i = 0; req->inputs && i < req->n_inputs; i++) {
        free(req->inputs[i].text);
        free(req->inputs[i].tokens);
    }
    free(req->inputs);
    *req = (serve_embed_request){0};
}
