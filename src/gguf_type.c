/* GGUF value types (names, sizes, mismatch messages) and the comparison of a file's strings with
 * C strings: what the reader (gguf.c, gguf_kv.c), the getters (gguf_value.c) and the metadata's
 * readers share. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "gguf.h"

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const char *gguf_type_name(uint32_t t) {
    static const char *const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

size_t gguf_type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* "u32", "array of string", ... */
static const char *describe_type(char buf[32], gguf_type t, gguf_type elem) {
    if (t != GGUF_TYPE_ARRAY) return gguf_type_name(t);
    snprintf(buf, 32, "array of %s", gguf_type_name(elem));
    return buf;
}

/* what: the subject of the message ("value", "gguf: key 'x'"). */
clinfer_status gguf_type_mismatch(const char *what, const gguf_kv *kv, gguf_type want,
                                  gguf_type want_elem) {
    char have_buf[32], want_buf[32];
    return err_fail(CLINFER_ERR_FORMAT, "%s has type %s, expected %s", what,
                    describe_type(have_buf, kv->type, kv->arr_type),
                    describe_type(want_buf, want, want_elem));
}
