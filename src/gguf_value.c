/* The typed getters of metadata values: each checks the key's type and range and says what it
 * found otherwise (the value types' names and mismatch messages are gguf_type.c's). */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "gguf.h"

/* ---- typed getters ------------------------------------------------------------------------- */

static clinfer_status find_key(const gguf_file *f, const char *key, const gguf_kv **kv) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return err_fail(CLINFER_ERR_NOT_FOUND, "gguf: key '%s' not found", key);
    return CLINFER_OK;
}

/* The getters' type errors, with the prefix the parser's messages get from gguf_open. */
static clinfer_status wrong_type(const gguf_kv *kv, gguf_type want, gguf_type want_elem) {
    char what[GGUF_SHOW + 16];
    snprintf(what, sizeof what, "gguf: key '%.*s'", gguf_show_len(kv->key), kv->key.ptr);
    return gguf_type_mismatch(what, kv, want, want_elem);
}

/* An integer kv whose value lies in lo..hi; want names the expected type in messages. */
static clinfer_status get_int(const gguf_file *f, const char *key, int64_t lo, int64_t hi,
                              gguf_type want, int64_t *out) {
    const gguf_kv *kv;
    clinfer_status st = find_key(f, key, &kv);
    if (st != CLINFER_OK) return st;
    const uint8_t *p = kv->data;
    int64_t v;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
        v = p[0];
        break;
    case GGUF_TYPE_INT8:
        v = (int8_t)p[0];
        break;
    case GGUF_TYPE_UINT16:
        v = (uint16_t)(p[0] | p[1] << 8);
        break;
    case GGUF_TYPE_INT16:
        v = (int16_t)(uint16_t)(p[0] | p[1] << 8);
        break;
    case GGUF_TYPE_UINT32:
        v = gguf_le_u32(p);
        break;
    case GGUF_TYPE_INT32:
        v = (int32_t)gguf_le_u32(p);
        break;
    case GGUF_TYPE_UINT64:
        if (gguf_le_u64(p) > INT64_MAX)
            return err_fail(CLINFER_ERR_FORMAT, "gguf: key '%s' = %llu does not fit %s", key,
                            (unsigned long long)gguf_le_u64(p), gguf_type_name(want));
        v = (int64_t)gguf_le_u64(p);
        break;
    case GGUF_TYPE_INT64:
        v = (int64_t)gguf_le_u64(p);
        break;
    default:
        return wrong_type(kv, want, 0);
    }
    if (v < lo || v > hi)
        return err_fail(CLINFER_ERR_FORMAT, "gguf: key '%s' = %lld does not fit %s", key,
                        (long long)v, gguf_type_name(want));
    *out = v;
    return CLINFER_OK;
}

clinfer_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    int64_t v = 0; /* gcc -O3 cannot tell that get_int sets it whenever it returns OK */
    clinfer_status st = get_int(f, key, 0, UINT32_MAX, GGUF_TYPE_UINT32, &v);
    if (st == CLINFER_OK) *out = (uint32_t)v;
    return st;
}

clinfer_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out) {
    int64_t v = 0; /* as in gguf_get_u32 */
    clinfer_status st = get_int(f, key, INT32_MIN, INT32_MAX, GGUF_TYPE_INT32, &v);
    if (st == CLINFER_OK) *out = (int32_t)v;
    return st;
}

clinfer_status gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv;
    clinfer_status st = find_key(f, key, &kv);
    if (st != CLINFER_OK) return st;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        uint32_t bits = gguf_le_u32(kv->data);
        memcpy(out, &bits, sizeof *out);
    } else if (kv->type == GGUF_TYPE_FLOAT64) {
        uint64_t bits = gguf_le_u64(kv->data);
        double d;
        memcpy(&d, &bits, sizeof d);
        *out = (float)d;
    } else {
        return wrong_type(kv, GGUF_TYPE_FLOAT32, 0);
    }
    return CLINFER_OK;
}

clinfer_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv;
    clinfer_status st = find_key(f, key, &kv);
    if (st != CLINFER_OK) return st;
    if (kv->type != GGUF_TYPE_BOOL) return wrong_type(kv, GGUF_TYPE_BOOL, 0);
    *out = kv->data[0] != 0;
    return CLINFER_OK;
}

clinfer_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv;
    clinfer_status st = find_key(f, key, &kv);
    if (st != CLINFER_OK) return st;
    if (kv->type != GGUF_TYPE_STRING) return wrong_type(kv, GGUF_TYPE_STRING, 0);
    out->len = gguf_le_u64(kv->data);
    out->ptr = (const char *)kv->data + 8;
    return CLINFER_OK;
}

clinfer_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem,
                            const gguf_kv **out) {
    const gguf_kv *kv;
    clinfer_status st = find_key(f, key, &kv);
    if (st != CLINFER_OK) return st;
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != elem)
        return wrong_type(kv, GGUF_TYPE_ARRAY, elem);
    *out = kv;
    return CLINFER_OK;
}

gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->data + kv->str_offsets[i];
    gguf_str s = {(const char *)p + 8, gguf_le_u64(p)};
    return s;
}

float gguf_arr_f32(const gguf_kv *kv, uint64_t i) {
    uint32_t bits = gguf_le_u32(kv->data + 4 * i);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

int32_t gguf_arr_i32(const gguf_kv *kv, uint64_t i) {
    return (int32_t)gguf_le_u32(kv->data + 4 * i);
}
