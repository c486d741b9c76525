/* The hybriddna model (HybriDNA): byte-level BPE, except that each "<dna>" ... "</dna>" block
 * in a run of plain text is DNA, upper-cased and cut into 6-mers (the last padded with 'A').
 * A k-mer's token is the one whose text is the k-mer followed by U+E000, a marker that keeps
 * k-mers apart from BPE tokens of the same letters; "<oov>" stands in for a k-mer without one.
 * As in llama.cpp, blocks are looked for after special tokens are taken out, so a "<dna>" that
 * is a user-defined token (or a control token, with parse_special) stands alone. */
#include <string.h>

#include "error.h"
#include "tok_internal.h"

#define DNA_MARKER "\xee\x80\x80"
#define DNA_MARKER_LEN 3
#define DNA_K 6

static const char open_tag[] = "<dna>", close_tag[] = "</dna>";

static int32_t token_id(const clinfer_vocab *v, const char *text) {
    return tok_strmap_get(&v->by_text, text, strlen(text));
}

void tok_dna_init(clinfer_vocab *v) {
    v->dna.open = token_id(v, open_tag);
    v->dna.close = token_id(v, close_tag);
    v->dna.oov = token_id(v, "<oov>");
    v->dna.on = v->dna.open >= 0 && v->dna.close >= 0 && v->dna.oov >= 0;
    if (v->dna.oov < 0) return;
    /* The k-mers follow <oov>: their pieces drop the marker, so that they read as bare DNA,
     * while by_text (whose keys keep their own lengths) still finds them with it. */
    for (size_t i = (size_t)v->dna.oov + 1; i < v->n_tokens; i++) {
        tok_entry *t = &v->tokens[i];
        if (t->len > DNA_MARKER_LEN &&
            memcmp(t->text + t->len - DNA_MARKER_LEN, DNA_MARKER, DNA_MARKER_LEN) == 0)
            t->len -= DNA_MARKER_LEN;
    }
}

/* Where tag first occurs in text[from, len), or len when it does not. */
static size_t find_tag(const char *text, size_t from, size_t len, const char *tag) {
    size_t n = strlen(tag);
    for (size_t i = from; i + n <= len; i++)
        if (memcmp(text + i, tag, n) == 0) return i;
    return len;
}

static clinfer_status encode_kmers(const clinfer_vocab *v, const char *dna, size_t len,
                                   tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    char key[DNA_K + DNA_MARKER_LEN];
    memcpy(key + DNA_K, DNA_MARKER, DNA_MARKER_LEN);
    for (size_t i = 0; i < len; i += DNA_K) {
        for (size_t j = 0; j < DNA_K; j++) {
            char c = i + j < len ? dna[i + j] : 'A';
            key[j] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
        }
        int32_t id = tok_strmap_get(&v->by_text, key, sizeof key);
        CHECK(tok_ids_push(out, id >= 0 ? id : v->dna.oov));
    }
cleanup:
    return st;
}

clinfer_status tok_dna_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    size_t pos = 0;
    while (pos < len) {
        size_t open = find_tag(text, pos, len, open_tag);
        if (open > pos) CHECK(tok_bpe_encode(v, text + pos, open - pos, out));
        if (open == len) break;
        CHECK(tok_ids_push(out, v->dna.open));
        size_t start = open + strlen(open_tag);
        size_t close = find_tag(text, start, len, close_tag); /* none: DNA to the end */
        CHECK(encode_kmers(v, text + start, close - start, out));
        if (close == len) break;
        CHECK(tok_ids_push(out, v->dna.close));
        pos = close + strlen(close_tag);
    }
cleanup:
    return st;
}
