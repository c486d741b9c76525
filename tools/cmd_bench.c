/* clinfer bench: a model's prefill and decode speed, in the shape of llama-bench's table.
 *   ppN  N prompt tokens in one clinfer_eval from an empty context
 *   tgN  N single-token clinfer_evals from an empty context (each waits for its logits)
 * Both are tokens per second, mean and sample standard deviation over -r repetitions after one
 * warm-up of each. Also: time to first token for a 16-token prompt with the model load
 * included (the first thing the command does: with a warm kernel cache that is what a user
 * waits for), the model load alone within it, and peak resident memory (getrusage). Token
 * ids are a fixed pseudo-random sequence; speed does not depend on which tokens they are. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "cli_common.h"

enum { TTFT_TOKENS = 16, OPT_JSON = 512 };

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer bench [-m MODEL] [OPTIONS]\n\n"
            "Measures prefill (ppN: N prompt tokens in one evaluation) and decode (tgN: N\n"
            "single-token evaluations) in tokens/s, mean and standard deviation over\n"
            "repetitions after a warm-up; time to first token of a %d-token prompt with the\n"
            "model load included; and peak resident memory.\n\n"
            "  -p, --n-prompt N     prompt tokens of the prefill test; 0 skips it (default 128)\n"
            "  -n, --n-gen N        tokens of the decode test; 0 skips it (default 64)\n"
            "  -r, --repetitions R  timed runs of each test (default 5)\n"
            "  -o, --output FORMAT  md (the table, default), json (one object) or csv (a header\n"
            "                       line and a line per test)\n"
            "      --json           -o json\n" CLI_ACT_HELP CLI_PROFILE_HELP CLI_MODEL_HELP,
            TTFT_TOKENS);
}

typedef struct {
    cli_model_opts model;
    long n_prompt, n_gen, reps;
    bool json, csv, profile;
    clinfer_activations act;
} bench_opts;

static int bench_option(int opt, const char *arg, void *user) {
    bench_opts *o = user;
    int used = cli_model_option(opt, arg, &o->model);
    if (used) return used;
    switch (opt) {
    case 'p':
        return cli_parse_long("-p", arg, 0, 1 << 16, &o->n_prompt) ? 1 : -1;
    case 'n':
        return cli_parse_long("-n", arg, 0, 1 << 16, &o->n_gen) ? 1 : -1;
    case 'r':
        return cli_parse_long("-r", arg, 1, 1000, &o->reps) ? 1 : -1;
    case 'o':
        if (strcmp(arg, "md") && strcmp(arg, "json") && strcmp(arg, "csv")) {
            cli_error("bench: -o '%s' is not one of md, json, csv", arg);
            return -1;
        }
        o->json = !strcmp(arg, "json");
        o->csv = !strcmp(arg, "csv");
        return 1;
    case OPT_JSON:
        o->json = true;
        return 1;
    case OPT_PROFILE:
        o->profile = true;
        o->model.params.options.profile = CLINFER_ON;
        return 1;
    default:
        return cli_act_option(opt, arg, &o->act);
    }
}

/* 0 to go on, 1 on an error (printed), 2 after --help. */
static int parse(int argc, char **argv, bench_opts *o) {
    static const struct option options[] = {CLI_MODEL_OPTIONS,
                                            {"n-prompt", required_argument, NULL, 'p'},
                                            {"n-gen", required_argument, NULL, 'n'},
                                            {"repetitions", required_argument, NULL, 'r'},
                                            {"json", no_argument, NULL, OPT_JSON},
                                            {"output", required_argument, NULL, 'o'},
                                            {"profile", no_argument, NULL, OPT_PROFILE},
                                            CLI_ACT_OPTIONS,
                                            {NULL, 0, NULL, 0}};
    int rc = cli_parse_options("bench", argc, argv, ":" CLI_MODEL_SHORT "p:n:r:o:", options,
                               bench_option, o, usage);
    if (rc) return rc;
    if (optind < argc) return cli_error("bench: unexpected argument '%s'", argv[optind]);
    return 0;
}

/* The i-th token of every test: a fixed pseudo-random walk over the vocabulary. */
static int32_t bench_token(size_t i, uint32_t n_vocab) {
    return (int32_t)((i * 2654435761u + 1000u) % n_vocab);
}

typedef struct {
    const char *name; /* "pp" or "tg" */
    long n;
    double mean, sd; /* tokens/s */
} bench_result;

/* One run of a test from an empty context: its tokens per second, or < 0 after an error
 * (printed). */
static double run_once(clinfer_context *ctx, const char *test, long n, uint32_t n_vocab) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) {
        cli_error("bench: out of memory for %ld tokens", n);
        return -1;
    }
    for (long i = 0; i < n; i++)
        ids[i] = bench_token((size_t)i, n_vocab);
    clinfer_context_reset(ctx);
    clinfer_status st = CLINFER_OK;
    double t0 = cli_now_ms();
    if (!strcmp(test, "pp"))
        st = clinfer_eval(ctx, ids, (size_t)n);
    else
        for (long i = 0; i < n && st == CLINFER_OK; i++)
            st = clinfer_eval(ctx, &ids[i], 1);
    double ms = cli_now_ms() - t0;
    free(ids);
    if (st != CLINFER_OK) {
        cli_error("bench: %s%ld failed: %s (%s)", test, n, clinfer_last_error(),
                  clinfer_status_str(st));
        return -1;
    }
    return ms > 0 ? (double)n * 1e3 / ms : 0;
}

/* A warm-up, then reps timed runs; 1 after an error (printed). */
static int run_test(clinfer_context *ctx, long reps, uint32_t n_vocab, bench_result *r) {
    double *tps = malloc((size_t)reps * sizeof *tps), sum = 0, sq = 0;
    if (!tps) return cli_error("bench: out of memory");
    int rc = run_once(ctx, r->name, r->n, n_vocab) < 0;
    for (long i = 0; i < reps && !rc; i++) {
        tps[i] = run_once(ctx, r->name, r->n, n_vocab);
        rc = tps[i] < 0;
        sum += tps[i];
    }
    if (!rc) {
        r->mean = sum / (double)reps;
        for (long i = 0; i < reps; i++)
            sq += (tps[i] - r->mean) * (tps[i] - r->mean);
        r->sd = reps > 1 ? sqrt(sq / (double)(reps - 1)) : 0;
    }
    free(tps);
    return rc;
}

/* Loads the model and evaluates a TTFT_TOKENS prompt up to its first (greedy) token. */
static int first_token(const bench_opts *o, uint32_t n_ctx, clinfer_model **model,
                       clinfer_context **ctx, clinfer_model_info *info, double *ttft_ms,
                       double *load_ms) {
    double t0 = cli_now_ms();
    if (cli_load_model(&o->model, model, NULL)) return 1;
    *load_ms = cli_now_ms() - t0;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.activations = o->act;
    clinfer_status st = clinfer_model_get_info(*model, info);
    if (st == CLINFER_OK) st = clinfer_context_create(*model, &cp, ctx);
    if (st != CLINFER_OK)
        return cli_error("bench: cannot create a context: %s (%s)", clinfer_last_error(),
                         clinfer_status_str(st));
    int32_t prompt[TTFT_TOKENS];
    for (size_t i = 0; i < TTFT_TOKENS; i++)
        prompt[i] = bench_token(i, info->n_vocab);
    const float *logits = NULL;
    size_t n = 0;
    if ((st = clinfer_eval(*ctx, prompt, TTFT_TOKENS)) == CLINFER_OK)
        st = clinfer_get_logits(*ctx, &logits, &n);
    if (st != CLINFER_OK)
        return cli_error("bench: the first-token prompt failed: %s (%s)", clinfer_last_error(),
                         clinfer_status_str(st));
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    *ttft_ms = cli_now_ms() - t0;
    return 0;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0;
}

static const char *model_label(const bench_opts *o, const clinfer_model_info *info) {
    if (!o->model.path) return info->name;
    const char *slash = strrchr(o->model.path, '/');
    return slash ? slash + 1 : o->model.path;
}

/* What matmuls over quantized weights read x as (--act, resolved by the context); F16/F32
 * weights always take f32. */
static const char *activations(const bench_opts *o) {
    return clinfer_activations_name(o->act);
}

static int print_json(const bench_opts *o, const clinfer_model_info *info,
                      const bench_result *tests, size_t n_tests, double ttft_ms, double load_ms) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", model_label(o, info));
    cJSON_AddStringToObject(root, "architecture", info->architecture);
    cJSON_AddNumberToObject(root, "size_bytes", (double)info->weight_bytes);
    cJSON_AddNumberToObject(root, "n_params", (double)info->n_params);
    cJSON_AddStringToObject(root, "backend", info->backend);
    cJSON_AddStringToObject(root, "activations", activations(o));
    cJSON_AddNumberToObject(root, "repetitions", (double)o->reps);
    cJSON *arr = cJSON_AddArrayToObject(root, "tests");
    for (size_t i = 0; i < n_tests; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%ld", tests[i].name, tests[i].n);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, t);
        cJSON_AddStringToObject(t, "test", name);
        cJSON_AddNumberToObject(t, "n_tokens", (double)tests[i].n);
        cJSON_AddNumberToObject(t, "avg_ts", tests[i].mean);
        cJSON_AddNumberToObject(t, "stddev_ts", tests[i].sd);
    }
    cJSON_AddNumberToObject(root, "ttft_tokens", TTFT_TOKENS);
    cJSON_AddNumberToObject(root, "ttft_ms", ttft_ms);
    cJSON_AddNumberToObject(root, "load_ms", load_ms);
    cJSON_AddNumberToObject(root, "peak_rss_mib", peak_rss_mib());
    cJSON_AddBoolToObject(root, "profiled", o->profile);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return cli_error("bench: out of memory writing JSON");
    puts(text);
    free(text);
    return 0;
}

/* llama-bench's -o csv in spirit: one line per test, the run's facts repeated on each. */
static void print_csv(const bench_opts *o, const clinfer_model_info *info,
                      const bench_result *tests, size_t n_tests, double ttft_ms) {
    printf("model,size_bytes,n_params,backend,activations,test,n,avg_ts,stddev_ts,ttft_ms,"
           "peak_rss_mib\n");
    for (size_t i = 0; i < n_tests; i++)
        printf("\"%s\",%llu,%llu,\"%s\",%s,%s,%ld,%.4f,%.4f,%.1f,%.1f\n", model_label(o, info),
               (unsigned long long)info->weight_bytes, (unsigned long long)info->n_params,
               info->backend, activations(o), tests[i].name, tests[i].n, tests[i].mean, tests[i].sd,
               ttft_ms, peak_rss_mib());
}

static void print_table(const bench_opts *o, const clinfer_model_info *info,
                        const bench_result *tests, size_t n_tests, double ttft_ms, double load_ms) {
    const char *backend =
        o->model.params.backend == CLINFER_BACKEND_REFERENCE ? "reference" : "OpenCL";
    printf("| %-36s | %10s | %8s | %-9s | %7s | %16s |\n", "model", "size", "params", "backend",
           "test", "t/s");
    printf("| %.36s | %.10s | %.8s | %.9s | %.7s | %.16s |\n",
           "------------------------------------", "---------:", "-------:", "---------",
           "------:", "---------------:");
    for (size_t i = 0; i < n_tests; i++) {
        char size[32], params[32], test[32], tps[48];
        snprintf(size, sizeof size, "%.2f MiB", (double)info->weight_bytes / 1048576.0);
        snprintf(params, sizeof params, "%.2f M", (double)info->n_params / 1e6);
        snprintf(test, sizeof test, "%s%ld", tests[i].name, tests[i].n);
        snprintf(tps, sizeof tps, "%.2f ± %.2f", tests[i].mean, tests[i].sd);
        printf("| %-36.36s | %10s | %8s | %-9s | %7s | %17s |\n", model_label(o, info), size,
               params, backend, test, tps);
    }
    printf("\ndevice: %s\n", info->backend);
    printf("activations of matmuls over quantized weights: %s (--act)\n", activations(o));
    printf("time to first token (%d-token prompt, model load included): %.0f ms\n", TTFT_TOKENS,
           ttft_ms);
    printf("model load (within it): %.0f ms\n", load_ms);
    printf("peak resident memory: %.1f MiB\n", peak_rss_mib());
    printf("%ld repetitions after a warm-up%s\n", o->reps,
           o->profile ? "; profiled: OpenCL times kernels with events (no measurable cost on "
                        "PoCL), other backends wait for each op (slower)"
                      : "");
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.n_prompt = 128, .n_gen = 64, .reps = 5};
    cli_model_opts_init(&o.model);
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;

    clinfer_model *model = NULL;
    clinfer_context *ctx = NULL;
    clinfer_model_info info;
    bench_result tests[2];
    size_t n_tests = 0;
    double ttft_ms = 0, load_ms = 0;
    long longest = o.n_prompt > o.n_gen ? o.n_prompt : o.n_gen;
    uint32_t n_ctx = (uint32_t)(longest > TTFT_TOKENS ? longest : TTFT_TOKENS);
    rc = 1;

    if (first_token(&o, n_ctx, &model, &ctx, &info, &ttft_ms, &load_ms)) goto cleanup;
    o.act = clinfer_context_activations(ctx);
    if (o.n_prompt) tests[n_tests++] = (bench_result){.name = "pp", .n = o.n_prompt};
    if (o.n_gen) tests[n_tests++] = (bench_result){.name = "tg", .n = o.n_gen};
    for (size_t i = 0; i < n_tests; i++)
        if (run_test(ctx, o.reps, info.n_vocab, &tests[i])) goto cleanup;
    if (o.json)
        rc = print_json(&o, &info, tests, n_tests, ttft_ms, load_ms);
    else if (o.csv)
        print_csv(&o, &info, tests, n_tests, ttft_ms), rc = 0;
    else
        print_table(&o, &info, tests, n_tests, ttft_ms, load_ms), rc = 0;
cleanup:
    clinfer_context_free(ctx);
    clinfer_model_free(model);
    return rc;
}
