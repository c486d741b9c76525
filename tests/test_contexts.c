/* Contexts of one model evaluated at once from several threads (src/context.c: each context runs
 * on its own instance of the model's backend): on the reference backend, on OpenCL with per-op
 * launches and, on CPU devices, with graph launches, THREADS contexts decode at once on a fresh
 * model (so they also build its kernels at once), then one context decodes alone; every thread's
 * logits equal the lone context's, bit for bit (on PoCL, whose CPU driver aborted about 1 run
 * in 20 here while two queues ran one kernel at once, the queues take turns: launch_cl.c's
 * cl_turn_begin). On OpenCL a context made after the first builds
 * no program: the backend's instances share the model's (no cache lookup, no build). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "opencl/program.h"
#include "tiny_model.h"

#define THREADS 3
#define N_PROMPT 8
#define N_DECODE 40

static void decode_at_once(const char *path, clinfer_backend_kind kind, clinfer_toggle graph,
                           const char *what) {
    clinfer_model *m = NULL;
    EXPECT_OK(tiny_model_load(path, kind, graph, &m));
    if (!m) return;
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    tiny_model_job jobs[THREADS + 1];
    pthread_t t[THREADS];
    for (int i = 0; i <= THREADS; i++)
        jobs[i] = (tiny_model_job){m, N_PROMPT, N_DECODE, calloc(n, sizeof(float)), CLINFER_OK};
    for (int i = 0; i < THREADS; i++)
        EXPECT(pthread_create(&t[i], NULL, tiny_model_run_job, &jobs[i]) == 0, "%s: thread %d",
               what, i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    tiny_model_run_job(&jobs[THREADS]);
    for (int i = 0; i <= THREADS; i++)
        EXPECT(jobs[i].st == CLINFER_OK, "%s: context %d: %s", what, i,
               clinfer_status_str(jobs[i].st));
    for (int i = 0; i < THREADS; i++)
        EXPECT(!memcmp(jobs[i].logits, jobs[THREADS].logits, n * sizeof(float)),
               "%s: context %d, decoding beside %d others, differs from decoding alone", what, i,
               THREADS - 1);

    if (kind == CLINFER_BACKEND_OPENCL) {
        clinfer_context *first = NULL, *second = NULL;
        unsigned hits0, misses0, hits1, misses1;
        EXPECT_OK(clinfer_context_create(m, NULL, &first));
        cl_program_cache_stats(&hits0, &misses0);
        EXPECT_OK(clinfer_context_create(m, NULL, &second));
        cl_program_cache_stats(&hits1, &misses1);
        EXPECT(hits1 == hits0 && misses1 == misses0,
               "%s: a second context built programs (cache hits %u -> %u, builds %u -> %u)", what,
               hits0, hits1, misses0, misses1);
        clinfer_context_free(second);
        clinfer_context_free(first);
    }
    printf("%s: %d contexts at once, logits as alone\n", what, THREADS);
    for (int i = 0; i <= THREADS; i++)
        free(jobs[i].logits);
    clinfer_model_free(m);
}

/* options.threads 1 on a CPU device with more: a sub-device of one compute unit, named in the
 * description, decoding the logits of the whole device. */
static void one_thread(const char *path) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    clinfer_model *whole = NULL, *one = NULL;
    EXPECT_OK(clinfer_model_load(path, &p, &whole));
    p.options.threads = 1;
    EXPECT_OK(clinfer_model_load(path, &p, &one));
    clinfer_model_info info;
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
    if (whole && one && a && b && clinfer_model_get_info(one, &info) == CLINFER_OK) {
        EXPECT_OK(tiny_model_decode(whole, NULL, N_PROMPT, N_DECODE, a));
        EXPECT_OK(tiny_model_decode(one, NULL, N_PROMPT, N_DECODE, b));
        EXPECT(!memcmp(a, b, n * sizeof(float)), "one thread decodes other logits");
        size_t index = 0;
        clinfer_device_info dev;
        bool many = clinfer_device_select(NULL, &index, NULL, 0) == CLINFER_OK &&
                    clinfer_device_get_info(index, &dev) == CLINFER_OK &&
                    dev.type == CLINFER_DEVICE_CPU && dev.compute_units > 1;
        EXPECT(!many || strstr(info.backend, ", 1 thread)"), "one thread not named: %s",
               info.backend);
        printf("one thread: %s, logits as the whole device's\n", info.backend);
    }
    free(a);
    free(b);
    clinfer_model_free(whole);
    clinfer_model_free(one);
}

int main(void) {
    char path[128];
    snprintf(path, sizeof path, "contexts_%d.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q4_0);
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    decode_at_once(path, CLINFER_BACKEND_REFERENCE, CLINFER_DEFAULT, "reference");
    size_t devices = 0;
    if (clinfer_device_count(&devices) == CLINFER_OK && devices > 0) {
        decode_at_once(path, CLINFER_BACKEND_OPENCL, CLINFER_OFF, "OpenCL, per-op launches");
        /* graph launches where the device takes them (CPU devices) */
        decode_at_once(path, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, "OpenCL, default launches");
        one_thread(path);
    } else {
        printf("no OpenCL device: the reference backend only\n");
    }
    remove(path);
    return finish("test_contexts");
}
