/* WordPiece (BERT) as llama.cpp runs it: the BERT normaliser and pre-tokenizer (drop control
 * characters, split at whitespace, isolate punctuation and CJK ideographs; with strip_accents
 * each character becomes the first of its canonical decomposition and marks go; lower case),
 * then the longest vocabulary match from the start of each word; a word that cannot be covered
 * becomes [UNK]. Where llama.cpp departs from Hugging Face's BERT it is followed: a character's
 * decomposition is cut to its first code point (a Hangul syllable keeps its leading consonant),
 * every mark goes, not only non-spacing ones, and words have no length limit.
 * tokenizer.ggml.normalizer.lowercase and .strip_accents (default: as lowercase) switch those
 * steps. llama.cpp's converter stores word-initial pieces with a U+2581 prefix and
 * continuations ("##x" in BERT's vocab.txt) bare, so words are matched with U+2581 in front. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "error.h"
#include "tok_internal.h"

/* The CJK Unified Ideograph blocks BERT isolates (tokenize_chinese_chars): a property of the
 * BERT algorithm itself, not a Unicode table utf8proc could provide. Extension E starts at
 * U+2B920 here, as in Hugging Face's Rust tokenizers and llama.cpp. */
static bool is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Whitespace is tested first, so the control characters among it separate words. */
static bool is_control(utf8proc_category_t cat) {
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
           cat == UTF8PROC_CATEGORY_CN;
}

static bool is_mark(utf8proc_category_t cat) {
    return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
           cat == UTF8PROC_CATEGORY_ME;
}

/* Unicode punctuation, plus every ASCII non-alphanumeric symbol ($ + < = > ^ ` | ~). */
static bool is_punct(int32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return true;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

typedef struct {
    char *buf; /* U+2581 then the word's UTF-8 */
    size_t len, cap, n_chars;
} word;

static clinfer_status word_append(word *w, int32_t c) {
    if (w->len + 4 > w->cap) {
        size_t cap = 2 * w->cap + 64;
        char *buf = realloc(w->buf, cap);
        if (!buf) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: word of %zu bytes", cap);
        w->buf = buf;
        w->cap = cap;
    }
    w->len += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)w->buf + w->len);
    w->n_chars++;
    return CLINFER_OK;
}

/* Tokenizes the word collected so far and starts a new one. */
static clinfer_status flush(const clinfer_vocab *v, word *w, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    if (w->n_chars == 0) return CLINFER_OK;
    size_t first = out->n;
    bool covered = true;
    for (size_t i = 0; covered && i < w->len;) {
        size_t j = w->len - i > v->max_token_len ? i + v->max_token_len : w->len;
        int32_t id = -1;
        for (; j > i && (id = tok_strmap_get(&v->by_text, w->buf + i, j - i)) < 0; j--)
            ;
        if (id < 0)
            covered = false;
        else
            CHECK(tok_ids_push(out, id));
        i = j;
    }
    if (!covered) {
        out->n = first;
        if (v->unk >= 0) CHECK(tok_ids_push(out, v->unk));
    }
cleanup:
    w->len = 3; /* keep the U+2581 */
    w->n_chars = 0;
    return st;
}

/* Appends c to the current word, or as a word of its own when it is punctuation or an
 * ideograph. */
static clinfer_status add_char(const clinfer_vocab *v, word *w, int32_t c, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    bool alone = is_punct(c) || is_cjk(c);
    if (v->lowercase) c = utf8proc_tolower(c);
    if (alone) CHECK(flush(v, w, out));
    CHECK(word_append(w, c));
    if (alone) CHECK(flush(v, w, out));
cleanup:
    return st;
}

clinfer_status tok_wpm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    word w = {0};
    CHECK(word_append(&w, 0x2581));
    w.n_chars = 0;
    for (size_t off = 0; off < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)text + off,
                                              (utf8proc_ssize_t)(len - off), &c);
        if (n <= 0) { /* an invalid byte: BERT's cleaning drops U+FFFD */
            off++;
            continue;
        }
        off += (size_t)n;
        if (v->strip_accents) { /* the first code point of the canonical decomposition */
            utf8proc_int32_t nfd[16];
            int last_bound = 0;
            utf8proc_ssize_t n_nfd =
                utf8proc_decompose_char(c, nfd, 16, UTF8PROC_DECOMPOSE, &last_bound);
            if (n_nfd > 0 && n_nfd <= 16) c = nfd[0];
        }
        utf8proc_category_t cat = utf8proc_category(c);
        if (tok_white_space(c)) {
            CHECK(flush(v, &w, out));
            continue;
        }
        if (c == 0 || c == 0xFFFD || is_control(cat)) continue;
        if (v->strip_accents && is_mark(cat)) continue;
        CHECK(add_char(v, &w, c, out));
    }
    CHECK(flush(v, &w, out));
cleanup:
    free(w.buf);
    return st;
}
