/* What the tokenizers share (declared in tok_internal.h): the growing id list, UTF-8 character
 * lengths and Unicode white space, the position tables of the segmenting tokenizers, and
 * SentencePiece's escaping of spaces as U+2581. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "error.h"
#include "tok_internal.h"

clinfer_status tok_ids_push(tok_ids *out, int32_t id) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 64;
        int32_t *ids = realloc(out->ids, cap * sizeof *ids);
        if (!ids) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu tokens", cap);
        out->ids = ids;
        out->cap = cap;
    }
    out->ids[out->n++] = id;
    return CLINFER_OK;
}

size_t tok_char_len(const char *s, size_t n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t r =
        utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)(n > 4 ? 4 : n), &cp);
    return r > 0 ? (size_t)r : 1;
}

clinfer_status tok_alloc_positions(size_t n, size_t size, void **out) {
    *out = NULL;
    if (n > UINT32_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", n);
    *out = malloc((n + 1) * size);
    if (!*out) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes of text", n);
    return CLINFER_OK;
}

bool tok_white_space(int32_t c) {
    utf8proc_category_t cat = utf8proc_category(c);
    return (c >= '\t' && c <= '\r') || c == 0x85 || cat == UTF8PROC_CATEGORY_ZS ||
           cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

clinfer_status tok_escape_spaces(const char *text, size_t len, bool prefix, char **escaped,
                                 size_t *n) {
    if (len > (SIZE_MAX - 3) / 3)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", len);
    char *e = malloc(3 * len + 3);
    if (!e) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes of text", len);
    size_t k = 0;
    if (prefix) {
        memcpy(e, TOK_SPACE_MARK, 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(e + k, TOK_SPACE_MARK, 3);
            k += 3;
        } else {
            e[k++] = text[i];
        }
    }
    *escaped = e;
    *n = k;
    return CLINFER_OK;
}
