/* BPE: the pre-tokenizer splits text into words, then merges apply by rank within each word.
 * Byte-level BPE (GPT-2 and its descendants) first turns each word's bytes into printable
 * stand-in characters (GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the others for U+0100 onwards). SentencePiece-style BPE (Gemma 4) instead merges the UTF-8
 * itself, spaces written as U+2581, and falls back to <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "error.h"
#include "tok_internal.h"

static bool printable_latin1(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

clinfer_status tok_bpe_init(clinfer_vocab *v, const char *pre, size_t pre_len) {
    int next = 256;
    for (int i = 0; i < 512; i++)
        v->char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int cp = printable_latin1(b) ? b : next++;
        utf8proc_ssize_t n = utf8proc_encode_char(cp, (utf8proc_uint8_t *)v->byte_char[b]);
        v->byte_char[b][n] = '\0';
        v->char_byte[cp] = (int16_t)b;
    }
    return tok_pretok_create(pre, pre_len, &v->pretok, &v->bpe);
}

static bool merge_priority(const clinfer_vocab *v, const char *left, size_t left_len,
                           size_t right_len, char *scratch, double *priority) {
    memcpy(scratch, left, left_len);
    scratch[left_len] = ' ';
    memcpy(scratch + left_len + 1, left + left_len, right_len);
    int32_t rank = tok_strmap_get(&v->merge_rank, scratch, left_len + 1 + right_len);
    *priority = -(double)rank; /* the lowest rank merges first */
    return rank >= 0;
}

/* A symbol no token covers: one token per byte, the <0xXX> byte token or (byte-level) the
 * token of that single byte; a byte without one is dropped, as llama.cpp drops it. */
static clinfer_status push_bytes(const clinfer_vocab *v, const char *s, size_t n, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    for (size_t i = 0; i < n; i++) {
        int32_t id = v->bpe.raw_bytes ? v->byte_token[(unsigned char)s[i]]
                                      : tok_strmap_get(&v->by_text, s + i, 1);
        if (id >= 0) CHECK(tok_ids_push(out, id));
    }
cleanup:
    return st;
}

static bool only_line_feeds(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n') return false;
    return true;
}

static clinfer_status encode_word(const clinfer_vocab *v, const char *word, size_t len,
                                  tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    tok_span *syms = NULL;
    size_t n_syms = 0;
    bool take_whole = v->bpe.ignore_merges || (v->bpe.newline_words && only_line_feeds(word, len));
    int32_t whole = take_whole ? tok_strmap_get(&v->by_text, word, len) : -1;
    if (whole >= 0) return tok_ids_push(out, whole);
    CHECK(tok_merge(v, word, len, merge_priority, &syms, &n_syms));
    for (size_t i = 0; i < n_syms; i++) {
        int32_t id = tok_strmap_get(&v->by_text, word + syms[i].off, syms[i].len);
        if (id >= 0)
            CHECK(tok_ids_push(out, id));
        else
            CHECK(push_bytes(v, word + syms[i].off, syms[i].len, out));
    }
cleanup:
    free(syms);
    return st;
}

static clinfer_status encode_text(const clinfer_vocab *v, const char *text, size_t len,
                                  tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    tok_span *words = NULL;
    size_t n_words = 0;
    char *mapped = NULL, *escaped = NULL;
    if (v->bpe.escape_spaces) {
        CHECK(tok_escape_spaces(text, len, false, &escaped, &len));
        text = escaped;
    }
    CHECK(tok_pretok_split(v->pretok, text, len, &words, &n_words));
    if (v->bpe.raw_bytes) {
        for (size_t w = 0; w < n_words; w++)
            CHECK(encode_word(v, text + words[w].off, words[w].len, out));
        goto cleanup;
    }
    mapped = malloc(2 * len + 1); /* every stand-in character is at most 2 bytes of UTF-8 */
    if (!mapped) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes of text", len);
        goto cleanup;
    }
    for (size_t w = 0; w < n_words; w++) {
        size_t n = 0;
        for (size_t i = 0; i < words[w].len; i++) {
            const char *c = v->byte_char[(unsigned char)text[words[w].off + i]];
            size_t cl = strlen(c);
            memcpy(mapped + n, c, cl);
            n += cl;
        }
        CHECK(encode_word(v, mapped, n, out));
    }
cleanup:
    free(escaped);
    free(mapped);
    free(words);
    return st;
}

/* The "whitespace" model: whitespace only separates (and is dropped), each run of other
 * characters (lower-cased when the normaliser says so; an invalid byte as U+FFFD) is BPE text. */
static clinfer_status encode_segments(const clinfer_vocab *v, const char *text, size_t len,
                                      tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    if (len > (SIZE_MAX - 1) / 3)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", len);
    char *seg = malloc(3 * len + 1); /* U+FFFD for a byte is the most a byte can become */
    size_t n = 0;
    if (!seg) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes of text", len);
    for (size_t off = 0; off <= len;) {
        utf8proc_int32_t c = ' ';
        utf8proc_ssize_t cl = 1;
        if (off < len) {
            cl = utf8proc_iterate((const utf8proc_uint8_t *)text + off,
                                  (utf8proc_ssize_t)(len - off > 4 ? 4 : len - off), &c);
            if (cl <= 0) {
                c = 0xFFFD;
                cl = 1;
            }
        }
        off += (size_t)cl;
        if (tok_white_space(c)) {
            if (n) CHECK(encode_text(v, seg, n, out));
            n = 0;
            continue;
        }
        if (v->lowercase) c = utf8proc_tolower(c);
        n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)seg + n);
    }
cleanup:
    free(seg);
    return st;
}

clinfer_status tok_bpe_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    return v->drop_whitespace ? encode_segments(v, text, len, out) : encode_text(v, text, len, out);
}
