/* The mask trie of a loaded model: each token's bytes as the tokenizer writes them out. Control,
 * unknown and unused tokens never match grammar text (their text, "<|im_start|>" say, is not
 * what they mean); end-of-generation tokens may come only where the grammar can end. Built once
 * per model: a request's time to first token would otherwise be mostly this. */
#include <stdlib.h>

#include "error.h"
#include "grammar.h"
#include "model.h"
#include "tok_internal.h"

clinfer_status gvocab_from_model(const clinfer_model *model, gvocab **out) {
    if (!model || !model->vocab)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "grammar: the model has no vocabulary");
    clinfer_status st = CLINFER_OK;
    const clinfer_vocab *v = model->vocab;
    size_t n = vocab_n_tokens(v);
    char **text = calloc(n + 1, sizeof *text);
    size_t *len = calloc(n + 1, sizeof *len);
    uint8_t *kind = calloc(n + 1, 1);
    if (!text || !len || !kind) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = (int32_t)i, type = v->tokens[i].type;
        if (vocab_is_eog(v, id)) {
            kind[i] = GV_EOG;
            continue;
        }
        if (type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN || type == TOK_TYPE_UNUSED) {
            kind[i] = GV_NEVER;
            continue;
        }
        /* A piece is never much longer than the token's stored text; retry if it is. */
        size_t cap = v->tokens[i].len + 8;
        for (int pass = 0; pass < 2; pass++) {
            char *buf = realloc(text[i], cap);
            if (!buf) {
                st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
                goto cleanup;
            }
            text[i] = buf;
            st = vocab_piece(v, id, buf, cap, &len[i]);
            if (st != CLINFER_ERR_BUFFER_TOO_SMALL) break;
            cap = len[i];
        }
        if (st != CLINFER_OK) goto cleanup;
        kind[i] = GV_TEXT;
    }
    st = gvocab_create(n, (const char *const *)text, len, kind, out);
cleanup:
    for (size_t i = 0; text && i < n; i++)
        free(text[i]);
    free(text);
    free(len);
    free(kind);
    return st;
}

clinfer_status gvocab_of_model(const clinfer_model *model, gvocab **out) {
    if (!model || !model->vocab)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "grammar: the model has no vocabulary");
    /* The trie is a cache beside the model's read-only weights: filling it is not a change the
     * caller's const promise is about. */
    clinfer_model *m = (clinfer_model *)model;
    clinfer_status st = CLINFER_OK;
    pthread_mutex_lock(&m->gvocab_lock);
    if (!m->gvocab) st = gvocab_from_model(m, &m->gvocab);
    if (st == CLINFER_OK) *out = gvocab_ref(m->gvocab);
    pthread_mutex_unlock(&m->gvocab_lock);
    return st;
}
