/* The executor's profiler, switched on per context by the environment:
 *   CLINFER_PROFILE=1      per op kind: ops, launches, time, share, us per op, GB/s and GFLOP/s,
 *                          and per token wall time = kernel time + gaps, printed to stderr as the
 *                          context is freed;
 *   CLINFER_TRACE=f.json   a Chrome trace (chrome://tracing, Perfetto) with one event per op.
 * Where the backend times its kernels (timing_mark/timing_collect: OpenCL, whose queue gets
 * profiling events when either variable is set as the backend is created), a walk is enqueued
 * as without the profile and collected once at its end: times are kernel times from the device's
 * clock, launches count kernels, and trace events sit at their device timestamps. Otherwise
 * (the reference backend, an OpenCL backend created before the variables were set) each op is
 * waited for and timed on the host: its time includes the wait, launches count ops.
 * The results do not change. When both are unset a context has no profile and the executor
 * does no extra work. Bytes and flops come from the op's shapes and weight type: bytes the op
 * must read and write at least, flops 2 per multiply-add. */
#ifndef CLINFER_PROFILE_H
#define CLINFER_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"

/* Plan walks of one kind: single tokens (decode) or several (prefill). */
typedef struct {
    uint64_t tokens, walks, launches;
    double wall_ms;    /* from the walk's first enqueue until its last op finished */
    double enqueue_ms; /* timed walks: from the first enqueue until the last one returned */
    double op_ms;      /* summed op (kernel) time */
} exec_profile_walks;

typedef struct {
    uint64_t ops[CLINFER_OP_COUNT];
    uint64_t launches[CLINFER_OP_COUNT]; /* device launches when timed, else ops */
    double ms[CLINFER_OP_COUNT];
    double bytes[CLINFER_OP_COUNT];
    double flops[CLINFER_OP_COUNT];
    exec_profile_walks walks[2]; /* [0]: one token, [1]: several */
    bool timed;                  /* walks were timed by the backend (see above) */
    bool table;                  /* CLINFER_PROFILE: print the table at the end */
    FILE *trace;                 /* CLINFER_TRACE: events written so far, NULL: no trace */
    uint64_t n_events;
    double t_origin; /* ms: the trace's time zero for host times */
    /* the walk under way */
    int walk_n;
    double walk_t0, walk_enqueued;
    clinfer_op_timing *timing; /* its ops' kernel times, for timing_collect */
    size_t timing_cap;
} exec_profile;

/* Reads the environment: *out is NULL when profiling is off. */
clinfer_status exec_profile_create(exec_profile **out);

/* Prints the table (when CLINFER_PROFILE asked for it), closes the trace and frees. */
void exec_profile_free(exec_profile *profile, FILE *out);

/* Least bytes an op moves and its flops; w_type is the weight type of MATMUL and EMBED. */
void exec_op_cost(const clinfer_op *op, clinfer_dtype w_type, double *bytes, double *flops);

/* Starts a plan walk over n tokens and n_ops ops, making room for their timings. */
clinfer_status exec_profile_walk(exec_profile *profile, int n, size_t n_ops);
/* Marks the end of its enqueueing (timed walks), then ends it; timed: its ops are recorded
 * with exec_profile_device_op. */
void exec_profile_enqueued(exec_profile *profile);
void exec_profile_walk_end(exec_profile *profile, bool timed);

/* Records one op that ran from t0 to t1 (ms, exec_now_ms, the wait for the device included). */
void exec_profile_op(exec_profile *profile, const clinfer_op *op, clinfer_dtype w_type, double t0,
                     double t1);
/* Records one op as the backend timed its kernels. */
void exec_profile_device_op(exec_profile *profile, const clinfer_op *op, clinfer_dtype w_type,
                            const clinfer_op_timing *t);

#endif
