/* The weight store: GGUF blocks laid out as weight arrays (repack_cl.c), the arenas those live
 * in on CPU devices (arena_cl.c), the on-disk cache of laid-out arenas (weight_cache_cl.c) and
 * the upload that uses all three (weights_cl.c). */
#ifndef CLINFER_CL_WEIGHTS_H
#define CLINFER_CL_WEIGHTS_H

#include <stdint.h>

#include "cl_backend.h"

enum { ARENA_BYTES = 256 << 20 }; /* weight arenas (CPU devices), unless a part needs more */

/* On CPU devices weights live in arenas: a few large buffers, each weight array a sub-buffer of
 * one, so that one graph launch can name every weight of a model among its few buffer
 * arguments. An arena is filled in order and released when nothing holds it: neither an array
 * in it nor the state, while it is the one being filled. */
/* Host memory that arenas of a weight cache file lie on (weight_cache_cl.c): the file's mapping,
 * or memory of the process's own it was read into; unmapped when its last holder goes. */
typedef struct {
    void *addr;
    size_t size;
    int holders;
} cl_host_region;

typedef struct cl_arena {
    cl_mem mem;
    const void *base; /* a window on host data (place_in_place): the host memory it is */
    size_t size, used;
    int holders;
    cl_host_region *region; /* the memory it lies on (a weight cache file's), or NULL */
} cl_arena;

/* One array of a weight part: its own buffer, or a sub-buffer at offset bytes of an arena. */
typedef struct {
    cl_mem mem;
    cl_arena *arena;
    size_t offset;
} weight_array;

typedef struct {
    weight_array q, s; /* s.mem is NULL for f32/f16 */
    int row0, rows;
} weight_part;

struct cl_weight {
    clinfer_block_split layout; /* its type's (base/quant.c) */
    int m, k;
    int il; /* the parts' rows are interleaved by 16 (word_at in cl/matvec.cl) */
    int n_parts;
    weight_part parts[];
};

/* The weight store of a backend (an instance's stays empty: weights are made on the root). */
struct cl_store {
    cl_arena *filling; /* weights go to arenas (CPU devices): the one being filled, or NULL */
    int arenas;
    size_t align; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes: where sub-buffers may start */
    /* Host data weights may use in place (host_data), on devices that share host memory; the
     * window of it that arrays are placed in now (an arena over the host memory), or NULL. */
    const uint8_t *host;
    size_t host_size;
    int host_unified;
    cl_arena *window;
    struct cl_weight_cache *wcache; /* from weight_cache_open to _close; NULL: none */
};

/* arena_cl.c: the allocation limit for one array (the device's, or CLINFER_MAX_ALLOC when
 * smaller); an arena's holders. */
uint64_t cl_alloc_limit(const cl_backend_ctx *b);
void cl_release_arena(cl_arena *arena);         /* drops a holder; the last releases it */
void cl_release_region(cl_host_region *region); /* the same for a region */
/* Makes a a read-only sub-buffer of bytes at offset at of arena, holding it (what: for the
 * error message). */
clinfer_status cl_arena_array(cl_arena *arena, size_t at, size_t bytes, const char *what,
                              weight_array *a);
/* repack_cl.c: lays out rows GGUF rows of nb blocks each from src as a part's quant array q and
 * scale array s (non-f32/f16 types), il: interleaved by 16, the last group padded with zero
 * rows. Every byte of both arrays is written. */
void cl_repack(const clinfer_block_split *l, int il, const uint8_t *src, size_t nb, size_t rows,
               uint8_t *q, uint8_t *s);

/* weight_cache_cl.c: the cache file of the arenas quantized weights are laid out into. One
 * record per weight part, as the file holds it. */
typedef struct {
    uint32_t type;
    int32_t m, k, il, n_parts, part;
    uint32_t q_arena, s_arena;
    uint64_t q_off, q_bytes, s_off, s_bytes;
} cl_cached_part;
/* The backend's weight_cache_open and _close (backend.h); _free drops it, unwritten. */
bool cl_wcache_open(cl_backend_ctx *b, const void *id, size_t id_size);
void cl_wcache_close(cl_backend_ctx *b);
void cl_wcache_free(cl_backend_ctx *b);
/* Where quantized weights' arrays are reserved: the cache's arena while it writes one, else
 * the state's. */
cl_arena **cl_wcache_slot(cl_backend_ctx *b);
/* Reading a file: the next n_parts records where they are the parts of a weight of type,
 * m x k, il (the caller checks their sizes), else NULL; cl_wcache_array makes one of their
 * arrays, cl_wcache_taken consumes them; cl_wcache_mismatch drops the file for the rest of the
 * load (a weight it does not hold). */
const cl_cached_part *cl_wcache_next(cl_backend_ctx *b, clinfer_dtype type, int m, int k, int il,
                                     int n_parts);
clinfer_status cl_wcache_array(cl_backend_ctx *b, uint32_t arena, uint64_t off, uint64_t bytes,
                               weight_array *a);
void cl_wcache_taken(cl_backend_ctx *b, int n_parts);
void cl_wcache_mismatch(cl_backend_ctx *b);
/* Writing one: records part p of a weight (rec's type, shape and sizes; where p lies is filled
 * in here). */
void cl_wcache_record(cl_backend_ctx *b, cl_cached_part rec, const weight_part *p);
/* Process-wide counts of files used (read or mapped) and written, for tests. */
void cl_weight_cache_stats(unsigned *hits, unsigned *writes);

/* weights_cl.c: the store of a backend, from cl_store_init to cl_store_free (weights still
 * alive keep their arenas); the backend's weight_create, weight_cached (the weight cache file
 * being read holds the next weight, of type and m x k, as this build lays it out) and
 * host_data (host memory that weights may use in place). */
clinfer_status cl_store_init(cl_backend_ctx *b);
void cl_store_free(cl_backend_ctx *b);
clinfer_status cl_weight_create(cl_backend_ctx *b, clinfer_dtype type, int m, int k,
                                const void *data, clinfer_buffer **out);
void cl_weight_free(struct cl_weight *w);
bool cl_weight_cached(cl_backend_ctx *b, clinfer_dtype type, int m, int k);
void cl_weight_host_data(cl_backend_ctx *b, const void *base, size_t size);
/* The bytes a row of k elements takes as stored (what kernels read). */
size_t cl_stored_row_bytes(const clinfer_block_split *l, int il, int k);

#endif
