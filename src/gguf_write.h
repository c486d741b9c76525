/* Writing GGUF v3: the byte encoding of the header, metadata pairs and tensor infos into a
 * growing buffer, and an output file that appears under its name only when complete (written as
 * NAME.tmp, renamed at the end), so a failed write never leaves a partial file behind.
 * clinfer_quantize_file writes through these; so does the tests' fixture writer
 * (tests/gguf_writer.c), which adds only its deliberately malformed variants. */
#ifndef CLINFER_GGUF_WRITE_H
#define CLINFER_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf.h"

#define GGUF_WRITE_VERSION 3u
#define GGUF_WRITE_ALIGNMENT 32u /* GGUF's default, when general.alignment is absent */

/* Bytes appended in the file's (little-endian) order. After a failed allocation `failed` is set
 * and further puts do nothing, so a sequence of puts is checked once at its end. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} gguf_buf;

void gguf_buf_free(gguf_buf *b);
void gguf_put_bytes(gguf_buf *b, const void *src, size_t n);
void gguf_put_zeros(gguf_buf *b, size_t n);
void gguf_put_u32(gguf_buf *b, uint32_t v);
void gguf_put_u64(gguf_buf *b, uint64_t v);
void gguf_put_str(gguf_buf *b, const void *s, size_t n); /* u64 length, then the bytes */

/* Magic, version, tensor and pair counts. */
void gguf_put_header(gguf_buf *b, uint64_t n_tensors, uint64_t n_kv);
/* A pair's key and value type; its value follows. */
void gguf_put_kv_head(gguf_buf *b, const void *key, size_t key_len, uint32_t type);
/* One value of a scalar type from a host value of that type (a C bool for GGUF_TYPE_BOOL);
 * false, with nothing written, for strings, arrays and unknown types. */
bool gguf_put_scalar(gguf_buf *b, gguf_type type, const void *value);
/* A pair read by the GGUF reader, key and value as the file had them. */
void gguf_put_kv(gguf_buf *b, const gguf_kv *kv);
/* A tensor info: name, n_dims, the first n_dims of ne, type id, offset in the data section. */
void gguf_put_tensor_info(gguf_buf *b, const void *name, size_t name_len, uint32_t n_dims,
                          const uint64_t *ne, uint32_t type, uint64_t offset);

/* n rounded up to a multiple of alignment (> 0). */
static inline uint64_t gguf_align_up(uint64_t n, uint64_t alignment) {
    return (n + alignment - 1) / alignment * alignment;
}

/* A file written as path.tmp and renamed to path by gguf_out_commit. */
typedef struct {
    FILE *f;
    char *path, *tmp;
    uint64_t pos; /* bytes written so far */
    bool created; /* tmp is this gguf_out's to remove */
} gguf_out;

/* Creates (or truncates) path.tmp. On failure nothing is left open or created. */
clinfer_status gguf_out_open(gguf_out *o, const char *path);
clinfer_status gguf_out_write(gguf_out *o, const void *data, size_t n);
/* Zeros up to the next multiple of alignment. */
clinfer_status gguf_out_pad(gguf_out *o, uint64_t alignment);
/* Flushes, syncs and closes the file, then renames it to its path; on failure it is removed. */
clinfer_status gguf_out_commit(gguf_out *o);
/* Closes and removes an uncommitted file; nothing after a commit (or on a zeroed gguf_out). */
void gguf_out_discard(gguf_out *o);

#endif
