/* Perplexity and KL divergence statistics; see scores.h. */
#include "scores.h"

#include <math.h>
#include <stdlib.h>

void scores_log_softmax(const float *logits, size_t n, float *lp) {
    float max = logits[0];
    for (size_t i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - max);
    double log_sum = log(sum) + max;
    for (size_t i = 0; i < n; i++)
        lp[i] = (float)((double)logits[i] - log_sum);
}

void nll_add(nll_stats *s, double nll) {
    s->sum += nll;
    s->sum2 += nll * nll;
    s->count++;
}

double nll_ppl(const nll_stats *s) {
    return s->count ? exp(s->sum / (double)s->count) : NAN;
}

double nll_ppl_error(const nll_stats *s) {
    if (s->count < 2) return 0;
    double mean = s->sum / (double)s->count;
    double var = s->sum2 / (double)s->count - mean * mean;
    return var > 0 ? sqrt(var / (double)(s->count - 1)) * nll_ppl(s) : 0;
}

static size_t argmax(const float *v, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

bool kld_add(kld_stats *s, const float *base_lp, const float *run_lp, size_t n_vocab,
             int32_t next) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        double *kld = realloc(s->kld, cap * sizeof *kld);
        if (!kld) return false;
        s->kld = kld;
        s->cap = cap;
    }
    /* KL(base || run) = sum p_base (log p_base - log p_run) */
    double kld = 0;
    for (size_t i = 0; i < n_vocab; i++)
        kld += exp((double)base_lp[i]) * ((double)base_lp[i] - run_lp[i]);
    s->kld[s->n++] = kld;
    s->sorted = false;
    s->kld_sum += kld;
    s->kld_sum2 += kld * kld;
    s->same_top += argmax(base_lp, n_vocab) == argmax(run_lp, n_vocab);
    nll_add(&s->base, -(double)base_lp[next]);
    nll_add(&s->run, -(double)run_lp[next]);
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kld_percentile(kld_stats *s, double p) {
    if (!s->n) return NAN;
    if (!s->sorted) qsort(s->kld, s->n, sizeof *s->kld, cmp_double);
    s->sorted = true;
    double rank = p / 100.0 * (double)(s->n - 1);
    return s->kld[(size_t)llround(rank)];
}

void kld_free(kld_stats *s) {
    free(s->kld);
    *s = (kld_stats){0};
}
