/* A bounded GGUF (v2, v3) reader. Every field is validated before use; a malformed file yields
 * CLINFER_ERR_FORMAT with a message naming the field, never a crash. Strings point into the
 * mapped file and are not NUL-terminated. */
#ifndef CLINFER_GGUF_H
#define CLINFER_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "quant.h"

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
} gguf_type;

typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    gguf_type type;      /* GGUF_TYPE_ARRAY for arrays */
    gguf_type arr_type;  /* element type of an array */
    uint64_t arr_n;      /* element count of an array */
    const uint8_t *data; /* the raw little-endian value (array: first element), maybe unaligned */
    const uint64_t *str_offsets; /* string arrays: byte offset of each element from data */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[4]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    clinfer_dtype type;
    uint64_t offset;  /* from the start of the data section */
    uint64_t size;    /* bytes */
    const void *data; /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Maps and validates a file. */
clinfer_status gguf_open(const char *path, gguf_file **out);
/* Validates a buffer the caller keeps alive (fuzzing, tests). */
clinfer_status gguf_open_memory(const void *data, size_t size, gguf_file **out);
void gguf_close(gguf_file *f);
/* Makes [ptr, ptr + len) of a mapped file the process's own copy (read from the file into
 * anonymous pages at the same addresses), so that a truncation of the file cannot take it away
 * later (SIGBUS at the next read) and one before is CLINFER_ERR_IO here, naming the sizes.
 * gguf_open claims the header; readers of tensor data claim them before reading. On failure the
 * range reads as zeros past what was read: the caller gives up the file. No effect on files
 * opened from memory or on pointers outside the mapping. */
clinfer_status gguf_claim(const gguf_file *f, const void *ptr, size_t len);
/* Tells the kernel that the whole pages of a mapped file inside [ptr, ptr + len) are no longer
 * needed (weights already copied to a backend), so they stop counting in resident memory; they
 * stay readable (from the file again, claimed or not). No effect on files opened from memory or on
 * pointers outside the mapping. */
void gguf_release(const gguf_file *f, const void *ptr, size_t len);

/* The file's mapping (gguf_open), which lives until gguf_close; false for files opened from
 * memory. */
bool gguf_mapping(const gguf_file *f, const void **base, size_t *size);

/* What identifies a mapped file's contents cheaply: stat = its device, inode, size and
 * modification time (ns) as gguf_open found them, and the bytes before its tensor data (header,
 * metadata, tensor infos). False for files opened from memory. */
bool gguf_identity(const gguf_file *f, uint64_t stat[4], const void **header, size_t *header_size);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_file_size(const gguf_file *f);

size_t gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key); /* NULL if absent */

/* Typed getters. CLINFER_ERR_NOT_FOUND if absent (message set), CLINFER_ERR_FORMAT if the type
 * does not fit. Integer getters accept any integer type whose value fits the result. */
clinfer_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
clinfer_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
clinfer_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
clinfer_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
clinfer_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* An array whose elements have type elem (checked). */
clinfer_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem,
                            const gguf_kv **out);

/* Elements of arrays (i < kv->arr_n; type checked by the caller through gguf_get_arr). */
gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i);
float gguf_arr_f32(const gguf_kv *kv, uint64_t i);
int32_t gguf_arr_i32(const gguf_kv *kv, uint64_t i); /* INT32 or UINT32 arrays */

size_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */

bool gguf_str_eq(gguf_str s, const char *c);
/* Bytes of one value of a scalar type; 0 for strings, arrays and unknown types. */
size_t gguf_type_size(gguf_type type);

/* For messages (gguf_type.c): at most GGUF_SHOW bytes of a key or name, a type's name ("u32"),
 * and the failure of a value of kv's type where want (an array of want_elem) was expected
 * (what: the subject, "value", "gguf: key 'x'"). */
#define GGUF_SHOW 64
static inline int gguf_show_len(gguf_str s) {
    return (int)(s.len < GGUF_SHOW ? s.len : GGUF_SHOW);
}
const char *gguf_type_name(uint32_t type);

/* Little-endian reads at any alignment (the file's byte order, whatever the host's). */
static inline uint64_t gguf_le_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t gguf_le_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

clinfer_status gguf_type_mismatch(const char *what, const gguf_kv *kv, gguf_type want,
                                  gguf_type want_elem);

#endif
