/* Pooling the hidden states of an eval into one vector per text (clinfer_get_embeddings_pooled).
 */
#include <math.h>
#include <stdlib.h>

#include "context.h"
#include "error.h"

clinfer_status clinfer_get_embeddings_pooled(clinfer_context *ctx, clinfer_pooling pooling,
                                             bool normalize, float *out, size_t capacity,
                                             size_t *n_embd) {
    const float *row;
    size_t d = 0;
    if (!out && capacity)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "get_embeddings_pooled: NULL out");
    if (pooling != CLINFER_POOLING_MEAN && pooling != CLINFER_POOLING_LAST)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "get_embeddings_pooled: pooling %d unknown",
                        (int)pooling);
    clinfer_status st = clinfer_get_embeddings_ith(ctx, -1, &row, &d);
    if (st != CLINFER_OK) return st;
    if (n_embd) *n_embd = d;
    if (d > capacity)
        return err_fail(CLINFER_ERR_BUFFER_TOO_SMALL,
                        "get_embeddings_pooled: %zu values do not fit %zu", d, capacity);
    size_t n = context_n_eval(ctx), first = pooling == CLINFER_POOLING_MEAN ? 0 : n - 1;
    /* sums in double: a mean over thousands of tokens keeps f32's precision */
    double *sum = calloc(d, sizeof *sum), sum2 = 0;
    if (!sum)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "get_embeddings_pooled: no memory for %zu", d);
    for (size_t t = first; t < n; t++) {
        clinfer_get_embeddings_ith(ctx, (int32_t)t, &row, NULL);
        for (size_t j = 0; j < d; j++)
            sum[j] += row[j];
    }
    for (size_t j = 0; j < d; j++) {
        out[j] = (float)(sum[j] / (double)(n - first));
        sum2 += (double)out[j] * out[j];
    }
    free(sum);
    if (normalize && sum2 > 0) {
        double scale = 1.0 / sqrt(sum2);
        for (size_t j = 0; j < d; j++)
            out[j] = (float)(out[j] * scale);
    }
    return CLINFER_OK;
}
