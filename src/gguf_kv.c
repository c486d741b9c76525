/* GGUF metadata pairs: a key, a value type and a value (scalars, strings, arrays of either),
 * read through the bounded cursor. */
#include <stdlib.h>

#include "gguf_cursor.h"

#define GGUF_MAX_KEY 65535u

/* Reads an array value: element type, count, then the elements; string arrays get an offset
 * table so element i is found without rescanning. */
static clinfer_status read_array(cursor *c, gguf_kv *kv) {
    clinfer_status st;
    uint32_t elem = 0;
    uint64_t n = 0;
    const uint8_t *p = NULL;
    CHECK(read_u32(c, "array element type", &elem));
    CHECK(read_u64(c, "array length", &n));
    kv->arr_type = (gguf_type)elem;
    kv->arr_n = n;
    kv->data = c->base + c->pos;
    size_t left = c->size - c->pos;
    if (elem == GGUF_TYPE_ARRAY) {
        st = err_fail(CLINFER_ERR_FORMAT, "nested arrays are not allowed");
    } else if (elem == GGUF_TYPE_STRING) {
        /* Each element has at least its 8-byte length: this bounds the offset table. */
        if (n > left / 8) {
            st = err_fail(CLINFER_ERR_FORMAT,
                          "array length %llu of strings needs at least %llu bytes, only "
                          "%zu left (file size %zu)",
                          (unsigned long long)n, (unsigned long long)n * 8, left, c->size);
            goto cleanup;
        }
        uint64_t *offs = malloc(n ? (size_t)n * sizeof *offs : 1);
        if (!offs) {
            st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for %llu string offsets",
                          (unsigned long long)n);
            goto cleanup;
        }
        kv->str_offsets = offs;
        for (uint64_t i = 0; i < n; i++) {
            gguf_str s;
            offs[i] = (uint64_t)(c->base + c->pos - kv->data);
            CHECK(read_str(c, "array string element", &s));
        }
    } else {
        size_t es = gguf_type_size((gguf_type)elem);
        if (es == 0) {
            st = err_fail(CLINFER_ERR_FORMAT, "unknown array element type %u", elem);
        } else if (n > left / es) {
            st = err_fail(CLINFER_ERR_FORMAT,
                          "array length %llu of %s (%zu bytes each) is past end of file: "
                          "%zu bytes left (file size %zu)",
                          (unsigned long long)n, gguf_type_name(elem), es, left, c->size);
        } else {
            st = take(c, n * es, "array data", &p);
            for (uint64_t i = 0; st == CLINFER_OK && elem == GGUF_TYPE_BOOL && i < n; i++)
                if (p[i] > 1)
                    st = err_fail(CLINFER_ERR_FORMAT,
                                  "bool array element %llu has value %u (not 0 or 1)",
                                  (unsigned long long)i, p[i]);
        }
    }
cleanup:
    return st;
}

static clinfer_status read_value(cursor *c, gguf_kv *kv) {
    const uint8_t *p = NULL;
    gguf_str s;
    clinfer_status st;
    kv->data = c->base + c->pos;
    if (kv->type == GGUF_TYPE_ARRAY) return read_array(c, kv);
    if (kv->type == GGUF_TYPE_STRING) return read_str(c, "string value", &s);
    size_t es = gguf_type_size(kv->type);
    if (es == 0) return err_fail(CLINFER_ERR_FORMAT, "unknown value type %u", (unsigned)kv->type);
    st = take(c, es, "value", &p);
    if (st == CLINFER_OK && kv->type == GGUF_TYPE_BOOL && p[0] > 1)
        st = err_fail(CLINFER_ERR_FORMAT, "bool value %u is not 0 or 1", p[0]);
    return st;
}

/* Keys whose type the rest of clinfer relies on. */
static const struct {
    const char *key;
    gguf_type type, arr_type;
} known_keys[] = {
    {"general.alignment", GGUF_TYPE_UINT32, 0},
    {"general.architecture", GGUF_TYPE_STRING, 0},
    {"tokenizer.ggml.model", GGUF_TYPE_STRING, 0},
    {"tokenizer.ggml.pre", GGUF_TYPE_STRING, 0},
    {"tokenizer.chat_template", GGUF_TYPE_STRING, 0},
    {"tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING},
    {"tokenizer.ggml.scores", GGUF_TYPE_ARRAY, GGUF_TYPE_FLOAT32},
    {"tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, GGUF_TYPE_INT32},
    {"tokenizer.ggml.merges", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING},
};

static clinfer_status check_known_type(const gguf_kv *kv) {
    for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++) {
        if (!gguf_str_eq(kv->key, known_keys[i].key)) continue;
        if (kv->type != known_keys[i].type ||
            (kv->type == GGUF_TYPE_ARRAY && kv->arr_type != known_keys[i].arr_type))
            return gguf_type_mismatch("value", kv, known_keys[i].type, known_keys[i].arr_type);
    }
    return CLINFER_OK;
}

clinfer_status gguf_read_kv(cursor *c, size_t i, gguf_kv *kv) {
    clinfer_status st;
    uint32_t type = 0;
    CHECK(read_str(c, "key", &kv->key));
    CHECK(check_name(kv->key, "key", GGUF_MAX_KEY));
    CHECK(read_u32(c, "value type", &type));
    kv->type = (gguf_type)type;
    CHECK(read_value(c, kv));
    CHECK(check_known_type(kv));
cleanup:
    if (st != CLINFER_OK) {
        if (kv->key.ptr && kv->key.len)
            err_prefix("kv %zu '%.*s'", i, gguf_show_len(kv->key), kv->key.ptr);
        else
            err_prefix("kv %zu", i);
    }
    return st;
}
