/* The public token functions (over the model's vocabulary) and clinfer_generate: prompt
 * evaluation, sampling, and text streamed through a callback in whole UTF-8 characters. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "model.h"
#include "profile.h"
#include "tokenizer.h"

static clinfer_status need_vocab(const clinfer_model *m, const char *what) {
    if (!m) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "%s: NULL model", what);
    if (!m->vocab)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "%s: the model file has no tokenizer (tokenizer.ggml.model)", what);
    return CLINFER_OK;
}

clinfer_status clinfer_tokenize(const clinfer_model *m, const char *text, size_t len, bool add_bos,
                                bool parse_special, int32_t *tokens, size_t capacity,
                                size_t *n_tokens) {
    clinfer_status st = need_vocab(m, "tokenize");
    if (st != CLINFER_OK) return st;
    return vocab_tokenize(m->vocab, text, len, add_bos, parse_special, tokens, capacity, n_tokens);
}

clinfer_status clinfer_tokenize_pieces(const clinfer_model *m, const clinfer_text_piece *pieces,
                                       size_t n, bool add_bos, int32_t *tokens, size_t capacity,
                                       size_t *n_tokens) {
    clinfer_status st = need_vocab(m, "tokenize");
    if (st != CLINFER_OK) return st;
    return vocab_tokenize_pieces(m->vocab, pieces, n, add_bos, tokens, capacity, n_tokens);
}

clinfer_status clinfer_token_to_piece(const clinfer_model *m, int32_t token, char *buf, size_t size,
                                      size_t *len) {
    clinfer_status st = need_vocab(m, "token_to_piece");
    if (st != CLINFER_OK) return st;
    return vocab_piece(m->vocab, token, buf, size, len);
}

int32_t clinfer_token_bos(const clinfer_model *m) {
    return m && m->vocab ? vocab_bos(m->vocab) : -1;
}

bool clinfer_token_add_bos(const clinfer_model *m) {
    return m && m->vocab && vocab_add_bos(m->vocab);
}

int32_t clinfer_token_eos(const clinfer_model *m) {
    return m && m->vocab ? vocab_eos(m->vocab) : -1;
}

bool clinfer_token_is_eog(const clinfer_model *m, int32_t token) {
    return m && m->vocab && vocab_is_eog(m->vocab, token);
}

/* ---- generation -------------------------------------------------------------------------- */

/* Bytes of generated pieces not yet handed to the callback. */
typedef struct {
    char *data;
    size_t len, cap;
    clinfer_text_callback callback;
    void *user;
    bool stopped; /* the callback returned false */
} text_stream;

static clinfer_status stream_piece(text_stream *ts, const clinfer_model *m, int32_t token) {
    size_t need = 0;
    clinfer_status st = vocab_piece(m->vocab, token, ts->data + ts->len, ts->cap - ts->len, &need);
    if (st == CLINFER_ERR_BUFFER_TOO_SMALL) {
        size_t cap = 2 * (ts->len + need);
        char *grown = realloc(ts->data, cap);
        if (!grown)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "generate: no memory for %zu bytes", cap);
        ts->data = grown;
        ts->cap = cap;
        st = vocab_piece(m->vocab, token, ts->data + ts->len, ts->cap - ts->len, &need);
    }
    if (st != CLINFER_OK) return st;
    ts->len += need;
    /* A character split across tokens waits for its remaining bytes. */
    size_t ready = clinfer_utf8_complete(ts->data, ts->len);
    if (ready && ts->callback && !ts->stopped)
        ts->stopped = !ts->callback(ts->data, ready, ts->user);
    memmove(ts->data, ts->data + ready, ts->len - ready);
    ts->len -= ready;
    return CLINFER_OK;
}

/* At the end, an unfinished character is shown as U+FFFD rather than as stray bytes. */
static void stream_finish(text_stream *ts) {
    static const char replacement[] = "\xEF\xBF\xBD";
    if (ts->len && ts->callback && !ts->stopped)
        ts->callback(replacement, sizeof replacement - 1, ts->user);
    ts->len = 0;
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static clinfer_status next_token(clinfer_context *ctx, clinfer_sampler *sampler, int32_t *tok) {
    const float *logits;
    size_t n_vocab;
    clinfer_status st = clinfer_get_logits(ctx, &logits, &n_vocab);
    if (st != CLINFER_OK) return st;
    if (!sampler) {
        *tok = argmax(logits, n_vocab);
        return CLINFER_OK;
    }
    return clinfer_sampler_sample(sampler, logits, n_vocab, tok);
}

/* Every emitted token is evaluated into the context, so a conversation can continue after it;
 * the end-of-generation token is not. n_predict < 0: until end of generation or a full
 * context. */
clinfer_status clinfer_generate(clinfer_context *ctx, const int32_t *prompt, size_t n_prompt,
                                int32_t n_predict, clinfer_sampler *sampler,
                                clinfer_text_callback callback, void *user,
                                clinfer_generate_stats *stats) {
    clinfer_status st = CLINFER_OK;
    text_stream ts = {.callback = callback, .user = user, .cap = 256};
    clinfer_generate_stats s = {.n_prompt = n_prompt};
    if (!ctx || (!prompt && n_prompt))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    const clinfer_model *m = context_model(ctx);
    CHECK(need_vocab(m, "generate"));
    if (!n_prompt && !clinfer_context_n_past(ctx)) {
        st = err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                      "no prompt tokens and an empty context: nothing to continue");
        goto cleanup;
    }
    size_t room = clinfer_context_n_ctx(ctx) - clinfer_context_n_past(ctx);
    if (n_prompt > room || (n_predict >= 0 && (size_t)n_predict > room - n_prompt)) {
        st = err_fail(CLINFER_ERR_CONTEXT_FULL,
                      "%zu prompt tokens + %d to generate do not fit the %zu "
                      "free positions of the context",
                      n_prompt, (int)n_predict, room);
        goto cleanup;
    }
    ts.data = malloc(ts.cap);
    if (!ts.data) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory");
        goto cleanup;
    }

    double t0 = clock_now_ms();
    if (n_prompt) CHECK(clinfer_eval(ctx, prompt, n_prompt));
    for (size_t i = 0; sampler && i < n_prompt; i++)
        clinfer_sampler_accept(sampler, prompt[i]);
    double t1 = clock_now_ms();
    s.prefill_ms = t1 - t0;

    for (int32_t i = 0; (n_predict < 0 || i < n_predict) && !ts.stopped; i++) {
        if (clinfer_context_n_past(ctx) >= clinfer_context_n_ctx(ctx)) break;
        int32_t tok;
        CHECK(next_token(ctx, sampler, &tok));
        if (clinfer_token_is_eog(m, tok)) break;
        if (sampler) clinfer_sampler_accept(sampler, tok);
        s.n_generated++;
        CHECK(stream_piece(&ts, m, tok));
        CHECK(clinfer_eval(ctx, &tok, 1));
    }
    stream_finish(&ts);
    s.decode_ms = clock_now_ms() - t1;
cleanup:
    if (st != CLINFER_OK) err_prefix("generate");
    if (stats) *stats = s;
    free(ts.data);
    return st;
}
