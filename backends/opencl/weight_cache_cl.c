/* The on-disk cache of re-laid-out weights (the backend's weight_cache_open .. _close): on CPU
 * devices that share host memory, the arenas that weight_create laid quantized weights out into
 * are written to a file beside the kernel binaries once, and later loads of the same model on
 * the same device make their arenas on that file's data: no re-layout.
 *
 * File <cache dir>/weights-<key>.clw, key = SHA-256 of the model's identity (device, inode, size,
 * mtime, header bytes: gguf_identity), the device, driver, clinfer version, WCACHE_LAYOUT and the
 * limits that shape the arenas. Contents: a header (magic, layout, key, counts, sizes, XXH3-64 of
 * the arenas' bytes, SHA-256 of the header and tables), each arena's used bytes, one record per
 * weight part (type, shape, where its arrays lie), then the arenas, each at a page boundary.
 * Written after the load by a thread of its own (the arenas mapped for reading meanwhile) to a
 * temp file and renamed; a damaged, truncated or foreign file is reported, deleted and
 * rewritten, its data checked before any weight is made on it; a record that does not match the
 * weight asked for drops the file for the rest of the load. A later load maps the file, its size
 * checked against the header first, and hashes the data over the mapping, each chunk populated
 * before it is read (a page past the end of a file truncated meanwhile fails the populate, not
 * with SIGBUS); the arenas are then made on the mapping: the pages the kernels read, touched
 * once, by the check, and shared with other processes using the file. clinfer only replaces
 * (rename) and deletes these files, which leaves a mapping intact; a truncation in place by
 * another program while a model uses the file would take its pages away (SIGBUS at the next
 * kernel): CLINFER_WEIGHT_CACHE=copy reads the data into memory of the process's own instead,
 * which no truncation reaches, at the cost of that memory and the copy (docs/PERFORMANCE.md).
 * No failure here fails a load; CLINFER_WEIGHT_CACHE=0 turns it off and CLINFER_WEIGHT_CACHE_MAX
 * caps the files' total (oldest used evicted first). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "error.h"
#include "log.h"
#include "type_kernels_cl.h"
#include "weights_cl.h"
#include "options.h"
#include "cache_dir.h"
#include "program.h"

#define WCACHE_MAGIC "CLINFWC1"
/* Bump when the arrays' layout (repack_cl.c, weights_cl.c) or the order in which the loader
 * (src/model.c, src/arch_*.c) creates weights changes, or this file's format: older files then
 * no longer match. */
#define WCACHE_LAYOUT 2u
#define WCACHE_PAGE 4096u
#define MAX_ARENAS 65536u
#define MAX_PARTS (1u << 24)
#define READ_CHUNK ((size_t)4 << 20) /* hashed while still in the CPU's caches */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels refuse it (EINVAL) */
#endif

typedef struct {
    char magic[8];
    uint32_t layout, page;
    unsigned char key[32];
    uint64_t n_arenas, n_parts;
    uint64_t data_start, file_size;
    uint64_t data_hash;       /* XXH3-64 of the arenas' used bytes, in order */
    unsigned char digest[32]; /* of this header (digest zeroed), the used[] and part tables */
} wc_header;

enum { WC_OFF, WC_READ, WC_WRITE };

struct cl_weight_cache {
    int mode;
    char dir[PATH_MAX], path[PATH_MAX + 64];
    unsigned char key[32];
    cl_cached_part *parts;
    size_t n_parts, cap_parts, next; /* next: the record the next weight must match (WC_READ) */
    cl_arena **arenas;               /* WC_READ: read from the file; WC_WRITE: filled, in order */
    size_t n_arenas, cap_arenas;
    cl_arena *filling;      /* WC_WRITE: the arena quantized weights are laid out into */
    cl_host_region *region; /* WC_READ, while the file is read: the memory its data lie in */
    /* After the load: the arenas mapped for reading, the thread writing them and its cap. */
    void **mapped;
    pthread_t writer;
    bool writing;
    uint64_t max;
};

static atomic_uint wc_hits, wc_writes, temp_counter;

void cl_weight_cache_stats(unsigned *hits, unsigned *writes) {
    if (hits) *hits = atomic_load(&wc_hits);
    if (writes) *writes = atomic_load(&wc_writes);
}

static bool digest_of(const void *const *parts, const size_t *sizes, size_t n,
                      unsigned char out[32]) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int len = 0;
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(md, parts[i], sizes[i]) == 1;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(md);
    return ok;
}

/* The header's digest over itself (digest zeroed) and the tables. */
static bool header_digest(const wc_header *h, const uint64_t *used, const cl_cached_part *parts,
                          unsigned char out[32]) {
    wc_header copy = *h;
    memset(copy.digest, 0, sizeof copy.digest);
    const void *p[] = {&copy, used, parts};
    size_t s[] = {sizeof copy, h->n_arenas * sizeof *used, h->n_parts * sizeof *parts};
    return digest_of(p, s, 3, out);
}

static uint64_t round_page(uint64_t v) {
    return (v + WCACHE_PAGE - 1) / WCACHE_PAGE * WCACHE_PAGE;
}

/* The key of this model on this device, and the file's path. */
static bool make_key(cl_backend_ctx *b, const void *id, size_t id_size, struct cl_weight_cache *c) {
    char shape[160];
    clinfer_dev_options dev;
    dev_options_get(&dev);
    snprintf(shape, sizeof shape, "layout %u page %u align %zu limit %llu il %d arena %d",
             WCACHE_LAYOUT, WCACHE_PAGE, b->store->align, (unsigned long long)cl_alloc_limit(b),
             b->types->interleave, ARENA_BYTES);
    const clinfer_device_info *in = &b->info;
    const void *p[] = {id,
                       in->name,
                       in->driver_version,
                       in->platform_version,
                       in->kernel_path,
                       CLINFER_VERSION_STRING,
                       shape};
    size_t s[sizeof p / sizeof p[0]] = {id_size};
    for (size_t i = 1; i < sizeof p / sizeof p[0]; i++)
        s[i] = strlen(p[i]) + 1; /* with the NUL: ("ab", "c") and ("a", "bc") differ */
    if (!digest_of(p, s, sizeof p / sizeof p[0], c->key)) return false;
    if (!cl_cache_dir(b->options.cache_dir, c->dir, sizeof c->dir)) return false;
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", c->key[i]);
    int n = snprintf(c->path, sizeof c->path, "%s/weights-%s.clw", c->dir, hex);
    return n > 0 && (size_t)n < sizeof c->path;
}

static void discard(const char *path, const char *why) {
    log_msg(CLINFER_LOG_WARN, "weight cache file %s is damaged (%s); rewriting it", path, why);
    unlink(path);
}

/* Whether [off, off + bytes) is a placeable array of an arena of used bytes. */
static bool array_fits(uint32_t arena, uint64_t off, uint64_t bytes, const uint64_t *used,
                       uint64_t n_arenas, size_t align) {
    return arena < n_arenas && bytes > 0 && off % align == 0 && off <= used[arena] &&
           bytes <= used[arena] - off;
}

/* Checks the file's header and tables (read into *used, c->parts); NULL when valid, else why
 * not. */
static const char *check_file(int fd, uint64_t file_size, cl_backend_ctx *b,
                              struct cl_weight_cache *c, wc_header *h, uint64_t **used) {
    if (file_size < sizeof *h || pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h)
        return "shorter than its header";
    if (memcmp(h->magic, WCACHE_MAGIC, sizeof h->magic) || h->layout != WCACHE_LAYOUT ||
        h->page != WCACHE_PAGE)
        return "bad magic or layout version";
    if (memcmp(h->key, c->key, sizeof c->key)) return "key does not match its name";
    if (h->n_arenas == 0 || h->n_arenas > MAX_ARENAS || h->n_parts == 0 || h->n_parts > MAX_PARTS)
        return "bad counts";
    uint64_t tables = h->n_arenas * sizeof **used + h->n_parts * sizeof *c->parts;
    if (h->data_start != round_page(sizeof *h + tables) || h->file_size != file_size ||
        h->data_start > file_size)
        return "sizes do not match the file (truncated?)";
    *used = malloc(h->n_arenas * sizeof **used);
    c->parts = malloc(h->n_parts * sizeof *c->parts);
    if (!*used || !c->parts) return "no memory for its tables";
    if (pread(fd, *used, h->n_arenas * sizeof **used, sizeof *h) !=
            (ssize_t)(h->n_arenas * sizeof **used) ||
        pread(fd, c->parts, h->n_parts * sizeof *c->parts,
              (off_t)(sizeof *h + h->n_arenas * sizeof **used)) !=
            (ssize_t)(h->n_parts * sizeof *c->parts))
        return "cannot read its tables";
    unsigned char digest[32];
    if (!header_digest(h, *used, c->parts, digest) || memcmp(digest, h->digest, sizeof digest))
        return "header checksum mismatch";
    uint64_t at = h->data_start;
    for (uint64_t i = 0; i < h->n_arenas; i++) {
        if (at > file_size || (*used)[i] == 0 || (*used)[i] > cl_alloc_limit(b) ||
            (*used)[i] > file_size - at)
            return "an arena past the end of the file";
        at += round_page((*used)[i]);
    }
    if (at != file_size) return "arenas do not fill the file";
    for (size_t i = 0; i < h->n_parts; i++) {
        const cl_cached_part *p = &c->parts[i];
        if (!array_fits(p->q_arena, p->q_off, p->q_bytes, *used, h->n_arenas, b->store->align) ||
            !array_fits(p->s_arena, p->s_off, p->s_bytes, *used, h->n_arenas, b->store->align))
            return "a part outside its arena";
    }
    return NULL;
}

/* Reads bytes at offset at of the file into dst, hashing them into xs; NULL or why not. */
static const char *read_hashed(int fd, uint8_t *dst, uint64_t bytes, uint64_t at,
                               XXH3_state_t *xs) {
    while (bytes > 0) {
        size_t want = bytes < READ_CHUNK ? (size_t)bytes : READ_CHUNK;
        ssize_t n = pread(fd, dst, want, (off_t)at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return "cannot read its data";
        if (n == 0) return "it shrank while it was read";
        XXH3_64bits_update(xs, dst, (size_t)n);
        dst += n;
        at += (uint64_t)n;
        bytes -= (uint64_t)n;
    }
    return NULL;
}

/* Hashes bytes at offset at of the file into xs from its mapping map, a chunk at a time, each
 * populated first: MADV_POPULATE_READ fails where a page lies past the end of the file, where a
 * read would raise SIGBUS. A chunk it does not populate (a kernel before 5.14, a file that
 * shrank) is read into bounce (READ_CHUNK bytes) instead, and a short read says why. */
static const char *hash_mapped(int fd, const uint8_t *map, uint64_t bytes, uint64_t at,
                               uint8_t *bounce, XXH3_state_t *xs) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (uint64_t end = at + bytes; at < end;) {
        size_t n = end - at < READ_CHUNK ? (size_t)(end - at) : READ_CHUNK;
        const uint8_t *p = map + at;
        uintptr_t lo = (uintptr_t)p / page * page; /* madvise takes whole pages */
        if (madvise((void *)lo, (uintptr_t)p + n - lo, MADV_POPULATE_READ) == 0) {
            XXH3_64bits_update(xs, p, n);
        } else {
            const char *why = read_hashed(fd, bounce, n, at, xs);
            if (why) return why;
        }
        at += n;
    }
    return NULL;
}

/* The data of a file whose header and tables are valid, in c->region: the file's mapping, or
 * with copy memory of the process's own read from it; hashed as they are brought in (the pages
 * are touched once, here, before kernels read them) and checked against the header's hash
 * before any weight is made on them. NULL when intact (or out of memory, *st saying so), else
 * why not. */
static const char *load_data(int fd, const wc_header *h, const uint64_t *used, bool copy,
                             struct cl_weight_cache *c, clinfer_status *st) {
    cl_host_region *r = calloc(1, sizeof *r);
    XXH3_state_t *xs = XXH3_createState();
    uint8_t *bounce = copy ? NULL : malloc(READ_CHUNK);
    void *addr = MAP_FAILED;
    if (r && xs && (copy || bounce) && XXH3_64bits_reset(xs) == XXH_OK)
        addr = copy ? mmap(NULL, h->file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0)
                    : mmap(NULL, h->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const char *why = NULL;
    if (addr == MAP_FAILED) {
        *st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "weight cache: %s: %llu bytes to %s it into",
                       c->path, (unsigned long long)h->file_size, copy ? "read" : "map");
        free(r);
    } else {
        *r = (cl_host_region){addr, (size_t)h->file_size, 1}; /* this load's, until it ends */
        c->region = r;
        uint64_t at = h->data_start;
        for (uint64_t i = 0; i < h->n_arenas && !why; at += round_page(used[i++]))
            why = copy ? read_hashed(fd, (uint8_t *)addr + at, used[i], at, xs)
                       : hash_mapped(fd, addr, used[i], at, bounce, xs);
        if (!why && XXH3_64bits_digest(xs) != h->data_hash) why = "data checksum mismatch";
    }
    free(bounce);
    XXH3_freeState(xs);
    return why;
}

/* The arenas of a checked file: buffers of the device's on c->region (CL_MEM_USE_HOST_PTR), into
 * c->arenas. */
static clinfer_status make_arenas(cl_backend_ctx *b, const wc_header *h, const uint64_t *used,
                                  struct cl_weight_cache *c) {
    if (!(c->arenas = calloc(h->n_arenas, sizeof *c->arenas)))
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "weight cache: %s", c->path);
    uint64_t at = h->data_start;
    for (size_t i = 0; i < h->n_arenas; at += round_page(used[i++])) {
        cl_arena *a = calloc(1, sizeof *a);
        if (!a) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "weight cache: arena");
        *a = (cl_arena){.size = (size_t)used[i], .used = (size_t)used[i], .holders = 1};
        a->region = c->region;
        c->region->holders++;
        c->arenas[c->n_arenas++] = a;
        clinfer_status st = cl_create_buffer(b, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, a->size,
                                             (uint8_t *)c->region->addr + at, &a->mem);
        if (st != CLINFER_OK) return st;
    }
    return CLINFER_OK;
}

/* Uses the file in c (WC_READ) where a valid one exists. */
static void try_read(cl_backend_ctx *b, struct cl_weight_cache *c) {
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return; /* a miss */
    clinfer_dev_options dev;
    dev_options_get(&dev);
    struct stat sb;
    wc_header h;
    uint64_t *used = NULL;
    clinfer_status st = CLINFER_OK;
    /* the size as it is now, before anything is mapped: a file truncated since it was written
     * is refused here */
    const char *why = fstat(fd, &sb) != 0 ? "cannot stat it"
                                          : check_file(fd, (uint64_t)sb.st_size, b, c, &h, &used);
    if (!why) why = load_data(fd, &h, used, dev.weight_cache_copy, c, &st);
    if (!why && st == CLINFER_OK) st = make_arenas(b, &h, used, c);
    if (why) {
        discard(c->path, why);
    } else if (st != CLINFER_OK) {
        cl_verbose("weight cache: %s not used: %s", c->path, clinfer_last_error());
    } else {
        c->n_parts = h.n_parts;
        c->mode = WC_READ;
        futimens(fd, NULL); /* used now: eviction goes by modification time */
        atomic_fetch_add(&wc_hits, 1);
        cl_verbose("weight cache: %s %s (%zu arenas, %zu parts)",
                   dev.weight_cache_copy ? "read" : "mapped", c->path, c->n_arenas, c->n_parts);
    }
    if (c->mode != WC_READ) {
        for (size_t i = 0; i < c->n_arenas; i++)
            cl_release_arena(c->arenas[i]);
        c->n_arenas = 0;
        free(c->arenas);
        c->arenas = NULL;
        free(c->parts);
        c->parts = NULL;
    }
    if (c->region) cl_release_region(c->region); /* the arenas hold it on */
    c->region = NULL;
    free(used);
    close(fd); /* a mapping outlives its descriptor */
}

bool cl_wcache_open(cl_backend_ctx *b, const void *id, size_t id_size) {
    struct cl_store *s = b->store;
    clinfer_dev_options dev;
    dev_options_get(&dev);
    cl_wcache_free(b); /* a second model on one backend starts afresh */
    if (!dev.weight_cache || !s->arenas || !s->host_unified || !id) return false;
    struct cl_weight_cache *c = calloc(1, sizeof *c);
    if (!c) return false;
    s->wcache = c;
    if (!make_key(b, id, id_size, c)) return false; /* WC_OFF */
    c->mode = WC_WRITE;
    try_read(b, c);
    return c->mode == WC_READ;
}

cl_arena **cl_wcache_slot(cl_backend_ctx *b) {
    struct cl_weight_cache *c = b->store->wcache;
    return c && c->mode == WC_WRITE ? &c->filling : &b->store->filling;
}

/* Drops the file: it no longer matches what is loaded. */
static void stale(struct cl_weight_cache *c) {
    cl_verbose("weight cache: %s does not match this load; dropping it", c->path);
    unlink(c->path);
    c->mode = WC_OFF;
}

const cl_cached_part *cl_wcache_next(cl_backend_ctx *b, clinfer_dtype type, int m, int k, int il,
                                     int n_parts) {
    struct cl_weight_cache *c = b->store->wcache;
    if (!c || c->mode != WC_READ) return NULL;
    if (c->n_parts - c->next < (size_t)n_parts) return NULL;
    const cl_cached_part *p = &c->parts[c->next];
    for (int i = 0; i < n_parts; i++)
        if (p[i].type != (uint32_t)type || p[i].m != m || p[i].k != k || p[i].il != il ||
            p[i].n_parts != n_parts || p[i].part != i)
            return NULL;
    return p;
}

void cl_wcache_mismatch(cl_backend_ctx *b) {
    struct cl_weight_cache *c = b->store->wcache;
    if (c && c->mode == WC_READ) stale(c);
}

clinfer_status cl_wcache_array(cl_backend_ctx *b, uint32_t arena, uint64_t off, uint64_t bytes,
                               weight_array *a) {
    struct cl_weight_cache *c = b->store->wcache;
    cl_arena *ar = c->arenas[arena]; /* checked with the file */
    return cl_arena_array(ar, (size_t)off, (size_t)bytes, "placing a cached weight array", a);
}

void cl_wcache_taken(cl_backend_ctx *b, int n_parts) {
    b->store->wcache->next += (size_t)n_parts;
}

/* The index of arena a among the arenas to write, appended where new. */
static bool arena_index(struct cl_weight_cache *c, cl_arena *a, uint32_t *index) {
    for (size_t i = c->n_arenas; i-- > 0;)
        if (c->arenas[i] == a) {
            *index = (uint32_t)i;
            return true;
        }
    if (c->n_arenas == c->cap_arenas) {
        size_t cap = c->cap_arenas ? 2 * c->cap_arenas : 16;
        cl_arena **grown = realloc(c->arenas, cap * sizeof *grown);
        if (!grown) return false;
        c->arenas = grown;
        c->cap_arenas = cap;
    }
    a->holders++;
    *index = (uint32_t)c->n_arenas;
    c->arenas[c->n_arenas++] = a;
    return true;
}

void cl_wcache_record(cl_backend_ctx *b, cl_cached_part rec, const weight_part *p) {
    struct cl_weight_cache *c = b->store->wcache;
    if (!c || c->mode != WC_WRITE) return;
    if (c->n_parts == c->cap_parts) {
        size_t cap = c->cap_parts ? 2 * c->cap_parts : 256;
        cl_cached_part *grown = realloc(c->parts, cap * sizeof *grown);
        if (!grown) {
            c->mode = WC_OFF;
            return;
        }
        c->parts = grown;
        c->cap_parts = cap;
    }
    rec.q_off = p->q.offset;
    rec.s_off = p->s.offset;
    if (!arena_index(c, p->q.arena, &rec.q_arena) || !arena_index(c, p->s.arena, &rec.s_arena)) {
        c->mode = WC_OFF;
        return;
    }
    c->parts[c->n_parts++] = rec;
}

/* Writes the recorded arenas (mapped for reading at c->mapped) and parts to c->path through a
 * temp file, the header last (its hash of the arenas is taken as they are written); 0 or an
 * errno value. */
static int write_file(const struct cl_weight_cache *c, uint64_t max) {
    static const uint8_t zeros[WCACHE_PAGE];
    wc_header h = {.layout = WCACHE_LAYOUT, .page = WCACHE_PAGE};
    memcpy(h.magic, WCACHE_MAGIC, sizeof h.magic);
    memcpy(h.key, c->key, sizeof h.key);
    h.n_arenas = c->n_arenas;
    h.n_parts = c->n_parts;
    uint64_t *used = malloc(c->n_arenas * sizeof *used);
    XXH3_state_t *xs = XXH3_createState();
    int err = used && xs && XXH3_64bits_reset(xs) == XXH_OK ? 0 : ENOMEM;
    uint64_t tables = c->n_arenas * sizeof *used + c->n_parts * sizeof *c->parts;
    h.data_start = round_page(sizeof h + tables);
    h.file_size = h.data_start;
    for (size_t i = 0; !err && i < c->n_arenas; i++)
        h.file_size += round_page(used[i] = c->arenas[i]->used);
    if (!err) err = cl_make_dirs(c->dir);
    if (!err && !cl_cache_make_room(c->dir, h.file_size, max)) err = ENOSPC;
    char tmp[sizeof c->path + 48];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", c->path, (long)getpid(),
             atomic_fetch_add(&temp_counter, 1));
    int fd = err ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (!err && fd < 0) err = errno;
    if (fd >= 0) {
        err = cl_write_all(fd, &h, sizeof h); /* a placeholder until the hash is known */
        if (!err) err = cl_write_all(fd, used, c->n_arenas * sizeof *used);
        if (!err) err = cl_write_all(fd, c->parts, c->n_parts * sizeof *c->parts);
        if (!err) err = cl_write_all(fd, zeros, (size_t)(h.data_start - sizeof h - tables));
        for (size_t i = 0; !err && i < c->n_arenas; i++) {
            XXH3_64bits_update(xs, c->mapped[i], used[i]);
            err = cl_write_all(fd, c->mapped[i], used[i]);
            if (!err) err = cl_write_all(fd, zeros, (size_t)(round_page(used[i]) - used[i]));
        }
        h.data_hash = XXH3_64bits_digest(xs);
        if (!err && !header_digest(&h, used, c->parts, h.digest)) err = EIO;
        ssize_t n = err ? 0 : pwrite(fd, &h, sizeof h, 0);
        if (!err && n != (ssize_t)sizeof h) err = n < 0 ? errno : EIO;
        if (close(fd) != 0 && !err) err = errno;
        if (!err && rename(tmp, c->path) != 0) err = errno;
        if (err) unlink(tmp);
    }
    XXH3_freeState(xs);
    free(used);
    return err;
}

static void *write_run(void *arg) {
    struct cl_weight_cache *c = arg;
    int err = write_file(c, c->max);
    if (err == ENOSPC) /* a choice of the user's (the cap) or a full disk: not a fault */
        cl_verbose("weight cache: %s would not fit (CLINFER_WEIGHT_CACHE_MAX, disk space)",
                   c->path);
    else if (err)
        log_msg(CLINFER_LOG_WARN, "weight cache: cannot write %s (%s)", c->path, strerror(err));
    else
        atomic_fetch_add(&wc_writes, 1);
    if (!err) cl_verbose("weight cache: wrote %s", c->path);
    return NULL;
}

/* Maps the recorded arenas for reading (kernels may read them meanwhile) and writes the file on
 * a thread of its own, so that the load does not wait for the disk; cl_wcache_free waits for
 * it. Where no thread starts, here. */
static void start_writing(cl_backend_ctx *b, struct cl_weight_cache *c) {
    clinfer_dev_options dev;
    dev_options_get(&dev);
    c->max = dev.weight_cache_max;
    if (!(c->mapped = calloc(c->n_arenas, sizeof *c->mapped))) return;
    for (size_t i = 0; i < c->n_arenas; i++) {
        cl_int err = CL_SUCCESS;
        c->mapped[i] = clEnqueueMapBuffer(b->queue, c->arenas[i]->mem, CL_TRUE, CL_MAP_READ, 0,
                                          c->arenas[i]->used, 0, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            c->mapped[i] = NULL;
            return; /* cl_wcache_free unmaps those mapped */
        }
    }
    c->writing = pthread_create(&c->writer, NULL, write_run, c) == 0;
    if (!c->writing) write_run(c);
}

void cl_wcache_close(cl_backend_ctx *b) {
    struct cl_weight_cache *c = b->store->wcache;
    if (!c) return;
    if (c->mode == WC_READ && c->next != c->n_parts) stale(c); /* the load took fewer weights */
    bool write = c->mode == WC_WRITE && c->n_parts > 0;
    c->mode = WC_OFF; /* weights made after the load are no part of the file */
    if (write) start_writing(b, c);
    if (!c->writing) cl_wcache_free(b);
}

void cl_wcache_free(cl_backend_ctx *b) {
    struct cl_weight_cache *c = b->store->wcache;
    if (!c) return;
    if (c->writing) pthread_join(c->writer, NULL);
    for (size_t i = 0; c->mapped && i < c->n_arenas; i++)
        if (c->mapped[i])
            clEnqueueUnmapMemObject(b->queue, c->arenas[i]->mem, c->mapped[i], 0, NULL, NULL);
    if (c->mapped) clFinish(b->queue);
    free(c->mapped);
    for (size_t i = 0; i < c->n_arenas; i++)
        cl_release_arena(c->arenas[i]); /* weights in them hold them on */
    if (c->filling) cl_release_arena(c->filling);
    free(c->arenas);
    free(c->parts);
    free(c);
    b->store->wcache = NULL;
}
