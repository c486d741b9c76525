/* The sampler: greedy is the argmax, a seed replays, and each filter keeps exactly the tokens
 * its definition keeps on hand-made distributions. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "random.h"

#define N_VOCAB 1000

static clinfer_sampler *make(float temp, int32_t top_k, float top_p, float min_p, float penalty,
                             uint64_t seed) {
    clinfer_sampler_params p;
    clinfer_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = penalty;
    p.seed = seed;
    clinfer_sampler *s = NULL;
    EXPECT_OK(clinfer_sampler_create(&p, &s));
    return s;
}

static int32_t sample(clinfer_sampler *s, const float *logits, size_t n) {
    int32_t t = -1;
    EXPECT_OK(clinfer_sampler_sample(s, logits, n, &t));
    return t;
}

static size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void test_greedy_and_top_k_1(void) {
    float logits[N_VOCAB];
    clinfer_sampler *greedy = make(0.0f, 0, 1.0f, 0.0f, 1.0f, 1);
    clinfer_sampler *top1 = make(1.5f, 1, 1.0f, 0.0f, 1.0f, 2);
    for (int round = 0; round < 20; round++) {
        rng_fill(logits, N_VOCAB, -10.0f, 10.0f);
        size_t want = argmax(logits, N_VOCAB);
        EXPECT(sample(greedy, logits, N_VOCAB) == (int32_t)want, "greedy is not the argmax %zu",
               want);
        EXPECT(sample(top1, logits, N_VOCAB) == (int32_t)want, "top-k 1 is not the argmax %zu",
               want);
    }
    clinfer_sampler_free(greedy);
    clinfer_sampler_free(top1);
}

/* Two samplers with one seed draw the same sequence; another seed draws a different one. */
static void test_seed_reproduces(void) {
    float logits[N_VOCAB];
    rng_fill(logits, N_VOCAB, -2.0f, 2.0f); /* flat enough that draws vary */
    clinfer_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 1234);
    clinfer_sampler *b = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 1234);
    clinfer_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 999);
    int same_ab = 0, same_ac = 0, distinct = 0;
    int32_t seen[64];
    for (int i = 0; i < 64; i++) {
        int32_t ta = sample(a, logits, N_VOCAB), tb = sample(b, logits, N_VOCAB);
        same_ab += ta == tb;
        same_ac += ta == sample(c, logits, N_VOCAB);
        seen[i] = ta;
        bool repeat = false;
        for (int j = 0; j < i; j++)
            repeat = repeat || seen[j] == ta;
        distinct += !repeat;
    }
    EXPECT(same_ab == 64, "same seed agreed on %d of 64 draws", same_ab);
    EXPECT(same_ac < 32, "different seeds agreed on %d of 64 draws", same_ac);
    EXPECT(distinct > 16, "only %d distinct tokens in 64 draws at temperature 1", distinct);
    clinfer_sampler_free(a);
    clinfer_sampler_free(b);
    clinfer_sampler_free(c);
}

/* Probabilities 0.5, 0.3, 0.15, 0.05 (over 4 tokens, in shuffled positions). */
static void crafted(float *logits, const int32_t *pos) {
    const float p[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    for (int i = 0; i < 4; i++)
        logits[pos[i]] = logf(p[i]);
}

/* Counts how often each of the 4 tokens is drawn in n draws. */
static void histogram(clinfer_sampler *s, const float *logits, const int32_t *pos, int n,
                      int *count) {
    memset(count, 0, 4 * sizeof *count);
    for (int i = 0; i < n; i++) {
        int32_t t = sample(s, logits, 4);
        for (int j = 0; j < 4; j++)
            count[j] += t == pos[j];
    }
}

static void test_filters(void) {
    const int32_t pos[4] = {2, 0, 3, 1};
    float logits[4];
    crafted(logits, pos);
    int count[4];
    enum { DRAWS = 4000 };

    /* Unfiltered at temperature 1, each token appears near its probability. */
    clinfer_sampler *s = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 7);
    histogram(s, logits, pos, DRAWS, count);
    EXPECT(count[3] > DRAWS * 0.03 && count[3] < DRAWS * 0.07,
           "the 0.05 token was drawn %d of %d times", count[3], DRAWS);
    EXPECT(count[0] > DRAWS * 0.45 && count[0] < DRAWS * 0.55,
           "the 0.5 token was drawn %d of %d times", count[0], DRAWS);
    clinfer_sampler_free(s);

    /* top-p 0.75: 0.5 + 0.3 reaches it, so only the first two remain. */
    s = make(1.0f, 0, 0.75f, 0.0f, 1.0f, 7);
    histogram(s, logits, pos, DRAWS, count);
    EXPECT(count[2] == 0 && count[3] == 0, "top-p 0.75 drew the excluded tokens %d and %d times",
           count[2], count[3]);
    EXPECT(count[0] > 0 && count[1] > 0, "top-p 0.75 never drew a kept token (%d, %d)", count[0],
           count[1]);
    clinfer_sampler_free(s);

    /* min-p 0.2: the floor is 0.1, so 0.05 goes and 0.15 stays. */
    s = make(1.0f, 0, 1.0f, 0.2f, 1.0f, 7);
    histogram(s, logits, pos, DRAWS, count);
    EXPECT(count[3] == 0, "min-p 0.2 drew the 0.05 token %d times", count[3]);
    EXPECT(count[2] > 0, "min-p 0.2 never drew the 0.15 token");
    clinfer_sampler_free(s);

    /* top-k 3 drops only the least likely one. */
    s = make(1.0f, 3, 1.0f, 0.0f, 1.0f, 7);
    histogram(s, logits, pos, DRAWS, count);
    EXPECT(count[3] == 0 && count[2] > 0, "top-k 3 drew (%d, %d) of the 3rd and 4th tokens",
           count[2], count[3]);
    clinfer_sampler_free(s);

    /* A low temperature sharpens what remains toward the most likely token. */
    s = make(0.25f, 0, 1.0f, 0.0f, 1.0f, 7);
    histogram(s, logits, pos, DRAWS, count);
    EXPECT(count[0] > DRAWS * 0.8, "at temperature 0.25 the top token got only %d of %d", count[0],
           DRAWS);
    clinfer_sampler_free(s);
}

static void test_repeat_penalty(void) {
    /* Token 5 leads narrowly; once accepted, a penalty of 1.3 makes token 6 the greedy pick.
     * A negative logit must also move down, not up. */
    float logits[10];
    for (int i = 0; i < 10; i++)
        logits[i] = -1.0f;
    logits[5] = 2.0f;
    logits[6] = 1.8f;
    clinfer_sampler *plain = make(0.0f, 0, 1.0f, 0.0f, 1.0f, 1);
    clinfer_sampler *pen = make(0.0f, 0, 1.0f, 0.0f, 1.3f, 1);
    EXPECT(sample(pen, logits, 10) == 5, "before any history the leader wins");
    clinfer_sampler_accept(plain, 5);
    clinfer_sampler_accept(pen, 5);
    clinfer_sampler_accept(pen, 5); /* counted once: 2.0 / 1.3 = 1.54 < 1.8 */
    EXPECT(sample(plain, logits, 10) == 5, "without a penalty history changes nothing");
    EXPECT(sample(pen, logits, 10) == 6, "the penalty did not demote the repeated token");

    /* All logits negative: -0.5 vs -0.6; penalising the leader gives -0.65 < -0.6. */
    for (int i = 0; i < 10; i++)
        logits[i] = -5.0f;
    logits[2] = -0.5f;
    logits[3] = -0.6f;
    clinfer_sampler_accept(pen, 2);
    EXPECT(sample(pen, logits, 10) == 3, "a negative repeated logit was not lowered");
    clinfer_sampler_free(plain);
    clinfer_sampler_free(pen);
}

/* OpenAI's penalties: presence once per seen token, frequency per occurrence in the window. */
static void test_presence_frequency(void) {
    float logits[4] = {3.0f, 2.5f, 1.0f, 0.0f};
    clinfer_sampler_params p;
    clinfer_sampler_params_default(&p);
    p.temperature = 0.0f;
    p.presence_penalty = 0.6f; /* token 0 seen: 3.0 - 0.6 = 2.4 < 2.5 */
    clinfer_sampler *pres = NULL, *freq = NULL;
    EXPECT_OK(clinfer_sampler_create(&p, &pres));
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.3f; /* once: 2.7 > 2.5 still wins; twice: 2.4 loses */
    EXPECT_OK(clinfer_sampler_create(&p, &freq));
    if (!pres || !freq) return;
    clinfer_sampler_accept(pres, 0);
    clinfer_sampler_accept(freq, 0);
    EXPECT(sample(pres, logits, 4) == 1, "presence penalty did not demote a seen token");
    EXPECT(sample(freq, logits, 4) == 0, "frequency penalty of one occurrence overshot");
    clinfer_sampler_accept(freq, 0);
    EXPECT(sample(freq, logits, 4) == 1, "frequency penalty did not grow with the count");
    clinfer_sampler_free(pres);
    clinfer_sampler_free(freq);
    p.frequency_penalty = NAN;
    EXPECT(clinfer_sampler_create(&p, &freq) == CLINFER_ERR_INVALID_ARGUMENT,
           "frequency_penalty NaN");
}

static void test_invalid(void) {
    clinfer_sampler_params p;
    clinfer_sampler *s = NULL;
    clinfer_sampler_params_default(&p);
    p.top_p = 0.0f;
    EXPECT(clinfer_sampler_create(&p, &s) == CLINFER_ERR_INVALID_ARGUMENT && !s, "top_p 0");
    clinfer_sampler_params_default(&p);
    p.temperature = NAN;
    EXPECT(clinfer_sampler_create(&p, &s) == CLINFER_ERR_INVALID_ARGUMENT, "temperature NaN");
    clinfer_sampler_params_default(&p);
    p.repeat_penalty = 0.0f;
    EXPECT(clinfer_sampler_create(&p, &s) == CLINFER_ERR_INVALID_ARGUMENT, "penalty 0");
    clinfer_sampler_params_default(&p);
    p.repeat_last_n = -1;
    EXPECT(clinfer_sampler_create(&p, &s) == CLINFER_ERR_INVALID_ARGUMENT, "last_n -1");
    clinfer_sampler_params_default(&p);
    p.min_p = 1.5f;
    EXPECT(clinfer_sampler_create(&p, &s) == CLINFER_ERR_INVALID_ARGUMENT, "min_p 1.5");
    EXPECT(strstr(clinfer_last_error(), "min_p") != NULL, "message names min_p: %s",
           clinfer_last_error());

    clinfer_sampler_params_default(&p);
    p.repeat_penalty = 1.1f;
    EXPECT_OK(clinfer_sampler_create(&p, &s));
    float x[3] = {0, 1, 2};
    int32_t t;
    EXPECT(clinfer_sampler_sample(s, x, 0, &t) == CLINFER_ERR_INVALID_ARGUMENT, "n_vocab 0");
    EXPECT(clinfer_sampler_sample(s, NULL, 3, &t) == CLINFER_ERR_INVALID_ARGUMENT, "NULL logits");
    float inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    EXPECT(clinfer_sampler_sample(s, inf, 3, &t) == CLINFER_ERR_INVALID_ARGUMENT,
           "all logits -inf");
    clinfer_sampler_accept(s, -7); /* out-of-range history entries are ignored, not read */
    clinfer_sampler_accept(s, 1 << 30);
    EXPECT_OK(clinfer_sampler_sample(s, x, 3, &t));
    clinfer_sampler_free(s);
}

int main(void) {
    rng_seed(11);
    test_greedy_and_top_k_1();
    test_presence_frequency();
    test_seed_reproduces();
    test_filters();
    test_repeat_penalty();
    test_invalid();
    return finish("test_sampler");
}
