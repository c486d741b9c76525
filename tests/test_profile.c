/* The executor's profiler (src/profile.h): profiling and tracing leave the logits bit for bit
 * as they are, on the reference backend (waited per op) and on OpenCL (timed by the device: a
 * context that profiles gets a queue that times its kernels, whatever the model was loaded
 * with); the
 * table's times add up (matmul > 0, op time <= wall time); the Chrome trace is valid JSON with
 * one complete event per launch (an op, or a run of ops in one); op costs follow the shapes. And
 * `clinfer bench --json --profile` (argv[1] is the binary) reports every test and prints the
 * profile table. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "profile.h"
#include "tiny_model.h"

#define N_PROMPT 12
#define N_DECODE 4

/* Counts the trace's events named name, and graph events (runs of ops in one launch) that
 * begin with an op of that name; -1 when it is not the expected JSON. */
static int trace_events(const char *path, const char *name) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static char text[1 << 22];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    cJSON *root = cJSON_Parse(text);
    cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    int n = cJSON_IsArray(events) ? 0 : -1;
    for (int i = 0; n >= 0 && i < cJSON_GetArraySize(events); i++) {
        cJSON *e = cJSON_GetArrayItem(events, i);
        cJSON *ph = cJSON_GetObjectItem(e, "ph"), *dur = cJSON_GetObjectItem(e, "dur");
        cJSON *event_name = cJSON_GetObjectItem(e, "name");
        cJSON *first = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "first");
        if (!cJSON_IsString(event_name) || !cJSON_IsString(ph) || strcmp(ph->valuestring, "X") ||
            !cJSON_IsNumber(dur) || dur->valuedouble < 0)
            n = -1;
        else if (!strcmp(event_name->valuestring, "graph"))
            n += cJSON_IsString(first) && !strcmp(first->valuestring, name);
        else
            n += !strcmp(event_name->valuestring, name);
    }
    cJSON_Delete(root);
    return n;
}

/* Checks the table tiny_model_decode's context printed: matmul took time (its own launches, or
 * graph launches that ran runs of ops), the op times (and, timed, the host's enqueue time) of a
 * token fit in its wall time, and the times come from the device exactly when the backend was
 * timed. */
static void check_table(const char *path, const char *what, bool timed) {
    FILE *f = fopen(path, "r");
    char line[512];
    bool header = false;
    int decode = 0, matmul = 0;
    unsigned long long mm_ops = 0, mm_launches = 0, graph_launches = 0;
    double mm_ms = 0, graph_ms = 0;
    while (f && fgets(line, sizeof line, f)) {
        double wall, ops, gaps, ms;
        unsigned long long n_ops, launches;
        header |= strstr(line, timed ? "kernel times from the device's clock" : "host times") != 0;
        if (sscanf(line,
                   " decode: %*u tokens in %*u walks: wall %lf ms/token = %*s %lf ms + gaps %lf",
                   &wall, &ops, &gaps) == 3) {
            decode++;
            EXPECT(ops > 0 && ops <= wall && gaps >= 0, "%s: op time %g ms of a %g ms token", what,
                   ops, wall);
            /* timed walks also say how long the host took to enqueue them */
            const char *host = strstr(line, "; host enqueue ");
            double enqueue = -1;
            EXPECT(!host == !timed, "%s: host enqueue time %s", what,
                   timed ? "missing" : "untimed");
            if (host) sscanf(host, "; host enqueue %lf", &enqueue);
            EXPECT(!host || (enqueue > 0 && enqueue <= wall), "%s: enqueue %g ms of a %g ms token",
                   what, enqueue, wall);
        }
        if (sscanf(line, " matmul %llu %llu %lf", &n_ops, &launches, &ms) == 3) {
            matmul++;
            mm_ops = n_ops, mm_launches = launches, mm_ms = ms;
        }
        if (sscanf(line, " graph %llu %llu %lf", &n_ops, &launches, &ms) == 3)
            graph_launches = launches, graph_ms = ms;
    }
    if (f) fclose(f);
    /* without graph launches every matmul has launches of its own */
    EXPECT(mm_ops > 0 && mm_ms + graph_ms > 0 && (graph_launches > 0 || mm_launches >= mm_ops),
           "%s: %llu matmuls, %llu launches, %g ms; graph %llu launches, %g ms", what, mm_ops,
           mm_launches, mm_ms, graph_launches, graph_ms);
    EXPECT(header && decode == 1 && matmul == 1, "%s: the table lacks lines (%d %d %d)", what,
           header, decode, matmul);
}

static void test_same_logits(const char *model_path, clinfer_backend_kind kind) {
    char trace[128], table[128], what[64];
    snprintf(trace, sizeof trace, "profile_trace_%d.json", (int)getpid());
    snprintf(table, sizeof table, "profile_table_%d.txt", (int)getpid());
    snprintf(what, sizeof what, "backend %d", (int)kind);
    size_t n = (size_t)(1 + N_DECODE) * tiny_model_n_vocab();
    float *plain = calloc(n, sizeof *plain), *profiled = calloc(n, sizeof *profiled);
    clinfer_model *m = NULL;
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    EXPECT_OK(clinfer_model_load(model_path, &p, &m));
    if (!m || !plain || !profiled) goto cleanup;

    EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, plain));
    setenv("CLINFER_PROFILE", "1", 1);
    setenv("CLINFER_TRACE", trace, 1);
    /* the table goes to stderr as the context is freed */
    fflush(stderr);
    int saved_stderr = dup(2), table_fd = open(table, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved_stderr >= 0 && table_fd >= 0) dup2(table_fd, 2);
    EXPECT_OK(tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, profiled));
    fflush(stderr);
    if (saved_stderr >= 0) dup2(saved_stderr, 2);
    if (saved_stderr >= 0) close(saved_stderr);
    if (table_fd >= 0) close(table_fd);
    unsetenv("CLINFER_PROFILE");
    unsetenv("CLINFER_TRACE");
    EXPECT(!memcmp(plain, profiled, n * sizeof *plain), "%s: logits differ with profiling on",
           what);
    check_table(table, what, kind == CLINFER_BACKEND_OPENCL);

    /* One event per launch: each plan walk (the prompt's and N_DECODE single tokens) starts
     * with the one embedding lookup of a llama model, alone or leading a graph launch. */
    int embeds = trace_events(trace, "embed");
    EXPECT(embeds == 1 + N_DECODE, "%s: %d embed events in the trace", what, embeds);

    /* A trace file that cannot be written fails context creation cleanly. */
    setenv("CLINFER_TRACE", "/nonexistent-dir/trace.json", 1);
    clinfer_context *ctx = NULL;
    EXPECT(clinfer_context_create(m, NULL, &ctx) == CLINFER_ERR_IO && !ctx,
           "an unwritable trace is an I/O error");
    EXPECT(strstr(clinfer_last_error(), "/nonexistent-dir/trace.json") != NULL, "message: %s",
           clinfer_last_error());
    unsetenv("CLINFER_TRACE");
cleanup:
    remove(trace);
    remove(table);
    clinfer_model_free(m);
    free(plain);
    free(profiled);
}

static void test_costs(void) {
    clinfer_op op = {.kind = CLINFER_OP_MATMUL, .matmul = {.m = 64, .k = 256, .n = 3}};
    double bytes, flops;
    exec_op_cost(&op, CLINFER_DT_Q8_0, &bytes, &flops);
    EXPECT(flops == 2.0 * 64 * 256 * 3, "matmul flops %g", flops);
    /* Q8_0: 34 bytes per 32 weights; x read, y written. */
    EXPECT(bytes == 64 * 8 * 34 + 4.0 * (3 * 256 + 3 * 64), "matmul bytes %g", bytes);
    op.matmul.accumulate = true;
    double acc_bytes;
    exec_op_cost(&op, CLINFER_DT_Q8_0, &acc_bytes, &flops);
    EXPECT(acc_bytes == bytes + 4.0 * 3 * 64, "accumulating matmul reads y: %g", acc_bytes);

    op = (clinfer_op){.kind = CLINFER_OP_ATTENTION,
                      .attention = {.kv_type = CLINFER_DT_F16,
                                    .n = 1,
                                    .n_head = 4,
                                    .n_kv_head = 2,
                                    .head_dim = 16,
                                    .pos0 = 9}};
    exec_op_cost(&op, CLINFER_DT_F32, &bytes, &flops);
    EXPECT(flops == 4.0 * 10 * 4 * 16, "attention over 10 positions: flops %g", flops);
    EXPECT(bytes == 4.0 * 2 * 4 * 16 + 2.0 * 10 * 2 * 16 * 2, "attention bytes %g", bytes);
}

static char *slurp(FILE *f) {
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[len] = '\0';
    return text;
}

/* The bench command on the reference backend: no speed is checked, only what it reports. */
static void test_bench_command(const char *binary, const char *model_path) {
    char cmd[1024], err_path[64];
    snprintf(err_path, sizeof err_path, "profile_bench_%d.err", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' --reference -p 8 -n 4 -r 2 --json --profile 2>%s",
             binary, model_path, err_path);
    FILE *p = popen(cmd, "r");
    cJSON *root = cJSON_Parse(slurp(p));
    int rc = p ? pclose(p) : -1;
    EXPECT(rc == 0, "`%s` exited with %d", cmd, rc);
    cJSON *tests = cJSON_GetObjectItem(root, "tests");
    EXPECT(cJSON_GetArraySize(tests) == 2, "bench --json: %d tests", cJSON_GetArraySize(tests));
    const char *names[2] = {"pp8", "tg4"};
    for (int i = 0; i < 2 && i < cJSON_GetArraySize(tests); i++) {
        cJSON *t = cJSON_GetArrayItem(tests, i);
        cJSON *name = cJSON_GetObjectItem(t, "test"), *tps = cJSON_GetObjectItem(t, "avg_ts");
        EXPECT(cJSON_IsString(name) && !strcmp(name->valuestring, names[i]), "test %d is not %s", i,
               names[i]);
        EXPECT(cJSON_IsNumber(tps) && tps->valuedouble > 0, "%s: no tokens/s", names[i]);
    }
    cJSON *params = cJSON_GetObjectItem(root, "n_params"),
          *ttft = cJSON_GetObjectItem(root, "ttft_ms");
    cJSON *rss = cJSON_GetObjectItem(root, "peak_rss_mib");
    EXPECT(cJSON_IsNumber(params) && params->valuedouble > 0, "bench --json: no parameter count");
    EXPECT(cJSON_IsNumber(ttft) && ttft->valuedouble > 0, "bench --json: no time to first token");
    EXPECT(cJSON_IsNumber(rss) && rss->valuedouble > 0, "bench --json: no peak memory");
    cJSON_Delete(root);

    FILE *f = fopen(err_path, "r");
    const char *err = slurp(f);
    if (f) fclose(f);
    EXPECT(strstr(err, "launches") && strstr(err, "matmul") && strstr(err, "GB/s"),
           "--profile printed no table: %s", err);
    remove(err_path);
}

int main(int argc, char **argv) {
    char path[128];
    clinfer_log_set(check_log_to_stderr, NULL); /* the profile table and warnings */
    snprintf(path, sizeof path, "profile_tiny_%d.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    if (tiny_model_write(&spec, path) != 0) return 1;

    test_costs();
    test_same_logits(path, CLINFER_BACKEND_REFERENCE);
    if (argc > 1) test_bench_command(argv[1], path);
    size_t n_devices = 0;
    bool have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    if (have_opencl) test_same_logits(path, CLINFER_BACKEND_OPENCL);
    remove(path);
    int rc = finish("test_profile");
    if (!rc && !have_opencl) {
        printf("no OpenCL device: the OpenCL half skipped\n");
        return 77;
    }
    return rc;
}
