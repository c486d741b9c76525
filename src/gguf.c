/* The GGUF reader. The file is read through a bounded cursor: every read checks the bytes left
 * and every count is checked against those bytes before anything is allocated, so a hostile
 * file can cost at most memory proportional to its own size. Lookups go through sorted
 * indexes, which also find duplicate keys and tensor names in O(n log n). */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "gguf_cursor.h"
#include "names.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
/* Larger alignments only serve to make padding arithmetic overflow; real files use 32. */
#define GGUF_MAX_ALIGNMENT (1u << 16)
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_NAME 64u /* tensor names: ggml's GGML_MAX_NAME */
/* Smallest encodings, used to bound counts by the bytes left: a kv is a key length, a key of
 * at least one byte, a type and a one-byte value; a tensor info is a name length, a name of at
 * least one byte, n_dims, one dimension, a type and an offset. */
#define GGUF_MIN_KV_BYTES (8u + 1u + 4u + 1u)
#define GGUF_MIN_TENSOR_BYTES (8u + 1u + 4u + 8u + 4u + 8u)

struct gguf_file {
    const uint8_t *base;
    size_t size;
    void *map;        /* non-NULL when gguf_open mapped the file */
    int fd;           /* the mapped file's, to tell its size now (gguf_claim); else -1 */
    uint64_t stat[4]; /* mapped files: device, inode, size, mtime in ns (gguf_identity) */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_start;
    size_t n_kv, kv_cap; /* keys read so far, and allocated */
    gguf_kv *kvs;
    const gguf_kv **kv_index; /* sorted by key */
    size_t n_tensors;
    gguf_tensor *tensors;
    const gguf_tensor **tensor_index; /* sorted by name */
};
static int str_cmp(gguf_str a, gguf_str b) {
    int r = memcmp(a.ptr, b.ptr, a.len < b.len ? a.len : b.len);
    if (r != 0) return r;
    return (a.len > b.len) - (a.len < b.len);
}

static int kv_ptr_cmp(const void *a, const void *b) {
    return str_cmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}

/* bsearch comparator: a gguf_str key against a kv_index entry. */
static int kv_key_cmp(const void *key, const void *entry) {
    return str_cmp(*(const gguf_str *)key, (*(const gguf_kv *const *)entry)->key);
}

static const gguf_kv *kv_lookup(const gguf_file *f, const char *key) {
    gguf_str k = {key, strlen(key)};
    const gguf_kv **hit = bsearch(&k, f->kv_index, f->n_kv, sizeof *f->kv_index, kv_key_cmp);
    return hit ? *hit : NULL;
}

/* After all keys are read: unique keys, the alignment and the tokenizer array lengths. */
static clinfer_status check_metadata(gguf_file *f) {
    for (size_t i = 0; i < f->n_kv; i++)
        f->kv_index[i] = &f->kvs[i];
    if (f->n_kv > 1) qsort(f->kv_index, f->n_kv, sizeof *f->kv_index, kv_ptr_cmp);
    for (size_t i = 1; i < f->n_kv; i++)
        if (str_cmp(f->kv_index[i - 1]->key, f->kv_index[i]->key) == 0)
            return err_fail(CLINFER_ERR_FORMAT, "duplicate key '%.*s'",
                            gguf_show_len(f->kv_index[i]->key), f->kv_index[i]->key.ptr);

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = kv_lookup(f, "general.alignment");
    if (al) {
        uint32_t a = gguf_le_u32(al->data);
        if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
            return err_fail(CLINFER_ERR_FORMAT,
                            "key 'general.alignment' is %u, expected a power of two "
                            "from 1 to %u",
                            a, GGUF_MAX_ALIGNMENT);
        f->alignment = a;
    }

    const gguf_kv *tokens = kv_lookup(f, "tokenizer.ggml.tokens");
    const char *per_token[] = {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
    for (size_t i = 0; tokens && i < sizeof per_token / sizeof per_token[0]; i++) {
        const gguf_kv *kv = kv_lookup(f, per_token[i]);
        if (kv && kv->arr_n != tokens->arr_n)
            return err_fail(CLINFER_ERR_FORMAT,
                            "key '%s' has %llu elements but 'tokenizer.ggml.tokens' "
                            "has %llu",
                            per_token[i], (unsigned long long)kv->arr_n,
                            (unsigned long long)tokens->arr_n);
    }
    return CLINFER_OK;
}

/* ---- tensors ------------------------------------------------------------------------------- */

/* ggml's type names, so a file with a real type clinfer lacks gets a message naming it; NULL
 * marks ids ggml has retired. */
static const char *ggml_type_name(uint32_t t) {
    static const char *const names[] = {
        "F32",     "F16",    "Q4_0",    "Q4_1",  NULL,     NULL,    "Q5_0",  "Q5_1",
        "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
        "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
        "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  NULL,
        NULL,      NULL,     "TQ1_0",   "TQ2_0", NULL,     NULL,    NULL,    "MXFP4"};
    return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

static clinfer_status read_tensor_info(cursor *c, gguf_tensor *t) {
    clinfer_status st;
    uint32_t type = 0;
    CHECK(read_str(c, "tensor name", &t->name));
    CHECK(check_name(t->name, "tensor name", GGUF_MAX_NAME));
    CHECK(read_u32(c, "n_dims", &t->n_dims));
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
        st = err_fail(CLINFER_ERR_FORMAT, "n_dims %u is not in 1..%u", t->n_dims, GGUF_MAX_DIMS);
        goto cleanup;
    }
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims) CHECK(read_u64(c, "dimension", &ne));
        if (ne < 1 || ne > INT64_MAX) {
            st = err_fail(CLINFER_ERR_FORMAT, "dimension ne[%u] = %lld is not positive", d,
                          (long long)ne);
            goto cleanup;
        }
        if (n_elems > INT64_MAX / ne) {
            st = err_fail(CLINFER_ERR_FORMAT, "element count overflows at dimension ne[%u] = %llu",
                          d, (unsigned long long)ne);
            goto cleanup;
        }
        n_elems *= ne;
        t->ne[d] = (int64_t)ne;
    }
    CHECK(read_u32(c, "tensor type", &type));
    if (!dtype_valid(type)) {
        const char *name = ggml_type_name(type);
        char types[256];
        names_list(dtype_weight_name_at, types, sizeof types);
        st = name ? err_fail(CLINFER_ERR_UNSUPPORTED,
                             "tensor type %s (%u) is not supported by clinfer (supported "
                             "types: %s)",
                             name, type, types)
                  : err_fail(CLINFER_ERR_FORMAT, "unknown tensor type %u", type);
        goto cleanup;
    }
    t->type = (clinfer_dtype)type;
    uint64_t blk = dtype_block_elems(t->type);
    uint64_t blk_bytes = dtype_block_bytes(t->type);
    if ((uint64_t)t->ne[0] % blk != 0) {
        st = err_fail(CLINFER_ERR_FORMAT,
                      "dimension ne[0] = %lld is not a multiple of the %s block size %llu",
                      (long long)t->ne[0], dtype_name(t->type), (unsigned long long)blk);
        goto cleanup;
    }
    /* n_elems is a multiple of blk because ne[0] is. */
    if (n_elems / blk > UINT64_MAX / blk_bytes) {
        st = err_fail(CLINFER_ERR_FORMAT, "byte size of %llu %s elements overflows",
                      (unsigned long long)n_elems, dtype_name(t->type));
        goto cleanup;
    }
    t->size = n_elems / blk * blk_bytes;
    CHECK(read_u64(c, "tensor offset", &t->offset));
cleanup:
    return st;
}

static int tensor_name_cmp(const void *a, const void *b) {
    return str_cmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static int tensor_offset_cmp(const void *a, const void *b) {
    uint64_t x = (*(const gguf_tensor *const *)a)->offset;
    uint64_t y = (*(const gguf_tensor *const *)b)->offset;
    return (x > y) - (x < y);
}

/* Each tensor's range lies inside the data section, aligned, and no two ranges overlap. */
static clinfer_status check_tensor_data(gguf_file *f) {
    const gguf_tensor **idx = f->tensor_index;
    uint64_t data_size = f->size - f->data_start;
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0)
            return err_fail(CLINFER_ERR_FORMAT,
                            "tensor '%.*s': offset %llu is not a multiple of the "
                            "alignment %llu",
                            gguf_show_len(t->name), t->name.ptr, (unsigned long long)t->offset,
                            (unsigned long long)f->alignment);
        if (t->offset > data_size || t->size > data_size - t->offset)
            return err_fail(CLINFER_ERR_FORMAT,
                            "tensor '%.*s': offset %llu + size %llu is past end of file "
                            "(data section of %llu bytes at offset %llu, file size %zu)",
                            gguf_show_len(t->name), t->name.ptr, (unsigned long long)t->offset,
                            (unsigned long long)t->size, (unsigned long long)data_size,
                            (unsigned long long)f->data_start, f->size);
        t->data = f->base + f->data_start + t->offset;
        idx[i] = t;
    }
    if (f->n_tensors > 1) qsort(idx, f->n_tensors, sizeof *idx, tensor_offset_cmp);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (idx[i - 1]->offset + idx[i - 1]->size > idx[i]->offset)
            return err_fail(
                CLINFER_ERR_FORMAT,
                "tensor '%.*s' (offset %llu, size %llu) overlaps tensor '%.*s' (offset %llu)",
                gguf_show_len(idx[i - 1]->name), idx[i - 1]->name.ptr,
                (unsigned long long)idx[i - 1]->offset, (unsigned long long)idx[i - 1]->size,
                gguf_show_len(idx[i]->name), idx[i]->name.ptr, (unsigned long long)idx[i]->offset);

    /* The index is left sorted by name for gguf_find_tensor. */
    if (f->n_tensors > 1) qsort(idx, f->n_tensors, sizeof *idx, tensor_name_cmp);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (str_cmp(idx[i - 1]->name, idx[i]->name) == 0)
            return err_fail(CLINFER_ERR_FORMAT, "duplicate tensor name '%.*s'",
                            gguf_show_len(idx[i]->name), idx[i]->name.ptr);
    return CLINFER_OK;
}

/* ---- the file ------------------------------------------------------------------------------ */

static clinfer_status parse(gguf_file *f) {
    clinfer_status st;
    cursor c = {f->base, 0, f->size};
    const uint8_t *magic = NULL;
    uint64_t n_tensors = 0, n_kv = 0;
    CHECK(take(&c, 4, "magic", &magic));
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) {
        st = err_fail(CLINFER_ERR_FORMAT,
                      "magic is %02x %02x %02x %02x, expected \"GGUF\" (not a GGUF file)", magic[0],
                      magic[1], magic[2], magic[3]);
        goto cleanup;
    }
    CHECK(read_u32(&c, "version", &f->version));
    if (f->version != 2 && f->version != 3) {
        /* A big-endian file shows its version byte-swapped. */
        bool swapped = (f->version & 0xffffu) == 0 && f->version != 0;
        st = err_fail(CLINFER_ERR_FORMAT, "version %u is not supported (2 and 3 are)%s", f->version,
                      swapped ? "; big-endian files are not supported" : "");
        goto cleanup;
    }
    CHECK(read_u64(&c, "n_tensors", &n_tensors));
    CHECK(read_u64(&c, "n_kv", &n_kv));
    size_t left = c.size - c.pos;
    if (n_kv > left / GGUF_MIN_KV_BYTES) {
        st = err_fail(CLINFER_ERR_FORMAT,
                      "n_kv %llu needs at least %u bytes each, only %zu bytes left",
                      (unsigned long long)n_kv, GGUF_MIN_KV_BYTES, left);
        goto cleanup;
    }
    if (n_tensors > (left - n_kv * GGUF_MIN_KV_BYTES) / GGUF_MIN_TENSOR_BYTES) {
        st =
            err_fail(CLINFER_ERR_FORMAT,
                     "n_tensors %llu needs at least %u bytes each, only %llu bytes left after n_kv",
                     (unsigned long long)n_tensors, GGUF_MIN_TENSOR_BYTES,
                     (unsigned long long)(left - n_kv * GGUF_MIN_KV_BYTES));
        goto cleanup;
    }
    f->kv_cap = (size_t)n_kv;
    f->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kvs);
    f->kv_index = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kv_index);
    f->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f->tensors);
    f->tensor_index = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f->tensor_index);
    if (!f->kvs || !f->kv_index || !f->tensors || !f->tensor_index) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for %llu kvs, %llu tensors",
                      (unsigned long long)n_kv, (unsigned long long)n_tensors);
        goto cleanup;
    }

    for (; f->n_kv < n_kv; f->n_kv++)
        CHECK(gguf_read_kv(&c, f->n_kv, &f->kvs[f->n_kv]));
    CHECK(check_metadata(f));

    for (; f->n_tensors < n_tensors; f->n_tensors++) {
        gguf_tensor *t = &f->tensors[f->n_tensors];
        st = read_tensor_info(&c, t);
        if (st != CLINFER_OK) {
            if (t->name.len && t->name.len <= GGUF_MAX_NAME)
                err_prefix("tensor %zu '%.*s'", f->n_tensors, gguf_show_len(t->name), t->name.ptr);
            else
                err_prefix("tensor %zu", f->n_tensors);
            goto cleanup;
        }
    }

    /* The data section starts at the next multiple of the alignment. A file without tensors
     * may end right after its tensor infos. */
    f->data_start = c.pos + (f->alignment - c.pos % f->alignment) % f->alignment;
    if (f->n_tensors > 0 && f->data_start > f->size) {
        st = err_fail(CLINFER_ERR_FORMAT,
                      "data section at offset %llu (alignment %llu) is past end of file "
                      "(size %zu)",
                      (unsigned long long)f->data_start, (unsigned long long)f->alignment, f->size);
        goto cleanup;
    }
    if (f->data_start > f->size) f->data_start = f->size;
    CHECK(check_tensor_data(f));
cleanup:
    return st;
}

/* Takes ownership of map and fd (unmapped and closed on failure too). */
static clinfer_status open_buffer(const void *data, size_t size, void *map, int fd,
                                  gguf_file **out) {
    clinfer_status st;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (map) munmap(map, size);
        if (fd >= 0) close(fd);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for the file handle");
    }
    f->base = data;
    f->size = size;
    f->map = map;
    f->fd = fd;
    CHECK(parse(f));
    /* The header is read for as long as the file is open (vocabulary, metadata strings point
     * into it): the process's own copy from here on. */
    if (map) CHECK(gguf_claim(f, map, (size_t)f->data_start));
    *out = f;
cleanup:
    if (st != CLINFER_OK) gguf_close(f);
    return st;
}

clinfer_status gguf_open_memory(const void *data, size_t size, gguf_file **out) {
    if (!out || (!data && size > 0))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "gguf_open_memory: NULL argument");
    *out = NULL;
    /* An empty buffer fails the magic check like an empty file. */
    clinfer_status st = open_buffer(data ? data : "", size, NULL, -1, out);
    if (st != CLINFER_OK) err_prefix("gguf");
    return st;
}

clinfer_status gguf_open(const char *path, gguf_file **out) {
    clinfer_status st;
    struct stat sb;
    void *map = NULL;
    if (!path || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_fail(CLINFER_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        st = err_fail(CLINFER_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(errno));
        goto cleanup;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = err_fail(CLINFER_ERR_IO, "gguf: '%s' is not a regular file", path);
        goto cleanup;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        st = err_fail(CLINFER_ERR_IO, "gguf: '%s' is too large to map (%lld bytes)", path,
                      (long long)sb.st_size);
        goto cleanup;
    }
    size_t size = (size_t)sb.st_size;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            st = err_fail(CLINFER_ERR_IO, "gguf: cannot map '%s' (%zu bytes): %s", path, size,
                          strerror(errno));
            goto cleanup;
        }
    }
    st = open_buffer(map ? map : "", size, map, map ? fd : -1, out);
    if (map) fd = -1; /* the file handle's now, closed or not */
    if (st != CLINFER_OK) err_prefix("gguf: %s", path);
    if (st == CLINFER_OK) {
        uint64_t *id = (*out)->stat;
        id[0] = (uint64_t)sb.st_dev;
        id[1] = (uint64_t)sb.st_ino;
        id[2] = (uint64_t)sb.st_size;
        id[3] = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
    }
cleanup:
    if (fd >= 0) close(fd);
    return st;
}

/* Whether [ptr, ptr + len) lies in the file's mapping. */
static bool in_mapping(const gguf_file *f, const void *ptr, size_t len) {
    uintptr_t map = (uintptr_t)f->map;
    return f->map && len > 0 && (uintptr_t)ptr >= map && (uintptr_t)ptr - map <= f->size &&
           len <= f->size - ((uintptr_t)ptr - map);
}

clinfer_status gguf_claim(const gguf_file *f, const void *ptr, size_t len) {
    if (!f || !in_mapping(f, ptr, len)) return CLINFER_OK;
    uintptr_t map = (uintptr_t)f->map, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)ptr / page * page,
              hi = ((uintptr_t)ptr + len + page - 1) / page * page;
    /* Anonymous pages in place of the file's, read into: a truncation drops a file mapping's
     * pages, even those copied on write, but cannot reach these. */
    if (mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0) == MAP_FAILED)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "gguf: %zu bytes to copy the mapped file into",
                        (size_t)(hi - lo));
    size_t want = (hi < map + f->size ? hi : map + f->size) - lo, done = 0;
    while (done < want) {
        ssize_t n = pread(f->fd, (void *)(lo + done), want - done, (off_t)(lo - map + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            struct stat sb;
            long long now = fstat(f->fd, &sb) == 0 ? (long long)sb.st_size : -1;
            return err_fail(CLINFER_ERR_IO,
                            "gguf: reading bytes %zu to %zu of the file: %s (%lld bytes now, "
                            "%zu when opened)",
                            (size_t)(lo - map + done), (size_t)(lo - map + want),
                            n < 0 ? strerror(errno) : "it shrank", now, f->size);
        }
        done += (size_t)n;
    }
    mprotect((void *)lo, hi - lo, PROT_READ); /* read-only as the file's pages were */
    return CLINFER_OK;
}

void gguf_release(const gguf_file *f, const void *ptr, size_t len) {
    if (!f || !in_mapping(f, ptr, len)) return; /* a copy staged on the heap: nothing to drop */
    uintptr_t map = (uintptr_t)f->map, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)ptr + page - 1) / page * page,
              hi = ((uintptr_t)ptr + len) / page * page;
    /* The file mapped again over them: a claimed copy is freed, a file page dropped, and either
     * refaults from the file if read again. */
    if (lo < hi)
        mmap((void *)lo, hi - lo, PROT_READ, MAP_FIXED | MAP_PRIVATE, f->fd, (off_t)(lo - map));
}

bool gguf_mapping(const gguf_file *f, const void **base, size_t *size) {
    if (!f || !f->map) return false;
    *base = f->map;
    *size = f->size;
    return true;
}

bool gguf_identity(const gguf_file *f, uint64_t stat[4], const void **header, size_t *header_size) {
    if (!f || !f->map) return false;
    memcpy(stat, f->stat, sizeof f->stat);
    *header = f->base;
    *header_size = (size_t)f->data_start;
    return true;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (size_t i = 0; f->kvs && i < f->kv_cap; i++)
        free((void *)f->kvs[i].str_offsets);
    free(f->kvs);
    free(f->kv_index);
    free(f->tensors);
    free(f->tensor_index);
    if (f->map) munmap(f->map, f->size);
    if (f->fd >= 0) close(f->fd);
    free(f);
}

uint32_t gguf_version(const gguf_file *f) {
    return f->version;
}
uint64_t gguf_file_size(const gguf_file *f) {
    return f->size;
}
size_t gguf_kv_count(const gguf_file *f) {
    return f->n_kv;
}
size_t gguf_tensor_count(const gguf_file *f) {
    return f->n_tensors;
}

const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) {
    return i < f->n_kv ? &f->kvs[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    return kv_lookup(f, key);
}

/* bsearch comparator: a gguf_str name against a tensor_index entry. */
static int tensor_name_key_cmp(const void *name, const void *entry) {
    return str_cmp(*(const gguf_str *)name, (*(const gguf_tensor *const *)entry)->name);
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    gguf_str k = {name, strlen(name)};
    const gguf_tensor **hit =
        bsearch(&k, f->tensor_index, f->n_tensors, sizeof *f->tensor_index, tensor_name_key_cmp);
    return hit ? *hit : NULL;
}
