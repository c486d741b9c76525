/* The test GGUF writer: metadata is serialized as it is added; tensor infos and data are kept
 * until the layout (offsets, padding) is known at serialization. */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} bytes;

typedef struct {
    char *name;
    size_t name_len;
    uint32_t n_dims;
    uint64_t ne[8];
    uint32_t type;
    uint64_t offset; /* raw tensors: as given; others: assigned at serialization */
    uint8_t *data;   /* NULL for raw tensors */
    size_t size;
} wtensor;

struct gguf_writer {
    bytes kvs;
    uint64_t n_kv;
    wtensor *tensors;
    size_t n_tensors;
    uint32_t alignment;
    size_t data_min;
    bool failed;
    gw_sections sections;
};

static void put(bytes *b, const void *src, size_t n) {
    if (b->failed) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* Writes a host value of size n in little-endian byte order. */
static void put_le(bytes *b, const void *v, size_t n) {
    const uint16_t probe = 1;
    const uint8_t *src = v;
    uint8_t tmp[8];
    bool little = *(const uint8_t *)&probe == 1;
    for (size_t i = 0; i < n; i++)
        tmp[i] = little ? src[i] : src[n - 1 - i];
    put(b, tmp, n);
}

static void put_u32(bytes *b, uint32_t v) {
    put_le(b, &v, 4);
}
static void put_u64(bytes *b, uint64_t v) {
    put_le(b, &v, 8);
}

static void put_str(bytes *b, const void *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}

gguf_writer *gw_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = 32;
    return w;
}

void gw_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->tensors);
    free(w->kvs.p);
    free(w);
}

static void kv_head(gguf_writer *w, const char *key, gguf_type type) {
    put_str(&w->kvs, key, strlen(key));
    put_u32(&w->kvs, type);
    w->n_kv++;
}

void gw_kv_scalar(gguf_writer *w, const char *key, gguf_type type, const void *value) {
    size_t n = gguf_type_size(type);
    if (n == 0) {
        w->failed = true;
        return;
    }
    kv_head(w, key, type);
    if (type == GGUF_TYPE_BOOL) {
        uint8_t b = *(const bool *)value;
        put(&w->kvs, &b, 1);
    } else {
        put_le(&w->kvs, value, n);
    }
    if (type == GGUF_TYPE_UINT32 && strcmp(key, "general.alignment") == 0) {
        uint32_t a = *(const uint32_t *)value;
        /* Larger ones only serve to build bad files. */
        if (a && (a & (a - 1)) == 0 && a <= (1u << 16)) w->alignment = a;
    }
}

void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v) {
    gw_kv_scalar(w, key, GGUF_TYPE_UINT32, &v);
}
void gw_kv_i32(gguf_writer *w, const char *key, int32_t v) {
    gw_kv_scalar(w, key, GGUF_TYPE_INT32, &v);
}
void gw_kv_f32(gguf_writer *w, const char *key, float v) {
    gw_kv_scalar(w, key, GGUF_TYPE_FLOAT32, &v);
}
void gw_kv_bool(gguf_writer *w, const char *key, bool v) {
    gw_kv_scalar(w, key, GGUF_TYPE_BOOL, &v);
}

void gw_kv_str(gguf_writer *w, const char *key, const char *v) {
    kv_head(w, key, GGUF_TYPE_STRING);
    put_str(&w->kvs, v, strlen(v));
}

void gw_kv_arr(gguf_writer *w, const char *key, gguf_type elem, const void *values, size_t n) {
    size_t es = gguf_type_size(elem);
    if (es == 0) {
        w->failed = true;
        return;
    }
    kv_head(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kvs, elem);
    put_u64(&w->kvs, n);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *v =
            (const uint8_t *)values + i * (elem == GGUF_TYPE_BOOL ? sizeof(bool) : es);
        uint8_t b = elem == GGUF_TYPE_BOOL ? *(const bool *)v : 0;
        put_le(&w->kvs, elem == GGUF_TYPE_BOOL ? &b : v, es);
    }
}

void gw_kv_arr_str(gguf_writer *w, const char *key, const char *const *strs, size_t n) {
    kv_head(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kvs, GGUF_TYPE_STRING);
    put_u64(&w->kvs, n);
    for (size_t i = 0; i < n; i++)
        put_str(&w->kvs, strs[i], strlen(strs[i]));
}

void gw_kv_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n) {
    gw_kv_arr(w, key, GGUF_TYPE_FLOAT32, v, n);
}

void gw_kv_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n) {
    gw_kv_arr(w, key, GGUF_TYPE_INT32, v, n);
}

void gw_kv_raw(gguf_writer *w, const void *key, size_t key_len, uint32_t type, const void *value,
               size_t value_len) {
    put_str(&w->kvs, key, key_len);
    put_u32(&w->kvs, type);
    put(&w->kvs, value, value_len);
    w->n_kv++;
}

/* Appends a tensor record; the name is copied. Returns NULL (and marks the writer failed) when
 * memory runs out. */
static wtensor *add_tensor(gguf_writer *w, const void *name, size_t name_len) {
    wtensor *t = realloc(w->tensors, (w->n_tensors + 1) * sizeof *t);
    char *copy = malloc(name_len + 1);
    if (t) w->tensors = t;
    if (!t || !copy) {
        free(copy);
        w->failed = true;
        return NULL;
    }
    memcpy(copy, name, name_len);
    copy[name_len] = '\0';
    t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = copy;
    t->name_len = name_len;
    return t;
}

void gw_tensor(gguf_writer *w, const char *name, clinfer_dtype type, uint32_t n_dims,
               const int64_t *ne, const void *data) {
    if (n_dims < 1 || n_dims > 4) {
        w->failed = true;
        return;
    }
    size_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++)
        rows *= (size_t)ne[d];
    size_t size = clinfer_dtype_row_bytes(type, (size_t)ne[0]) * rows;
    uint8_t *copy = malloc(size ? size : 1);
    wtensor *t = copy ? add_tensor(w, name, strlen(name)) : NULL;
    if (!t) {
        free(copy);
        w->failed = true;
        return;
    }
    if (data)
        memcpy(copy, data, size);
    else
        memset(copy, 0, size);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < n_dims; d++)
        t->ne[d] = (uint64_t)ne[d];
    t->type = type;
    t->data = copy;
    t->size = size;
}

void gw_tensor_raw(gguf_writer *w, const void *name, size_t name_len, uint32_t n_dims,
                   const uint64_t *ne, uint32_t type, uint64_t offset) {
    wtensor *t = add_tensor(w, name, name_len);
    if (!t) return;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < n_dims && d < 8; d++)
        t->ne[d] = ne[d];
    t->type = type;
    t->offset = offset;
}

void gw_data_min(gguf_writer *w, size_t bytes) {
    w->data_min = bytes;
}

static size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

static void pad_to(bytes *b, size_t target) {
    static const uint8_t zeros[64];
    while (b->len < target && !b->failed)
        put(b, zeros, target - b->len < sizeof zeros ? target - b->len : sizeof zeros);
}

int gw_to_memory(gguf_writer *w, uint8_t **buf, size_t *len) {
    bytes b = {0};
    *buf = NULL;
    *len = 0;
    if (w->failed || w->kvs.failed) return -1;
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, w->n_tensors);
    put_u64(&b, w->n_kv);
    w->sections.header_end = b.len;
    put(&b, w->kvs.p, w->kvs.len);
    w->sections.kv_end = b.len;

    size_t data_len = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        if (t->data) {
            t->offset = align_up(data_len, w->alignment);
            data_len = t->offset + t->size;
        }
        put_str(&b, t->name, t->name_len);
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 8; d++)
            put_u64(&b, t->ne[d]);
        put_u32(&b, t->type);
        put_u64(&b, t->offset);
    }
    w->sections.tensors_end = b.len;

    size_t data_start = align_up(b.len, w->alignment);
    pad_to(&b, data_start);
    w->sections.data_start = b.len;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (!t->data) continue;
        pad_to(&b, data_start + t->offset);
        put(&b, t->data, t->size);
    }
    pad_to(&b, data_start + w->data_min);
    w->sections.total = b.len;
    if (b.failed) {
        free(b.p);
        return -1;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}

int gw_write_file(gguf_writer *w, const char *path) {
    uint8_t *buf;
    size_t len;
    if (gw_to_memory(w, &buf, &len) != 0) return -1;
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(buf, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    free(buf);
    return rc;
}

gw_sections gw_last_sections(const gguf_writer *w) {
    return w->sections;
}
