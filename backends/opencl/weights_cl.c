/* Weights on the device: how each GGUF block type is split into a quant and a scale array at
 * upload (clinfer_block_split, from the type table; repack_cl.c lays the arrays out), rows split
 * over several allocations where one array would exceed the device's (or CLINFER_MAX_ALLOC's)
 * limit, Q8_0/Q4_0/Q4_1 rows interleaved by 16 where the device built matvec_q8_il (PoCL on an
 * AVX2 host), and on CPU devices the arrays placed as sub-buffers of a few large arenas. f32/f16
 * rows of a mapped model file are not copied on devices that share host memory: the buffers are
 * made on the mapping. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "type_kernels_cl.h"
#include "weights_cl.h"
#include "options.h"

static size_t blk_elems(const clinfer_block_split *l) {
    return dtype_block_elems(l->type);
}

static size_t blk_bytes(const clinfer_block_split *l) {
    return dtype_block_bytes(l->type);
}

/* Bytes of the scales of one block as the weight stores them. */
static size_t scale_bytes(const clinfer_block_split *l, int il) {
    return il ? l->s[0].len : l->s_bytes;
}

/* Bytes of a row of k elements as the weight stores them (what kernels read). */
size_t cl_stored_row_bytes(const clinfer_block_split *l, int il, int k) {
    return (size_t)k / blk_elems(l) * (l->s_bytes ? l->q_len + scale_bytes(l, il) : blk_bytes(l));
}

clinfer_status cl_store_init(cl_backend_ctx *b) {
    struct cl_store *s = calloc(1, sizeof *s);
    if (!s) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: weight store");
    b->store = s;
    cl_uint align_bits = 0;
    clinfer_status st = cl_error(clGetDeviceInfo(b->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                                                 sizeof align_bits, &align_bits, NULL),
                                 "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)");
    s->align = align_bits >= 8 ? align_bits / 8 : 1;
    s->arenas = b->info.type == CLINFER_DEVICE_CPU; /* for graph launches */
    cl_bool unified = CL_FALSE; /* deprecated in OpenCL 2.0, still answered; false on error */
    clGetDeviceInfo(b->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    s->host_unified = unified == CL_TRUE;
    return st;
}

void cl_store_free(cl_backend_ctx *b) {
    struct cl_store *s = b->store;
    if (!s) return;
    cl_wcache_free(b);
    if (s->filling) cl_release_arena(s->filling); /* weights still alive keep their arena */
    if (s->window) cl_release_arena(s->window);
    free(s);
    b->store = NULL;
}

void cl_weight_host_data(cl_backend_ctx *b, const void *base, size_t size) {
    b->store->host = base;
    b->store->host_size = size;
}

/* Whether bytes of host data are used where they lie: inside the declared host data, on a
 * device that reads host memory directly. */
static bool in_place(const cl_backend_ctx *b, const void *host, size_t bytes) {
    const struct cl_store *s = b->store;
    const uint8_t *p = host;
    return s->host_unified && s->host && p >= s->host && bytes <= s->host_size &&
           (size_t)(p - s->host) <= s->host_size - bytes;
}

/* Places an array of the declared host data without copying it: its own CL_MEM_USE_HOST_PTR
 * buffer, or where weights go to arenas a sub-buffer of a window, such a buffer over up to
 * ARENA_BYTES of the host data that graph launches take as an arena. A window starts at its
 * first array; later ones join it while their distance from its start is a multiple of the
 * sub-buffer alignment (PoCL takes host pointers of any alignment, sub-buffers only at
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN) and they end inside it. */
static clinfer_status place_in_place(cl_backend_ctx *b, size_t bytes, const void *host,
                                     weight_array *a) {
    struct cl_store *s = b->store;
    const uint8_t *p = host;
    void *ptr = (void *)(uintptr_t)host;
    cl_mem_flags flags = CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR;
    if (!s->arenas) return cl_create_buffer(b, flags, bytes, ptr, &a->mem);
    cl_arena *w = s->window;
    const uint8_t *base = w ? (const uint8_t *)w->base : NULL;
    if (!w || p < base || (size_t)(p - base) % s->align || (size_t)(p - base) + bytes > w->size) {
        size_t size = bytes > ARENA_BYTES ? bytes : ARENA_BYTES;
        size_t left = s->host_size - (size_t)(p - s->host);
        if (size > left) size = left;
        if (size > cl_alloc_limit(b)) size = bytes; /* parts never exceed the limit */
        cl_arena *arena = calloc(1, sizeof *arena);
        if (!arena) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul: window");
        clinfer_status st = cl_create_buffer(b, flags, size, ptr, &arena->mem);
        if (st != CLINFER_OK) {
            free(arena);
            return st;
        }
        arena->size = arena->used = size;
        arena->base = host;
        arena->holders = 1; /* the state's, while arrays join it */
        if (w) cl_release_arena(w);
        s->window = w = arena;
        base = p;
    }
    return cl_arena_array(w, (size_t)(p - base), bytes, "placing a weight array in a window", a);
}

/* A new arena of size bytes to fill, in *slot. */
static clinfer_status new_arena(cl_backend_ctx *b, uint64_t size, cl_arena **slot) {
    cl_arena *arena = calloc(1, sizeof *arena);
    if (!arena) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul: arena");
    clinfer_status st = cl_create_buffer(b, CL_MEM_READ_ONLY, (size_t)size, NULL, &arena->mem);
    if (st != CLINFER_OK) {
        free(arena);
        return st;
    }
    arena->size = (size_t)size;
    arena->holders = 1; /* the slot's, while it is filled */
    if (*slot) cl_release_arena(*slot);
    *slot = arena;
    return CLINFER_OK;
}

/* Makes a a sub-buffer of bytes in the arena being filled in *slot (a new arena when it lacks
 * room). */
static clinfer_status reserve(cl_backend_ctx *b, size_t bytes, cl_arena **slot, weight_array *a) {
    size_t at = *slot ? cl_round_up((*slot)->used, b->store->align) : 0;
    if (!*slot || at + bytes > (*slot)->size) {
        uint64_t size = bytes > ARENA_BYTES ? bytes : ARENA_BYTES;
        if (size > cl_alloc_limit(b)) size = cl_alloc_limit(b); /* parts never exceed it */
        clinfer_status st = new_arena(b, size, slot);
        if (st != CLINFER_OK) return st;
        at = 0;
    }
    clinfer_status st = cl_arena_array(*slot, at, bytes, "placing a weight array in an arena", a);
    if (st == CLINFER_OK) (*slot)->used = at + bytes;
    return st;
}

/* Uploads bytes of host data as a weight array: in place where in_place says so, a sub-buffer
 * of an arena where weights go to arenas, else a buffer of its own. */
static clinfer_status place(cl_backend_ctx *b, size_t bytes, const void *host, weight_array *a) {
    void *src = (void *)(uintptr_t)host;
    if (in_place(b, host, bytes)) return place_in_place(b, bytes, host, a);
    if (!b->store->arenas)
        return cl_create_buffer(b, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, src, &a->mem);
    clinfer_status st = reserve(b, bytes, &b->store->filling, a);
    if (st != CLINFER_OK) return st;
    return cl_error(clEnqueueWriteBuffer(b->queue, a->arena->mem, CL_TRUE, a->offset, bytes, host,
                                         0, NULL, NULL),
                    "writing a weight array to its arena");
}

static void release_array(weight_array *a) {
    if (a->mem) clReleaseMemObject(a->mem);
    if (a->arena) cl_release_arena(a->arena);
}

/* Maps arrays q and s of arenas for the host to write (*qd, *sd), the first without waiting:
 * the queue is in order, so the second map's completion covers both. */
static clinfer_status map_arrays(cl_backend_ctx *b, const weight_array *q, size_t q_bytes,
                                 const weight_array *s, size_t s_bytes, uint8_t **qd,
                                 uint8_t **sd) {
    cl_int err = CL_SUCCESS;
    *qd = clEnqueueMapBuffer(b->queue, q->arena->mem, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION,
                             q->offset, q_bytes, 0, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        *sd = clEnqueueMapBuffer(b->queue, s->arena->mem, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION,
                                 s->offset, s_bytes, 0, NULL, NULL, &err);
    return cl_error(err, "mapping a weight part's arrays");
}

/* Unmaps what map_arrays mapped (each where it was) and waits, so that every queue sees them. */
static clinfer_status unmap_arrays(cl_backend_ctx *b, const weight_part *p, uint8_t *qd,
                                   uint8_t *sd) {
    cl_int err = CL_SUCCESS, e;
    if (qd && (e = clEnqueueUnmapMemObject(b->queue, p->q.arena->mem, qd, 0, NULL, NULL))) err = e;
    if (sd && (e = clEnqueueUnmapMemObject(b->queue, p->s.arena->mem, sd, 0, NULL, NULL))) err = e;
    if ((e = clFinish(b->queue))) err = e;
    return cl_error(err, "unmapping a weight part's arrays");
}

/* The bytes of the quant and scale arrays of rows rows of k elements (split types). */
static void array_bytes(const clinfer_block_split *l, int il, int k, int rows, size_t *q_bytes,
                        size_t *s_bytes) {
    size_t nb_row = (size_t)k / blk_elems(l);
    size_t r = il ? cl_round_up((size_t)rows, 16) : (size_t)rows;
    *q_bytes = r * nb_row * l->q_len;
    *s_bytes = r * nb_row * scale_bytes(l, il);
}

/* Uploads part p; with il its rows are interleaved by 16, zero rows padding the last group.
 * Where weights go to arenas the arrays are laid out straight into them (mapped), and recorded
 * for the weight cache as rec (its type, shape and part). */
static clinfer_status upload_part(cl_backend_ctx *b, const clinfer_block_split *l,
                                  const uint8_t *data, int k, int il, weight_part *p,
                                  cl_cached_part rec) {
    clinfer_status st = CLINFER_OK;
    size_t nb_row = (size_t)k / blk_elems(l), row_bytes = nb_row * blk_bytes(l);
    if (!l->s_bytes) /* f32/f16: the GGUF rows are the layout */
        return place(b, (size_t)p->rows * row_bytes, data + (size_t)p->row0 * row_bytes, &p->q);
    size_t q_bytes, s_bytes;
    array_bytes(l, il, k, p->rows, &q_bytes, &s_bytes);
    const uint8_t *src = data + (size_t)p->row0 * row_bytes;
    uint8_t *q = NULL, *s = NULL; /* the arrays: mapped in their arenas, else host copies */
    bool direct = b->store->arenas;
    if (direct) {
        CHECK(reserve(b, q_bytes, cl_wcache_slot(b), &p->q));
        CHECK(reserve(b, s_bytes, cl_wcache_slot(b), &p->s));
        CHECK(map_arrays(b, &p->q, q_bytes, &p->s, s_bytes, &q, &s));
    } else if (!(q = malloc(q_bytes)) || !(s = malloc(s_bytes))) {
        CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                       "OpenCL matmul: %zu + %zu bytes to re-lay out %d rows of %s", q_bytes,
                       s_bytes, p->rows, dtype_name(l->type)));
    }
    cl_repack(l, il, src, nb_row, (size_t)p->rows, q, s);
    if (!direct) {
        CHECK(place(b, q_bytes, q, &p->q));
        CHECK(place(b, s_bytes, s, &p->s));
    }
cleanup:
    if (direct && (q || s)) {
        clinfer_status un = unmap_arrays(b, p, q, s);
        if (st == CLINFER_OK) st = un;
        rec.q_bytes = q_bytes;
        rec.s_bytes = s_bytes;
        if (st == CLINFER_OK) cl_wcache_record(b, rec, p);
    } else if (!direct) {
        free(q);
        free(s);
    }
    return st;
}

/* How a weight of type, m x k, is split: rows interleaved by 16 or not, rows per part, parts.
 * Builds the type's kernels first: whether it interleaves depends on them. */
typedef struct {
    int il;
    uint64_t rows_per_part;
    int n_parts;
} weight_plan;

static clinfer_status plan_weight(cl_backend_ctx *b, const clinfer_block_split *l, int m, int k,
                                  weight_plan *pl) {
    clinfer_status st = cl_build_type(b, l->type);
    if (st != CLINFER_OK) return st;
    size_t nb_row = (size_t)k / blk_elems(l);
    size_t widest = nb_row * (l->s_bytes ? l->q_len : blk_bytes(l));
    if (nb_row * l->s_bytes > widest) widest = nb_row * l->s_bytes;
    pl->rows_per_part = cl_alloc_limit(b) / widest;
    /* interleaved parts hold whole groups of 16 rows (the last one padded) */
    const type_kernels *t = &b->types->types[l->type]; /* interleave 2: forced, for oclgrind */
    pl->il = (t->matvec_q8_il || (b->types->interleave == 2 && t->matvec_il_n)) &&
             pl->rows_per_part >= 16;
    if (pl->il) pl->rows_per_part -= pl->rows_per_part % 16;
    if (pl->rows_per_part == 0)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL weight_create: one %s row of %d elements (%zu bytes) exceeds "
                        "the allocation limit of %llu bytes",
                        dtype_name(l->type), k, widest, (unsigned long long)cl_alloc_limit(b));
    if (pl->rows_per_part > (uint64_t)m) pl->rows_per_part = (uint64_t)m;
    pl->n_parts = (int)(((uint64_t)m + pl->rows_per_part - 1) / pl->rows_per_part);
    return CLINFER_OK;
}

static int part_rows(const weight_plan *pl, int m, int i) {
    int row0 = (int)((uint64_t)i * pl->rows_per_part);
    return m - row0 < (int)pl->rows_per_part ? m - row0 : (int)pl->rows_per_part;
}

/* The weight cache's records of this weight's parts where the file being read holds them (the
 * arrays' sizes as this build lays them out), else NULL. */
static const cl_cached_part *cached(cl_backend_ctx *b, const clinfer_block_split *l, int m, int k,
                                    const weight_plan *pl) {
    if (!l->s_bytes) return NULL; /* f32/f16 need no re-layout */
    const cl_cached_part *rec = cl_wcache_next(b, l->type, m, k, pl->il, pl->n_parts);
    for (int i = 0; rec && i < pl->n_parts; i++) {
        size_t q_bytes, s_bytes;
        array_bytes(l, pl->il, k, part_rows(pl, m, i), &q_bytes, &s_bytes);
        if (rec[i].q_bytes != q_bytes || rec[i].s_bytes != s_bytes) rec = NULL;
    }
    return rec;
}

bool cl_weight_cached(cl_backend_ctx *b, clinfer_dtype type, int m, int k) {
    clinfer_block_split split = dtype_split(type);
    weight_plan pl = {0};
    if (!split.kblk || m <= 0 || k <= 0 || k % (int)blk_elems(&split) ||
        (uint64_t)m * (uint64_t)k > INT_MAX || plan_weight(b, &split, m, k, &pl) != CLINFER_OK)
        return false;
    return cached(b, &split, m, k, &pl) != NULL;
}

clinfer_status cl_weight_create(cl_backend_ctx *b, clinfer_dtype type, int m, int k,
                                const void *data, clinfer_buffer **out) {
    clinfer_status st = CLINFER_OK;
    struct cl_weight *w = NULL;
    clinfer_buffer *buf = NULL;
    clinfer_block_split split = dtype_split(type);
    const clinfer_block_split *l = &split;
    if (!out || !data || m <= 0 || k <= 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "OpenCL weight_create: m %d, k %d, data %p, out %p", m, k, data,
                        (void *)out);
    *out = NULL;
    if (!l->kblk)
        return err_fail(CLINFER_ERR_UNSUPPORTED, "OpenCL weight_create: type %d", (int)type);
    if (k % (int)blk_elems(l))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "OpenCL weight_create: k %d is not a multiple of the %s block (%zu)", k,
                        dtype_name(type), blk_elems(l));
    if ((uint64_t)m * (uint64_t)k > INT_MAX)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL weight_create: %d x %d elements exceed the kernels' int "
                        "indexing",
                        m, k);
    weight_plan pl = {0};
    CHECK(plan_weight(b, l, m, k, &pl));
    const cl_cached_part *rec = cached(b, l, m, k, &pl);
    if (!rec && l->s_bytes) cl_wcache_mismatch(b); /* a file being read lacks it */
    w = calloc(1, sizeof *w + (size_t)pl.n_parts * sizeof w->parts[0]);
    buf = calloc(1, sizeof *buf);
    if (!w || !buf)
        CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL weight_create: %d parts", pl.n_parts));
    w->layout = split;
    w->m = m;
    w->k = k;
    w->il = pl.il;
    for (int i = 0; i < pl.n_parts; i++) {
        weight_part *p = &w->parts[i];
        p->row0 = (int)((uint64_t)i * pl.rows_per_part);
        p->rows = part_rows(&pl, m, i);
        w->n_parts = i + 1; /* counts parts holding buffers, for cleanup */
        if (rec) {
            CHECK(cl_wcache_array(b, rec[i].q_arena, rec[i].q_off, rec[i].q_bytes, &p->q));
            CHECK(cl_wcache_array(b, rec[i].s_arena, rec[i].s_off, rec[i].s_bytes, &p->s));
        } else {
            cl_cached_part part = {.type = (uint32_t)type,
                                   .m = m,
                                   .k = k,
                                   .il = pl.il,
                                   .n_parts = pl.n_parts,
                                   .part = i};
            CHECK(upload_part(b, l, data, k, pl.il, p, part));
        }
    }
    if (rec) cl_wcache_taken(b, pl.n_parts);
    buf->weight = w;
    buf->head = (clinfer_buffer_head){
        .bytes = (size_t)m * cl_stored_row_bytes(l, pl.il, k),
        .weight = true,
        /* f32/f16 parts are the GGUF rows: see upload_part */
        .in_place =
            !l->s_bytes && in_place(b, data, (size_t)m * blk_bytes(l) * ((size_t)k / blk_elems(l))),
        .m = m,
        .k = k};
    *out = buf;
    return CLINFER_OK;
cleanup:
    err_prefix("OpenCL weight_create(%s, %d x %d)", dtype_name(type), m, k);
    cl_weight_free(w);
    free(buf);
    return st;
}

void cl_weight_free(struct cl_weight *w) {
    if (!w) return;
    for (int i = 0; i < w->n_parts; i++) {
        release_array(&w->parts[i].q);
        release_array(&w->parts[i].s);
    }
    free(w);
}
