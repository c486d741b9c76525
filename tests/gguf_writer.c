/* The test GGUF writer: metadata is serialized as it is added; tensor infos and data are kept
 * until the layout (offsets, padding) is known at serialization. The encoding is the library's
 * (src/gguf_write.h); what is added here is the bookkeeping of fixtures and the raw calls that
 * build malformed files. */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"

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
    gguf_buf kvs;
    uint64_t n_kv;
    wtensor *tensors;
    size_t n_tensors;
    uint32_t alignment;
    size_t data_min;
    bool failed;
    gw_sections sections;
};

gguf_writer *gw_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_WRITE_ALIGNMENT;
    return w;
}

void gw_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->tensors);
    gguf_buf_free(&w->kvs);
    free(w);
}

static void kv_head(gguf_writer *w, const char *key, gguf_type type) {
    gguf_put_kv_head(&w->kvs, key, strlen(key), type);
    w->n_kv++;
}

void gw_kv_scalar(gguf_writer *w, const char *key, gguf_type type, const void *value) {
    if (gguf_type_size(type) == 0) {
        w->failed = true;
        return;
    }
    kv_head(w, key, type);
    gguf_put_scalar(&w->kvs, type, value);
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
    gguf_put_str(&w->kvs, v, strlen(v));
}

void gw_kv_arr(gguf_writer *w, const char *key, gguf_type elem, const void *values, size_t n) {
    size_t es = gguf_type_size(elem);
    if (es == 0) {
        w->failed = true;
        return;
    }
    size_t host_size = elem == GGUF_TYPE_BOOL ? sizeof(bool) : es;
    kv_head(w, key, GGUF_TYPE_ARRAY);
    gguf_put_u32(&w->kvs, elem);
    gguf_put_u64(&w->kvs, n);
    for (size_t i = 0; i < n; i++)
        gguf_put_scalar(&w->kvs, elem, (const uint8_t *)values + i * host_size);
}

void gw_kv_arr_str(gguf_writer *w, const char *key, const char *const *strs, size_t n) {
    kv_head(w, key, GGUF_TYPE_ARRAY);
    gguf_put_u32(&w->kvs, GGUF_TYPE_STRING);
    gguf_put_u64(&w->kvs, n);
    for (size_t i = 0; i < n; i++)
        gguf_put_str(&w->kvs, strs[i], strlen(strs[i]));
}

void gw_kv_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n) {
    gw_kv_arr(w, key, GGUF_TYPE_FLOAT32, v, n);
}

void gw_kv_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n) {
    gw_kv_arr(w, key, GGUF_TYPE_INT32, v, n);
}

void gw_kv_raw(gguf_writer *w, const void *key, size_t key_len, uint32_t type, const void *value,
               size_t value_len) {
    gguf_put_kv_head(&w->kvs, key, key_len, type);
    gguf_put_bytes(&w->kvs, value, value_len);
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
    size_t size = dtype_row_bytes(type, (size_t)ne[0]) * rows;
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

/* A raw info may claim any n_dims, of which the first 8 dimensions are written: the claim is
 * patched over the count of those written. */
static void put_tensor_info(gguf_buf *b, const wtensor *t) {
    size_t n_dims_at = b->len + 8 + t->name_len;
    uint32_t written = t->n_dims < 8 ? t->n_dims : 8;
    gguf_put_tensor_info(b, t->name, t->name_len, written, t->ne, t->type, t->offset);
    for (int i = 0; i < 4 && !b->failed; i++)
        b->p[n_dims_at + i] = (uint8_t)(t->n_dims >> (8 * i));
}

/* Zeros up to target bytes. */
static void pad_to(gguf_buf *b, size_t target) {
    if (b->len < target) gguf_put_zeros(b, target - b->len);
}

int gw_to_memory(gguf_writer *w, uint8_t **buf, size_t *len) {
    gguf_buf b = {0};
    *buf = NULL;
    *len = 0;
    if (w->failed || w->kvs.failed) return -1;
    gguf_put_header(&b, w->n_tensors, w->n_kv);
    w->sections.header_end = b.len;
    gguf_put_bytes(&b, w->kvs.p, w->kvs.len);
    w->sections.kv_end = b.len;

    size_t data_len = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        if (t->data) {
            t->offset = gguf_align_up(data_len, w->alignment);
            data_len = t->offset + t->size;
        }
        put_tensor_info(&b, t);
    }
    w->sections.tensors_end = b.len;

    size_t data_start = gguf_align_up(b.len, w->alignment);
    pad_to(&b, data_start);
    w->sections.data_start = b.len;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (!t->data) continue;
        pad_to(&b, data_start + t->offset);
        gguf_put_bytes(&b, t->data, t->size);
    }
    pad_to(&b, data_start + w->data_min);
    w->sections.total = b.len;
    if (b.failed) {
        gguf_buf_free(&b);
        return -1;
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}

int gw_write_file(gguf_writer *w, const char *path) {
    uint8_t *buf;
    size_t len;
    gguf_out o;
    if (gw_to_memory(w, &buf, &len) != 0) return -1;
    clinfer_status st = gguf_out_open(&o, path);
    if (st == CLINFER_OK) st = gguf_out_write(&o, buf, len);
    if (st == CLINFER_OK) st = gguf_out_commit(&o);
    gguf_out_discard(&o);
    free(buf);
    return st == CLINFER_OK ? 0 : -1;
}

gw_sections gw_last_sections(const gguf_writer *w) {
    return w->sections;
}
