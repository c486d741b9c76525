/* A GGUF v3 writer for tests: builds fixture models and, through the raw calls, malformed files.
 * Adding calls never fail visibly; an allocation failure is remembered and reported by
 * gw_to_memory / gw_write_file (-1). Tensor data is laid out in the order added, each tensor at
 * the next multiple of the alignment: 32, or general.alignment when set to a power of two up to
 * 65536. */
#ifndef CLINFER_TEST_GGUF_WRITER_H
#define CLINFER_TEST_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "quant.h"

typedef struct gguf_writer gguf_writer;

gguf_writer *gw_new(void);
void gw_free(gguf_writer *w);

void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gw_kv_i32(gguf_writer *w, const char *key, int32_t v);
void gw_kv_f32(gguf_writer *w, const char *key, float v);
void gw_kv_bool(gguf_writer *w, const char *key, bool v);
void gw_kv_str(gguf_writer *w, const char *key, const char *v);
/* Any scalar type (not string or array); value points at a host value of that type. */
void gw_kv_scalar(gguf_writer *w, const char *key, gguf_type type, const void *value);

void gw_kv_arr_str(gguf_writer *w, const char *key, const char *const *strs, size_t n);
void gw_kv_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n);
void gw_kv_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n);
/* An array of any scalar element type; values are host values of that type. */
void gw_kv_arr(gguf_writer *w, const char *key, gguf_type elem, const void *values, size_t n);

/* A tensor of n_dims (1..4) dimensions, ne[0] contiguous; data (copied) holds its bytes, NULL
 * gives zeros. */
void gw_tensor(gguf_writer *w, const char *name, clinfer_dtype type, uint32_t n_dims,
               const int64_t *ne, const void *data);

/* ---- malformed files ---------------------------------------------------------------------- */

/* A kv written exactly as given: key bytes, a type id, then value_len raw value bytes. */
void gw_kv_raw(gguf_writer *w, const void *key, size_t key_len, uint32_t type, const void *value,
               size_t value_len);
/* A tensor info written exactly as given (any n_dims, of which the first 8 dims are written
 * from ne; any type id; offset relative to the data section), with no data of its own. */
void gw_tensor_raw(gguf_writer *w, const void *name, size_t name_len, uint32_t n_dims,
                   const uint64_t *ne, uint32_t type, uint64_t offset);
/* Pads the data section to at least bytes (zeros), for raw tensors to point into. */
void gw_data_min(gguf_writer *w, size_t bytes);

/* Where the sections of the last serialized file end. */
typedef struct {
    size_t header_end;  /* magic, version, n_tensors, n_kv */
    size_t kv_end;      /* the metadata */
    size_t tensors_end; /* the tensor infos */
    size_t data_start;  /* after the alignment padding */
    size_t total;
} gw_sections;

/* Serializes into a malloc'd buffer the caller frees. 0 on success, -1 on failure. */
int gw_to_memory(gguf_writer *w, uint8_t **buf, size_t *len);
int gw_write_file(gguf_writer *w, const char *path);
gw_sections gw_last_sections(const gguf_writer *w);

#endif
