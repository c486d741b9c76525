/* The GGUF encoder and the all-or-nothing output file (gguf_write.h). */
#include "gguf_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

/* ---- the buffer ------------------------------------------------------------------------- */

void gguf_buf_free(gguf_buf *b) {
    free(b->p);
    *b = (gguf_buf){0};
}

/* Room for n more bytes, doubling the capacity. */
static bool reserve(gguf_buf *b, size_t n) {
    if (b->failed) return false;
    if (n <= b->cap - b->len) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void gguf_put_bytes(gguf_buf *b, const void *src, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

void gguf_put_zeros(gguf_buf *b, size_t n) {
    if (!reserve(b, n)) return;
    memset(b->p + b->len, 0, n);
    b->len += n;
}

/* A host value of n bytes (n <= 8) in little-endian order, whatever the host's. */
static void put_le(gguf_buf *b, const void *value, size_t n) {
    const uint16_t probe = 1;
    const uint8_t *src = value;
    uint8_t tmp[8];
    bool little = *(const uint8_t *)&probe == 1;
    for (size_t i = 0; i < n; i++)
        tmp[i] = little ? src[i] : src[n - 1 - i];
    gguf_put_bytes(b, tmp, n);
}

void gguf_put_u32(gguf_buf *b, uint32_t v) {
    put_le(b, &v, sizeof v);
}

void gguf_put_u64(gguf_buf *b, uint64_t v) {
    put_le(b, &v, sizeof v);
}

void gguf_put_str(gguf_buf *b, const void *s, size_t n) {
    gguf_put_u64(b, n);
    gguf_put_bytes(b, s, n);
}

/* ---- the encoding ----------------------------------------------------------------------- */

void gguf_put_header(gguf_buf *b, uint64_t n_tensors, uint64_t n_kv) {
    gguf_put_bytes(b, "GGUF", 4);
    gguf_put_u32(b, GGUF_WRITE_VERSION);
    gguf_put_u64(b, n_tensors);
    gguf_put_u64(b, n_kv);
}

void gguf_put_kv_head(gguf_buf *b, const void *key, size_t key_len, uint32_t type) {
    gguf_put_str(b, key, key_len);
    gguf_put_u32(b, type);
}

bool gguf_put_scalar(gguf_buf *b, gguf_type type, const void *value) {
    size_t n = gguf_type_size(type);
    if (n == 0) return false;
    if (type == GGUF_TYPE_BOOL) {
        uint8_t v = *(const bool *)value;
        gguf_put_bytes(b, &v, 1);
    } else {
        put_le(b, value, n);
    }
    return true;
}

/* The bytes of kv's value after its type (arrays: after element type and count), which the
 * reader has checked lie inside the file: scalars are already little-endian there. */
static size_t value_bytes(const gguf_kv *kv) {
    if (kv->type == GGUF_TYPE_STRING) return 8 + (size_t)gguf_le_u64(kv->data);
    if (kv->type != GGUF_TYPE_ARRAY) return gguf_type_size(kv->type);
    if (kv->arr_n == 0) return 0;
    if (kv->arr_type != GGUF_TYPE_STRING) return (size_t)kv->arr_n * gguf_type_size(kv->arr_type);
    uint64_t last = kv->str_offsets[kv->arr_n - 1];
    return (size_t)(last + 8 + gguf_le_u64(kv->data + last));
}

void gguf_put_kv(gguf_buf *b, const gguf_kv *kv) {
    gguf_put_kv_head(b, kv->key.ptr, kv->key.len, kv->type);
    if (kv->type == GGUF_TYPE_ARRAY) {
        gguf_put_u32(b, kv->arr_type);
        gguf_put_u64(b, kv->arr_n);
    }
    gguf_put_bytes(b, kv->data, value_bytes(kv));
}

void gguf_put_tensor_info(gguf_buf *b, const void *name, size_t name_len, uint32_t n_dims,
                          const uint64_t *ne, uint32_t type, uint64_t offset) {
    gguf_put_str(b, name, name_len);
    gguf_put_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        gguf_put_u64(b, ne[d]);
    gguf_put_u32(b, type);
    gguf_put_u64(b, offset);
}

/* ---- the output file -------------------------------------------------------------------- */

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

clinfer_status gguf_out_open(gguf_out *o, const char *path) {
    *o = (gguf_out){0};
    o->path = concat(path, "");
    o->tmp = concat(path, ".tmp");
    if (!o->path || !o->tmp) {
        gguf_out_discard(o);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for the path '%s'", path);
    }
    o->f = fopen(o->tmp, "wb");
    if (!o->f) {
        clinfer_status st =
            err_fail(CLINFER_ERR_IO, "cannot create '%s': %s", o->tmp, strerror(errno));
        gguf_out_discard(o);
        return st;
    }
    o->created = true;
    return CLINFER_OK;
}

clinfer_status gguf_out_write(gguf_out *o, const void *data, size_t n) {
    if (n && fwrite(data, 1, n, o->f) != n)
        return err_fail(CLINFER_ERR_IO, "cannot write %zu bytes at offset %llu of '%s': %s", n,
                        (unsigned long long)o->pos, o->tmp, strerror(errno));
    o->pos += n;
    return CLINFER_OK;
}

clinfer_status gguf_out_pad(gguf_out *o, uint64_t alignment) {
    static const uint8_t zeros[256];
    clinfer_status st = CLINFER_OK;
    uint64_t n = gguf_align_up(o->pos, alignment) - o->pos;
    while (st == CLINFER_OK && n > 0) {
        size_t step = n < sizeof zeros ? (size_t)n : sizeof zeros;
        st = gguf_out_write(o, zeros, step);
        n -= step;
    }
    return st;
}

clinfer_status gguf_out_commit(gguf_out *o) {
    clinfer_status st = CLINFER_OK;
    /* fsync: the rename must not land on disk before the data it names. */
    if (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0)
        st = err_fail(CLINFER_ERR_IO, "cannot write '%s': %s", o->tmp, strerror(errno));
    int rc = fclose(o->f);
    o->f = NULL;
    if (st == CLINFER_OK && rc != 0)
        st = err_fail(CLINFER_ERR_IO, "cannot close '%s': %s", o->tmp, strerror(errno));
    if (st == CLINFER_OK && rename(o->tmp, o->path) != 0)
        st = err_fail(CLINFER_ERR_IO, "cannot rename '%s' to '%s': %s", o->tmp, o->path,
                      strerror(errno));
    if (st == CLINFER_OK) o->created = false; /* renamed: nothing left to remove */
    gguf_out_discard(o);
    return st;
}

void gguf_out_discard(gguf_out *o) {
    if (o->f) fclose(o->f);
    if (o->created) remove(o->tmp);
    free(o->tmp);
    free(o->path);
    *o = (gguf_out){0};
}
