/* clinfer serve: the bodies of llama-server's POST /tokenize and /detokenize (serve_request.h).
 * Strict JSON; a member neither of them reads gets 400 naming it. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

#define BAD(...) serve_error_set(err, 400, "invalid_request_error", __VA_ARGS__)

/* The object body, each of its members one of names (between spaces); NULL with *err set. */
static cJSON *object_of(const char *body, size_t len, const char *names, serve_error *err) {
    cJSON *root = serve_parse_strict(body, len, err);
    if (!root) return NULL;
    if (!cJSON_IsObject(root)) {
        BAD("the body must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    for (const cJSON *v = root->child; v; v = v->next) {
        char key[72];
        if (snprintf(key, sizeof key, " %s ", v->string) >= (int)sizeof key ||
            strchr(v->string, ' ') || !strstr(names, key)) {
            BAD("'%.64s' is not a member of this endpoint's body", v->string);
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}

static int flag(const cJSON *root, const char *name, bool *out, serve_error *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) return 0;
    if (!cJSON_IsBool(f)) return BAD("'%s' must be true or false", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

int serve_tokenize_request_parse(const char *body, size_t len, serve_tokenize_request *req,
                                 serve_error *err) {
    *req = (serve_tokenize_request){.parse_special = true};
    cJSON *root = object_of(body, len, " content add_special parse_special with_pieces ", err);
    if (!root) return -1;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
    int rc = -1;
    if (!cJSON_IsString(c))
        BAD("'content' must be a string");
    else if (!flag(root, "add_special", &req->add_special, err) &&
             !flag(root, "parse_special", &req->parse_special, err) &&
             !flag(root, "with_pieces", &req->with_pieces, err)) {
        req->content = malloc(strlen(c->valuestring) + 1);
        if (req->content) strcpy(req->content, c->valuestring);
        rc = req->content ? 0 : serve_error_set(err, 500, "server_error", "out of memory");
    }
    cJSON_Delete(root);
    return rc;
}

int serve_detokenize_request_parse(const char *body, size_t len, serve_detokenize_request *req,
                                   serve_error *err) {
    *req = (serve_detokenize_request){0};
    cJSON *root = object_of(body, len, " tokens ", err);
    if (!root) return -1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    int n = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : -1, rc = 0;
    if (n < 0) rc = BAD("'tokens' must be an array of token ids");
    if (n > 0 && !(req->tokens = malloc((size_t)n * sizeof *req->tokens)))
        rc = serve_error_set(err, 500, "server_error", "out of memory");
    for (const cJSON *v = n > 0 ? t->child : NULL; !rc && v; v = v->next) {
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(d >= 0 && d <= INT32_MAX && d == floor(d)))
            rc = BAD("'tokens[%zu]' must be a token id (a whole number >= 0)", req->n_tokens);
        else
            req->tokens[req->n_tokens++] = (int32_t)d;
    }
    if (rc) {
        free(req->tokens);
        *req = (serve_detokenize_request){0};
    }
    cJSON_Delete(root);
    return rc;
}
