/* Lifetimes on the OpenCL backend: a tiny model loaded, run and freed ITERATIONS times in one
 * process, with f32 GEMM forced through CLBlast where it is built in, must keep its resident
 * memory flat and leave nothing holding the freed model's OpenCL context. Every tenth iteration a
 * second model is live beside the first and outlives it, so the last of several CLBlast users is
 * the one that empties CLBlast's program cache. Exits 77 when there is no OpenCL device. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model.h"
#include "opencl/matmul_cl.h"
#include "tiny_model.h"

#define ITERATIONS 100
#define WARMUP 10 /* iterations before the first measure: caches and allocator pools settle */
/* More prompt tokens than the matvec takes (MATVEC_MAX_N, 8, in matmul_cl.c): the prompt is
 * one GEMM per weight, through CLBlast. */
#define N_PROMPT 12
#define N_DECODE 3
/* RSS may grow this much from WARMUP to ITERATIONS. Measured on PoCL 3.1 + CLBlast 1.5.3 (RSS
 * after malloc_trim): +0.2 to +0.3 MiB over the 90 iterations, with or without the cache fix, as
 * CLBlast's cached programs are small on PoCL (the context check catches those); 1 MiB is three
 * times that drift and fails a leak of 12 KiB per load. */
#define RSS_GROWTH_BOUND (1 << 20)

/* Resident bytes once glibc has handed its free pages back: the free lists of its per-thread
 * arenas (PoCL's threads allocate too) otherwise move RSS by 10+ MiB between iterations. */
static size_t rss_bytes(void) {
    malloc_trim(0);
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static clinfer_model *load(const char *path) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = CLINFER_BACKEND_OPENCL;
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(path, &p, &m));
    return m;
}

/* A reference to m's OpenCL context that outlives m, for expect_released. */
static cl_context retain_context(clinfer_model *m) {
    cl_context c = ((cl_backend_ctx *)m->backend->ctx)->context;
    clRetainContext(c);
    return c;
}

/* Once every model is freed, the reference from retain_context must be the context's last:
 * every queue, program, kernel and buffer made in it (by clinfer or by CLBlast's program
 * cache) holds one until it is released. */
static void expect_released(cl_context c, int it) {
    cl_uint refs = 0;
    cl_int err = CL_SUCCESS;
    /* PoCL drops the references of finished commands from its own threads, a little after
     * clFinish returns: wait up to a second for them. */
    for (int tries = 0; tries < 100; tries++) {
        err = clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
        if (err != CL_SUCCESS || refs == 1) break;
        usleep(10000);
    }
    EXPECT(err == CL_SUCCESS && refs == 1,
           "iteration %d: the freed model's context still has %u other references (error %d)", it,
           refs - 1, err);
    clReleaseContext(c);
}

/* The greedy token after the prompt and after each decoded token, into tokens[1 + N_DECODE]. */
static void run(clinfer_model *m, float *logits, int32_t *tokens) {
    size_t n_vocab = tiny_model_n_vocab();
    memset(tokens, 0xff, (1 + N_DECODE) * sizeof *tokens);
    clinfer_status st = tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, logits);
    EXPECT(st == CLINFER_OK, "decode: %s", clinfer_last_error());
    for (int i = 0; st == CLINFER_OK && i <= N_DECODE; i++) {
        const float *row = logits + (size_t)i * n_vocab;
        size_t best = 0;
        for (size_t v = 1; v < n_vocab; v++)
            if (row[v] > row[best]) best = v;
        tokens[i] = (int32_t)best;
    }
}

int main(void) {
    size_t n_devices = 0;
    if (clinfer_device_count(&n_devices) != CLINFER_OK || n_devices == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        return 77;
    }
    setenv("CLINFER_CLBLAST", "1", 1); /* CPU devices take our GEMM otherwise */
    char path[128];
    snprintf(path, sizeof path, "tiny_model_lifetime_%d.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    if (tiny_model_write(&spec, path) != 0) return 1;

    float *logits = malloc((1 + N_DECODE) * tiny_model_n_vocab() * sizeof *logits);
    int32_t first[1 + N_DECODE], tokens[1 + N_DECODE];
    size_t rss_warm = 0;
    for (int it = 0; it < ITERATIONS && check_failures == 0; it++) {
        if (it == WARMUP) rss_warm = rss_bytes();
        if (it % 10 == 0) printf("iteration %d: RSS %.1f MiB\n", it, rss_bytes() / 1048576.0);
        clinfer_model *m = load(path), *beside = it % 10 == 5 ? load(path) : NULL;
        if (!m || !logits) break;
#ifdef CLINFER_WITH_CLBLAST
        if (it == 0) EXPECT(cl_matmul_clblast(m->backend->ctx), "CLBlast is not in use");
#endif
        run(m, logits, it == 0 ? first : tokens);
        cl_context held[2] = {retain_context(m), beside ? retain_context(beside) : NULL};
        clinfer_model_free(m);
        if (beside) {
            run(beside, logits, tokens);
            clinfer_model_free(beside);
        }
        for (int i = 0; i < 2 && held[i]; i++)
            expect_released(held[i], it);
        EXPECT(it == 0 || memcmp(tokens, first, sizeof first) == 0,
               "iteration %d: greedy tokens differ from the first iteration's", it);
    }
    size_t rss_end = rss_bytes();
    long growth = (long)rss_end - (long)rss_warm;
    printf("RSS after %d iterations %.1f MiB, after %d %.1f MiB: %+ld KiB (bound %d KiB)\n", WARMUP,
           rss_warm / 1048576.0, ITERATIONS, rss_end / 1048576.0, growth / 1024,
           RSS_GROWTH_BOUND / 1024);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine keeps freed blocks resident */
    EXPECT(check_failures > 0 || growth <= RSS_GROWTH_BOUND,
           "RSS grew by %ld KiB over %d load/free iterations", growth / 1024, ITERATIONS - WARMUP);
#endif
    free(logits);
    remove(path);
    return finish("test_model_lifetime");
}
