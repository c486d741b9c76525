/* The statistics of scoring a text with a model, defined as llama-perplexity defines them so
 * that the two tools' figures compare: perplexity over the scored tokens with its uncertainty,
 * and the KL divergence of one run's token distributions from a base run's, with top-1
 * agreement and the perplexity ratio. */
#ifndef CLINFER_SCORES_H
#define CLINFER_SCORES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* lp[i] = log softmax(logits)[i], summed in double. */
void scores_log_softmax(const float *logits, size_t n, float *lp);

/* Negative log-likelihoods of the scored tokens. */
typedef struct {
    double sum, sum2;
    size_t count;
} nll_stats;

void nll_add(nll_stats *s, double nll);
double nll_ppl(const nll_stats *s); /* exp(mean nll) */
/* The standard error of the mean nll, carried to the perplexity (ppl * its error); 0 with
 * fewer than two tokens. */
double nll_ppl_error(const nll_stats *s);

/* A run against a base run, token by token. */
typedef struct {
    nll_stats base, run;
    double *kld; /* per token, for percentiles */
    size_t n, cap;
    double kld_sum, kld_sum2;
    size_t same_top; /* tokens whose most likely next token agrees */
    bool sorted;     /* kld is in order (kld_percentile sorts it once) */
} kld_stats;

/* Adds one scored position: both runs' log-probabilities over n_vocab and the token that
 * followed. False when out of memory. */
bool kld_add(kld_stats *s, const float *base_lp, const float *run_lp, size_t n_vocab, int32_t next);
/* The p-th percentile (0..100) of the per-token KLD values, nearest rank; sorts them the first
 * time. */
double kld_percentile(kld_stats *s, double p);
void kld_free(kld_stats *s);

#endif
