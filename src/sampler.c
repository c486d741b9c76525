/* Token sampling on the host: repetition, presence and frequency penalties, then greedy or top-k ->
 * top-p -> min-p -> temperature -> a draw from a seeded xoshiro256** generator (the order llama.cpp
 * uses, so the same settings mean the same thing). The filters look at the unscaled distribution;
 * the temperature only reshapes what survives them. A grammar (src/grammar.h) first removes the
 * tokens that cannot continue its match, and the drawn token advances it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"

/* Upper bound on the penalty window: keeps the history allocation sane for any caller. */
#define REPEAT_LAST_N_MAX (1 << 20)

typedef struct {
    float logit;
    int32_t id;
} candidate;

struct clinfer_sampler {
    clinfer_sampler_params params;
    uint64_t rng[4];     /* xoshiro256** state */
    int32_t *history;    /* ring of the last repeat_last_n accepted tokens */
    size_t history_n;    /* valid entries (<= repeat_last_n) */
    size_t history_next; /* where the next accepted token goes */
    int32_t *seen;       /* scratch: the history sorted, so each token is penalised once */
    candidate *cand;     /* scratch: n_vocab candidates */
    size_t cand_cap;
    gconstraint *grammar; /* NULL: unconstrained */
};

void clinfer_sampler_params_default(clinfer_sampler_params *params) {
    params->temperature = 0.8f;
    params->top_k = 40;
    params->top_p = 0.95f;
    params->min_p = 0.05f;
    params->repeat_penalty = 1.0f;
    params->repeat_last_n = 64;
    params->seed = 42;
    params->presence_penalty = 0.0f;
    params->frequency_penalty = 0.0f;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) {
    return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53;
}

static clinfer_status validate(const clinfer_sampler_params *p) {
    if (!isfinite(p->temperature))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "sampler: temperature %g is not finite",
                        (double)p->temperature);
    if (!(p->top_p > 0.0f))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: top_p %g must be > 0 (>= 1 turns it off)", (double)p->top_p);
    if (!(p->min_p <= 1.0f))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: min_p %g must be <= 1 (<= 0 turns it off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: repeat_penalty %g must be finite and > 0 (1 turns it off)",
                        (double)p->repeat_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: presence_penalty %g and frequency_penalty %g must be finite",
                        (double)p->presence_penalty, (double)p->frequency_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > REPEAT_LAST_N_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: repeat_last_n %d must be in [0, %d]", (int)p->repeat_last_n,
                        REPEAT_LAST_N_MAX);
    return CLINFER_OK;
}

clinfer_status clinfer_sampler_create(const clinfer_sampler_params *params, clinfer_sampler **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_sampler *s = NULL;
    if (!params || !out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "sampler_create: NULL %s",
                        params ? "out" : "params");
    *out = NULL;
    CHECK(validate(params));
    s = calloc(1, sizeof *s);
    if (!s) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "sampler_create: out of memory");
    s->params = *params;
    if (params->repeat_last_n > 0) {
        s->history = malloc((size_t)params->repeat_last_n * sizeof *s->history);
        s->seen = malloc((size_t)params->repeat_last_n * sizeof *s->seen);
        if (!s->history || !s->seen) {
            st = err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                          "sampler_create: no memory for a history of %d tokens",
                          (int)params->repeat_last_n);
            goto cleanup;
        }
    }
    uint64_t x = params->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    *out = s;
    s = NULL;
cleanup:
    clinfer_sampler_free(s);
    return st;
}

void clinfer_sampler_free(clinfer_sampler *s) {
    if (!s) return;
    free(s->history);
    free(s->seen);
    free(s->cand);
    gconstraint_free(s->grammar);
    free(s);
}

clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *s, const clinfer_model *model,
                                           const char *gbnf) {
    clinfer_status st = CLINFER_OK;
    gvocab *v = NULL;
    gconstraint *c = NULL;
    if (!s) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "sampler_set_grammar: NULL sampler");
    if (gbnf) {
        CHECK(gvocab_of_model(model, &v));
        st = gconstraint_create(gbnf, strlen(gbnf), v, &c); /* takes v */
        v = NULL;
        if (st != CLINFER_OK) goto cleanup;
    }
    gconstraint_free(s->grammar);
    s->grammar = c;
cleanup:
    gvocab_free(v);
    return st;
}

/* Keeps only the candidates the grammar allows, in order; their count. */
static clinfer_status grammar_filter(gconstraint *g, candidate *c, size_t *n) {
    const uint64_t *allowed;
    clinfer_status st = gconstraint_mask(g, &allowed);
    if (st != CLINFER_OK) return st;
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        int32_t t = c[i].id;
        if (allowed[t / 64] >> (t % 64) & 1) c[kept++] = c[i];
    }
    *n = kept;
    if (!kept)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler: no token can continue the grammar (a dead end, or it is "
                        "complete and the model has no end-of-generation token)");
    return CLINFER_OK;
}

static clinfer_status pick(clinfer_sampler *s, candidate *c, size_t n_cand, int32_t *token);

void clinfer_sampler_accept(clinfer_sampler *s, int32_t token) {
    if (!s || s->params.repeat_last_n <= 0) return;
    s->history[s->history_next] = token;
    s->history_next = (s->history_next + 1) % (size_t)s->params.repeat_last_n;
    if (s->history_n < (size_t)s->params.repeat_last_n) s->history_n++;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Descending logit; ties by ascending id so the order (and the draw) is deterministic. */
static int cmp_cand_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Over each distinct token of the window, seen `count` times: the CTRL-style repetition
 * penalty (a positive logit is divided, a negative one multiplied, so a penalised token always
 * becomes less likely; once per token), then OpenAI's presence and frequency penalties. */
static void apply_penalties(clinfer_sampler *s, candidate *c, size_t n_vocab) {
    const clinfer_sampler_params *p = &s->params;
    if ((p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
         p->frequency_penalty == 0.0f) ||
        s->history_n == 0)
        return;
    memcpy(s->seen, s->history, s->history_n * sizeof *s->seen);
    qsort(s->seen, s->history_n, sizeof *s->seen, cmp_i32);
    for (size_t i = 0, count; i < s->history_n; i += count) {
        int32_t t = s->seen[i];
        for (count = 1; i + count < s->history_n && s->seen[i + count] == t; count++)
            ;
        if (t < 0 || (size_t)t >= n_vocab) continue;
        float *l = &c[t].logit;
        *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
        *l -= p->presence_penalty + (float)count * p->frequency_penalty;
    }
}

/* Min-heap on (logit, -id) over the first k entries: after the sweep c[0..k) holds the top k. */
static bool heap_less(const candidate *a, const candidate *b) {
    return cmp_cand_desc(a, b) > 0;
}

static void heap_sift_down(candidate *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_less(&h[l], &h[m])) m = l;
        if (r < n && heap_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        candidate t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Moves the k best candidates to the front, sorted best first: O(n log k). */
static void select_top_k(candidate *c, size_t n, size_t k) {
    for (size_t i = k / 2; i-- > 0;)
        heap_sift_down(c, k, i);
    for (size_t i = k; i < n; i++) {
        if (heap_less(&c[0], &c[i])) {
            c[0] = c[i];
            heap_sift_down(c, k, 0);
        }
    }
    qsort(c, k, sizeof *c, cmp_cand_desc);
}

clinfer_status clinfer_sampler_sample(clinfer_sampler *s, const float *logits, size_t n_vocab,
                                      int32_t *token) {
    if (!s || !logits || !token)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "sampler_sample: NULL argument");
    if (n_vocab == 0 || n_vocab > INT32_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler_sample: n_vocab %zu must be in [1, %d]", n_vocab, (int)INT32_MAX);
    if (n_vocab > s->cand_cap) {
        candidate *c = realloc(s->cand, n_vocab * sizeof *c);
        if (!c)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                            "sampler_sample: no memory for %zu candidates", n_vocab);
        s->cand = c;
        s->cand_cap = n_vocab;
    }
    candidate *c = s->cand;
    for (size_t i = 0; i < n_vocab; i++)
        c[i] = (candidate){logits[i], (int32_t)i};
    apply_penalties(s, c, n_vocab);
    size_t n_cand = n_vocab;
    bool picked = false;
    if (s->grammar) {
        /* Tokens past the grammar's vocabulary (a padded output layer) are never allowed. */
        size_t n_known = gconstraint_n_tokens(s->grammar);
        if (n_cand > n_known) n_cand = n_known;
        clinfer_status st = CLINFER_OK;
        /* Greedy: when the best token of all is allowed it is the best allowed one (ties go to
         * the lowest id either way), so the mask is built only when the grammar refuses it. A
         * draw gets the mask first: its filters must see only the allowed tokens. */
        if (s->params.temperature <= 0.0f) {
            st = pick(s, c, n_cand, token);
            if (st == CLINFER_OK) st = gconstraint_allows(s->grammar, *token, &picked);
        }
        if (st == CLINFER_OK && !picked) st = grammar_filter(s->grammar, c, &n_cand);
        if (st != CLINFER_OK) return st;
    }
    clinfer_status st = picked ? CLINFER_OK : pick(s, c, n_cand, token);
    if (st == CLINFER_OK && s->grammar) st = gconstraint_accept(s->grammar, *token);
    return st;
}

/* Greedy or filtered and drawn among c[0 .. n_cand). */
static clinfer_status pick(clinfer_sampler *s, candidate *c, size_t n_cand, int32_t *token) {
    const clinfer_sampler_params *p = &s->params;
    if (p->temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < n_cand; i++)
            if (c[i].logit > c[best].logit) best = i;
        *token = c[best].id;
        return CLINFER_OK;
    }

    size_t n = n_cand;
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        n = (size_t)p->top_k;
        select_top_k(c, n_cand, n);
    } else if (p->top_p < 1.0f) {
        qsort(c, n, sizeof *c, cmp_cand_desc); /* top-p needs the order; min-p does not */
    }

    /* Probabilities at temperature 1 for the filters; the max is found, not assumed first. */
    float max_logit = c[0].logit;
    for (size_t i = 1; i < n; i++)
        if (c[i].logit > max_logit) max_logit = c[i].logit;
    if (!isfinite(max_logit))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "sampler_sample: the largest logit is %g, not a finite value",
                        (double)max_logit);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += exp((double)c[i].logit - max_logit);

    if (p->top_p < 1.0f && n > 1) {
        double cum = 0;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - max_logit) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p); compacted in order. */
        double floor_logit = max_logit + log(p->min_p);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if ((double)c[i].logit >= floor_logit) c[kept++] = c[i];
        n = kept; /* the max itself always passes, so n >= 1 */
    }

    double total = 0;
    double inv_t = 1.0 / p->temperature;
    for (size_t i = 0; i < n; i++)
        total += exp(((double)c[i].logit - max_logit) * inv_t);
    double r = uniform01(s->rng) * total;
    size_t pick = n - 1; /* rounding can leave r just above the last partial sum */
    for (size_t i = 0; i < n; i++) {
        r -= exp(((double)c[i].logit - max_logit) * inv_t);
        if (r < 0) {
            pick = i;
            break;
        }
    }
    *token = c[pick].id;
    return CLINFER_OK;
}
