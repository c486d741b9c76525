/* clinfer serve: POST /v1/embeddings. The inputs are tokenized (or taken as token ids), checked
 * against the vocabulary and the context, and run as one job between the scheduler's steps, on
 * a context of its own: each input alone, its hidden states mean-pooled and normalized to length
 * 1, as llama-server's --pooling mean gives them (OpenAI's are of length 1 too). */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* Every input's tokens one after another into *all, input i's ending at ends[i]; each checked
 * to be non-empty, within the vocabulary and the context. */
static int gather(serve_server *s, const serve_embed_request *req, int32_t **all, size_t *ends,
                  serve_error *err) {
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    uint32_t n_ctx = serve_pool_n_ctx(s->pool);
    size_t total = 0;
    for (size_t i = 0; i < req->n_inputs; i++) {
        const serve_input *in = &req->inputs[i];
        int32_t *own = NULL;
        const int32_t *ids = in->tokens;
        size_t n = in->n_tokens;
        if (in->text && serve_tokenize(s->model, in->text, &own, &n, err)) {
            free(own);
            return -1;
        }
        if (in->text) ids = own;
        int rc = 0;
        if (n == 0)
            rc = serve_error_set(err, 400, "invalid_request_error", "input[%zu] has no tokens", i);
        else if (n > n_ctx)
            rc = serve_error_set(err, 400, "invalid_request_error",
                                 "input[%zu] has %zu tokens, more than the context of %u", i, n,
                                 n_ctx);
        for (size_t t = 0; rc == 0 && t < n; t++)
            if ((uint32_t)ids[t] >= info.n_vocab)
                rc = serve_error_set(err, 400, "invalid_request_error",
                                     "input[%zu][%zu] is %d, outside the vocabulary of %u", i, t,
                                     ids[t], info.n_vocab);
        int32_t *grown = rc ? NULL : realloc(*all, (total + n) * sizeof **all);
        if (!rc && !grown) rc = serve_error_set(err, 500, "server_error", "out of memory");
        if (!rc) {
            *all = grown;
            memcpy(*all + total, ids, n * sizeof *ids);
            ends[i] = total += n;
        }
        free(own);
        if (rc) return rc;
    }
    return 0;
}

int serve_embeddings(serve_server *s, const char *body, size_t len, int fd, char **out,
                     serve_error *err) {
    serve_embed_request req;
    *out = NULL;
    if (serve_embed_request_parse(body, len, &req, err)) return -1;
    clinfer_model_info info;
    clinfer_model_get_info(s->model, &info);
    int32_t *tokens = NULL;
    size_t *ends = malloc(req.n_inputs * sizeof *ends);
    serve_job *job = NULL;
    int rc = -1;
    if (!ends) {
        serve_error_set(err, 500, "server_error", "out of memory");
    } else if (req.dimensions && (uint32_t)req.dimensions != info.n_embd) {
        serve_error_set(err, 400, "invalid_request_error",
                        "'dimensions' %d: this model's embeddings have %u", (int)req.dimensions,
                        info.n_embd);
    } else if (!gather(s, &req, &tokens, ends, err)) {
        job = serve_job_create_embed(s->pool, tokens, ends, req.n_inputs, info.n_embd);
        if (!job)
            serve_error_set(err, 500, "server_error", "out of memory");
        else if (!serve_pool_submit(s->pool, job))
            serve_error_set(err, 503, "unavailable_error",
                            "the server is busy: all %zu slots run and %zu requests wait; retry "
                            "later",
                            s->n_slots, s->queue_cap);
        else
            rc = 0;
    }
    size_t seen = 0, n;
    char none[1];
    while (rc == 0 && !serve_job_wait(job, &seen, none, 0, &n, SERVE_WAIT_MS))
        if (serve_client_gone(fd)) {
            serve_job_cancel(job);
            rc = 1;
        }
    if (rc == 0 && job->status != CLINFER_OK)
        rc = serve_error_set(err, 500, "server_error", "embedding failed: %s", job->error);
    if (rc == 0) {
        *out = serve_json_embeddings(s, job->embeddings, job->n_inputs, job->n_embd, req.base64,
                                     job->stats.n_prompt);
        if (!*out) rc = serve_error_set(err, 500, "server_error", "out of memory");
    }
    serve_job_release(job);
    free(tokens);
    free(ends);
    serve_embed_request_free(&req);
    return rc;
}
