/* The OpenCL op tests' operands: one buffer on each of their two backends (the reference, then the
 * device's), made from the same host data. The tests name their backends be[] and define
 * pair_new, pair_random and pair_free over them. */
#ifndef CLINFER_TEST_OP_PAIR_H
#define CLINFER_TEST_OP_PAIR_H

#include <stdlib.h>

#include "backend.h"
#include "check.h"
#include "random.h"

typedef struct {
    clinfer_buffer *buf[2];
} pair;

/* bytes on both sides, written from data where it is given. */
static inline pair op_pair_new(clinfer_backend *const *be, const void *data, size_t bytes) {
    pair p = {{NULL, NULL}};
    for (int s = 0; s < 2; s++) {
        EXPECT_OK(be[s]->i->buffer_alloc(be[s]->ctx, bytes, &p.buf[s]));
        if (data && p.buf[s])
            EXPECT_OK(be[s]->i->buffer_write(be[s]->ctx, p.buf[s], 0, bytes, data));
    }
    return p;
}

/* n floats uniform in [-1, 1), the same on both sides. */
static inline pair op_pair_random(clinfer_backend *const *be, size_t n) {
    float *x = malloc(n * sizeof *x);
    rng_fill(x, n, -1.0f, 1.0f);
    pair p = op_pair_new(be, x, n * sizeof *x);
    free(x);
    return p;
}

static inline void op_pair_free(clinfer_backend *const *be, pair *p) {
    for (int s = 0; s < 2; s++)
        if (p->buf[s]) be[s]->i->buffer_free(be[s]->ctx, p->buf[s]);
}

#endif
