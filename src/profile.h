/* The executor's profiler, switched on per context by the environment:
 *   CLINFER_PROFILE=1      per op kind: launches, time, share of the op time, GB/s and GFLOP/s,
 *                          printed to stderr as the context is freed;
 *   CLINFER_TRACE=f.json   a Chrome trace (chrome://tracing, Perfetto) with one event per op.
 * Either one waits for the device after every op, so each op's time is its own; the results do
 * not change. When both are unset a context has no profile and the executor does no extra work.
 * Bytes and flops come from the op's shapes and weight type: bytes the op must read and write
 * at least, flops 2 per multiply-add. */
#ifndef CLINFER_PROFILE_H
#define CLINFER_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"

typedef struct {
    uint64_t count[CLINFER_OP_COUNT];
    double ms[CLINFER_OP_COUNT];
    double bytes[CLINFER_OP_COUNT];
    double flops[CLINFER_OP_COUNT];
    uint64_t n_tokens, n_walks; /* tokens and plan walks profiled */
    bool table;                 /* CLINFER_PROFILE: print the table at the end */
    FILE *trace;                /* CLINFER_TRACE: events written so far, NULL: no trace */
    uint64_t n_events;
    double t_origin; /* ms: the trace's time zero */
} exec_profile;

/* Reads the environment: *out is NULL when profiling is off. */
clinfer_status exec_profile_create(exec_profile **out);

/* Prints the table (when CLINFER_PROFILE asked for it), closes the trace and frees. */
void exec_profile_free(exec_profile *profile, FILE *out);

/* Least bytes an op moves and its flops; w_type is the weight type of MATMUL and EMBED. */
void exec_op_cost(const clinfer_op *op, clinfer_dtype w_type, double *bytes, double *flops);

/* Records one op that ran from t0 to t1 (ms, exec_now_ms), and the start of a plan walk over
 * n tokens. */
void exec_profile_op(exec_profile *profile, const clinfer_op *op, clinfer_dtype w_type, double t0,
                     double t1);
void exec_profile_walk(exec_profile *profile, int n);

#endif
