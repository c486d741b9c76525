/* The executor's profiler, switched on per context by the environment:
 *   CLINFER_PROFILE=1      per op kind: ops, launches, time, share, us per op, GB/s and GFLOP/s,
 *                          and per token wall time = kernel time + gaps, printed to stderr as the
 *                          context is freed;
 *   CLINFER_TRACE=f.json   a Chrome trace (chrome://tracing, Perfetto) with one event per launch:
 *                          an op, or a run of ops enqueued as one (see EXEC_PROFILE_GRAPH).
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

/* The rows of the table: one per op kind, then EXEC_PROFILE_GRAPH for runs of more than two
 * ops that the backend enqueued as one (op_run), whose time cannot be split among their ops:
 * those ops count in their kinds' rows without time or launches. A pair (a matmul and the norm
 * of its output) counts as its first op. */
#define EXEC_PROFILE_GRAPH CLINFER_OP_COUNT
#define EXEC_PROFILE_ROWS (CLINFER_OP_COUNT + 1)

typedef struct {
    uint64_t ops[EXEC_PROFILE_ROWS];
    uint64_t launches[EXEC_PROFILE_ROWS]; /* device launches when timed, else ops */
    double ms[EXEC_PROFILE_ROWS];
    double bytes[EXEC_PROFILE_ROWS];
    double flops[EXEC_PROFILE_ROWS];
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
    size_t *runs;              /* at each run's first op: the ops it took */
    size_t timing_cap;
} exec_profile;

/* An op kind's name, or "graph" for the row EXEC_PROFILE_GRAPH. */
const char *exec_op_name(clinfer_op_kind kind);

/* profile: the model's option (CLINFER_DEFAULT: the environment's); CLINFER_TRACE adds a
 * trace. *out is NULL when profiling is off. */
clinfer_status exec_profile_create(clinfer_toggle profile, exec_profile **out);

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

/* Records a run of n ops enqueued as one (n = 1: a single op; w_type: theirs) that ran from t0
 * to t1 (ms, clock_now_ms, the wait for the device included). */
void exec_profile_ops(exec_profile *profile, const clinfer_op *ops, size_t n,
                      const clinfer_dtype *w_type, double t0, double t1);
/* Records a run of n ops as the backend timed its kernels (t: the run's). */
void exec_profile_device_ops(exec_profile *profile, const clinfer_op *ops, size_t n,
                             const clinfer_op_timing *t, const clinfer_dtype *w_type);

#endif
