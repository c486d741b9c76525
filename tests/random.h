/* Seeded pseudo-random floats for tests: xorshift64*, so every run and every machine draws the
 * same inputs and a failure can be replayed. */
#ifndef CLINFER_TEST_RANDOM_H
#define CLINFER_TEST_RANDOM_H

#include <stddef.h>
#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* A zero state would stay zero forever, so seed 0 maps to a fixed non-zero constant. */
static inline void rng_seed(uint64_t seed) {
    rng_state = seed ? seed : 0x9E3779B97F4A7C15ull;
}

static inline uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [lo, hi): the top 24 bits give every float step in [0, 1) equal weight. */
static inline float rng_uniform(float lo, float hi) {
    float u = (float)(rng_next() >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

static inline void rng_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform(lo, hi);
}

#endif
