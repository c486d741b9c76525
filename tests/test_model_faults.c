/* OpenCL failures along the model path (CLINFER_FAULT="kind:N:ERR", backends/opencl/fault.c):
 * for every N until the operation succeeds, the Nth buffer allocation, program build or kernel
 * enqueue fails during clinfer_model_load and during context creation plus generation of a tiny
 * model; each returns a non-OK status with a message and frees everything (the ASan build
 * checks the leaks), and a fresh load afterwards works. A device lost during eval (-5, -36)
 * makes later calls on that model return CLINFER_ERR_DEVICE_LOST. Weights split by a small
 * CLINFER_MAX_ALLOC give the reference backend's logits. A model file truncated during its load
 * fails the load with CLINFER_ERR_IO; truncated after it, the model generates as before (no
 * SIGBUS: what it reads is its own copy). Exits 77 without an OpenCL device. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

#define CL_MEM_OBJECT_ALLOCATION_FAILURE -4
#define CL_OUT_OF_RESOURCES -5
#define CL_BUILD_PROGRAM_FAILURE -11
#define CL_INVALID_COMMAND_QUEUE -36
#define MAX_FAULTS 400 /* far more allocations, builds or launches than a tiny model makes */
#define N_PROMPT 8
#define N_GEN 4

static char path[64];
static int32_t prompt[N_PROMPT] = {1, 300, 301, 302, 10, 20, 30, 40};

static clinfer_status load(clinfer_backend_kind kind, clinfer_model **m) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    return clinfer_model_load(path, &p, m);
}

static void arm(const char *kind, int n, int err) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%d:%d", kind, n, err);
    setenv("CLINFER_FAULT", spec, 1);
}

/* A context on m evaluates the prompt and generates N_GEN tokens; logits (optional, n_vocab
 * floats) receive the prompt's. */
static clinfer_status generate(clinfer_model *m, float *logits) {
    clinfer_context *ctx = NULL;
    clinfer_status st = clinfer_context_create(m, NULL, &ctx);
    if (st == CLINFER_OK) st = clinfer_eval(ctx, prompt, N_PROMPT);
    const float *out;
    size_t n_vocab;
    if (st == CLINFER_OK) st = clinfer_get_logits(ctx, &out, &n_vocab);
    if (st == CLINFER_OK && logits) memcpy(logits, out, n_vocab * sizeof *out);
    if (st == CLINFER_OK) st = clinfer_generate(ctx, NULL, 0, N_GEN, NULL, NULL, NULL, NULL);
    clinfer_context_free(ctx);
    return st;
}

/* A failure must carry a message saying what failed. */
static void expect_failed(clinfer_status st, const char *what, const char *kind, int n) {
    const char *msg = clinfer_last_error();
    EXPECT(st != CLINFER_OK && msg[0], "%s with %s %d failing: %s, message '%s'", what, kind, n,
           clinfer_status_str(st), msg);
}

static void check_fresh_load(const char *after) {
    clinfer_model *m = NULL;
    EXPECT_OK(load(CLINFER_BACKEND_OPENCL, &m));
    if (m) {
        clinfer_status st = generate(m, NULL);
        EXPECT(st == CLINFER_OK, "after %s: a fresh model generates: %s (%s)", after,
               clinfer_status_str(st), clinfer_last_error());
    }
    clinfer_model_free(m);
}

/* Fails the 1st, 2nd, ... kind during model load until a load succeeds. */
static void test_load_faults(const char *kind, int err) {
    int n = 1;
    for (; n <= MAX_FAULTS; n++) {
        clinfer_model *m = NULL;
        arm(kind, n, err);
        clinfer_status st = load(CLINFER_BACKEND_OPENCL, &m);
        unsetenv("CLINFER_FAULT");
        if (st == CLINFER_OK) {
            clinfer_model_free(m);
            break;
        }
        expect_failed(st, "model load", kind, n);
        EXPECT(m == NULL && strstr(clinfer_last_error(), "loading '"), "message '%s'",
               clinfer_last_error());
    }
    EXPECT(n <= MAX_FAULTS, "load still fails with %s %d failing", kind, n);
    printf("model load: each of the %d %s calls failed cleanly\n", n - 1, kind);
    char after[64];
    snprintf(after, sizeof after, "failed %s during load", kind);
    check_fresh_load(after);
}

/* Fails the 1st, 2nd, ... kind during context creation and generation. */
static void test_generate_faults(const char *kind, int err) {
    int n = 1;
    for (; n <= MAX_FAULTS; n++) {
        clinfer_model *m = NULL;
        EXPECT_OK(load(CLINFER_BACKEND_OPENCL, &m));
        if (!m) return;
        arm(kind, n, err);
        clinfer_status st = generate(m, NULL);
        unsetenv("CLINFER_FAULT");
        clinfer_model_free(m);
        if (st == CLINFER_OK) break;
        expect_failed(st, "generation", kind, n);
    }
    EXPECT(n <= MAX_FAULTS, "generation still fails with %s %d failing", kind, n);
    printf("generation: each of the %d %s calls failed cleanly\n", n - 1, kind);
    char after[64];
    snprintf(after, sizeof after, "failed %s during generation", kind);
    check_fresh_load(after);
}

/* A launch failing with err in the middle of an eval loses the device for the model. */
static void test_device_lost(int err) {
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL, *other = NULL;
    EXPECT_OK(load(CLINFER_BACKEND_OPENCL, &m));
    if (!m) return;
    EXPECT_OK(clinfer_context_create(m, NULL, &ctx));
    if (!ctx) goto done;
    EXPECT_OK(clinfer_eval(ctx, prompt, 4));
    arm("enqueue", 5, err);
    clinfer_status st = clinfer_eval(ctx, prompt + 4, 4);
    unsetenv("CLINFER_FAULT");
    EXPECT(st == err, "eval with a launch failing %d: %s", err, clinfer_status_str(st));
    EXPECT(clinfer_context_n_past(ctx) == 4, "n_past %u after the failed eval",
           clinfer_context_n_past(ctx));
    st = clinfer_eval(ctx, prompt + 4, 4);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST && strstr(clinfer_last_error(), "device failed"),
           "eval after the loss: %s (%s)", clinfer_status_str(st), clinfer_last_error());
    st = clinfer_generate(ctx, prompt, 1, 2, NULL, NULL, NULL, NULL);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST, "generate after the loss: %s", clinfer_status_str(st));
    st = clinfer_context_create(m, NULL, &other);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST && !other, "a new context after the loss: %s",
           clinfer_status_str(st));
done:
    clinfer_context_free(ctx);
    clinfer_model_free(m);
    check_fresh_load("a lost device");
}

/* Weights split over allocations of a few rows give the reference backend's logits. */
static void test_max_alloc(void) {
    uint32_t n_vocab = tiny_model_n_vocab();
    float *ref = calloc(n_vocab, sizeof *ref), *split = calloc(n_vocab, sizeof *split);
    clinfer_model *m = NULL;
    if (!ref || !split) goto done;
    EXPECT_OK(load(CLINFER_BACKEND_REFERENCE, &m));
    if (m) EXPECT_OK(generate(m, ref));
    clinfer_model_free(m);
    m = NULL;
    /* Q8_0 rows of 64 are 68 bytes: every matrix is cut into parts of 15 rows. */
    setenv("CLINFER_MAX_ALLOC", "1024", 1);
    EXPECT_OK(load(CLINFER_BACKEND_OPENCL, &m));
    unsetenv("CLINFER_MAX_ALLOC");
    if (m) EXPECT_OK(generate(m, split));
    double e = nmse(split, ref, n_vocab);
    EXPECT(e < 1e-4, "split weights vs reference logits NMSE %.3g", e);
    printf("CLINFER_MAX_ALLOC=1024: logits NMSE vs reference %.3g\n", e);
done:
    clinfer_model_free(m);
    free(ref);
    free(split);
}

/* The progress callback that truncates the file (user) to half once the embeddings are loaded,
 * before the first layer is read. */
static bool truncate_in_load(float fraction, void *user) {
    struct stat sb;
    if (fraction > 0 && stat(user, &sb) == 0 && sb.st_size > 1)
        EXPECT(truncate(user, sb.st_size / 2) == 0, "truncating %s", (char *)user);
    return true;
}

/* A model file of type truncated during its load, then after it, for both backends. */
static void test_truncated_file(clinfer_dtype type) {
    char file[80];
    snprintf(file, sizeof file, "model_faults_%d_truncated.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", type);
    uint32_t n_vocab = tiny_model_n_vocab();
    float *ref = calloc(n_vocab, sizeof *ref), *after = calloc(n_vocab, sizeof *after);
    for (int kind = 0; ref && after && kind < 2; kind++) {
        clinfer_model_params p;
        clinfer_model_params_default(&p);
        p.backend = kind ? CLINFER_BACKEND_OPENCL : CLINFER_BACKEND_REFERENCE;
        const char *what = kind ? "OpenCL" : "reference";
        clinfer_model *m = NULL;

        EXPECT(tiny_model_write(&spec, file) == 0, "writing %s", file);
        p.progress = truncate_in_load;
        p.progress_user = file;
        clinfer_status st = clinfer_model_load(file, &p, &m);
        EXPECT(st == CLINFER_ERR_IO && !m && strstr(clinfer_last_error(), "shrank"),
               "%s %s: truncated during the load: %s, '%s'", what, dtype_name(type),
               clinfer_status_str(st), clinfer_last_error());
        clinfer_model_free(m);
        m = NULL;

        EXPECT(tiny_model_write(&spec, file) == 0, "writing %s", file);
        p.progress = NULL;
        EXPECT_OK(clinfer_model_load(file, &p, &m));
        if (!m) continue;
        EXPECT_OK(generate(m, ref));
        EXPECT(truncate(file, 0) == 0, "truncating %s under the model", file);
        EXPECT_OK(generate(m, after));
        EXPECT(memcmp(ref, after, n_vocab * sizeof *ref) == 0,
               "%s %s: logits changed by truncating the file after the load", what,
               dtype_name(type));
        clinfer_model_free(m);
    }
    remove(file);
    free(ref);
    free(after);
}

int main(void) {
    snprintf(path, sizeof path, "model_faults_%d.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    if (tiny_model_write(&spec, path) != 0) return 1;
    size_t count = 0;
    if (clinfer_device_count(&count) != CLINFER_OK || count == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        remove(path);
        return 77;
    }
    test_load_faults("alloc", CL_MEM_OBJECT_ALLOCATION_FAILURE);
    test_load_faults("build", CL_BUILD_PROGRAM_FAILURE);
    test_load_faults("enqueue", CL_MEM_OBJECT_ALLOCATION_FAILURE);
    test_generate_faults("alloc", CL_MEM_OBJECT_ALLOCATION_FAILURE);
    test_generate_faults("enqueue", CL_MEM_OBJECT_ALLOCATION_FAILURE);
    test_device_lost(CL_OUT_OF_RESOURCES);
    test_device_lost(CL_INVALID_COMMAND_QUEUE);
    test_max_alloc();
    test_truncated_file(CLINFER_DT_Q8_0); /* copied to the device */
    test_truncated_file(CLINFER_DT_F16);  /* used where it lies on CPU devices */
    remove(path);
    return finish("test_model_faults");
}
