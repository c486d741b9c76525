/* The GGUF reader's bounded cursor (gguf.c, gguf_kv.c): every read checks the bytes left, so a
 * hostile file is never read past its end. */
#ifndef CLINFER_GGUF_CURSOR_H
#define CLINFER_GGUF_CURSOR_H

#include <string.h>

#include "error.h"
#include "gguf.h"

typedef struct {
    const uint8_t *base;
    size_t pos, size;
} cursor;

/* Values are assembled byte by byte (gguf_le_u32, gguf_le_u64): the file is little-endian whatever
 * the host is, and fields are not aligned. */
static inline clinfer_status take(cursor *c, uint64_t n, const char *what, const uint8_t **out) {
    if (n > c->size - c->pos)
        return err_fail(CLINFER_ERR_FORMAT,
                        "%s at offset %zu needs %llu bytes, only %zu left (file size %zu)", what,
                        c->pos, (unsigned long long)n, c->size - c->pos, c->size);
    *out = c->base + c->pos;
    c->pos += (size_t)n;
    return CLINFER_OK;
}

static inline clinfer_status read_u32(cursor *c, const char *what, uint32_t *v) {
    const uint8_t *p = NULL;
    clinfer_status st = take(c, 4, what, &p);
    if (st == CLINFER_OK) *v = gguf_le_u32(p);
    return st;
}

static inline clinfer_status read_u64(cursor *c, const char *what, uint64_t *v) {
    const uint8_t *p = NULL;
    clinfer_status st = take(c, 8, what, &p);
    if (st == CLINFER_OK) *v = gguf_le_u64(p);
    return st;
}

static inline clinfer_status read_str(cursor *c, const char *what, gguf_str *s) {
    uint64_t len = 0;
    const uint8_t *p = NULL;
    clinfer_status st = read_u64(c, what, &len);
    if (st == CLINFER_OK && len > c->size - c->pos)
        st = err_fail(CLINFER_ERR_FORMAT,
                      "%s: length %llu at offset %zu is past end of file (size %zu)", what,
                      (unsigned long long)len, c->pos - 8, c->size);
    if (st == CLINFER_OK) st = take(c, len, what, &p);
    if (st == CLINFER_OK) {
        s->ptr = (const char *)p;
        s->len = len;
    }
    return st;
}

/* Keys and names are compared with C strings and printed, so they may not hold NUL bytes. */
static inline clinfer_status check_name(gguf_str s, const char *what, uint64_t max) {
    if (s.len == 0) return err_fail(CLINFER_ERR_FORMAT, "%s is empty", what);
    if (s.len > max)
        return err_fail(CLINFER_ERR_FORMAT, "%s of %llu bytes is longer than %llu", what,
                        (unsigned long long)s.len, (unsigned long long)max);
    if (memchr(s.ptr, 0, s.len))
        return err_fail(CLINFER_ERR_FORMAT, "%s '%.*s' holds a NUL byte", what, gguf_show_len(s),
                        s.ptr);
    return CLINFER_OK;
}

/* gguf_kv.c: metadata pair i at the cursor (key, type, value), checked: a valid key, a known
 * value type, arrays bounded by the bytes left, the keys clinfer relies on of their type. */
clinfer_status gguf_read_kv(cursor *c, size_t i, gguf_kv *kv);

#endif
