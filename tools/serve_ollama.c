/* clinfer serve: ollama's answers. The bodies of /api/chat and /api/generate (serve_generate.c
 * runs them), and the endpoints that do not generate: /api/tags and /api/show (the loaded
 * model, and the ones `clinfer pull` stored), /api/embed and /api/embeddings (through
 * serve_embeddings), /api/version, and "Ollama is running" at / as ollama answers there. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_common.h"
#include "model_registry.h"
#include "serve_http.h"
#include "serve_ollama.h"

static char *print_and_free(cJSON *root) {
    char *out = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return out;
}

/* t (seconds and nanoseconds) in RFC 3339, UTC, as ollama writes its times. */
static void rfc3339(time_t sec, long nsec, char *out, size_t size) {
    struct tm tm;
    gmtime_r(&sec, &tm);
    size_t n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, size - n, ".%09ldZ", nsec);
}

static bool add_time(cJSON *o, const char *name, time_t sec, long nsec) {
    char t[48];
    rfc3339(sec, nsec, t, sizeof t);
    return cJSON_AddStringToObject(o, name, t) != NULL;
}

static bool add_now(cJSON *o) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return add_time(o, "created_at", ts.tv_sec, ts.tv_nsec);
}

/* OpenAI's tool_calls as ollama's: {"function": {"index", "name", "arguments": {...}}}, the
 * arguments as the object their JSON text holds. */
static void add_tool_calls(cJSON *message, const cJSON *openai) {
    cJSON *list = cJSON_AddArrayToObject(message, "tool_calls");
    const cJSON *c;
    double index = 0;
    cJSON_ArrayForEach(c, openai) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        cJSON *one = cJSON_CreateObject(), *fn = cJSON_AddObjectToObject(one, "function");
        cJSON *value = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
        cJSON_AddNumberToObject(fn, "index", index++);
        cJSON_AddStringToObject(fn, "name", cJSON_IsString(name) ? name->valuestring : "");
        cJSON_AddItemToObject(fn, "arguments", value ? value : cJSON_CreateObject());
        cJSON_AddItemToArray(list, one);
    }
}

char *serve_ollama_json(const serve_server *s, const serve_ollama_out *o) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", s->model_id);
    add_now(root);
    cJSON *text = serve_json_text(o->text ? o->text : "", o->len);
    if (o->generate) {
        cJSON_AddItemToObject(root, "response", text);
    } else {
        cJSON *m = cJSON_AddObjectToObject(root, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddItemToObject(m, "content", text);
        if (o->tool_calls) add_tool_calls(m, o->tool_calls);
    }
    cJSON_AddBoolToObject(root, "done", o->done);
    if (!o->done) return print_and_free(root);
    cJSON_AddStringToObject(root, "done_reason", o->done_reason);
    if (!o->stats) return print_and_free(root);
    /* durations in nanoseconds; the model stays loaded, so loading takes none */
    cJSON_AddNumberToObject(root, "total_duration",
                            (double)(long long)((cli_now_ms() - o->start_ms) * 1e6));
    cJSON_AddNumberToObject(root, "load_duration", 0);
    cJSON_AddNumberToObject(root, "prompt_eval_count", (double)o->stats->n_prompt);
    cJSON_AddNumberToObject(root, "prompt_eval_duration",
                            (double)(long long)(o->stats->prefill_ms * 1e6));
    cJSON_AddNumberToObject(root, "eval_count", (double)o->stats->n_generated);
    cJSON_AddNumberToObject(root, "eval_duration", (double)(long long)(o->stats->decode_ms * 1e6));
    return print_and_free(root);
}

/* ---- the model ----------------------------------------------------------------------------- */

/* The tensor type that holds most of the weights' bytes, as the quantization level. */
static const char *main_type(const clinfer_model_info *info) {
    const char *t = "unknown";
    uint64_t most = 0;
    for (uint32_t i = 0; i < info->n_tensor_types; i++)
        if (info->tensor_types[i].bytes > most) {
            most = info->tensor_types[i].bytes;
            t = info->tensor_types[i].type;
        }
    return t;
}

/* name, model, modified_at, size, digest and details of the model file at path; info: its
 * header's facts (NULL: not read, the details left empty). */
static cJSON *model_entry(const char *name, const char *path, uint64_t size, time_t mtime,
                          const clinfer_model_info *info) {
    cJSON *m = cJSON_CreateObject(), *d;
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "model", name);
    add_time(m, "modified_at", mtime, 0);
    cJSON_AddNumberToObject(m, "size", (double)size);
    /* not a hash of the file (seconds to read a large one): FNV-1a of path, size and mtime */
    uint64_t h = 0xcbf29ce484222325ull;
    char key[PATH_MAX + 64], digest[17];
    snprintf(key, sizeof key, "%s|%llu|%lld", path, (unsigned long long)size, (long long)mtime);
    for (const char *k = key; *k; k++)
        h = (h ^ (unsigned char)*k) * 0x100000001b3ull;
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)h);
    cJSON_AddStringToObject(m, "digest", digest);
    cJSON_AddItemToObject(m, "details", d = cJSON_CreateObject());
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "gguf");
    const char *family = info ? info->architecture : "";
    cJSON_AddStringToObject(d, "family", family);
    cJSON_AddItemToObject(d, "families",
                          info ? cJSON_CreateStringArray((const char *[]){family}, 1)
                               : cJSON_CreateArray());
    char params[32] = "";
    double p = info ? (double)info->n_params : 0;
    if (info)
        snprintf(params, sizeof params, p >= 1e9 ? "%.1fB" : "%.2fM", p >= 1e9 ? p / 1e9 : p / 1e6);
    cJSON_AddStringToObject(d, "parameter_size", params);
    cJSON_AddStringToObject(d, "quantization_level", info ? main_type(info) : "");
    return m;
}

static cJSON *loaded_entry(const serve_server *s, const clinfer_model_info *info) {
    struct stat st = {0};
    const char *path = s->model_path ? s->model_path : "";
    if (stat(path, &st)) st.st_mtime = s->start_time;
    return model_entry(s->model_id, path, info->file_bytes, st.st_mtime, info);
}

static int gguf_only(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return e->d_name[0] != '.' && n > 5 && !strcmp(e->d_name + n - 5, ".gguf");
}

/* The models `clinfer pull` stored (its folder's .gguf files) other than the loaded one, each
 * passed to fn, or the one named only (not NULL); whether one was. Their headers are not read:
 * that would take a vocabulary's load each. */
static bool each_pulled(const serve_server *s, const char *only,
                        void (*fn)(cJSON *to, const char *name, const char *path,
                                   const struct stat *st),
                        cJSON *to) {
    char dir[PATH_MAX], loaded[PATH_MAX], real[PATH_MAX];
    bool have_loaded = s->model_path && realpath(s->model_path, loaded), any = false;
    struct dirent **files = NULL;
    int n = cli_models_dir(dir, sizeof dir) ? scandir(dir, &files, gguf_only, alphasort) : -1;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]->d_name);
        bool take = (!only || !strcmp(only, files[i]->d_name)) && !stat(path, &st) &&
                    S_ISREG(st.st_mode) &&
                    !(have_loaded && realpath(path, real) && !strcmp(real, loaded));
        if (take) fn(to, files[i]->d_name, path, &st);
        any = any || take;
        free(files[i]);
    }
    free(files);
    return any;
}

static void add_pulled(cJSON *list, const char *name, const char *path, const struct stat *st) {
    cJSON_AddItemToArray(list, model_entry(name, path, (uint64_t)st->st_size, st->st_mtime, NULL));
}

static char *tags(const serve_server *s) {
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "models");
    cJSON_AddItemToArray(list, loaded_entry(s, &info));
    each_pulled(s, NULL, add_pulled, list);
    return print_and_free(root);
}

/* /api/show's answer for a pulled model that is not loaded: its entry, nothing from its header. */
static void show_pulled(cJSON *root, const char *name, const char *path, const struct stat *st) {
    cJSON *m = model_entry(name, path, (uint64_t)st->st_size, st->st_mtime, NULL), *v;
    while ((v = m->child)) /* its members into root */
        cJSON_AddItemToObject(root, v->string, cJSON_DetachItemViaPointer(m, v));
    cJSON_Delete(m);
    cJSON_AddStringToObject(root, "modelfile", "");
    cJSON_AddStringToObject(root, "parameters", "");
    cJSON_AddStringToObject(root, "template", "");
    cJSON_AddObjectToObject(root, "model_info");
    const char *caps[] = {"completion", "embedding", "tools"};
    cJSON_AddItemToObject(root, "capabilities", cJSON_CreateStringArray(caps, 3));
}

/* POST /api/show: {"model" (or the older "name"), "verbose"}: a pulled model's file by its name,
 * else (any other name) the loaded model. */
static char *show(const serve_server *s, const char *body, size_t len, serve_error *e) {
    cJSON *req = serve_parse_strict(body, len, e);
    if (!req) return NULL;
    const char *bad = NULL;
    for (const cJSON *v = cJSON_IsObject(req) ? req->child : NULL; v && !bad; v = v->next)
        if (strcmp(v->string, "model") && strcmp(v->string, "name") && strcmp(v->string, "verbose"))
            bad = v->string;
    cJSON *verbose = cJSON_GetObjectItemCaseSensitive(req, "verbose");
    int rc = 0;
    if (!cJSON_IsObject(req))
        rc = serve_error_set(e, 400, "invalid_request_error", "the body must be a JSON object");
    else if (bad)
        rc = serve_error_set(e, 400, "invalid_request_error",
                             "'%s' is not supported by this server", bad);
    else if (verbose && !cJSON_IsBool(verbose) && !cJSON_IsNull(verbose))
        rc = serve_error_set(e, 400, "invalid_request_error", "'verbose' must be true or false");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(req, "model");
    if (!rc && !name) name = cJSON_GetObjectItemCaseSensitive(req, "name");
    if (!rc && name && !cJSON_IsString(name))
        rc =
            serve_error_set(e, 400, "invalid_request_error", "'%s' must be a string", name->string);
    cJSON *root = rc || !cJSON_IsString(name) ? NULL : cJSON_CreateObject();
    if (root && each_pulled(s, name->valuestring, show_pulled, root)) {
        cJSON_Delete(req);
        return print_and_free(root);
    }
    cJSON_Delete(root);
    cJSON_Delete(req);
    if (rc) return NULL;
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    cJSON *mi;
    root = loaded_entry(s, &info);
    cJSON_AddStringToObject(root, "modelfile", "");
    cJSON_AddStringToObject(root, "parameters", "");
    cJSON_AddStringToObject(root, "template",
                            s->chat_template ? s->chat_template : info.chat_format);
    cJSON_AddItemToObject(root, "model_info", mi = cJSON_CreateObject());
    char key[96];
    cJSON_AddStringToObject(mi, "general.architecture", info.architecture);
    cJSON_AddNumberToObject(mi, "general.parameter_count", (double)info.n_params);
    const struct {
        const char *name;
        uint32_t v;
    } dims[] = {{"context_length", info.n_ctx_train},  {"embedding_length", info.n_embd},
                {"block_count", info.n_layer},         {"feed_forward_length", info.n_ff},
                {"attention.head_count", info.n_head}, {"attention.head_count_kv", info.n_head_kv}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", info.architecture, dims[i].name);
        cJSON_AddNumberToObject(mi, key, dims[i].v);
    }
    const char *caps[] = {"completion", "embedding", "tools"};
    cJSON_AddItemToObject(root, "capabilities", cJSON_CreateStringArray(caps, 3));
    return print_and_free(root);
}

/* ---- embeddings ---------------------------------------------------------------------------- */

/* OpenAI's embeddings list (serve_embeddings') as ollama's: {"embeddings": [[...]]} with the
 * counts, or the legacy {"embedding": [...]} of one prompt. */
static char *embed_answer(const serve_server *s, const char *openai, bool legacy, double start) {
    cJSON *in = cJSON_Parse(openai), *out = cJSON_CreateObject(), *list = NULL;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(in, "data"), *d;
    if (!in || !out) goto fail;
    if (!legacy) {
        cJSON_AddStringToObject(out, "model", s->model_id);
        list = cJSON_AddArrayToObject(out, "embeddings");
    }
    cJSON_ArrayForEach(d, data) {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)d, "embedding");
        if (!v) goto fail;
        if (legacy) {
            cJSON_AddItemToObject(out, "embedding", v);
            break;
        }
        cJSON_AddItemToArray(list, v);
    }
    if (!legacy) {
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(in, "usage");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
        cJSON_AddNumberToObject(out, "total_duration",
                                (double)(long long)((cli_now_ms() - start) * 1e6));
        cJSON_AddNumberToObject(out, "load_duration", 0);
        cJSON_AddNumberToObject(out, "prompt_eval_count", cJSON_IsNumber(n) ? n->valuedouble : 0);
    }
    cJSON_Delete(in);
    return print_and_free(out);
fail:
    cJSON_Delete(in);
    cJSON_Delete(out);
    return NULL;
}

static enum MHD_Result answer_embed(request *r, struct MHD_Connection *c, bool legacy) {
    double start = cli_now_ms();
    char *body = NULL, *openai = NULL;
    serve_error e;
    if (serve_ollama_embed_body(r->body ? r->body : "", r->len, legacy, &body, &e))
        return serve_send_error(r, c, &e);
    int rc = serve_embeddings(r->s, body, strlen(body), serve_connection_fd(c), &openai, &e);
    cJSON_free(body);
    if (rc > 0) return MHD_NO; /* the client left */
    if (rc) return serve_send_error(r, c, &e);
    char *out = embed_answer(r->s, openai, legacy, start);
    free(openai);
    return serve_send_owned(r, c, 200, out, "application/json");
}

/* ---- the endpoints ------------------------------------------------------------------------- */

static char *copy_text(const char *t) {
    char *d = malloc(strlen(t) + 1);
    if (d) strcpy(d, t);
    return d;
}

enum MHD_Result serve_answer_ollama(request *r, struct MHD_Connection *c) {
    serve_server *s = r->s;
    serve_error e = {0};
    char *out;
    switch (r->ep) {
    case SERVE_EP_root:
        return serve_send_owned(r, c, 200, copy_text("Ollama is running"),
                                "text/plain; charset=utf-8");
    case SERVE_EP_ollama_version: {
        char v[64];
        snprintf(v, sizeof v, "{\"version\":\"%s\"}", clinfer_version());
        return serve_send_owned(r, c, 200, copy_text(v), "application/json");
    }
    case SERVE_EP_ollama_tags:
        return serve_send_owned(r, c, 200, tags(s), "application/json");
    case SERVE_EP_ollama_show:
        if (!(out = show(s, r->body ? r->body : "", r->len, &e)) && e.status)
            return serve_send_error(r, c, &e);
        return serve_send_owned(r, c, 200, out, "application/json");
    default:
        return answer_embed(r, c, r->ep == SERVE_EP_ollama_embeddings);
    }
}
