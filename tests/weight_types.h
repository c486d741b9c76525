/* Every weight type the backends run, from the type table (base/quant.c), so that the op,
 * model and graph tests cover a new type without being edited. */
#ifndef CLINFER_TEST_WEIGHT_TYPES_H
#define CLINFER_TEST_WEIGHT_TYPES_H

#include <stddef.h>

#include "quant.h"

/* Fills out (in type-id order) and returns the count. */
static inline size_t weight_types(clinfer_dtype out[CLINFER_DT_ID_LIMIT]) {
    size_t n = 0;
    for (uint32_t t = 0; t < CLINFER_DT_ID_LIMIT; t++)
        if (clinfer_dtype_valid(t) && clinfer_dtype_is_weight((clinfer_dtype)t))
            out[n++] = (clinfer_dtype)t;
    return n;
}

#endif
