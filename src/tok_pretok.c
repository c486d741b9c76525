/* Pre-tokenizers of BPE vocabularies: the regular expressions of each model family
 * (tok_pretok_table.c, by the name llama.cpp's converter stores in tokenizer.ggml.pre), run by
 * PCRE2 with Unicode properties. A family may chain several regexes: each one splits the words
 * the previous produced, and both its matches and the text between them become words, so no
 * byte is ever dropped; an empty match cuts the word where it matches. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tok_internal.h"
#include "tok_pretok_table.h"

#define MAX_REGEXES 8

struct tok_pretok {
    pcre2_code *re[MAX_REGEXES];
    size_t n_re;
};

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_re; i++)
        pcre2_code_free(p->re[i]);
    free(p);
}

clinfer_status tok_pretok_create(const char *name, size_t name_len, tok_pretok **out,
                                 tok_pretok_traits *traits) {
    clinfer_status st = CLINFER_OK;
    tok_pretok *p = NULL;
    *out = NULL;
    const tok_pretok_family *fam = tok_pretok_families;
    while (fam < tok_pretok_families + tok_pretok_n_families &&
           !(strlen(fam->name) == name_len && memcmp(fam->name, name, name_len) == 0))
        fam++;
    if (fam == tok_pretok_families + tok_pretok_n_families)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "tokenizer: unknown pre-tokenizer tokenizer.ggml.pre = '%.*s'",
                        (int)(name_len > 64 ? 64 : name_len), name);
    p = calloc(1, sizeof *p);
    if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: pre-tokenizer");
    /* MATCH_INVALID_UTF: invalid bytes match nothing, so they fall between matches and become
     * words of their own; DOLLAR_ENDONLY: '$' means the end of the word, as in the original. */
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    for (const char *const *re = fam->regexes; *re; re++) {
        if (p->n_re == MAX_REGEXES) {
            st = err_fail(CLINFER_ERR_UNSUPPORTED,
                          "tokenizer: pre-tokenizer '%s' has over %d "
                          "regexes",
                          fam->name, MAX_REGEXES);
            goto cleanup;
        }
        int err;
        PCRE2_SIZE err_off;
        p->re[p->n_re] =
            pcre2_compile((PCRE2_SPTR)*re, PCRE2_ZERO_TERMINATED, options, &err, &err_off, NULL);
        if (!p->re[p->n_re]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            st = err_fail(CLINFER_ERR_UNSUPPORTED,
                          "tokenizer: pre-tokenizer '%s' regex %zu at offset %zu: %s", fam->name,
                          p->n_re, (size_t)err_off, (const char *)msg);
            goto cleanup;
        }
        /* JIT is only a speed-up: the interpreter gives the same matches where it is missing. */
        pcre2_jit_compile(p->re[p->n_re], PCRE2_JIT_COMPLETE);
        p->n_re++;
    }
    *traits = fam->traits;
    *out = p;
    p = NULL;
cleanup:
    tok_pretok_free(p);
    return st;
}

typedef struct {
    tok_span *items;
    size_t n, cap;
} span_list;

static clinfer_status span_push(span_list *l, size_t off, size_t len) {
    if (len == 0) return CLINFER_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        tok_span *items = realloc(l->items, cap * sizeof *items);
        if (!items) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu words", cap);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = (tok_span){(uint32_t)off, (uint32_t)len};
    return CLINFER_OK;
}

/* Splits the word at text + w.off by re: matches and the gaps between them. */
static clinfer_status split_word(const pcre2_code *re, const char *text, tok_span w,
                                 pcre2_match_data *md, pcre2_match_context *mc, span_list *out) {
    clinfer_status st = CLINFER_OK;
    PCRE2_SPTR subject = (PCRE2_SPTR)(text + w.off);
    size_t emitted = 0, start = 0;
    while (start < w.len) {
        int rc = pcre2_match(re, subject, w.len, start, 0, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "tokenizer: pre-tokenizer regex failed in a word of %u bytes: %s",
                            w.len, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        CHECK(span_push(out, w.off + emitted, ov[0] - emitted));
        if (ov[1] == ov[0]) { /* a cut: look again one character on */
            emitted = ov[0];
            start = ov[0] + tok_char_len(text + w.off + ov[0], w.len - ov[0]);
            continue;
        }
        CHECK(span_push(out, w.off + ov[0], ov[1] - ov[0]));
        emitted = start = ov[1];
    }
    CHECK(span_push(out, w.off + emitted, w.len - emitted));
cleanup:
    return st;
}

clinfer_status tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **spans,
                                size_t *n_spans) {
    clinfer_status st = CLINFER_OK;
    span_list cur = {0}, next = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    pcre2_jit_stack *stack = NULL;
    *spans = NULL;
    *n_spans = 0;
    if (len > UINT32_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", len);
    md = pcre2_match_data_create(4, NULL);
    mc = pcre2_match_context_create(NULL);
    /* Long runs of whitespace or letters need more than the default 32 KiB of JIT stack. */
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!md || !mc || !stack) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: regex match data");
        goto cleanup;
    }
    pcre2_jit_stack_assign(mc, NULL, stack);
    CHECK(span_push(&cur, 0, len));
    for (size_t r = 0; r < p->n_re; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++)
            CHECK(split_word(p->re[r], text, cur.items[i], md, mc, &next));
        span_list t = cur;
        cur = next;
        next = t;
    }
    *spans = cur.items;
    *n_spans = cur.n;
    cur.items = NULL;
cleanup:
    free(cur.items);
    free(next.items);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    return st;
}
