/* Graph launches (backends/opencl/graph_cl.c, cl/graph.cl: runs of decode ops in one launch on
 * CPU devices) against the per-op launches they replace, which must give the same bits:
 *   - models: tiny models of every architecture (gemma3, mistral, gemma2 and olmo2 with sliding
 *     windows) and weight type, f16 and f32 KV caches, 8-bit and f32 activations; a prompt,
 *     then single tokens until attention splits the positions into chunks; the logits of every
 *     step are identical with CLINFER_GRAPH=0, and the trace shows that graph launches ran the
 *     decode steps (gpt2's layer norms, biases, stores and GELUs included); models mixing weight
 *     types (Q4_K_M's and others) through one program of every type's readers, their logits
 *     also checked against the reference backend's;
 *   - two models decoding at once from two threads, their graph launches sharing the device's
 *     threads: both finish, with the logits of decoding alone;
 *   - a device on which graph.cl fails to build decodes through per-op launches, as without it;
 *   - a graph launch that stalls (a record waiting on itself, as on a device that does not run
 *     the work-groups at once) ends its eval in an error naming the stall, not a hang; the context
 * launches per op after it, a new one decodes as the per-op launches do;
 *   - steps of four sequences in one batch (llama with f32 and 8-bit x, gpt2; Q4_0's interleaved
 *     rows, Q4_K and Q6_K's row-major ones): graph launches take their matmuls (four columns) and
 *     their attentions (one per sequence), with the logits of per-op launches; Q4_1 and Q8_0
 *     with f32 x also at the f32 kernels' other vector width (CLINFER_F32_LANES: 16 lanes on a
 *     CPU without AVX-512, 8 on one with it), prompts included, bit for bit;
 *   - ops: a run stops before an op the kernel cannot do (a ROPE) and before a bad one (a
 *     matmul past its output buffer), which op() then rejects with its own message; a run that
 *     names more buffers than a launch takes is split over several launches; the outputs are
 *     those of the per-op backend.
 * Skipped (77) where the chosen device (CLINFER_DEVICE, else the strongest) is not a CPU: the
 * backend takes no graph launches there. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "context.h"
#include "opencl/cl_backend.h"
#include "opencl/program.h"
#include "weight_types.h"
#include "random.h"
#include "tiny_model.h"

#define N_PROMPT 8
#define N_DECODE 100 /* past 64 positions: attention then runs in chunks and merges them */

enum { PER_OP, GRAPH, SIDES };

/* ---- models ------------------------------------------------------------------------------ */

static clinfer_model *load_on(const char *path, bool graph, clinfer_backend_kind backend) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = backend;
    setenv("CLINFER_GRAPH", graph ? "1" : "0", 1); /* unset: chosen per step by timing */
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(path, &p, &m));
    unsetenv("CLINFER_GRAPH");
    return m;
}

static clinfer_model *load(const char *path, bool graph) {
    return load_on(path, graph, CLINFER_BACKEND_OPENCL);
}

/* Events named name (a graph launch: "graph", else an op's own launch) in a Chrome trace written
 * by CLINFER_TRACE. */
static int trace_events(const char *path, const char *name) {
    FILE *f = fopen(path, "r");
    int n = 0;
    char line[1024], key[64];
    snprintf(key, sizeof key, "\"name\": \"%s\"", name);
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, key) != NULL;
    if (f) fclose(f);
    return n;
}

static int graph_events(const char *path) {
    return trace_events(path, "graph");
}

/* Decodes on a model into out (arg: what the caller passes through). */
typedef void (*side_decode)(clinfer_model *m, const void *arg, float *out);

/* The first of n floats where a and b differ in their bits, plus one; 0 where none does. */
static size_t first_difference(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return i + 1;
    return 0;
}

/* Runs decode on the model at path loaded for per-op launches, then for graph launches (traced
 * to trace), into logits[PER_OP] and logits[GRAPH] (n floats each): their first_difference. */
static size_t both_sides(const char *path, const char *trace, side_decode decode, const void *arg,
                         float *const *logits, size_t n) {
    for (int side = 0; side < SIDES; side++) {
        clinfer_model *m = load(path, side == GRAPH);
        if (side == GRAPH) setenv("CLINFER_TRACE", trace, 1);
        if (m) decode(m, arg, logits[side]);
        unsetenv("CLINFER_TRACE");
        clinfer_model_free(m);
    }
    return first_difference(logits[PER_OP], logits[GRAPH], n);
}

/* A prompt of N_PROMPT tokens, then N_DECODE single tokens (arg: the context's parameters). */
static void decode_single(clinfer_model *m, const void *arg, float *out) {
    EXPECT_OK(tiny_model_decode(m, arg, N_PROMPT, N_DECODE, out));
}

/* The model of arch with weights of type, or of type and the n_mix types of mix (n_mix > 0). */
static void test_model(const char *arch, clinfer_dtype type, const clinfer_dtype *mix, int n_mix,
                       bool kv_f32, bool f32_act) {
    char path[128], trace[128], what[96];
    int len = snprintf(what, sizeof what, "%s %s", arch, dtype_name(type));
    for (int i = 0; i < n_mix; i++)
        len += snprintf(what + len, sizeof what - (size_t)len, "+%s", dtype_name(mix[i]));
    snprintf(what + len, sizeof what - (size_t)len, "%s%s", kv_f32 ? " kv f32" : "",
             f32_act ? " f32 act" : "");
    snprintf(path, sizeof path, "graph_model_%d.gguf", (int)getpid());
    snprintf(trace, sizeof trace, "graph_trace_%d.json", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, arch, type);
    for (int i = 0; i < n_mix; i++)
        spec.mix[i] = mix[i];
    spec.n_mix = n_mix;
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    float *logits[SIDES] = {calloc(n, sizeof(float)), calloc(n, sizeof(float))};
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.kv_f32 = kv_f32;
    cp.activations = f32_act ? CLINFER_ACT_F32 : CLINFER_ACT_Q8;
    size_t differ = both_sides(path, trace, decode_single, &cp, logits, n);
    EXPECT(!differ, "%s: logits differ from the per-op launches at step %zu", what,
           differ ? (differ - 1) / tiny_model_n_vocab() : 0);
    int graphs = graph_events(trace);
    EXPECT(graphs >= N_DECODE, "%s: %d graph launches for %d decode steps", what, graphs, N_DECODE);
    if (n_mix) { /* the mix's readers side by side in one program: the reference's logits too */
        float *ref = calloc(n, sizeof(float));
        clinfer_model *m = load_on(path, false, CLINFER_BACKEND_REFERENCE);
        if (m) EXPECT_OK(tiny_model_decode(m, &cp, N_PROMPT, N_DECODE, ref));
        clinfer_model_free(m);
        double worst = 0;
        for (size_t i = 0; i < n; i += tiny_model_n_vocab()) {
            double err = nmse(logits[GRAPH] + i, ref + i, tiny_model_n_vocab());
            if (!(err <= worst)) worst = err;
        }
        EXPECT(worst < 1e-4, "%s: graph vs reference logits NMSE %.3g", what, worst);
        printf("%s: graph vs reference logits NMSE at most %.3g\n", what, worst);
        free(ref);
    }
    printf("%s: %d steps identical, %d graph launches\n", what, N_DECODE + 1, graphs);
    free(logits[PER_OP]);
    free(logits[GRAPH]);
    remove(path);
    remove(trace);
}

/* Two models (two backends on one device) decoding at once from two threads: their graph
 * launches share the device's threads, so one launch may run while the other's work-groups wait
 * for a thread; each must still finish, with the logits of a model decoding alone. */
static void test_concurrent(void) {
    char path[128];
    snprintf(path, sizeof path, "graph_threads_%d.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q4_0);
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    tiny_model_job jobs[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = (tiny_model_job){load(path, true), N_PROMPT, N_DECODE, calloc(n, sizeof(float)),
                                   CLINFER_OK};
    if (jobs[0].model && jobs[1].model && jobs[2].model) {
        tiny_model_run_job(&jobs[0]);
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            EXPECT(pthread_create(&t[i], NULL, tiny_model_run_job, &jobs[1 + i]) == 0, "thread %d",
                   i);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < 3; i++)
            EXPECT(jobs[i].st == CLINFER_OK, "model %d: %s", i, clinfer_status_str(jobs[i].st));
        for (int i = 1; i < 3; i++)
            EXPECT(!memcmp(jobs[i].logits, jobs[0].logits, n * sizeof(float)),
                   "model %d, decoding beside another, differs from decoding alone", i);
        printf("two models decoding at once: logits as alone\n");
    }
    for (int i = 0; i < 3; i++) {
        clinfer_model_free(jobs[i].model);
        free(jobs[i].logits);
    }
    remove(path);
}

/* Names this process's scratch model and trace files after tag (buffers of SCRATCH_NAME bytes)
 * and writes a tiny model of arch and type to the first. */
enum { SCRATCH_NAME = 128 };
static void scratch_model(const char *tag, const char *arch, clinfer_dtype type, char *path,
                          char *trace) {
    snprintf(path, SCRATCH_NAME, "graph_%s_%d.gguf", tag, (int)getpid());
    snprintf(trace, SCRATCH_NAME, "graph_%s_%d.json", tag, (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, arch, type);
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
}

/* A device that cannot build graph.cl (an injected build failure, CLINFER_FAULT) decodes through
 * the per-op launches: the same logits, no graph launch. */
static void test_build_failure(void) {
    char path[SCRATCH_NAME], trace[SCRATCH_NAME];
    scratch_model("build", "llama", CLINFER_DT_Q8_0, path, trace);
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    float *logits[SIDES] = {calloc(n, sizeof(float)), calloc(n, sizeof(float))};
    for (int side = 0; side < SIDES; side++) {
        clinfer_model *m = load(path, side == GRAPH);
        if (side == GRAPH) {
            setenv("CLINFER_FAULT", "build:1:-11", 1); /* the next build: graph.cl's */
            setenv("CLINFER_TRACE", trace, 1);
        }
        if (m) EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, logits[side]));
        unsetenv("CLINFER_FAULT");
        unsetenv("CLINFER_TRACE");
        clinfer_model_free(m);
    }
    EXPECT(!memcmp(logits[PER_OP], logits[GRAPH], n * sizeof(float)),
           "without graph.cl the logits differ from the per-op launches'");
    EXPECT(graph_events(trace) == 0, "%d graph launches without graph.cl", graph_events(trace));
    printf("graph.cl failing to build: per-op launches, the same logits\n");
    free(logits[PER_OP]);
    free(logits[GRAPH]);
    remove(path);
    remove(trace);
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A stalled graph launch (CLINFER_FAULT's graph-stall makes the first one's last record wait on
 * itself) fails the eval within seconds naming the stall; its context then launches per op, and
 * a new context decodes with the logits of per-op launches. */
static void test_stall(void) {
    char path[SCRATCH_NAME], trace[SCRATCH_NAME];
    scratch_model("stall", "llama", CLINFER_DT_Q8_0, path, trace);
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    float *logits[SIDES] = {calloc(n, sizeof(float)), calloc(n, sizeof(float))};
    clinfer_model *per_op = load(path, false), *graph = load(path, true);
    clinfer_context *ctx = NULL;
    if (per_op && graph) {
        EXPECT_OK(tiny_model_decode(per_op, NULL, N_PROMPT, N_DECODE, logits[PER_OP]));
        EXPECT_OK(clinfer_context_create(graph, NULL, &ctx));
    }
    if (ctx) {
        int32_t ids[N_PROMPT];
        for (int i = 0; i < N_PROMPT; i++)
            ids[i] = i + 1;
        setenv("CLINFER_FAULT", "graph-stall:1:-1", 1);
        double t0 = seconds();
        clinfer_status st = clinfer_eval(ctx, ids, N_PROMPT);
        for (int i = 0; st == CLINFER_OK && i < 4; i++) /* the prompt may not take the graph */
            st = clinfer_eval(ctx, ids, 1);
        double took = seconds() - t0;
        unsetenv("CLINFER_FAULT");
        EXPECT(st == CLINFER_ERR_UNSUPPORTED && strstr(clinfer_last_error(), "waited past"),
               "a stalled graph launch: %s (%s)", clinfer_status_str(st), clinfer_last_error());
        /* a bound that says "no hang", not a speed: the spins take 0.3-1 s on a quiet CPU,
         * several seconds on a loaded one */
        EXPECT(took < 60, "a stalled graph launch failed after %.1f s", took);
        clinfer_context_reset(ctx);
        EXPECT_OK(clinfer_eval(ctx, ids, N_PROMPT)); /* per-op launches now */
        clinfer_context_free(ctx);
        EXPECT_OK(tiny_model_decode(graph, NULL, N_PROMPT, N_DECODE, logits[GRAPH]));
        EXPECT(!memcmp(logits[PER_OP], logits[GRAPH], n * sizeof(float)),
               "after a stall a new context's logits differ from the per-op launches'");
        printf("a stalled graph launch: an error after %.2f s, then per-op launches\n", took);
    }
    clinfer_model_free(per_op);
    clinfer_model_free(graph);
    free(logits[PER_OP]);
    free(logits[GRAPH]);
    remove(path);
    remove(trace);
}

/* Decode steps alternating between the routes (backends/opencl/route_cl.h: the choice of the
 * context's backend instance, set here for each step: the graph route for three steps, then the
 * per-op one for three) give the logits of per-op launches, through clinfer_eval and through
 * single-token batches; the trace shows graph launches, fewer than where every step takes them. */
static int alternate_route(int step) {
    return step / 3 % 2 ? ROUTE_OPS : ROUTE_GRAPH;
}

static void decode_alternating(clinfer_model *m, bool batches, float *out) {
    int32_t ids[N_PROMPT + N_DECODE];
    for (int i = 0; i < N_PROMPT + N_DECODE; i++)
        ids[i] = 3 + (i * 53) % 250;
    clinfer_context *c = NULL;
    const float *logits;
    size_t n_vocab = 0;
    EXPECT_OK(clinfer_context_create(m, NULL, &c));
    if (c) EXPECT_OK(clinfer_eval(c, ids, N_PROMPT));
    clinfer_status st = CLINFER_OK;
    for (int i = 0; c && i <= N_DECODE && st == CLINFER_OK; i++) {
        logits = NULL;
        EXPECT_OK(clinfer_get_logits_ith(c, -1, &logits, &n_vocab));
        if (logits) memcpy(out + (size_t)i * n_vocab, logits, n_vocab * sizeof *out);
        if (i == N_DECODE) break;
        cl_route *route = &((cl_backend_ctx *)c->backend->ctx)->route;
        route->use = alternate_route(i); /* the route of this step: no probe before it */
        route->since_probe = 0;
        route->interval = 1 << 30;
        clinfer_batch_entry e = {.token = ids[N_PROMPT + i], .pos = N_PROMPT + i, .logits = true};
        st = batches ? clinfer_batch_eval(c, &e, 1) : clinfer_eval(c, &e.token, 1);
        EXPECT_OK(st);
    }
    clinfer_context_free(c);
}

static void test_alternating(void) {
    char path[SCRATCH_NAME], trace[SCRATCH_NAME];
    scratch_model("alternate", "gemma3", CLINFER_DT_Q4_0, path,
                  trace); /* sliding windows, 8-bit x */
    size_t n = (size_t)(N_DECODE + 1) * tiny_model_n_vocab();
    float *per_op = calloc(n, sizeof(float)), *mixed = calloc(n, sizeof(float));
    clinfer_model *m = load(path, false);
    if (m) EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, per_op));
    clinfer_model_free(m);
    m = load(path, true); /* the graph launches of every step graph: a bound for the mix's */
    setenv("CLINFER_TRACE", trace, 1);
    if (m) EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, mixed));
    unsetenv("CLINFER_TRACE");
    clinfer_model_free(m);
    int all_graph = graph_events(trace);
    remove(trace);
    unsetenv("CLINFER_GRAPH");
    EXPECT_OK(tiny_model_load(path, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, &m));
    int graph_steps = 0;
    for (int i = 0; i < N_DECODE; i++)
        graph_steps += alternate_route(i) == ROUTE_GRAPH;
    for (int batches = 0; m && batches < 2; batches++) {
        memset(mixed, 0, n * sizeof(float));
        setenv("CLINFER_TRACE", trace, 1);
        decode_alternating(m, batches, mixed);
        unsetenv("CLINFER_TRACE");
        const char *how = batches ? "single-token batches" : "clinfer_eval";
        size_t differ = 0;
        for (size_t i = 0; i < n && !differ; i++)
            if (memcmp(&per_op[i], &mixed[i], sizeof(float))) differ = i + 1;
        EXPECT(!differ, "%s, alternating routes: logits differ from per-op launches at step %zu",
               how, differ ? (differ - 1) / tiny_model_n_vocab() : 0);
        int graphs = graph_events(trace);
        EXPECT(graphs > 0 && graphs < all_graph,
               "%s: %d graph launches for %d of %d steps, %d for all", how, graphs, graph_steps,
               N_DECODE, all_graph);
        printf("routes alternating every 3 steps (%s): logits of per-op launches, %d graph "
               "launches\n",
               how, graphs);
        remove(trace);
    }
    clinfer_model_free(m);
    free(per_op);
    free(mixed);
    remove(path);
}

/* Decode steps of several sequences in one batch, as a server's: each sequence's attention is
 * an op of its own (gpt2's with two cache stores before it), and a run of them takes one graph
 * launch between the batch's matmuls. The logits of every entry are those of per-op launches,
 * bit for bit, and the trace shows graph launches on a model that never decoded a single token
 * (so a run without weights builds the program it runs in). The sequences' lengths differ, and
 * pass 64 positions: attention then splits them into chunks, every run merging its own. The
 * logits of the prompts' last tokens (one batch, per-op GEMMs on either side) come first. */
#define MAX_SEQ 8
typedef struct {
    clinfer_activations act;
    int n_seq; /* at most MAX_SEQ */
} batches_arg;

static void decode_batches(clinfer_model *m, const void *arg, float *out) {
    const batches_arg *a = arg;
    const int n_seq = a->n_seq;
    size_t n_vocab = tiny_model_n_vocab();
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_ctx = N_PROMPT + MAX_SEQ + N_DECODE;
    cp.activations = a->act;
    clinfer_context *c = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &c));
    clinfer_batch_entry e[MAX_SEQ * (N_PROMPT + MAX_SEQ)];
    size_t n = 0;
    for (int s = 0; s < n_seq; s++) /* sequence s: a prompt of N_PROMPT + s tokens */
        for (int i = 0; i < N_PROMPT + s; i++)
            e[n++] = (clinfer_batch_entry){3 + (s * 31 + i * 7) % 250, (uint32_t)i, (uint32_t)s,
                                           i == N_PROMPT + s - 1};
    clinfer_status st = c ? clinfer_batch_eval(c, e, n) : CLINFER_ERR_INVALID_ARGUMENT;
    EXPECT_OK(st);
    for (int s = 0, last = -1; s < n_seq && st == CLINFER_OK; s++) {
        const float *logits = NULL;
        last += N_PROMPT + s; /* the entry of sequence s's last prompt token */
        EXPECT_OK(clinfer_get_logits_ith(c, last, &logits, NULL));
        if (logits) memcpy(out + (size_t)s * n_vocab, logits, n_vocab * sizeof *out);
    }
    out += (size_t)n_seq * n_vocab;
    for (int step = 0; step < N_DECODE && st == CLINFER_OK; step++) {
        for (int s = 0; s < n_seq; s++)
            e[s] = (clinfer_batch_entry){3 + (s * 17 + step * 53) % 250,
                                         (uint32_t)(N_PROMPT + s + step), (uint32_t)s, true};
        if ((st = clinfer_batch_eval(c, e, (size_t)n_seq)) != CLINFER_OK) break;
        for (int s = 0; s < n_seq; s++) {
            const float *logits = NULL;
            EXPECT_OK(clinfer_get_logits_ith(c, s, &logits, NULL));
            if (logits)
                memcpy(out + ((size_t)step * (size_t)n_seq + (size_t)s) * n_vocab, logits,
                       n_vocab * sizeof *out);
        }
    }
    EXPECT_OK(st);
    clinfer_context_free(c);
}

static clinfer_device_info device; /* the device the models load on */

/* The vector width of the f32 kernels (cl/f32_lanes.clh) that this CPU does not take. */
static const char *other_f32_lanes(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_cpu_supports("avx512f") ? "8" : "16";
#else
    return "16";
#endif
}

/* The step of decode_batches' logits where the first difference (plus one) lies: 0 the prompts,
 * s + 1 decode step s. */
static size_t batch_step(size_t differ, int n_seq) {
    return (differ - 1) / tiny_model_n_vocab() / (size_t)n_seq;
}

/* widths: f32 x, also at the other f32 width (compiling every program again: the longest part) */
static void test_batches(const char *arch, clinfer_dtype type, clinfer_activations act, int n_seq,
                         bool widths) {
    char what[64];
    snprintf(what, sizeof what, "%s %s %s", arch, dtype_name(type),
             act == CLINFER_ACT_Q8 ? "8-bit x" : "f32 x");
    char path[SCRATCH_NAME], trace[SCRATCH_NAME];
    scratch_model("batches", arch, type, path, trace);
    size_t n = (size_t)(N_DECODE + 1) * (size_t)n_seq * tiny_model_n_vocab();
    float *logits[SIDES] = {calloc(n, sizeof(float)), calloc(n, sizeof(float))};
    batches_arg arg = {act, n_seq};
    size_t differ = both_sides(path, trace, decode_batches, &arg, logits, n);
    EXPECT(!differ, "%s, %d sequences a step: logits differ from per-op launches at step %zu", what,
           n_seq, differ ? batch_step(differ, n_seq) : 0);
    int graphs = graph_events(trace), matmuls = trace_events(trace, "matmul");
    EXPECT(graphs >= N_DECODE, "%s: %d graph launches for %d steps of %d sequences", what, graphs,
           N_DECODE, n_seq);
    /* the prompts' (GEMMs) only */
    EXPECT(matmuls < N_DECODE, "%s: %d matmuls launched on their own in %d steps", what, matmuls,
           N_DECODE);
    printf("%s, %d sequences a step: %d steps identical, %d graph launches\n", what, n_seq,
           N_DECODE, graphs);
    if (widths) { /* graph launches at the other width, into logits[PER_OP] */
        const char *lanes = other_f32_lanes();
        char define[32];
        snprintf(define, sizeof define, "-DCLINFER_F32_LANES=%s", lanes);
        setenv("CLINFER_F32_LANES", lanes, 1);
        EXPECT(strstr(cl_program_params(&device), define), "CLINFER_F32_LANES=%s: not in %s", lanes,
               cl_program_params(&device));
        memset(logits[PER_OP], 0, n * sizeof(float));
        clinfer_model *m = load(path, true);
        if (m) decode_batches(m, &arg, logits[PER_OP]);
        clinfer_model_free(m);
        unsetenv("CLINFER_F32_LANES");
        differ = first_difference(logits[PER_OP], logits[GRAPH], n);
        EXPECT(!differ, "%s, %d sequences a step: logits at %s f32 lanes differ at step %zu", what,
               n_seq, lanes, differ ? batch_step(differ, n_seq) : 0);
        if (!differ)
            printf("%s, %d sequences a step: the same at %s f32 lanes\n", what, n_seq, lanes);
    }
    free(logits[PER_OP]);
    free(logits[GRAPH]);
    remove(path);
    remove(trace);
}

/* ---- ops ---------------------------------------------------------------------------------- */

#define D 64  /* rows of x and outputs */
#define N_W 5 /* weights */
#define N_OUT                                                                                      \
    70 /* matmuls of the long run, each into a buffer of its own: more buffers than a              \
        * launch takes */

/* The same buffers on both backends. */
typedef struct {
    clinfer_backend *be;
    clinfer_buffer *x, *xn, *xq, *y, *z, *w[N_W], *out[N_OUT];
} side;

static side sides[SIDES];

static void side_init(side *s, bool graph, const float *x, const float *norm_w,
                      const unsigned char *weights) {
    setenv("CLINFER_GRAPH", graph ? "1" : "0", 1);
    EXPECT_OK(cl_backend_create(0, NULL, &s->be));
    unsetenv("CLINFER_GRAPH");
    if (!s->be) return;
    const clinfer_backend_i *i = s->be->i;
    size_t row = dtype_row_bytes(CLINFER_DT_Q4_0, D);
    EXPECT_OK(i->buffer_alloc(s->be->ctx, 2 * D * sizeof(float), &s->x));
    EXPECT_OK(i->buffer_write(s->be->ctx, s->x, 0, D * sizeof(float), x));
    EXPECT_OK(i->buffer_write(s->be->ctx, s->x, D * sizeof(float), D * sizeof(float), norm_w));
    EXPECT_OK(i->buffer_alloc(s->be->ctx, D * sizeof(float), &s->xn));
    EXPECT_OK(i->buffer_alloc(s->be->ctx, D * sizeof(float), &s->xq));
    EXPECT_OK(i->buffer_alloc(s->be->ctx, D * sizeof(float), &s->y));
    EXPECT_OK(i->buffer_alloc(s->be->ctx, D * sizeof(float), &s->z));
    for (int m = 0; m < N_W; m++)
        EXPECT_OK(
            i->weight_create(s->be->ctx, CLINFER_DT_Q4_0, D, D, weights + m * D * row, &s->w[m]));
    for (int o = 0; o < N_OUT; o++)
        EXPECT_OK(i->buffer_alloc(s->be->ctx, D * sizeof(float), &s->out[o]));
}

static void side_free(side *s) {
    if (!s->be) return;
    clinfer_buffer *bufs[] = {s->x, s->xn, s->xq, s->y, s->z};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        s->be->i->buffer_free(s->be->ctx, bufs[i]);
    for (int m = 0; m < N_W; m++)
        s->be->i->buffer_free(s->be->ctx, s->w[m]);
    for (int o = 0; o < N_OUT; o++)
        s->be->i->buffer_free(s->be->ctx, s->out[o]);
    backend_free(s->be);
}

static clinfer_ref at(clinfer_buffer *b, size_t offset) {
    return (clinfer_ref){b, offset};
}

static clinfer_op norm_op(const side *s) { /* xn = rmsnorm(x) * w */
    return (clinfer_op){
        .kind = CLINFER_OP_RMSNORM,
        .norm = {
            .x = at(s->x, 0), .w = at(s->x, D), .y = at(s->xn, 0), .n = 1, .d = D, .eps = 1e-5f}};
}

static clinfer_op round_op(const side *s) { /* xq = xn rounded for the matmuls */
    return (clinfer_op){
        .kind = CLINFER_OP_ROUND_Q8,
        .round_q8 = {.x = at(s->xn, 0), .y = at(s->xq, 0), .n = 1, .k = D, .block = 32}};
}

/* z rotated in place: an op graph launches do not take */
static clinfer_op rope_op(const side *s) {
    return (clinfer_op){.kind = CLINFER_OP_ROPE,
                        .rope = {.x = at(s->z, 0),
                                 .n = 1,
                                 .n_heads = 1,
                                 .head_dim = D,
                                 .n_rot = D,
                                 .pos0 = 5,
                                 .freq_base = 10000.0f,
                                 .freq_scale = 1.0f}};
}

/* y (+)= W[m] x, accumulating into the residual stream x */
static clinfer_op matmul_op(const side *s, int m, clinfer_buffer *y) {
    return (clinfer_op){.kind = CLINFER_OP_MATMUL,
                        .matmul = {.w = s->w[m],
                                   .x = at(s->xq, 0),
                                   .y = at(y, 0),
                                   .m = D,
                                   .k = D,
                                   .n = 1,
                                   .accumulate = y == s->x,
                                   .x_q8 = true}};
}

/* Runs ops as the executor does: runs where the backend takes them, else one op; *runs gets
 * the number of steps, bad the index of the op that failed (-1: none). */
static void run_ops(const side *s, const clinfer_op *ops, size_t n, int *runs, int *bad) {
    *runs = 0;
    *bad = -1;
    for (size_t i = 0; i < n;) {
        size_t taken = 0;
        clinfer_status st = s->be->i->op_run(s->be->ctx, ops + i, n - i, &taken);
        EXPECT(st == CLINFER_OK, "op_run at %zu: %s", i, clinfer_last_error());
        if (taken == 0) {
            st = s->be->i->op(s->be->ctx, &ops[i]);
            if (st != CLINFER_OK && *bad < 0) *bad = (int)i;
            taken = 1;
        }
        i += taken;
        ++*runs;
    }
    EXPECT_OK(s->be->i->sync(s->be->ctx));
}

static void expect_same(clinfer_buffer *const *bufs, const char *what) {
    float out[SIDES][D];
    for (int k = 0; k < SIDES; k++)
        EXPECT_OK(sides[k].be->i->buffer_read(sides[k].be->ctx, bufs[k], 0, sizeof out[k], out[k]));
    EXPECT(!memcmp(out[PER_OP], out[GRAPH], sizeof out[0]), "%s: outputs differ", what);
}

static void test_ops(void) {
    float x[D], norm_w[D];
    rng_seed(11);
    rng_fill(x, D, -1.0f, 1.0f);
    rng_fill(norm_w, D, 0.5f, 1.5f);
    size_t row = dtype_row_bytes(CLINFER_DT_Q4_0, D);
    unsigned char *weights = malloc(N_W * D * row);
    float f[D];
    for (int r = 0; r < N_W * D; r++) {
        rng_fill(f, D, -1.0f, 1.0f);
        quantize_row(CLINFER_DT_Q4_0, f, weights + r * row, D);
    }
    for (int k = 0; k < SIDES; k++)
        side_init(&sides[k], k == GRAPH, x, norm_w, weights);
    free(weights);
    if (!sides[PER_OP].be || !sides[GRAPH].be) return;

    /* norm, two matmuls and a layernorm, a rope the graph cannot do, norm and two matmuls again,
     * then a matmul past its output */
    int runs[SIDES], bad[SIDES];
    for (int k = 0; k < SIDES; k++) {
        const side *s = &sides[k];
        clinfer_op bad_mm = matmul_op(s, 4, s->y);
        bad_mm.matmul.y.offset = 1; /* D outputs from element 1 of a D-element buffer */
        clinfer_op ops[] = {norm_op(s),
                            round_op(s),
                            matmul_op(s, 0, s->y),
                            matmul_op(s, 1, s->x),
                            {.kind = CLINFER_OP_LAYERNORM,
                             .norm = {.x = at(s->y, 0),
                                      .w = at(s->x, D),
                                      .b = at(s->x, 0), /* the residual as a bias */
                                      .y = at(s->z, 0),
                                      .n = 1,
                                      .d = D,
                                      .eps = 1e-5f}},
                            rope_op(s),
                            norm_op(s),
                            round_op(s),
                            matmul_op(s, 2, s->y),
                            matmul_op(s, 3, s->x),
                            bad_mm};
        run_ops(s, ops, sizeof ops / sizeof ops[0], &runs[k], &bad[k]);
        if (k == GRAPH)
            EXPECT(strstr(clinfer_last_error(), "past the end"), "the bad matmul's message: %s",
                   clinfer_last_error());
    }
    EXPECT(bad[PER_OP] == 10 && bad[GRAPH] == 10, "the bad matmul fails (per-op %d, graph %d)",
           bad[PER_OP], bad[GRAPH]);
    EXPECT(runs[GRAPH] == 4, "graph steps: %d, want 4 (2 runs, the rope, the bad matmul)",
           runs[GRAPH]);
    expect_same((clinfer_buffer *[]){sides[0].z, sides[1].z}, "the layernorm and rope's output");
    expect_same((clinfer_buffer *[]){sides[0].x, sides[1].x}, "the residual after it");
    expect_same((clinfer_buffer *[]){sides[0].y, sides[1].y}, "the last matmul's output");

    /* N_OUT matmuls, each into a buffer of its own: more buffers than one launch takes */
    clinfer_op chain[SIDES][3 + N_OUT];
    for (int k = 0; k < SIDES; k++) {
        const side *s = &sides[k];
        chain[k][0] = norm_op(s);
        chain[k][1] = round_op(s);
        for (int o = 0; o < N_OUT; o++)
            chain[k][2 + o] = matmul_op(s, o % N_W, s->out[o]);
        chain[k][2 + N_OUT] = matmul_op(s, 0, s->x);
        run_ops(s, chain[k], 3 + N_OUT, &runs[k], &bad[k]);
    }
    EXPECT(bad[GRAPH] < 0 && runs[GRAPH] > 1 && runs[GRAPH] < 3 + N_OUT,
           "the long run: %d graph steps, failure at %d", runs[GRAPH], bad[GRAPH]);
    for (int o = 0; o < N_OUT; o++)
        expect_same((clinfer_buffer *[]){sides[0].out[o], sides[1].out[o]}, "the long run");
    expect_same((clinfer_buffer *[]){sides[0].x, sides[1].x}, "the long run's x");
    printf("ops: runs stop at a rope and a bad matmul; %d matmuls into as many buffers in %d "
           "launches\n",
           N_OUT + 1, runs[GRAPH]);

    /* a run cut short by a rope after a round_q8 (too few ops for a launch): the matmul before
     * that round_q8, launched on its own, still reads the 8-bit form of the one before it */
    for (int k = 0; k < SIDES; k++) {
        const side *s = &sides[k];
        clinfer_op cut[] = {norm_op(s),  round_op(s), rope_op(s), matmul_op(s, 0, s->y),
                            round_op(s), rope_op(s)};
        run_ops(s, cut, sizeof cut / sizeof cut[0], &runs[k], &bad[k]);
        EXPECT(bad[k] < 0, "the cut run fails at op %d: %s", bad[k], clinfer_last_error());
    }
    expect_same((clinfer_buffer *[]){sides[0].y, sides[1].y}, "the matmul before a cut run");
    for (int k = 0; k < SIDES; k++)
        side_free(&sides[k]);
}

int main(void) {
    size_t index = 0;
    /* the device the models load on: CLINFER_DEVICE's, else the strongest (a GPU, where any) */
    if (clinfer_device_select(NULL, &index, NULL, 0) != CLINFER_OK ||
        clinfer_device_get_info(index, &device) != CLINFER_OK ||
        device.type != CLINFER_DEVICE_CPU) {
        printf("the chosen OpenCL device is not a CPU: graph launches are not used\n");
        return 77;
    }
    test_ops();
    test_concurrent();
    test_build_failure();
    test_stall();
    test_alternating();
    /* f32 x over rows interleaved by 16 on AVX2 hosts: 4 and 8 columns take all 16 rows at once
     * (il_f32_rows16), 6 takes 4 so and 2 by il_f32_rows; with AVX-512 (or 16 lanes forced)
     * il_f32_rows takes every column count */
    test_batches("llama", CLINFER_DT_Q4_0, CLINFER_ACT_F32, 4, false);
    test_batches("llama", CLINFER_DT_Q4_1, CLINFER_ACT_F32, 8, true);
    test_batches("llama", CLINFER_DT_Q8_0, CLINFER_ACT_F32, 6, true);
    test_batches("llama", CLINFER_DT_Q4_0, CLINFER_ACT_Q8, 4, false);
    test_batches("gpt2", CLINFER_DT_Q4_0, CLINFER_ACT_Q8, 4, false);
    test_batches("llama", CLINFER_DT_Q4_K, CLINFER_ACT_Q8, 4, false);
    test_batches("qwen2", CLINFER_DT_Q6_K, CLINFER_ACT_Q8, 4, false);
    /* mixed types, as quantized files have them: Q4_K_M's Q4_K + Q6_K (with Q5_0 and Q8_0
     * where rows do not fit super-blocks), and the 32-element and float types */
    static const clinfer_dtype q4_k_m[] = {CLINFER_DT_Q6_K, CLINFER_DT_Q8_0, CLINFER_DT_Q5_0};
    static const clinfer_dtype small[] = {CLINFER_DT_Q5_0, CLINFER_DT_F16, CLINFER_DT_F32};
    test_model("llama", CLINFER_DT_Q4_K, q4_k_m, 1, false, false);
    test_model("qwen2", CLINFER_DT_Q4_K, q4_k_m, 3, false, false);
    test_model("gemma3", CLINFER_DT_Q4_K, q4_k_m, 3, true, true);
    test_model("llama", CLINFER_DT_Q8_0, small, 3, false, false);
    test_model("phi3", CLINFER_DT_Q4_0, small, 2, false, true);
    test_model("gpt2", CLINFER_DT_Q4_K, q4_k_m, 3, true, false);
    test_model("gpt2", CLINFER_DT_Q8_0, small, 3, false, true);
    /* gemma2: soft-caps in attention records and the logits' SCALE record; smollm3: a layer of
     * cache stores without rotation; granite: SCALE records of the residual stream; olmo2: norms
     * over whole q and k rows, post-norms only */
    static const char *const archs[] = {"llama",  "qwen2",   "qwen3",   "phi3",
                                        "gemma3", "mistral", "gpt2",    "llama3",
                                        "gemma2", "smollm3", "granite", "olmo2"};
    clinfer_dtype types[CLINFER_DT_ID_LIMIT];
    size_t n_types = weight_types(types);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t t = 0; t < n_types; t++)
            test_model(archs[a], types[t], NULL, 0, false, false);
    /* YaRN's and longrope's tables and magnitudes in attention records */
    test_model("yarn", CLINFER_DT_Q8_0, NULL, 0, false, false);
    test_model("phi3-longrope", CLINFER_DT_Q4_K, NULL, 0, false, false);
    /* gpt-oss: sinks in attention records and merges, SWIGLU_OAI records; the launches end at
     * each expert matmul and resume after it */
    test_model("gpt-oss", CLINFER_DT_MXFP4, NULL, 0, false, false);
    test_model("gpt-oss", CLINFER_DT_F32, NULL, 0, true, true);
    test_model("llama", CLINFER_DT_Q4_0, NULL, 0, true, false);
    test_model("qwen2", CLINFER_DT_Q8_0, NULL, 0, false, true);
    test_model("llama", CLINFER_DT_F16, NULL, 0, true, false);
    return finish("test_graph");
}
