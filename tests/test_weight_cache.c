/* The weight cache (backends/opencl/weight_cache_cl.c) on tiny models: the first load writes the
 * file, the second maps it, and both decode to logits bit-identical to a load without the cache;
 * a truncated (to nothing, into the header, to its tables, by a byte), extended or byte-flipped
 * header or table, data zeroed or flipped, a file of another model, and a model file touched
 * since are detected, and the load still gives those logits (the file rewritten); a file
 * replaced and deleted while a loaded model holds its weights changes nothing; with
 * CLINFER_WEIGHT_CACHE=copy the file is read, damage is still found, and a truncation under a
 * loaded model changes nothing; no room (CLINFER_WEIGHT_CACHE_MAX=0) and an unwritable path load
 * without one. The cache directory is a fresh one whose kernel binaries link to the test's kernel
 * cache. Exits 77 where the device does not lay weights out in arenas on host memory (no cache
 * there). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "opencl/cache_dir.h"
#include "opencl/matmul_cl.h"
#include "tiny_model.h"

#define N_PROMPT 12 /* past MATVEC_MAX_N: the prompt runs the GEMM paths */
#define N_DECODE 3

static char dir[] = "/tmp/clinfer-wcache-test-XXXXXX";
static size_t n_logits;

/* A fresh cache directory that reuses the kernel binaries of the one the test was given. */
static int make_cache_dir(void) {
    char kernels[PATH_MAX];
    if (!mkdtemp(dir) || !cl_cache_dir(NULL, kernels, sizeof kernels)) return -1;
    DIR *d = opendir(kernels);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        char from[PATH_MAX + 256], to[sizeof dir + 256];
        if (len < 6 || strcmp(e->d_name + len - 6, ".clbin")) continue;
        snprintf(from, sizeof from, "%s/%s", kernels, e->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, e->d_name);
        if (symlink(from, to) != 0) perror(to);
    }
    if (d) closedir(d);
    return setenv("CLINFER_CACHE_DIR", dir, 1);
}

/* The only weight cache file in the directory (path into out); how many there are. */
static int cache_file(char *out, size_t size) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (!strncmp(e->d_name, "weights-", 8) && strstr(e->d_name, ".clw") &&
            !strstr(e->d_name, ".tmp")) {
            snprintf(out, size, "%s/%s", dir, e->d_name);
            n++;
        }
    if (d) closedir(d);
    return n;
}

static void remove_cache_files(void) {
    char path[PATH_MAX];
    while (cache_file(path, sizeof path) > 0)
        if (unlink(path) != 0 && rmdir(path) != 0) break;
}

/* Copies the file from to a new file to; whether it did. */
static bool copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[1 << 16];
    size_t n = 0;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = false;
    return ok;
}

/* Loads path on OpenCL, decodes into logits and says how the cache counters moved. */
static bool load_run(const char *path, float *logits, unsigned *hits, unsigned *writes) {
    unsigned h0, w0, h1, w1;
    cl_weight_cache_stats(&h0, &w0);
    clinfer_model *m = NULL;
    clinfer_status st = tiny_model_load(path, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, &m);
    EXPECT(st == CLINFER_OK, "loading %s: %s", path, clinfer_last_error());
    if (st == CLINFER_OK) {
        st = tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, logits);
        EXPECT(st == CLINFER_OK, "decoding %s: %s", path, clinfer_last_error());
    }
    clinfer_model_free(m);
    cl_weight_cache_stats(&h1, &w1);
    *hits = h1 - h0;
    *writes = w1 - w0;
    return st == CLINFER_OK;
}

/* One load expected to hit (1) or miss (0) the file and to write it (1) or not (0), with the
 * reference logits. */
static void expect_load(const char *what, const char *path, const float *ref, float *logits,
                        unsigned hit, unsigned write) {
    unsigned hits, writes;
    if (!load_run(path, logits, &hits, &writes)) return;
    EXPECT(hits == hit && writes == write,
           "%s: %u uses and %u writes of the cache, expected %u, %u", what, hits, writes, hit,
           write);
    EXPECT(memcmp(logits, ref, n_logits * sizeof *logits) == 0,
           "%s: logits differ from those without the cache", what);
}

/* The header's data_start and the first arena's used bytes (wc_header: at 64 and right after
 * its 120 bytes). */
static bool data_range(int fd, uint64_t *start, uint64_t *used) {
    return pread(fd, start, 8, 64) == 8 && pread(fd, used, 8, 120) == 8;
}

/* Damages the cache file: truncated to size (when >= 0), else byte at `at` flipped (at < 0:
 * from the end), a page appended when at is 0 and size is -2, the middle third of the first
 * arena's data zeroed when size is -4, a byte in the middle of it flipped when size is -5.
 * (check_model turns -3 and -6 into sizes.) */
static void damage(long at, long size) {
    char path[PATH_MAX];
    if (cache_file(path, sizeof path) != 1) {
        EXPECT(false, "no cache file to damage");
        return;
    }
    if (size >= 0) {
        EXPECT(truncate(path, size) == 0, "truncating %s", path);
        return;
    }
    int fd = open(path, O_RDWR);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        EXPECT(false, "opening %s", path);
        if (fd >= 0) close(fd);
        return;
    }
    uint64_t start = 0, used = 0;
    if ((size == -4 || size == -5) &&
        (!data_range(fd, &start, &used) || used < 3 || start + used > (uint64_t)sb.st_size)) {
        EXPECT(false, "%s: no data range (start %llu, %llu bytes)", path, (unsigned long long)start,
               (unsigned long long)used);
    } else if (size == -4) {
        size_t n = (size_t)(used / 3);
        char *zeros = calloc(1, n);
        EXPECT(zeros && pwrite(fd, zeros, n, (off_t)(start + n)) == (ssize_t)n, "zeroing");
        free(zeros);
    } else if (size == -2) {
        static const char page[4096];
        EXPECT(pwrite(fd, page, sizeof page, sb.st_size) == (ssize_t)sizeof page, "extending");
    } else {
        off_t where = size == -5 ? (off_t)(start + used / 2) : at >= 0 ? at : sb.st_size + at;
        unsigned char c = 0;
        EXPECT(pread(fd, &c, 1, where) == 1, "reading byte %lld", (long long)where);
        c ^= 0x5a;
        EXPECT(pwrite(fd, &c, 1, where) == 1, "writing byte %lld", (long long)where);
    }
    close(fd);
}

static bool replace_delete(const char *file) {
    char moved[PATH_MAX + 8];
    snprintf(moved, sizeof moved, "%s.new", file);
    return copy_file(file, moved) && rename(moved, file) == 0 && unlink(file) == 0;
}

static bool truncate_all(const char *file) {
    return truncate(file, 0) == 0;
}

/* Loads path (which must use the cache file), does change to the file, then decodes with the
 * model: the logits must stay the reference's. */
static void change_under_model(const char *name, const char *path, const char *file,
                               const float *ref, float *logits, const char *what,
                               bool (*change)(const char *file)) {
    clinfer_model *m = NULL;
    unsigned h0, w0, h1, w1;
    cl_weight_cache_stats(&h0, &w0);
    EXPECT_OK(tiny_model_load(path, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, &m));
    cl_weight_cache_stats(&h1, &w1);
    EXPECT(h1 == h0 + 1, "%s: the load before %s did not use the file", name, what);
    EXPECT(change(file), "%s: %s %s under the model", name, what, file);
    if (m) EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, logits));
    EXPECT(m && memcmp(logits, ref, n_logits * sizeof *logits) == 0,
           "%s: logits changed by %s the file under the model", name, what);
    clinfer_model_free(m);
}

static void check_model(const char *name, const tiny_model_spec *spec) {
    char path[PATH_MAX], file[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    if (tiny_model_write(spec, path) != 0) {
        EXPECT(false, "writing %s", path);
        return;
    }
    float *ref = malloc(n_logits * sizeof *ref), *logits = malloc(n_logits * sizeof *logits);
    unsigned hits, writes;
    printf("%s\n", name);
    setenv("CLINFER_WEIGHT_CACHE", "0", 1);
    if (!ref || !logits || !load_run(path, ref, &hits, &writes)) goto done;
    EXPECT(hits == 0 && writes == 0 && cache_file(file, sizeof file) == 0,
           "%s: CLINFER_WEIGHT_CACHE=0 used the cache", name);
    unsetenv("CLINFER_WEIGHT_CACHE");

    expect_load("first load", path, ref, logits, 0, 1);
    EXPECT(cache_file(file, sizeof file) == 1, "%s: no cache file after the first load", name);
    expect_load("second load", path, ref, logits, 1, 0);

    /* Damage the header's fields (magic, layout, key, counts, sizes, data hash, digest), the
     * tables (the first arena's size, the first part record), the data and the file's length:
     * each must be found, the file rewritten, and the next load read it again. */
    const struct {
        const char *what;
        long at, size;
    } cases[] = {{"truncated to nothing", 0, 0},
                 {"truncated into the header", 0, 50},
                 {"truncated by a byte", 0, -3},
                 {"truncated to its tables", 0, -6},
                 {"a page appended", 0, -2},
                 {"magic flipped", 3, -1},
                 {"layout flipped", 8, -1},
                 {"key flipped", 20, -1},
                 {"part count flipped", 56, -1},
                 {"file size flipped", 72, -1},
                 {"data hash flipped", 84, -1},
                 {"digest flipped", 100, -1},
                 {"arena size flipped", 121, -1},
                 {"part record flipped", 130, -1},
                 {"a third of the data zeroed", 0, -4},
                 {"a data byte flipped", 0, -5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[96];
        long size = cases[i].size;
        if (size == -3) { /* one byte short */
            struct stat sb;
            size = stat(file, &sb) == 0 ? (long)sb.st_size - 1 : 0;
        } else if (size == -6) { /* the header and tables whole, no data */
            int fd = open(file, O_RDONLY);
            uint64_t start = 0, used = 0;
            size = fd >= 0 && data_range(fd, &start, &used) ? (long)start : 0;
            if (fd >= 0) close(fd);
        }
        damage(cases[i].at, size);
        snprintf(what, sizeof what, "%s: %s", name, cases[i].what);
        expect_load(what, path, ref, logits, 0, 1);
        snprintf(what, sizeof what, "%s: after %s", name, cases[i].what);
        expect_load(what, path, ref, logits, 1, 0);
    }

    /* Replaced (as a writer does: a new file renamed over it) and then deleted while a model
     * made on its mapping decodes: the mapping keeps the pages it had. */
    change_under_model(name, path, file, ref, logits, "replacing and deleting", replace_delete);
    expect_load("after deletion under a model", path, ref, logits, 0, 1);

    /* CLINFER_WEIGHT_CACHE=copy: the file read into memory of the process's own, checked as it
     * is read; truncated while a model made from it decodes, its weights are that copy. */
    setenv("CLINFER_WEIGHT_CACHE", "copy", 1);
    expect_load("copy", path, ref, logits, 1, 0);
    damage(0, -5);
    expect_load("copy: a data byte flipped", path, ref, logits, 0, 1);
    change_under_model(name, path, file, ref, logits, "truncating", truncate_all);
    expect_load("copy: after truncation under a model", path, ref, logits, 0, 1);
    unsetenv("CLINFER_WEIGHT_CACHE");
    expect_load("mapped after copy", path, ref, logits, 1, 0);

    /* The model file touched: another key, another file. */
    EXPECT(utimensat(AT_FDCWD, path, NULL, 0) == 0, "touching %s", path);
    expect_load("touched model", path, ref, logits, 0, 1);
    EXPECT(cache_file(file, sizeof file) == 2, "%s: the touched model has no file of its own",
           name);
    remove_cache_files();

    /* No room under the cap: no file, same logits. */
    setenv("CLINFER_WEIGHT_CACHE_MAX", "0", 1);
    expect_load("cap 0", path, ref, logits, 0, 0);
    EXPECT(cache_file(file, sizeof file) == 0, "%s: a file was written past the cap", name);
    unsetenv("CLINFER_WEIGHT_CACHE_MAX");

    /* The file's path taken by a directory that cannot be replaced: no file, same logits. */
    expect_load("before the directory", path, ref, logits, 0, 1);
    if (cache_file(file, sizeof file) == 1 && unlink(file) == 0 && mkdir(file, 0755) == 0) {
        char inside[PATH_MAX + 8];
        snprintf(inside, sizeof inside, "%s/x", file);
        FILE *f = fopen(inside, "w");
        if (f) fclose(f);
        expect_load("unwritable path", path, ref, logits, 0, 0);
        remove(inside);
        rmdir(file);
    }
    remove_cache_files();
done:
    remove(path);
    free(ref);
    free(logits);
}

int main(void) {
    size_t n_devices = 0;
    if (clinfer_device_count(&n_devices) != CLINFER_OK || n_devices == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        return 77;
    }
    if (make_cache_dir() != 0) {
        perror("cache directory");
        return 1;
    }
    n_logits = (size_t)(1 + N_DECODE) * tiny_model_n_vocab();
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q4_0);
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/probe.gguf", dir);
    clinfer_model *m = NULL;
    int skip = tiny_model_write(&spec, probe) != 0 ||
               tiny_model_load(probe, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, &m) != CLINFER_OK;
    if (!skip) {
        const struct cl_store *s = ((cl_backend_ctx *)m->backend->ctx)->store;
        skip = !s->arenas || !s->host_unified ? 77 : 0;
    }
    clinfer_model_free(m);
    remove(probe);
    remove_cache_files();
    if (skip) {
        printf("the device keeps no weight cache (%s)\n", skip == 77 ? "not CPU" : "failed");
        rmdir(dir);
        return skip == 77 ? 77 : 1;
    }

    check_model("q4_0", &spec); /* interleaved rows */
    tiny_model_default(&spec, "llama", CLINFER_DT_Q4_K);
    spec.mix[0] = CLINFER_DT_Q6_K; /* as in Q4_K_M files: split rows, f32 scales */
    spec.mix[1] = CLINFER_DT_Q8_0;
    spec.n_mix = 2;
    check_model("q4_k_mix", &spec);
    tiny_model_default(&spec, "qwen2", CLINFER_DT_Q8_0); /* biases; f32 vectors */
    spec.tied = true;
    check_model("q8_0_tied", &spec);

    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        char p[sizeof dir + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.') unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
    return finish("test_weight_cache");
}
