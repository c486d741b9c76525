/* The callbacks of include/clinfer.h on a tiny model (reference backend; OpenCL where there is a
 * device, for the backend's own messages):
 *   - log: without a callback the library writes nothing to stderr, even verbose and with
 *     CLINFER_VERBOSE=1; with one, a verbose load hands it the load steps (INFO), and
 *     CLINFER_VERBOSE=1 the backend's decisions (DEBUG) on OpenCL; clinfer_log_set(NULL) stops it;
 *   - abort: a callback that says stop before the second chunk makes the eval return
 *     CLINFER_ERR_ABORTED with the context as before (n_past 0), and the same context then
 *     evaluates the tokens to the logits a fresh context gives; clinfer_generate stops too;
 *   - progress: fractions from 0 rising to 1 during a load; a callback that returns false stops
 *     the load with CLINFER_ERR_ABORTED and no model. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

static char model_path[64];

typedef struct {
    int count[3]; /* by level */
    char first_info[256];
} log_sink;

static void collect(clinfer_log_level level, const char *message, void *user) {
    log_sink *s = user;
    if ((unsigned)level < 3) s->count[level]++;
    if (level == CLINFER_LOG_INFO && !s->first_info[0])
        snprintf(s->first_info, sizeof s->first_info, "%s", message);
}

static clinfer_model *load(clinfer_backend_kind kind, bool verbose) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    p.verbose = verbose;
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(model_path, &p, &m));
    return m;
}

/* A verbose load, a context and an eval; returns the bytes written to stderr meanwhile. */
static long quiet_run(clinfer_backend_kind kind) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/clinfer_cb_err_%d", (int)getpid());
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    clinfer_model *m = load(kind, true);
    clinfer_context *c = NULL;
    int32_t ids[3] = {1, 40, 50};
    if (m && clinfer_context_create(m, NULL, &c) == CLINFER_OK) clinfer_eval(c, ids, 3);
    clinfer_context_free(c);
    clinfer_model_free(m);
    fflush(stderr);
    long n = lseek(fd, 0, SEEK_END);
    dup2(saved, 2);
    close(saved);
    close(fd);
    remove(path);
    return n;
}

static void test_log(bool have_opencl) {
    setenv("CLINFER_VERBOSE", "1", 1);
    clinfer_log_set(NULL, NULL);
    long n = quiet_run(CLINFER_BACKEND_REFERENCE) +
             (have_opencl ? quiet_run(CLINFER_BACKEND_OPENCL) : 0);
    EXPECT(n == 0, "without a log callback the library wrote %ld bytes to stderr", n);

    log_sink sink = {{0}, ""};
    clinfer_log_set(collect, &sink);
    clinfer_model_free(load(CLINFER_BACKEND_REFERENCE, true));
    EXPECT(sink.count[CLINFER_LOG_INFO] >= 2 && strstr(sink.first_info, "backend"),
           "a verbose load logged %d INFO messages, the first '%s'", sink.count[CLINFER_LOG_INFO],
           sink.first_info);
    int info = sink.count[CLINFER_LOG_INFO];
    clinfer_model_free(load(CLINFER_BACKEND_REFERENCE, false));
    EXPECT(sink.count[CLINFER_LOG_INFO] == info, "a load without verbose logged load steps");
    if (have_opencl) {
        clinfer_model_free(load(CLINFER_BACKEND_OPENCL, false));
        EXPECT(sink.count[CLINFER_LOG_DEBUG] > 0,
               "CLINFER_VERBOSE=1 logged no backend decisions on OpenCL");
    }
    clinfer_log_set(NULL, NULL);
    int total = sink.count[0] + sink.count[1] + sink.count[2];
    clinfer_model_free(load(CLINFER_BACKEND_REFERENCE, true));
    EXPECT(sink.count[0] + sink.count[1] + sink.count[2] == total,
           "messages arrived after clinfer_log_set(NULL)");
    unsetenv("CLINFER_VERBOSE");
    printf("log: silent without a callback; %d INFO, %d DEBUG messages with one\n", info,
           sink.count[CLINFER_LOG_DEBUG]);
}

typedef struct {
    int calls, stop_at; /* says stop on call stop_at (from 1) */
} abort_state;

static bool stop_at(void *user) {
    abort_state *a = user;
    return ++a->calls >= a->stop_at;
}

static void test_abort(void) {
    clinfer_model *m = load(CLINFER_BACKEND_REFERENCE, false);
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_batch = 4;
    clinfer_context *c = NULL, *fresh = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &c));
    EXPECT_OK(clinfer_context_create(m, &cp, &fresh));
    if (!c || !fresh) goto done;
    int32_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = 3 + i * 11;
    abort_state a = {0, 2};
    clinfer_context_set_abort(c, stop_at, &a);
    clinfer_status st = clinfer_eval(c, ids, 10);
    EXPECT(st == CLINFER_ERR_ABORTED && a.calls == 2 && clinfer_context_n_past(c) == 0 &&
               strstr(clinfer_last_error(), "abort"),
           "an eval stopped before chunk 2: %s after %d calls, n_past %u: %s",
           clinfer_status_str(st), a.calls, clinfer_context_n_past(c), clinfer_last_error());
    clinfer_context_set_abort(c, NULL, NULL);
    EXPECT_OK(clinfer_eval(c, ids, 10));
    EXPECT_OK(clinfer_eval(fresh, ids, 10));
    const float *x = NULL, *y = NULL;
    size_t nv = 0;
    EXPECT_OK(clinfer_get_logits(c, &x, &nv));
    EXPECT_OK(clinfer_get_logits(fresh, &y, NULL));
    EXPECT(x && y && !memcmp(x, y, nv * sizeof *x),
           "after an aborted eval the context's logits differ from a fresh one's");

    clinfer_context_reset(c);
    abort_state g = {0, 4}; /* the prompt in one chunk, then a token: stopped at the third */
    clinfer_context_set_abort(c, stop_at, &g);
    clinfer_generate_stats stats = {0};
    st = clinfer_generate(c, ids, 3, 20, NULL, NULL, NULL, &stats);
    EXPECT(st == CLINFER_ERR_ABORTED && stats.n_generated < 20,
           "generate with an abort: %s, %zu generated", clinfer_status_str(st), stats.n_generated);
    printf("abort: an eval stopped before its second chunk; generate stopped after %zu tokens\n",
           stats.n_generated);
done:
    clinfer_context_free(c);
    clinfer_context_free(fresh);
    clinfer_model_free(m);
}

typedef struct {
    float seen[64];
    int n;
    int stop_after; /* 0: never */
} progress_state;

static bool on_progress(float fraction, void *user) {
    progress_state *p = user;
    if (p->n < 64) p->seen[p->n] = fraction;
    p->n++;
    return !p->stop_after || p->n < p->stop_after;
}

static void test_progress(void) {
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.backend = CLINFER_BACKEND_REFERENCE;
    progress_state p = {{0}, 0, 0};
    mp.progress = on_progress;
    mp.progress_user = &p;
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(model_path, &mp, &m));
    clinfer_model_free(m);
    bool rising = p.n >= 3 && p.seen[0] == 0.0f && p.seen[p.n - 1] == 1.0f;
    for (int i = 1; rising && i < p.n && i < 64; i++)
        rising = p.seen[i] > p.seen[i - 1];
    EXPECT(rising, "progress: %d calls, first %g, last %g, not rising from 0 to 1", p.n, p.seen[0],
           p.seen[p.n > 0 ? p.n - 1 : 0]);
    progress_state stop = {{0}, 0, 2};
    mp.progress_user = &stop;
    m = NULL;
    clinfer_status st = clinfer_model_load(model_path, &mp, &m);
    EXPECT(st == CLINFER_ERR_ABORTED && !m && stop.n == 2 &&
               strstr(clinfer_last_error(), "progress"),
           "a load stopped by its progress callback: %s, %s", clinfer_status_str(st),
           clinfer_last_error());
    clinfer_model_free(m);
    printf("progress: %d calls from 0 to 1; stopping it stops the load\n", p.n);
}

int main(void) {
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_F32);
    snprintf(model_path, sizeof model_path, "/tmp/clinfer_cb_%d.gguf", (int)getpid());
    if (tiny_model_write(&spec, model_path) != 0) return 1;
    size_t n_devices = 0;
    bool have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    test_log(have_opencl);
    test_abort();
    test_progress();
    remove(model_path);
    return finish("test_callbacks");
}
