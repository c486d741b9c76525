/* SentencePiece BPE (Llama 1/2, Mistral, TinyLlama): spaces become U+2581, a leading one is
 * added to each run of text (special tokens split runs) as SentencePiece does, adjacent pieces
 * merge while the merged piece is a token (the highest score first), and characters no token covers
 * fall back to <0xXX> byte tokens. */
#include <stdlib.h>

#include "error.h"
#include "tok_internal.h"

static bool score_priority(const clinfer_vocab *v, const char *left, size_t left_len,
                           size_t right_len, char *scratch, double *priority) {
    (void)scratch; /* the pair is contiguous in the text: no copy needed */
    int32_t id = tok_strmap_get(&v->by_text, left, left_len + right_len);
    if (id < 0) return false;
    *priority = v->tokens[id].score;
    return true;
}

clinfer_status tok_spm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    tok_span *syms = NULL;
    size_t n_syms = 0, n = 0;
    char *escaped = NULL;
    CHECK(tok_escape_spaces(text, len, v->add_space_prefix, &escaped, &n));
    CHECK(tok_merge(v, escaped, n, score_priority, &syms, &n_syms));
    for (size_t i = 0; i < n_syms; i++) {
        const char *s = escaped + syms[i].off;
        int32_t id = tok_strmap_get(&v->by_text, s, syms[i].len);
        if (id >= 0) {
            CHECK(tok_ids_push(out, id));
            continue;
        }
        for (size_t b = 0; b < syms[i].len; b++) {
            id = v->byte_token[(unsigned char)s[b]];
            if (id < 0) id = v->unk;
            if (id >= 0) CHECK(tok_ids_push(out, id));
        }
    }
cleanup:
    free(syms);
    free(escaped);
    return st;
}
