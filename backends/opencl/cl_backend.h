/* The core of the OpenCL backend, which every file of it stands on: the context, launches,
 * errors, buffers, the programs instances share. The files, each calling only the ones listed
 * before it (tests/check_layers.py checks this):
 *   fault.c, device.c, params.c, cache_dir.c, program.c  test faults; enumeration,
 *                   capabilities, kernel path; the per-device parameters; the on-disk caches'
 *                   directories and files; program builds and the binary cache (these know no
 *                   backend context)
 *   launch_cl.c     the launch helper, errors, buffers, device-lost marking, kernel timing
 *   build_cl.c      the programs a backend and its instances share, each built once (cl_build)
 *   device_setup_cl.c  a CPU device's threads as a sub-device; the loop probe (cpu-rows or not)
 *   type_kernels_cl.c  matvec.cl built per weight type (type_kernels_cl.h)
 *   repack_cl.c, arena_cl.c, weight_cache_cl.c, weights_cl.c  the weight store: GGUF blocks laid
 *                   out as arrays, the arenas they live in, the on-disk cache of laid-out
 *                   weights, the upload (weights_cl.h)
 *   act_q8_cl.c     8-bit activations: ROUND_Q8 and the form x_q8 matmuls read (act_q8_cl.h)
 *   clblast_cl.c, matmul_cl.c  matvec/GEMM over every weight type, embedding gather (matmul_cl.h)
 *   gpu_attention_cl.c  the GPU paths' attention, split across work-groups and merged
 *   ops_cl.c, attention_cl.c   norm, rope, store, element-wise; attention (ops_cl.h)
 *   moe_cl.c        mixture-of-experts routing, expert-indexed matmul, gated sum (moe_cl.h)
 *   graph_encode_cl.c, graph_cl.c  runs of decode ops in one launch (cl/graph.cl) on CPU
 *                   devices: their records, then the programs and the launch (graph_cl.h)
 *   backend_cl.c    the backend: its interface, op dispatch, instances */
#ifndef CLINFER_CL_BACKEND_H
#define CLINFER_CL_BACKEND_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>

#include "backend.h"
#include "graph_record.clh"
#include "route_cl.h"

/* Each op family's state, owned by its files (the header named). */
struct cl_types;        /* type_kernels_cl.h */
struct cl_store;        /* weights_cl.h */
struct cl_act_state;    /* act_q8_cl.h */
struct cl_q8_side;      /* act_q8_cl.h */
struct cl_matmul_state; /* matmul_cl.h */
struct cl_ops_state;    /* ops_cl.h */
struct cl_graph_state;  /* graph_cl.c */
struct cl_moe_state;    /* moe_cl.c */
struct cl_weight;       /* weights_cl.h */

/* Profiling events (timing_mark .. timing_collect): each launch keeps its event, tagged with the
 * op it belongs to. The array only grows, so recording allocates nothing per launch. */
typedef struct {
    cl_event event;
    size_t op;
} cl_timed_launch;

typedef struct {
    bool enabled;   /* the queue has CL_QUEUE_PROFILING_ENABLE */
    bool recording; /* launches keep events */
    size_t op;      /* the tag of the launches enqueued now */
    cl_timed_launch *launches;
    size_t n, cap;
    cl_ulong origin; /* START of the first timed launch (ns); 0: none yet */
} cl_timing;

/* What a backend and the instances made from it (backend.h) share, owned by the first: the
 * programs built on their context, each once (cl_build), and whether the device failed, after
 * which every call of each returns CLINFER_ERR_DEVICE_LOST. */
typedef struct cl_shared {
    pthread_mutex_t lock; /* held through a build too: no program is built twice */
    struct cl_built *programs;
    unsigned compiled; /* programs compiled from source (on_compile's count) */
    bool lost;
    char lost_reason[160];
} cl_shared;

typedef struct cl_backend_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_device_id sub_device; /* options.threads' sub-device, released by the root; else NULL */
    cl_context context;
    cl_command_queue queue;
    clinfer_device_info info; /* info.kernel_path: the variant in use, by name */
    clinfer_kernel_path path; /* the same variant */
    char description[384];    /* "OpenCL: name (platform, path, threads)": two 128-byte names fit */
    clinfer_backend_options options; /* resolved; options.cache_dir points to cache_dir */
    char cache_dir[1024];
    struct cl_types *types;
    struct cl_store *store;
    struct cl_act_state *act;
    struct cl_matmul_state *mm;
    struct cl_ops_state *ops;
    struct cl_graph_state *graph;
    struct cl_moe_state *moe;
    cl_shared *shared;
    bool owns_shared; /* made by cl_backend_create, not as an instance */
    cl_timing timing;
    cl_route route; /* graph or per-op launches for decode steps (plan_run) */
} cl_backend_ctx;

struct clinfer_buffer {
    clinfer_buffer_head head;
    cl_mem mem;               /* plain buffers */
    struct cl_weight *weight; /* non-NULL for weights made by weight_create */
    struct cl_q8_side *q8;    /* the 8-bit form a ROUND_Q8 left beside its y here (act_q8_cl.h) */
};

/* launch_cl.c: one kernel argument (CL_ARG(v): the variable v). */
typedef struct {
    size_t size;
    const void *value;
} cl_arg;
#define CL_ARG(v) ((cl_arg){sizeof(v), &(v)})
/* Arguments 2i and 2i + 1 for each of the n refs: its buffer and its offset, the offset held in
 * offs[i] (a kernel's ulong), which must live until the launch. */
void cl_ref_args(const clinfer_ref *refs, size_t n, cl_ulong *offs, cl_arg *args);
/* Sets kernel's n_args arguments and enqueues it (name labels messages), keeping the profiling
 * event while timing records. */
clinfer_status cl_launch(cl_backend_ctx *b, cl_kernel kernel, const char *name, const cl_arg *args,
                         size_t n_args, cl_uint dims, const size_t *global, const size_t *local);
/* err as a status, with a message naming the call (fmt); CL_OUT_OF_RESOURCES and
 * CL_INVALID_COMMAND_QUEUE mark the context lost (cl_note_lost, for statuses from elsewhere),
 * after which cl_check_alive fails. */
clinfer_status cl_check(cl_backend_ctx *b, cl_int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cl_note_lost(cl_backend_ctx *b, clinfer_status st);
/* Around every kernel enqueue on b->queue (cl_launch; CLBlast's): on devices whose driver needs
 * it (launch_cl.c), waits until no other queue has kernels in flight. cl_turn_leave gives the turn
 * up before b's queue is released. */
void cl_turn_begin(cl_backend_ctx *b);
void cl_turn_end(cl_backend_ctx *b);
void cl_turn_leave(cl_backend_ctx *b);
clinfer_status cl_check_alive(const cl_backend_ctx *b);
clinfer_status cl_sync(void *ctx);
/* The cpu-rows kernels (one work-item per row, no local memory), else a GPU path's. */
static inline bool cl_cpu_rows(const cl_backend_ctx *b) {
    return b->path == CLINFER_KERNEL_PATH_CPU_ROWS;
}
static inline size_t cl_round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* Builds cl/source_name with extra_options for this device (program.h's cl_program_build) once
 * per context: later calls, from this backend or an instance of it, get the same program.
 * *out is retained for the caller, who releases it. */
clinfer_status cl_build(cl_backend_ctx *b, const char *source_name, const char *extra_options,
                        cl_program *out);

/* The event argument of a launch: slot while recording, else NULL (no event). */
static inline cl_event *cl_timing_slot(cl_backend_ctx *b, cl_event *slot) {
    return b->timing.recording ? slot : NULL;
}
/* Keeps the event a launch filled in through cl_timing_slot (NULL: none) for timing_collect. */
clinfer_status cl_timing_keep(cl_backend_ctx *b, cl_event event);
/* The backend interface's timing_mark and timing_collect (backend.h). */
bool cl_timing_mark(void *ctx, size_t op_index);
clinfer_status cl_timing_collect(void *ctx, clinfer_op_timing *ops, size_t n_ops);

/* A device buffer that only grows (cl_ensure_scratch). */
typedef struct {
    cl_mem mem;
    size_t bytes;
} scratch;

/* err as a status naming what (no device-lost marking: for setup, not launches); a buffer of
 * bytes (from host with CL_MEM_COPY_HOST_PTR); sc grown to at least bytes. */
clinfer_status cl_error(cl_int err, const char *what);
clinfer_status cl_create_buffer(cl_backend_ctx *b, cl_mem_flags flags, size_t bytes, void *host,
                                cl_mem *out);
clinfer_status cl_ensure_scratch(cl_backend_ctx *b, scratch *sc, size_t bytes);

/* device_setup_cl.c, before the first kernel: options.threads of a CPU device as a sub-device the
 * backend and its instances run on (the root releases it); and cpu-rows left for gpu-local-reduce
 * where a work-item's loops are cut short, unless the path was asked for. */
clinfer_status cl_use_threads(cl_backend_ctx *b);
clinfer_status cl_check_loops(cl_backend_ctx *b);

/* build_cl.c: what a backend shares with its instances, made and freed by the backend. */
clinfer_status cl_shared_create(cl_shared **out);
void cl_shared_free(cl_shared *sh);

#endif
