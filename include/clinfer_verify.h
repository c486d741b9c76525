/* clinfer: a device against the reference backend, op by op.
 * Part of the public API: clinfer.h includes it and is the one header to include. */

#ifndef CLINFER_PUBLIC_VERIFY_H
#define CLINFER_PUBLIC_VERIFY_H

#include "clinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One region written by one op of the forward pass, the device's against the reference's. */
typedef struct {
    const char *phase; /* "prefill", "decode", or "whole" for the logits of a whole evaluation */
    int32_t layer;     /* -1: before the first layer (embeddings); n_layer: output norm and head */
    char op[64];       /* the op and the tensors it reads: "rmsnorm attn_norm", "matmul ffn_down" */
    const char *output; /* the region: "y", "x" (in place), "out", "k cache", "v cache", ... */
    double nmse;        /* sum (device - reference)^2 / sum reference^2 (NaN: the device wrote
                         * non-finite values) */
    double max_abs;     /* the largest |device - reference| */
    uint32_t worst_pos; /* the token position of that element */
    double bound;       /* the NMSE tolerance applied */
    bool ok;            /* nmse <= bound */
} clinfer_verify_row;

typedef struct {
    char device[256];   /* the device's backend, as clinfer_model_info.backend */
    char tolerance[64]; /* the tolerance table's entry applied: "Q4_1 weights, 8-bit activations" */
    double bound;       /* its NMSE bound of one op */
    double bound_whole; /* and of the whole evaluation's logits */
    clinfer_verify_row *rows;
    size_t n_rows;
    size_t n_failed;                   /* rows past their bound */
    size_t first_failed;               /* the first such row (n_rows: none) */
    size_t worst;                      /* the op row (not "whole") with the largest NMSE */
    int32_t top_device, top_reference; /* the whole evaluation's most likely next token */
    uint32_t n_layer;                  /* the model's: the head's rows have this layer */
} clinfer_verify_report;

/* Whether a device computes what the reference backend does: loads model_path on both (device:
 * device_params, NULL defaults) and evaluates tokens, all but the last as one prefill, then the
 * last as a decode step (cp as for clinfer_context_create; n_ctx 0: n_tokens). Op by op, each op
 * runs alone on both and each region it wrote is a row; the device then takes the reference's
 * values, so a row measures that op alone. Then the same batches whole, each side on its own, and
 * a last row compares the logits. Bounds come from one table, by the loosest weight type and
 * whether activations are 8-bit. CLINFER_OK whether or not rows pass: *out says. */
CLINFER_API clinfer_status clinfer_verify(const char *model_path,
                                          const clinfer_model_params *device_params,
                                          const clinfer_context_params *cp, const int32_t *tokens,
                                          size_t n_tokens, clinfer_verify_report **out);
CLINFER_API void clinfer_verify_report_free(clinfer_verify_report *report);

#ifdef __cplusplus
}
#endif
#endif
