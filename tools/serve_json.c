/* clinfer serve: the JSON bodies of responses, in the shapes of OpenAI's API. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* Generated text as a JSON string: bytes that are not valid UTF-8 (a model can emit any byte)
 * and NULs (which end C strings) become U+FFFD, so every client can decode the body. */
cJSON *serve_json_text(const char *text, size_t len) {
    char *s = malloc(3 * len + 1), *o = s;
    if (!s) return NULL;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = n > 0 && c != 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++)
            ok = (u[i + k] & 0xC0) == 0x80;
        if (ok && n > 1) { /* overlong forms, surrogates and values past U+10FFFF */
            uint32_t cp = c & (0x7F >> n);
            for (size_t k = 1; k < n; k++)
                cp = cp << 6 | (u[i + k] & 0x3F);
            static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= min[n] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (ok) {
            memcpy(o, u + i, n);
            o += n;
            i += n;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = '\0';
    cJSON *j = cJSON_CreateString(s);
    free(s);
    return j;
}

static char *print_and_free(cJSON *root) {
    char *out = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

char *serve_json_error(const serve_error *e) {
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type);
    cJSON_AddNumberToObject(err, "code", e->status);
    return print_and_free(root);
}

char *serve_json_error_ollama(const serve_error *e) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "error", e->message);
    return print_and_free(root);
}

char *serve_json_models(const serve_server *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->start_time);
    cJSON_AddStringToObject(m, "owned_by", "clinfer");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    return print_and_free(root);
}

static const char *finish_name(serve_finish f) {
    return f == SERVE_FINISH_STOP         ? "stop"
           : f == SERVE_FINISH_LENGTH     ? "length"
           : f == SERVE_FINISH_TOOL_CALLS ? "tool_calls"
                                          : NULL;
}

static cJSON *envelope(const serve_server *s, const char *object, const char *id, long created) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)created);
    cJSON_AddStringToObject(root, "model", s->model_id);
    return root;
}

static void add_usage(cJSON *root, size_t n_prompt, size_t n_generated) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(n_prompt + n_generated));
}

static void add_finish(cJSON *choice, serve_finish finish) {
    const char *name = finish_name(finish);
    if (name)
        cJSON_AddStringToObject(choice, "finish_reason", name);
    else
        cJSON_AddNullToObject(choice, "finish_reason");
}

/* One choice: the text as the message of a whole chat answer, the delta of a chat chunk (role
 * on a choice's first chunk) or a completion's text; its log-probabilities and tool calls. */
static cJSON *choice_json(serve_kind kind, bool chunk, const serve_choice_out *c) {
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", (double)c->index);
    if (kind == SERVE_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(choice, chunk ? "delta" : "message");
        if (c->role) cJSON_AddStringToObject(m, "role", c->role);
        if (c->tool_calls && !c->len && !chunk)
            cJSON_AddNullToObject(m, "content");
        else if (c->len || (c->role && !c->tool_calls))
            cJSON_AddItemToObject(m, "content", serve_json_text(c->text, c->len));
        if (c->tool_calls) cJSON_AddItemToObject(m, "tool_calls", c->tool_calls);
    } else {
        cJSON_AddItemToObject(choice, "text", serve_json_text(c->text, c->len));
    }
    if (c->logprobs)
        cJSON_AddItemToObject(choice, "logprobs", c->logprobs);
    else
        cJSON_AddNullToObject(choice, "logprobs");
    add_finish(choice, c->finish);
    return choice;
}

static const char *object_name(serve_kind kind, bool chunk) {
    return kind != SERVE_CHAT ? "text_completion"
           : chunk            ? "chat.completion.chunk"
                              : "chat.completion";
}

char *serve_json_completion(const serve_server *s, serve_kind kind, const char *id, long created,
                            const serve_choice_out *c, size_t n, size_t n_prompt,
                            size_t n_generated) {
    cJSON *root = envelope(s, object_name(kind, false), id, created);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(choices, choice_json(kind, false, &c[i]));
    add_usage(root, n_prompt, n_generated);
    return print_and_free(root);
}

char *serve_json_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                       const serve_choice_out *c) {
    cJSON *root = envelope(s, object_name(kind, true), id, created);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice_json(kind, true, c));
    return print_and_free(root);
}

char *serve_json_usage_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                             size_t n_prompt, size_t n_generated) {
    cJSON *root =
        envelope(s, kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion", id, created);
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, n_prompt, n_generated);
    return print_and_free(root);
}

/* The vector's little-endian f32 bytes in base64, as OpenAI's encoding_format "base64". */
static cJSON *base64_floats(const float *v, size_t d) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 4 * d;
    unsigned char *b = malloc(n);
    char *s = malloc(4 * ((n + 2) / 3) + 1), *o = s;
    if (!b || !s) {
        free(b);
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < d; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        *o++ = digits[w >> 18];
        *o++ = digits[(w >> 12) & 63];
        *o++ = i + 1 < n ? digits[(w >> 6) & 63] : '=';
        *o++ = i + 2 < n ? digits[w & 63] : '=';
    }
    *o = '\0';
    cJSON *j = cJSON_CreateString(s);
    free(b);
    free(s);
    return j;
}

char *serve_json_embeddings(const serve_server *s, const float *v, size_t n, size_t d, bool base64,
                            size_t n_prompt) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(data, e);
        cJSON_AddStringToObject(e, "object", "embedding");
        cJSON_AddNumberToObject(e, "index", (double)i);
        cJSON *vec = base64 ? base64_floats(v + i * d, d) : cJSON_CreateArray();
        for (size_t j = 0; !base64 && vec && j < d; j++)
            cJSON_AddItemToArray(vec, cJSON_CreateNumber(v[i * d + j]));
        if (!vec || !cJSON_AddItemToObject(e, "embedding", vec)) {
            cJSON_Delete(vec);
            cJSON_Delete(root);
            return NULL;
        }
    }
    cJSON_AddStringToObject(root, "model", s->model_id);
    cJSON *usage = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(usage, "total_tokens", (double)n_prompt);
    return print_and_free(root);
}
