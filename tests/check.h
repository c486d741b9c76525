/* Minimal test helpers: CHECK_TRUE/CHECK_OK record failures and keep going; finish() prints
 * the summary and returns the exit code (0 pass, 1 fail). */
#ifndef CLINFER_TEST_CHECK_H
#define CLINFER_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clinfer.h"

static int check_failures, check_count;

/* OCL_ICD_FILENAMES as the process found it. The ICD loader CUDA ships (Khronos', as in CUDA
 * 13.0) cuts it in place at the first OpenCL call, to its first driver, so the CLI runs a test
 * starts later would see that driver alone: check_icd_env_restore() puts it back first. */
static char *check_icd_filenames;

/* Also stdout line by line, so that a test killed by a signal (a driver's crash) still shows in
 * CTest's log how far it got. */
__attribute__((constructor)) static void check_init(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *icds = getenv("OCL_ICD_FILENAMES");
    check_icd_filenames = icds ? strdup(icds) : NULL;
}

static inline void check_icd_env_restore(void) {
    if (check_icd_filenames) setenv("OCL_ICD_FILENAMES", check_icd_filenames, 1);
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond);                      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define EXPECT_OK(call)                                                                            \
    do {                                                                                           \
        clinfer_status st_ = (call);                                                               \
        EXPECT(st_ == CLINFER_OK, "%s returned %s: %s", #call, clinfer_status_str(st_),            \
               clinfer_last_error());                                                              \
    } while (0)

/* Normalised mean squared error: sum((a-b)^2) / sum(b^2), b the reference. */
static inline double nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Generated text gathered by text_collect, a clinfer_text_callback (cut at the buffer's end). */
typedef struct {
    char text[8192];
    size_t len;
} text_sink;

static inline bool text_collect(const char *text, size_t len, void *user) {
    text_sink *c = user;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    return true;
}

/* A clinfer_log_callback printing on stderr, as the CLI's does: for tests that read the
 * library's diagnostics there. */
static inline void check_log_to_stderr(clinfer_log_level level, const char *message, void *user) {
    (void)user;
    fprintf(stderr, "clinfer: %s%s\n", level == CLINFER_LOG_WARN ? "warning: " : "", message);
}

static inline int finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
