/* clinfer serve: llama-server's POST /tokenize and /detokenize, and GET /props (the server's
 * settings: the slots, the context, the sampling defaults, the model and its chat format). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_http.h"

/* The bytes of token (malloc'ed, *len of them); NULL when it has none or out of memory. */
static char *piece(const clinfer_model *m, int32_t token, size_t *len) {
    size_t need = 0;
    char small[64];
    clinfer_status st = clinfer_token_to_piece(m, token, small, sizeof small, &need);
    char *p = st == CLINFER_OK || st == CLINFER_ERR_BUFFER_TOO_SMALL ? malloc(need + 1) : NULL;
    if (p && st == CLINFER_OK) memcpy(p, small, need);
    if (p && st != CLINFER_OK &&
        clinfer_token_to_piece(m, token, p, need + 1, &need) != CLINFER_OK) {
        free(p);
        p = NULL;
    }
    if (p) p[need] = '\0';
    *len = p ? need : 0;
    return p;
}

/* A piece as llama-server writes it: a string when it is valid UTF-8, else its bytes. */
static cJSON *piece_json(const char *p, size_t len) {
    cJSON *s = serve_json_text(p, len);
    if (!s || (strlen(s->valuestring) == len && !memcmp(s->valuestring, p, len))) return s;
    cJSON_Delete(s);
    cJSON *bytes = cJSON_CreateArray();
    for (size_t i = 0; i < len; i++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)p[i]));
    return bytes;
}

/* A float setting as it was written (0.8, not 0.800000011920929). */
static void add_setting(cJSON *o, const char *name, float v) {
    char text[32];
    snprintf(text, sizeof text, "%.7g", v);
    cJSON_AddNumberToObject(o, name, strtod(text, NULL));
}

static char *print_and_free(cJSON *root) {
    char *out = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* {"tokens": [ids]} (with_pieces: [{"id", "piece"}]). 0, or -1 with *e set. */
static int tokenize_body(serve_server *s, const serve_tokenize_request *q, char **out,
                         serve_error *e) {
    size_t len = strlen(q->content), need = len + 2;
    bool bos = q->add_special && clinfer_token_add_bos(s->model);
    int32_t *ids = NULL;
    clinfer_status st = CLINFER_ERR_BUFFER_TOO_SMALL;
    for (int attempt = 0; attempt < 2 && st == CLINFER_ERR_BUFFER_TOO_SMALL; attempt++) {
        free(ids);
        if (!(ids = malloc(need * sizeof *ids))) break;
        st = clinfer_tokenize(s->model, q->content, len, bos, q->parse_special, ids, need, &need);
    }
    if (st != CLINFER_OK) {
        free(ids);
        return serve_error_set(e, 500, "server_error", "tokenizing failed: %s",
                               ids ? clinfer_last_error() : "out of memory");
    }
    cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "tokens");
    for (size_t i = 0; i < need; i++) {
        if (!q->with_pieces) {
            cJSON_AddItemToArray(list, cJSON_CreateNumber(ids[i]));
            continue;
        }
        size_t n;
        char *p = piece(s->model, ids[i], &n);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", ids[i]);
        cJSON_AddItemToObject(o, "piece", piece_json(p ? p : "", n));
        free(p);
        cJSON_AddItemToArray(list, o);
    }
    free(ids);
    return (*out = print_and_free(root)) ? 0
                                         : serve_error_set(e, 500, "server_error", "out of memory");
}

/* {"content": text}: the tokens' pieces one after another. 0, or -1 with *e set. */
static int detokenize_body(serve_server *s, const serve_detokenize_request *q, char **out,
                           serve_error *e) {
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    char *text = NULL;
    size_t len = 0;
    for (size_t i = 0; i < q->n_tokens; i++) {
        if ((uint32_t)q->tokens[i] >= info.n_vocab) {
            free(text);
            return serve_error_set(e, 400, "invalid_request_error",
                                   "'tokens[%zu]' is %d, outside the vocabulary of %u", i,
                                   q->tokens[i], info.n_vocab);
        }
        size_t n;
        char *p = piece(s->model, q->tokens[i], &n);
        char *grown = realloc(text, len + n + 1);
        if (grown) {
            memcpy(grown + len, p ? p : "", n);
            len += n;
            text = grown;
        }
        free(p);
        if (!grown) {
            free(text);
            return serve_error_set(e, 500, "server_error", "out of memory");
        }
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "content", serve_json_text(text ? text : "", len));
    free(text);
    return (*out = print_and_free(root)) ? 0
                                         : serve_error_set(e, 500, "server_error", "out of memory");
}

enum MHD_Result serve_answer_tokenize(request *r, struct MHD_Connection *c, bool detokenize) {
    serve_error e;
    char *body = NULL;
    const char *in = r->body ? r->body : "";
    int rc;
    if (detokenize) {
        serve_detokenize_request q;
        rc = serve_detokenize_request_parse(in, r->len, &q, &e);
        if (!rc) rc = detokenize_body(r->s, &q, &body, &e);
        free(q.tokens);
    } else {
        serve_tokenize_request q;
        rc = serve_tokenize_request_parse(in, r->len, &q, &e);
        if (!rc) rc = tokenize_body(r->s, &q, &body, &e);
        free(q.content);
    }
    return rc ? serve_send_error(r, c, &e) : serve_send_owned(r, c, 200, body, "application/json");
}

/* A special token's text, or "" when the model has none. */
static void add_token_text(cJSON *o, const char *name, const clinfer_model *m, int32_t token) {
    size_t n = 0;
    char *p = token >= 0 ? piece(m, token, &n) : NULL;
    cJSON_AddItemToObject(o, name, serve_json_text(p ? p : "", n));
    free(p);
}

enum MHD_Result serve_answer_props(request *r, struct MHD_Connection *c) {
    serve_server *s = r->s;
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    clinfer_sampler_params sp;
    clinfer_sampler_params_default(&sp);
    cJSON *root = cJSON_CreateObject();
    cJSON *dg = cJSON_AddObjectToObject(root, "default_generation_settings");
    cJSON_AddNumberToObject(dg, "n_ctx", serve_pool_n_ctx(s->pool));
    cJSON *p = cJSON_AddObjectToObject(dg, "params");
    add_setting(p, "temperature", sp.temperature);
    cJSON_AddNumberToObject(p, "top_k", sp.top_k);
    add_setting(p, "top_p", sp.top_p);
    add_setting(p, "min_p", sp.min_p);
    add_setting(p, "repeat_penalty", sp.repeat_penalty);
    cJSON_AddNumberToObject(p, "repeat_last_n", sp.repeat_last_n);
    add_setting(p, "presence_penalty", sp.presence_penalty);
    add_setting(p, "frequency_penalty", sp.frequency_penalty);
    cJSON_AddNumberToObject(p, "n_predict", -1);
    cJSON_AddNumberToObject(root, "total_slots", (double)s->n_slots);
    cJSON_AddNumberToObject(root, "n_batch", serve_pool_n_batch(s->pool));
    cJSON_AddStringToObject(root, "model_path", s->model_path ? s->model_path : "");
    cJSON_AddStringToObject(root, "model_alias", s->model_id);
    cJSON_AddStringToObject(root, "chat_template",
                            s->chat_template && *s->chat_template ? s->chat_template
                                                                  : info.chat_format);
    add_token_text(root, "bos_token", s->model, clinfer_token_bos(s->model));
    add_token_text(root, "eos_token", s->model, clinfer_token_eos(s->model));
    cJSON_AddNumberToObject(root, "n_vocab", info.n_vocab);
    cJSON *mod = cJSON_AddObjectToObject(root, "modalities");
    cJSON_AddFalseToObject(mod, "vision");
    cJSON_AddFalseToObject(mod, "audio");
    char build[64];
    snprintf(build, sizeof build, "clinfer %s", clinfer_version());
    cJSON_AddStringToObject(root, "build_info", build);
    return serve_send_owned(r, c, 200, print_and_free(root), "application/json");
}
