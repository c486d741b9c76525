/* clinfer serve: log-probabilities of the generated tokens (logprobs, top_logprobs). The
 * scheduler computes them from each step's logits: the log-softmax of the model's distribution,
 * before temperature, penalties and grammar, as OpenAI reports them (llama-server's n_probs
 * reports the sampling chain's instead). The HTTP side takes them per chunk of text and writes
 * OpenAI's shapes: a chat choice's {"content": [{token, logprob, bytes, top_logprobs}]}, a
 * completion choice's {tokens, token_logprobs, top_logprobs, text_offset}. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "serve_pool.h"

#define LOGPROB_FLOOR -9999.0f /* what a token of probability 0 reports, as OpenAI's */

void serve_logprob_compute(const float *logits, size_t n_vocab, int32_t chosen, uint32_t k,
                           serve_logprob *out) {
    if (k > SERVE_MAX_TOP_LOGPROBS) k = SERVE_MAX_TOP_LOGPROBS;
    if (k > n_vocab) k = (uint32_t)n_vocab;
    float max = -INFINITY;
    for (size_t i = 0; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0;
    for (size_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - max);
    float lse = (float)(max + log(sum));
    out->n_top = 0;
    /* the k largest, kept sorted: most tokens fall below the smallest kept and cost one compare */
    for (size_t i = 0; k && i < n_vocab; i++) {
        float v = logits[i];
        if (out->n_top == k && !(v > out->top[k - 1].logprob)) continue;
        uint32_t at = out->n_top < k ? out->n_top++ : k - 1;
        while (at > 0 && out->top[at - 1].logprob < v) {
            out->top[at] = out->top[at - 1];
            at--;
        }
        out->top[at] = (serve_token_prob){(int32_t)i, v};
    }
    for (uint32_t i = 0; i < out->n_top; i++) {
        float lp = out->top[i].logprob - lse;
        out->top[i].logprob = isfinite(lp) ? lp : LOGPROB_FLOOR;
    }
    float lp = logits[chosen] - lse;
    out->chosen = (serve_token_prob){chosen, isfinite(lp) ? lp : LOGPROB_FLOOR};
    out->end = 0;
}

bool serve_job_push_logprob_locked(serve_job *job, const serve_logprob *lp) {
    if (job->n_lp == job->cap_lp) {
        size_t cap = job->cap_lp ? 2 * job->cap_lp : 64;
        serve_logprob *grown = realloc(job->lp, cap * sizeof *grown);
        if (!grown) return false;
        job->lp = grown;
        job->cap_lp = cap;
    }
    job->lp[job->n_lp++] = *lp;
    return true;
}

size_t serve_job_take_logprobs(serve_job *job, size_t *next, size_t upto, bool all,
                               serve_logprob **out) {
    *out = NULL;
    pthread_mutex_lock(&job->pool->lock);
    size_t end = *next;
    while (end < job->n_lp) {
        size_t start = end ? job->lp[end - 1].end : 0;
        if (!(job->lp[end].end <= upto || (all && start < upto))) break;
        end++;
    }
    size_t n = end - *next;
    if (n && (*out = malloc(n * sizeof **out))) {
        memcpy(*out, job->lp + *next, n * sizeof **out);
        *next = end;
    }
    pthread_mutex_unlock(&job->pool->lock);
    return *out ? n : 0;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* The token's bytes (NULL on failure: a token with no text has none). */
static char *piece_of(const clinfer_model *m, int32_t token, size_t *len) {
    char small[64];
    size_t need = 0;
    clinfer_status st = clinfer_token_to_piece(m, token, small, sizeof small, &need);
    char *p = malloc(need + 1);
    if (p && st == CLINFER_OK) {
        memcpy(p, small, need);
    } else if (p && st == CLINFER_ERR_BUFFER_TOO_SMALL) {
        st = clinfer_token_to_piece(m, token, p, need + 1, &need);
    }
    if (!p || st != CLINFER_OK) {
        free(p);
        *len = 0;
        return NULL;
    }
    p[need] = '\0';
    *len = need;
    return p;
}

/* {"token", "logprob", "bytes"} of a chat entry (with top: its top_logprobs too). */
static cJSON *chat_entry(const clinfer_model *m, const serve_token_prob *tp,
                         const serve_logprob *top) {
    size_t len;
    char *piece = piece_of(m, tp->token, &len);
    cJSON *e = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    cJSON_AddItemToObject(e, "token", serve_json_text(piece ? piece : "", len));
    cJSON_AddNumberToObject(e, "logprob", tp->logprob);
    for (size_t i = 0; i < len; i++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    cJSON_AddItemToObject(e, "bytes", bytes);
    free(piece);
    if (top) {
        cJSON *list = cJSON_AddArrayToObject(e, "top_logprobs");
        for (uint32_t i = 0; i < top->n_top; i++)
            cJSON_AddItemToArray(list, chat_entry(m, &top->top[i], NULL));
    }
    return e;
}

/* {tokens, token_logprobs, top_logprobs, text_offset} of a completion; *offset: the bytes of
 * text before these tokens, advanced past them. */
static cJSON *completion_logprobs(const clinfer_model *m, const serve_logprob *lp, size_t n,
                                  size_t *offset) {
    cJSON *o = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens");
    cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        char *piece = piece_of(m, lp[i].chosen.token, &len);
        cJSON_AddItemToArray(tokens, serve_json_text(piece ? piece : "", len));
        free(piece);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp[i].chosen.logprob));
        cJSON *top = cJSON_CreateObject();
        for (uint32_t t = 0; t < lp[i].n_top; t++) {
            char *tp = piece_of(m, lp[i].top[t].token, &len);
            cJSON *key = serve_json_text(tp ? tp : "", len);
            free(tp);
            /* tokens of one text (bytes that are not UTF-8 alone): the likeliest one's */
            if (key && !cJSON_GetObjectItemCaseSensitive(top, key->valuestring))
                cJSON_AddNumberToObject(top, key->valuestring, lp[i].top[t].logprob);
            cJSON_Delete(key);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
        *offset = lp[i].end;
    }
    return o;
}

cJSON *serve_json_logprobs(const clinfer_model *m, serve_kind kind, const serve_logprob *lp,
                           size_t n, size_t *offset) {
    if (kind != SERVE_CHAT) return completion_logprobs(m, lp, n, offset);
    cJSON *o = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(o, "content");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(content, chat_entry(m, &lp[i].chosen, &lp[i]));
    cJSON_AddNullToObject(o, "refusal");
    if (n) *offset = lp[n - 1].end;
    return o;
}
