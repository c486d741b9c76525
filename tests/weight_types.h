/* Every weight type the backends run, from the type table (base/quant.c), so that the op,
 * model and graph tests cover a new type without being edited. CLINFER_TEST_TYPES="Q2_K,Q5_K"
 * limits them to those named (a run under a simulator, which takes minutes per type), and
 * CLINFER_TEST_SHARD="i/n" to every n-th of those from the i-th (0 <= i < n): one simulator run
 * split into n tests that CTest runs side by side, each well inside its time limit. */
#ifndef CLINFER_TEST_WEIGHT_TYPES_H
#define CLINFER_TEST_WEIGHT_TYPES_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

/* Whether CLINFER_TEST_TYPES, when set, names type (a whole item of its comma list). */
static inline bool weight_type_picked(clinfer_dtype type) {
    const char *list = getenv("CLINFER_TEST_TYPES"), *name = dtype_name(type);
    size_t len = strlen(name);
    if (!list || !*list) return true;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) return true;
    return false;
}

/* Fills out (in type-id order) and returns the count. */
static inline size_t weight_types(clinfer_dtype out[CLINFER_DT_ID_LIMIT]) {
    unsigned shard = 0, shards = 1;
    const char *s = getenv("CLINFER_TEST_SHARD");
    if (s && (sscanf(s, "%u/%u", &shard, &shards) != 2 || shards == 0 || shard >= shards)) {
        fprintf(stderr, "CLINFER_TEST_SHARD '%s' is not i/n with 0 <= i < n\n", s);
        exit(2);
    }
    size_t n = 0, picked = 0;
    for (uint32_t t = 0; t < CLINFER_DT_ID_LIMIT; t++)
        if (dtype_valid(t) && dtype_is_weight((clinfer_dtype)t) &&
            weight_type_picked((clinfer_dtype)t) && picked++ % shards == shard)
            out[n++] = (clinfer_dtype)t;
    return n;
}

#endif
