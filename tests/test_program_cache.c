/* The kernel binary cache and build failures (backends/opencl/program.c): a second build hits
 * the cache and is faster; corrupted, truncated and foreign entries (another program's entry
 * copied over one) are detected, reported and rebuilt; an unwritable cache directory still builds
 * (with one warning); the cache directory follows CLINFER_CACHE_DIR, then XDG_CACHE_HOME; a syntax
 * error returns CLINFER_ERR_BUILD with the compiler's log, whether the source comes from a string
 * or from CLINFER_CL_DIR. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "opencl/device.h"
#include "opencl/program.h"
#include "temp_tree.h"

static cl_context ctx;
static cl_device_id device;
static clinfer_device_info info;
static char root[] = "/tmp/clinfer-cache-test-XXXXXX";
static char stderr_path[sizeof root + 16];

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Builds selftest.cl; returns how the cache counters moved (+1 hit / -1 miss / 0 failure). */
static int build(double *ms) {
    unsigned hits0, misses0, hits1, misses1;
    cl_program_cache_stats(&hits0, &misses0);
    cl_program prog = NULL;
    double start = now_ms();
    clinfer_status st = cl_program_build(ctx, device, &info, NULL, "selftest.cl", NULL, &prog);
    if (ms) *ms = now_ms() - start;
    EXPECT_OK(st);
    cl_int err = CL_INVALID_PROGRAM;
    if (prog) {
        /* The program must be usable whichever way it was made. */
        cl_kernel k = clCreateKernel(prog, "vector_add", &err);
        if (k) clReleaseKernel(k);
        clReleaseProgram(prog);
    }
    EXPECT(err == CL_SUCCESS, "vector_add from the built program: %s", clinfer_status_str(err));
    cl_program_cache_stats(&hits1, &misses1);
    EXPECT(hits1 + misses1 == hits0 + misses0 + 1, "one build counts once");
    return st != CLINFER_OK ? 0 : hits1 > hits0 ? 1 : -1;
}

/* The only .clbin entry in dir (path into out); returns how many there are. */
static int find_entry(const char *dir, char *out, size_t size) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 6 && !strcmp(e->d_name + len - 6, ".clbin")) {
            snprintf(out, size, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Runs fn with stderr captured; returns how many times needle appeared in it. */
static int count_in_stderr(void (*fn)(void *), void *arg, const char *needle) {
    fflush(stderr);
    int saved = dup(2);
    int fd = open(stderr_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[8192] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[got > 0 ? got : 0] = '\0';
    fputs(text, stderr); /* keep it visible in the test log */
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void rebuild_once(void *expect_miss) {
    int r = build(NULL);
    if (expect_miss) EXPECT(r == -1, "a damaged entry must be rebuilt (got %d)", r);
}

static void damage(const char *path, long offset, const char *bytes, size_t n, bool truncate_it) {
    int fd = open(path, O_RDWR);
    EXPECT(fd >= 0, "open %s", path);
    if (fd < 0) return;
    if (truncate_it)
        EXPECT(ftruncate(fd, offset) == 0, "truncate");
    else
        EXPECT(pwrite(fd, bytes, n, offset) == (ssize_t)n, "pwrite");
    close(fd);
}

static void test_hit_and_damage(void) {
    char dir[256], entry[512];
    snprintf(dir, sizeof dir, "%s/cache/nested", root);
    setenv("CLINFER_CACHE_DIR", dir, 1);

    double cold_ms, warm_ms;
    EXPECT(build(&cold_ms) == -1, "first build is a miss");
    EXPECT(find_entry(dir, entry, sizeof entry) == 1, "one entry written in %s", dir);
    EXPECT(build(&warm_ms) == 1, "second build hits the cache");
    printf("selftest.cl: build from source %.1f ms, from the cache %.1f ms\n", cold_ms, warm_ms);
    EXPECT(warm_ms < cold_ms, "cache hit %.1f ms not faster than %.1f ms", warm_ms, cold_ms);

    struct stat s;
    EXPECT(stat(entry, &s) == 0 && s.st_size > 64, "entry size");
    /* A flipped payload byte, a truncated file and a foreign header are each caught. */
    damage(entry, (long)s.st_size - 10, "\xff\x00\xff", 3, false);
    EXPECT(count_in_stderr(rebuild_once, "miss", "checksum mismatch") == 1, "payload damage");
    EXPECT(build(NULL) == 1, "the rebuilt entry is valid");
    damage(entry, (long)s.st_size / 2, NULL, 0, true);
    EXPECT(count_in_stderr(rebuild_once, "miss", "length does not match") == 1, "truncation");
    damage(entry, 0, "NOTCLINF", 8, false);
    EXPECT(count_in_stderr(rebuild_once, "miss", "bad header") == 1, "foreign header");
    damage(entry, 3, NULL, 0, true);
    EXPECT(count_in_stderr(rebuild_once, "miss", "bad header") == 1, "short file");
    EXPECT(build(NULL) == 1, "hit after the rebuilds");
    EXPECT(find_entry(dir, entry, sizeof entry) == 1, "no temp files or duplicates left");

    /* A valid entry of a program with other kernels copied over selftest.cl's: without a check
     * it loads, and every clCreateKernel of selftest.cl's fails (CL_INVALID_KERNEL_NAME). */
    static const char other[] = "__kernel void other_kernel(__global float *x) { x[0] = 1.0f; }\n";
    char saved[512], foreign[512];
    snprintf(saved, sizeof saved, "%s", entry);
    cl_program prog = NULL;
    EXPECT_OK(cl_program_build_source(ctx, device, &info, NULL, "other.cl", other, NULL, &prog));
    if (prog) clReleaseProgram(prog);
    EXPECT(find_entry(dir, foreign, sizeof foreign) == 2, "the other program's entry");
    DIR *d = opendir(dir); /* the entry that is not selftest.cl's */
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".clbin") && !strstr(saved, e->d_name))
            snprintf(foreign, sizeof foreign, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    EXPECT(strcmp(foreign, saved) != 0 && rename(foreign, saved) == 0, "copying %s over %s",
           foreign, saved);
    EXPECT(count_in_stderr(rebuild_once, "miss", "another program's binary") == 1,
           "a foreign entry is rebuilt");
    EXPECT(build(NULL) == 1, "the rebuilt entry is valid");

    /* Other options make another entry. */
    EXPECT_OK(cl_program_build(ctx, device, &info, NULL, "selftest.cl", "-DOTHER=1", &prog));
    if (prog) clReleaseProgram(prog);
    EXPECT(find_entry(dir, entry, sizeof entry) == 2, "options are part of the key");
}

static void build_twice(void *unused) {
    (void)unused;
    EXPECT(build(NULL) == -1, "no cache: a miss");
    EXPECT(build(NULL) == -1, "no cache: still a miss");
}

static void *build_in_thread(void *status) {
    cl_program prog = NULL;
    *(clinfer_status *)status =
        cl_program_build(ctx, device, &info, NULL, "selftest.cl", NULL, &prog);
    if (prog) clReleaseProgram(prog);
    return NULL;
}

/* Two threads filling the same empty entry: both build, one complete entry, no temp file. */
static void test_concurrent_store(void) {
    char dir[256], entry[512];
    snprintf(dir, sizeof dir, "%s/concurrent", root);
    setenv("CLINFER_CACHE_DIR", dir, 1);
    pthread_t threads[2];
    clinfer_status status[2] = {-1, -1};
    for (int i = 0; i < 2; i++)
        EXPECT(pthread_create(&threads[i], NULL, build_in_thread, &status[i]) == 0, "thread");
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    EXPECT(status[0] == CLINFER_OK && status[1] == CLINFER_OK, "%s, %s",
           clinfer_status_str(status[0]), clinfer_status_str(status[1]));
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        files += e->d_name[0] != '.';
    if (d) closedir(d);
    EXPECT(files == 1 && find_entry(dir, entry, sizeof entry) == 1, "%d files in %s", files, dir);
    EXPECT(build(NULL) == 1, "the entry the threads wrote is valid");
}

static void test_unwritable(void) {
    /* A path below a regular file cannot be created, even by root. */
    char file[256], dir[300];
    snprintf(file, sizeof file, "%s/not-a-dir", root);
    FILE *f = fopen(file, "w");
    EXPECT(f != NULL, "create %s", file);
    if (f) fclose(f);
    snprintf(dir, sizeof dir, "%s/cache", file);
    setenv("CLINFER_CACHE_DIR", dir, 1);
    EXPECT(count_in_stderr(build_twice, NULL, "is not writable") == 1, "exactly one warning");
}

static void test_xdg(void) {
    char xdg[256], dir[300], entry[512];
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    snprintf(dir, sizeof dir, "%s/clinfer", xdg);
    unsetenv("CLINFER_CACHE_DIR");
    setenv("XDG_CACHE_HOME", xdg, 1);
    EXPECT(build(NULL) == -1, "fresh XDG cache");
    EXPECT(find_entry(dir, entry, sizeof entry) == 1, "entry under $XDG_CACHE_HOME/clinfer");
    EXPECT(build(NULL) == 1, "XDG cache hit");
}

static void test_build_errors(void) {
    static const char broken[] = "__kernel void broken(__global float *x) { x[0] = y; }\n";
    cl_program prog = NULL;
    clinfer_status st =
        cl_program_build_source(ctx, device, &info, NULL, "broken.cl", broken, NULL, &prog);
    EXPECT(st == CLINFER_ERR_BUILD && !prog, "syntax error -> %s", clinfer_status_str(st));
    const char *msg = clinfer_last_error();
    EXPECT(strstr(msg, "broken.cl") && strstr(msg, "build log") && strstr(msg, "'y'"),
           "message names the file and carries the log: %s", msg);

    /* The same through a development folder of sources. */
    char cl_dir[256], path[300];
    snprintf(cl_dir, sizeof cl_dir, "%s/cl", root);
    mkdir(cl_dir, 0755);
    snprintf(path, sizeof path, "%s/selftest.cl", cl_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(broken, f);
        fclose(f);
    }
    setenv("CLINFER_CL_DIR", cl_dir, 1);
    st = cl_program_build(ctx, device, &info, NULL, "selftest.cl", NULL, &prog);
    EXPECT(st == CLINFER_ERR_BUILD && !prog, "CLINFER_CL_DIR syntax error -> %s",
           clinfer_status_str(st));
    EXPECT(strstr(clinfer_last_error(), "'y'") != NULL, "%s", clinfer_last_error());
    st = cl_program_build(ctx, device, &info, NULL, "absent.cl", NULL, &prog);
    EXPECT(st == CLINFER_ERR_IO && strstr(clinfer_last_error(), "absent.cl"), "absent: %s",
           clinfer_last_error());
    unsetenv("CLINFER_CL_DIR");

    /* Bad options are a build failure too, not a crash. */
    st = cl_program_build(ctx, device, &info, NULL, "selftest.cl", "-DX=1 -not-an-option", &prog);
    EXPECT(st == CLINFER_ERR_BUILD && !prog, "bad option -> %s", clinfer_status_str(st));
}

int main(void) {
    size_t count = 0, index = 0;
    clinfer_log_set(check_log_to_stderr, NULL); /* the damaged-entry warnings */
    EXPECT_OK(clinfer_device_count(&count));
    if (count == 0) {
        fprintf(stderr, "skipped: %s\n", clinfer_last_error());
        return 77;
    }
    EXPECT_OK(clinfer_device_select(NULL, &index, NULL, 0));
    EXPECT_OK(clinfer_device_get_info(index, &info));
    EXPECT_OK(cl_device_handles(index, NULL, &device));
    cl_int err = CL_SUCCESS;
    ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err != CL_SUCCESS || !mkdtemp(root)) {
        fprintf(stderr, "setup failed: %s\n", clinfer_status_str(err));
        return 1;
    }
    snprintf(stderr_path, sizeof stderr_path, "%s/stderr.txt", root);

    test_hit_and_damage();
    test_concurrent_store();
    test_unwritable();
    test_xdg();
    test_build_errors();

    clReleaseContext(ctx);
    remove_tree(root);
    return finish("test_program_cache");
}
