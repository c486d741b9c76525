/* Decode throughput of N sequences in one batch (clinfer_batch_eval) against one sequence through
 * clinfer_eval: bench_batch MODEL [STEPS [ROUNDS [N...]]] (defaults 32, 3, 1 4 8).
 *
 * Each measurement makes a context of n_seq_max N, prompts every sequence with 8 tokens in one
 * batch, then times STEPS steps that each decode one greedy token per sequence (logits for every
 * entry, read back as a server would). The configurations alternate round by round, so that a
 * shared machine's load falls on all of them alike; the median of ROUNDS is reported, with the
 * aggregate tokens per second relative to one sequence through clinfer_eval. BENCH_ACT=q8 (any
 * --act mode) sets the contexts' activations; the library's messages (CLINFER_PROFILE's table
 * as each context is freed) go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clinfer.h"

#define N_PROMPT 8
#define MAX_CONFIGS 8
#define MAX_ROUNDS 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static int fail(clinfer_status st, const char *what) {
    fprintf(stderr, "bench_batch: %s: %s: %s\n", what, clinfer_status_str(st),
            clinfer_last_error());
    return -1;
}

static clinfer_activations activations = CLINFER_ACT_DEFAULT;

static void log_stderr(clinfer_log_level level, const char *message, void *user) {
    (void)level, (void)user;
    fprintf(stderr, "%s\n", message);
}

/* Tokens per second of steps decode steps of n sequences; n 0: one sequence by clinfer_eval. */
static int measure(clinfer_model *m, int n, int steps, double *tok_s) {
    int seqs = n ? n : 1;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.activations = activations;
    /* room for the steps; n_batch (capped at n_ctx) for every prompt at once */
    cp.n_ctx = (uint32_t)(seqs * N_PROMPT + steps);
    cp.n_seq_max = (uint32_t)seqs;
    clinfer_context *ctx = NULL;
    clinfer_batch_entry *e = calloc((size_t)seqs * N_PROMPT, sizeof *e);
    int32_t *next = calloc((size_t)seqs, sizeof *next);
    clinfer_status st =
        e && next ? clinfer_context_create(m, &cp, &ctx) : CLINFER_ERR_OUT_OF_MEMORY;
    if (st != CLINFER_OK) goto done;
    size_t k = 0;
    for (int s = 0; s < seqs; s++)
        for (int i = 0; i < N_PROMPT; i++)
            e[k++] = (clinfer_batch_entry){100 + 7 * s + 13 * i, (uint32_t)i, (uint32_t)s,
                                           i == N_PROMPT - 1};
    st = clinfer_batch_eval(ctx, e, k);
    const float *logits;
    size_t n_vocab;
    for (int s = 0; s < seqs && st == CLINFER_OK; s++) {
        st = clinfer_get_logits_ith(ctx, s * N_PROMPT + N_PROMPT - 1, &logits, &n_vocab);
        if (st == CLINFER_OK) next[s] = argmax(logits, n_vocab);
    }
    double t0 = now_s();
    for (int step = 0; step < steps && st == CLINFER_OK; step++) {
        if (n == 0) {
            st = clinfer_eval(ctx, &next[0], 1);
        } else {
            for (int s = 0; s < seqs; s++)
                e[s] =
                    (clinfer_batch_entry){next[s], (uint32_t)(N_PROMPT + step), (uint32_t)s, true};
            st = clinfer_batch_eval(ctx, e, (size_t)seqs);
        }
        for (int s = 0; s < seqs && st == CLINFER_OK; s++) {
            st = clinfer_get_logits_ith(ctx, s, &logits, &n_vocab);
            if (st == CLINFER_OK) next[s] = argmax(logits, n_vocab);
        }
    }
    *tok_s = (double)seqs * steps / (now_s() - t0);
done:
    clinfer_context_free(ctx);
    free(e);
    free(next);
    return st == CLINFER_OK ? 0 : fail(st, "decode");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_batch MODEL [STEPS [ROUNDS [N...]]]\n");
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 32, rounds = argc > 3 ? atoi(argv[3]) : 3;
    int ns[MAX_CONFIGS] = {0, 1, 4, 8}, n_configs = 4; /* 0: clinfer_eval */
    if (argc > 4) {
        n_configs = 1;
        for (int i = 4; i < argc && n_configs < MAX_CONFIGS; i++)
            ns[n_configs++] = atoi(argv[i]);
    }
    if (steps < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_batch: STEPS >= 1, 1 <= ROUNDS <= %d\n", MAX_ROUNDS);
        return 2;
    }
    const char *act = getenv("BENCH_ACT");
    if (act && clinfer_activations_parse(act, &activations) != CLINFER_OK) {
        fprintf(stderr, "bench_batch: BENCH_ACT: %s\n", clinfer_last_error());
        return 2;
    }
    clinfer_log_set(log_stderr, NULL);
    clinfer_model *m = NULL;
    clinfer_status st = clinfer_model_load(argv[1], NULL, &m);
    if (st != CLINFER_OK) return fail(st, argv[1]) ? 1 : 0;
    double t[MAX_CONFIGS][MAX_ROUNDS], warm;
    int rc = measure(m, 0, 4, &warm); /* kernels built and caches warm before timing */
    for (int r = 0; r < rounds && !rc; r++)
        for (int c = 0; c < n_configs && !rc; c++)
            rc = measure(m, ns[c], steps, &t[c][r]);
    if (!rc) {
        double base = 0;
        printf("| sequences | call | aggregate tok/s (median of %d) | vs one by clinfer_eval |\n",
               rounds);
        printf("|---|---|---|---|\n");
        for (int c = 0; c < n_configs; c++) {
            qsort(t[c], (size_t)rounds, sizeof t[c][0], cmp_double);
            double med = t[c][rounds / 2];
            if (c == 0) base = med;
            printf("| %d | %s | %.1f | %.2fx |\n", ns[c] ? ns[c] : 1,
                   ns[c] ? "clinfer_batch_eval" : "clinfer_eval", med, med / base);
        }
    }
    clinfer_model_free(m);
    return rc ? 1 : 0;
}
