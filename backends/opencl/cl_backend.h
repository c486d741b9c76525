/* Internals of the OpenCL backend, shared by its files:
 *   backend_cl.c    context, queue, buffers, the interface and op dispatch
 *   launch_cl.c     the one launch helper, error checks, device-lost marking, kernel timing
 *   ops_cl.c        norm, rope, store, element-wise (ops_cl.h)
 *   attention_cl.c  attention, with rotation and cache writes (ops_cl.h)
 *   matmul_cl.c     matvec/GEMM over every weight type, embedding gather (matmul_cl.h)
 *   weights_cl.c    weight upload, parts, arenas (matmul_cl.h)
 *   weight_cache_cl.c  the on-disk cache of re-laid-out weights (matmul_cl.h)
 *   repack_cl.c     GGUF blocks laid out as weight arrays (split, interleaved), on threads
 *   act_q8_cl.c     8-bit activations for x_q8 matmuls (matmul_cl.h)
 *   clblast_cl.c    CLBlast's SGEMM and its cache's reference count (matmul_cl.h)
 *   graph_cl.c      runs of decode ops in one launch (cl/graph.cl) on CPU devices
 *   device.c        enumeration, capabilities, kernel path, selection
 *   program.c       program builds from the embedded cl/ sources, binary cache
 * Headers: cl_backend.h (this) for all; ops_cl.h and matmul_cl.h for their families; device.h,
 * program.h, fault.h stand alone. No header includes a .c file's private header. */
#ifndef CLINFER_CL_BACKEND_H
#define CLINFER_CL_BACKEND_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>

#include "backend.h"
#include "graph_record.clh"

/* The -D options of a program that includes cl/weights.clh for weights of type (-DWT_<name>,
 * -DWT_Q8_ACT where matmuls take 8-bit x), in buf, returned: from the type table
 * (base/quant.c), as is the layout of each type's weights. */
const char *cl_type_defines(clinfer_dtype type, char *buf, size_t size);

struct cl_matmul_state; /* matmul_cl.h */
struct cl_ops_state;    /* owned by backend_cl.c */
struct cl_weight;       /* matmul_cl.h */

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
    clinfer_device_info info; /* info.kernel_path: the variant in use */
    char description[384];    /* "OpenCL: name (platform, path, threads)": two 128-byte names fit */
    clinfer_backend_options options; /* resolved; options.cache_dir points to cache_dir */
    char cache_dir[1024];
    struct cl_matmul_state *mm;
    struct cl_ops_state *ops;
    struct cl_graph_state *graph;
    cl_shared *shared;
    bool owns_shared; /* made by clinfer_backend_opencl_create, not as an instance */
    cl_timing timing;
} cl_backend_ctx;

struct clinfer_buffer {
    clinfer_buffer_head head;
    cl_mem mem;               /* plain buffers */
    struct cl_weight *weight; /* non-NULL for weights made by weight_create */
};

/* launch_cl.c: one kernel argument (CL_ARG(v): the variable v). */
typedef struct {
    size_t size;
    const void *value;
} cl_arg;
#define CL_ARG(v) ((cl_arg){sizeof(v), &(v)})
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

/* attention_cl.c: this backend's limits on a valid (clinfer_op_check) attention op: the head
 * sizes its kernels hold; CLINFER_ERR_UNSUPPORTED beyond them. */
clinfer_status cl_attention_limits(const clinfer_op *op);
/* How an attention op's positions are split: chunk positions per item, n_chunks items per
 * (head, token); with more than one chunk, part (grown to bytes) holds their partial results. */
void cl_attention_chunks(const cl_backend_ctx *b, const clinfer_op *op, size_t *chunk,
                         size_t *n_chunks);
clinfer_status cl_attention_scratch(cl_backend_ctx *b, size_t bytes, cl_mem *part);

/* graph_cl.c: a run of ops in one launch of graph.cl on CPU devices. cl_graph_run enqueues
 * ops[0 .. *taken) that way, *taken 0 where it takes none (the caller runs ops[0]). */
struct cl_graph_state; /* owned by graph_cl.c */
clinfer_status cl_graph_init(cl_backend_ctx *b);
void cl_graph_free(cl_backend_ctx *b);
clinfer_status cl_graph_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, size_t *taken);
/* The backend interface's graph_route (backend.h): false where CLINFER_GRAPH=1 forces graph
 * launches or they are off (=0, not a CPU device). */
bool cl_graph_route(void *ctx, bool on);

/* The matmul family (matmul_cl.h): matmul_cl.c, weights in weights_cl.c, 8-bit activations
 * (cl_matmul_forget, cl_round_output .. cl_act_q8_made) in act_q8_cl.c. */
clinfer_status cl_matmul_init(cl_backend_ctx *b);
void cl_matmul_free(cl_backend_ctx *b);
clinfer_status cl_weight_create(cl_backend_ctx *b, clinfer_dtype type, int m, int k,
                                const void *data, clinfer_buffer **out);
void cl_weight_free(struct cl_weight *w);
/* The backend's weight_cached (backend.h): the weight cache file being read holds the next
 * weight, of type and m x k, as this build lays it out. */
bool cl_weight_cached(cl_backend_ctx *b, clinfer_dtype type, int m, int k);
clinfer_status cl_matmul(cl_backend_ctx *b, const clinfer_op *op);
/* The matmul op and the RMSNORM `norm` of its output in one launch, where the kernel for op can
 * (*fused); otherwise *fused is false and nothing is enqueued. norm is already checked. */
clinfer_status cl_matmul_norm(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                              bool *fused);
/* Drops the 8-bit activations kept for the next matmul over the same x: call before anything
 * that may write or free a buffer other than through a matmul. */
void cl_matmul_forget(cl_backend_ctx *b);
/* RMSNORM, SWIGLU and GEGLU ops with the y_q8 hint (backend.h) that one launch of quantize.cl can
 * run while rounding y for the next matmul, which then finds it made; cl_rounding_op runs one such
 * op, already checked. */
bool cl_round_output(const clinfer_op *op);
clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op);
/* For a kernel elsewhere that rounds its output y for the next x_q8 matmul (attention with
 * out_q8): cl_act_q8_buffers makes room for count rounded values and gives the xq, xd and xf
 * buffers and want_f of round_q8.clh's round_block; once the launch is enqueued,
 * cl_act_q8_made records y as rounded (span: act_q8's), so that matmul does not round it again. */
clinfer_status cl_act_q8_buffers(cl_backend_ctx *b, size_t count, cl_mem mem[3], int *want_f);
/* Room for the group offsets xo of count values rounded with a K-quant's span (round_q8.clh),
 * for a kernel that rounds such x itself (graph.cl); cl_act_q8_made's span says they are made. */
clinfer_status cl_act_q8_offsets(cl_backend_ctx *b, size_t count, cl_mem *xo);
int cl_act_q8_want_f(const cl_backend_ctx *b); /* the want_f cl_act_q8_buffers gives */
void cl_act_q8_made(cl_backend_ctx *b, clinfer_ref y, size_t count, int want_f, int span);
clinfer_status cl_embed(cl_backend_ctx *b, const clinfer_op *op);
/* What graph_cl.c needs to know of a MATMUL or EMBED op's weight, after checking the op as the
 * per-op path does: its type and first part's arrays (their arena, where it has one; s is q for
 * f32/f16), whether its rows are interleaved, the bytes a row takes as stored, and the matvec
 * the per-op path would run: CL_MM_ROWS over f32 x (or d * q of 8-bit x), CL_MM_IL or CL_MM_Q8
 * over 8-bit x (graph_record.clh names them, for graph.cl too). */
typedef struct {
    clinfer_dtype type;
    int parts;
    cl_mem q, s; /* at q_off and s_off bytes */
    size_t q_off, s_off;
    int il, variant;
    size_t row_bytes;
} cl_weight_view;
clinfer_status cl_weight_view_of(cl_backend_ctx *b, const clinfer_op *op, cl_weight_view *v);
/* 1 when f32 GEMM goes through CLBlast on this context (for bench-ops' side-by-side). */
int cl_matmul_clblast(const cl_backend_ctx *b);
/* Whether some weight type built so far has integer dots against 8-bit x (the backend's
 * int8_dots): matvec_q8, made on CPU devices where PoCL compiles for AVX2 or AVX-512. */
bool cl_matmul_int8_dots(const cl_backend_ctx *b);

#endif
