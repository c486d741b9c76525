/* bench_split MODEL [ROUNDS [STEPS]]: a split's decode time per token against its layers' times on
 * their devices alone (issue 47's goal: at most 10% above), for bench/split_decode.sh. Loads the
 * model three times, on device 0, on device 1 and split across both (--device 0,1: half the
 * layers each), and decodes on the three contexts in turn, one token each, so that a busy
 * machine slows all three alike. Each round is STEPS tokens of each (default 32; 8 rounds); its
 * split time per token is set against f * t0 + (1 - f) * t1, t0 and t1 the one-device times and f
 * the share of layers on device 0 (a layer costs the same on either device alone where they are
 * the same kind: two PoCL devices on the same cores). Prints each round and the median ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clinfer.h"

enum { ONE_A, ONE_B, SPLIT, RUNS };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what, clinfer_status st) {
    fprintf(stderr, "bench_split: %s: %s (%s)\n", what, clinfer_last_error(),
            clinfer_status_str(st));
    return 1;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_split MODEL [ROUNDS [STEPS]]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 8, steps = argc > 3 ? atoi(argv[3]) : 32;
    if (rounds < 1 || rounds > 1000 || steps < 1 || steps > 4000) {
        fprintf(stderr, "bench_split: ROUNDS 1 .. 1000, STEPS 1 .. 4000\n");
        return 2;
    }
    static const char *const names[RUNS] = {"device 0", "device 1", "split 0,1"};
    clinfer_model *m[RUNS] = {NULL};
    clinfer_context *c[RUNS] = {NULL};
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = (uint32_t)steps + 16;
    clinfer_status st = CLINFER_OK;
    for (int r = 0; r < RUNS && st == CLINFER_OK; r++) {
        clinfer_model_params p;
        clinfer_model_params_default(&p);
        p.options.device = r == ONE_B ? "1" : "0";
        if (r == SPLIT) {
            p.placement.devices[0] = "0";
            p.placement.devices[1] = "1";
        }
        if ((st = clinfer_model_load(argv[1], &p, &m[r])) != CLINFER_OK) return fail(names[r], st);
        if ((st = clinfer_context_create(m[r], &cp, &c[r])) != CLINFER_OK)
            return fail(names[r], st);
    }
    clinfer_model_placement pl;
    if ((st = clinfer_model_get_placement(m[SPLIT], &pl)) != CLINFER_OK)
        return fail("placement", st);
    clinfer_model_info info;
    clinfer_model_get_info(m[SPLIT], &info);
    double f = (double)pl.devices[0].n_layers / info.n_layer;
    printf("%s: %u layers; split: %u on device 0, %u on device 1 (f = %.3f)\n", info.name,
           info.n_layer, pl.devices[0].n_layers, pl.devices[1].n_layers, f);
    printf("%5s %10s %10s %10s %10s %7s  (ms per token)\n", "round", "device 0", "device 1",
           "alone", "split", "ratio");
    double *ratios = malloc((size_t)rounds * sizeof *ratios);
    for (int round = 0; round < rounds && st == CLINFER_OK; round++) {
        double ms[RUNS] = {0};
        const int32_t prompt[4] = {1, 17, 230, 4021};
        for (int r = 0; r < RUNS && st == CLINFER_OK; r++) {
            clinfer_context_reset(c[r]);
            st = clinfer_eval(c[r], prompt, 4);
        }
        for (int k = 0; k < steps && st == CLINFER_OK; k++) {
            int32_t token = (int32_t)(7 + 131 * k) % (int32_t)info.n_vocab;
            for (int j = 0; j < RUNS && st == CLINFER_OK; j++) {
                int r = (j + k) % RUNS; /* each run first in turn */
                const float *logits;
                double t0 = now_ms();
                st = clinfer_eval(c[r], &token, 1);
                if (st == CLINFER_OK) st = clinfer_get_logits(c[r], &logits, NULL);
                ms[r] += now_ms() - t0;
            }
        }
        if (st != CLINFER_OK) break;
        for (int r = 0; r < RUNS; r++)
            ms[r] /= steps;
        double alone = f * ms[ONE_A] + (1 - f) * ms[ONE_B];
        ratios[round] = ms[SPLIT] / alone;
        printf("%5d %10.2f %10.2f %10.2f %10.2f %7.3f\n", round + 1, ms[ONE_A], ms[ONE_B], alone,
               ms[SPLIT], ratios[round]);
    }
    if (st == CLINFER_OK) {
        qsort(ratios, (size_t)rounds, sizeof *ratios, compare_double);
        double median =
            rounds % 2 ? ratios[rounds / 2] : (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2;
        printf("median ratio split / alone: %.3f (goal <= 1.10)\n", median);
    }
    free(ratios);
    for (int r = 0; r < RUNS; r++) {
        clinfer_context_free(c[r]);
        clinfer_model_free(m[r]);
    }
    return st == CLINFER_OK ? 0 : fail("decode", st);
}
