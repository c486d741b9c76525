/* Runs of decode ops in one launch of cl/graph.cl, on CPU devices (see the kernel's banner for
 * how its work-groups take tasks and wait for each other without a launch between ops).
 *
 * cl_graph_run takes the longest run of ops at the head of a walk that the kernel can do:
 * single-token matmuls (and matmuls of up to MAX_N tokens, a decode step of a batch of sequences
 * or a short prompt, but for f32 x over row-major weights), embeddings, RMS and layer norms, the
 * element-wise ops (ADD, GELU, the GLUs, SCALE), KV cache stores and single-token attentions (a
 * batch's, one per sequence), each weight in one part, of any mix of weight types (the program is
 * built for the set of types of the run, each with its own readers, and one KV cache type): every
 * architecture's decode step, gpt2's included. Each
 * op is checked as its own launch would check it first; an op that fails the check, or that
 * the kernel cannot do, ends the run and goes through the per-op path, which reports it. Each
 * op becomes a record (its operands as slots of the launch's buffer arguments) split into
 * tasks, in one stage with the records before it where neither writes what the other touches
 * (the tasks of a stage wait only on the stage before); a ROUND_Q8 becomes a rounding record
 * (or the norm, element-wise or attention record that wrote its x rounds it as well: the same
 * bits, one wait less), writing the 8-bit form beside its y that the matmuls over y read, and
 * an attention split into chunks gets a merge record after it, as the per-op path launches them.
 * The records travel in a buffer made for the launch from the host's copy (CL_MEM_COPY_HOST_PTR): a
 * write command would cost a launch's wake-ups of the device's threads, and the buffer is gone once
 * the kernel is. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "error.h"
#include "fault.h"
#include "graph_cl.h"
#include "graph_encode_cl.h"
#include "ops_cl.h"
#include "program.h"
#include "weight_types.clh"

enum {
    MIN_RUN = 3,      /* fewer ops gain little over their own launches (and a matmul and its
                       * norm pair up without a graph) */
    MAX_PROGRAMS = 8, /* sets of weight types and KV cache types built for (a model has one or
                       * two: the runs' sets are mostly the model's) */
};

/* A graph program: built for a set of weight types (bit t: clinfer_dtype t) and a KV cache
 * type when first needed. */
typedef struct {
    uint64_t types;
    bool kv_f16;
    bool failed; /* the program did not build: per-op launches */
    cl_program program;
    cl_kernel kernel;
} graph_program;

struct cl_graph_state {
    graph_program programs[MAX_PROGRAMS];
    int n_programs;
    cl_mem ctl;
    int32_t *recs;  /* MAX_RECS records being encoded */
    bool off;       /* cl_graph_route turned graph launches off: per-op launches */
    bool stalls;    /* a launch stalled (cl_graph_check): per-op launches from then on */
    cl_int stalled; /* ctl's G_STALLED as last read back after a launch */
};

/* ---- programs and launch --------------------------------------------------------------- */

/* The weight types graph.cl reads, in the order of its slots (cl/weight_types.clh). */
#define GRAPH_TYPE(type, q8) CLINFER_DT_##type,
static const clinfer_dtype graph_types[] = {WEIGHT_TYPES(GRAPH_TYPE)};
#undef GRAPH_TYPE
_Static_assert(sizeof graph_types / sizeof graph_types[0] <= 14, "graph.cl has 14 type slots");
_Static_assert(CLINFER_DT_ID_LIMIT <= 64, "a set of weight types is a uint64_t");

/* The kernel for a run with weights of `types` and the KV cache type: that of a program built for
 * a set holding them all (any program, for a run without weights: a batch's attentions, one per
 * sequence), or of one built now; NULL where the program does not build on this
 * device (graph launches are then off for that set, and the per-op launches do the work:
 * CLINFER_VERBOSE says why) or no room is left for another. */
static cl_kernel graph_kernel(cl_backend_ctx *b, uint64_t types, bool kv_f16) {
    struct cl_graph_state *g = b->graph;
    for (int i = 0; i < g->n_programs; i++) {
        graph_program *p = &g->programs[i];
        if (p->kv_f16 == kv_f16 && (p->failed ? p->types == types : (p->types & types) == types))
            return p->kernel;
    }
    if (g->n_programs == MAX_PROGRAMS) return NULL;
    /* slot i of graph.cl: the i-th of the types in the order of its table (14 at most: the
     * buffers hold them all), and the expression that picks that type's readers */
    char options[1024], names[160] = "";
    int len = snprintf(options, sizeof options,
                       "%s-DMAX_HEAD_DIM=256 -DIL_COLS=%d -DILF_COLS=%d -DGQ_M=%d -DGQ_N=%d "
                       "-cl-fp32-correctly-rounded-divide-sqrt",
                       kv_f16 ? "-DKV_F16 " : "", IL_COLS, IL_F32_COLS, GEMM_Q8_M, GEMM_Q8_N),
        names_len = 0, slot = 0;
    uint64_t read = 0;
    for (size_t i = 0; i < sizeof graph_types / sizeof graph_types[0]; i++)
        if (types >> graph_types[i] & 1) {
            const char *name = dtype_name(graph_types[i]);
            int code = cl_graph_type_code(graph_types[i]);
            read |= (uint64_t)1 << graph_types[i];
            len += snprintf(options + len, sizeof options - (size_t)len,
                            " -DGT_%d=%d -DWT_%s=(GT_CODE==%d)", slot++, code, name, code);
            names_len += snprintf(names + names_len, sizeof names - (size_t)names_len, " %s", name);
        }
    graph_program *p = &g->programs[g->n_programs++];
    *p = (graph_program){.types = types, .kv_f16 = kv_f16};
    cl_int err = CL_SUCCESS;
    clinfer_status st = read == types ? cl_build(b, "graph.cl", options, &p->program)
                                      : err_fail(CLINFER_ERR_UNSUPPORTED,
                                                 "graph.cl has no readers for a weight type");
    if (st == CLINFER_OK) p->kernel = clCreateKernel(p->program, "run_graph", &err);
    if (st == CLINFER_OK && err != CL_SUCCESS)
        err_fail(err, "clCreateKernel(run_graph) failed: %s", clinfer_status_str(err));
    if (!p->kernel) {
        cl_verbose("graph launches off for weights of types%s: %s", names, clinfer_last_error());
        if (p->program) clReleaseProgram(p->program);
        p->program = NULL;
        p->failed = true;
    }
    return p->kernel;
}

static clinfer_status enqueue_run(cl_backend_ctx *b, cl_kernel kernel, const encoder *e) {
    struct cl_graph_state *g = b->graph;
    cl_int n_recs = (cl_int)e->n_recs, err = cl_fault("alloc");
    cl_mem recs = NULL;
    if (err == CL_SUCCESS)
        recs = clCreateBuffer(b->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              e->n_recs * G_INTS * sizeof(int32_t), e->recs, &err);
    if (err != CL_SUCCESS)
        return err_fail(err, "OpenCL graph: a buffer for %zu records: %s", e->n_recs,
                        clinfer_status_str(err));
    cl_arg args[3 + G_SLOTS] = {CL_ARG(recs), CL_ARG(n_recs), CL_ARG(g->ctl)};
    for (int i = 0; i < G_SLOTS; i++) /* unused slots repeat the first buffer */
        args[3 + i] = CL_ARG(e->slots[i < e->n_slots ? i : 0]);
    size_t units = b->info.compute_units ? b->info.compute_units : 1, one = 1;
    clinfer_status st = cl_launch(b, kernel, "run_graph", args, 3 + G_SLOTS, 1, &units, &one);
    clReleaseMemObject(recs); /* the kernel holds it until done */
    /* whether it stalled, for cl_graph_check once the queue is done */
    if (st == CLINFER_OK)
        st = cl_check(b,
                      clEnqueueReadBuffer(b->queue, g->ctl, CL_FALSE, G_STALLED * sizeof(cl_int),
                                          sizeof g->stalled, &g->stalled, 0, NULL, NULL),
                      "OpenCL graph: reading its stall flag");
    return st;
}

/* The run at the head of ops[0 .. n) into e: how many ops it takes (fewer than MIN_RUN: no run). */
static size_t encode_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, encoder *e) {
    *e = (encoder){.b = b, .kv_f16 = -1, .n_slots = FIRST_FREE_SLOT, .recs = b->graph->recs};
    size_t end = 0;
    while (end < n && cl_graph_encode(e, &ops[end]))
        end++;
    cl_graph_put_merges(e);
    return end;
}

size_t cl_graph_prepare(cl_backend_ctx *b, const clinfer_op *ops, size_t n) {
    encoder e;
    size_t end = b->graph ? encode_run(b, ops, n, &e) : 0;
    return end >= MIN_RUN && graph_kernel(b, e.types, e.kv_f16 != 0) ? end : 0;
}

clinfer_status cl_graph_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, size_t *taken) {
    struct cl_graph_state *g = b->graph;
    clinfer_status st = CLINFER_OK;
    *taken = 0;
    if (!g || g->off || g->stalls) return CLINFER_OK;
    encoder e;
    size_t end = encode_run(b, ops, n, &e);
    if (end < MIN_RUN) return CLINFER_OK;
    if (cl_fault("graph-stall") != CL_SUCCESS) { /* the last record waits on itself */
        int32_t *last = e.recs + (e.n_recs - 1) * G_INTS;
        last[G_AFTER] = last[G_AFTER + 1] = (int32_t)e.n_recs - 1;
    }
    /* The reserved slot: records name it by index, so its buffer can be made now that the run's
     * needs are known (unused, it names any buffer). */
    cl_mem part = g->ctl;
    if (e.part_bytes) CHECK(cl_attention_scratch(b, e.part_bytes, &part));
    e.slots[SLOT_PART] = part;
    cl_kernel kernel = graph_kernel(b, e.types, e.kv_f16 != 0);
    if (!kernel) return CLINFER_OK;
    CHECK(enqueue_run(b, kernel, &e));
    for (size_t i = 0; i < end; i++) /* the forms the run's roundings leave */
        if (ops[i].kind == CLINFER_OP_ROUND_Q8) cl_q8_made(&ops[i]);
    *taken = end;
cleanup:
    return st;
}

clinfer_status cl_graph_check(cl_backend_ctx *b) {
    struct cl_graph_state *g = b->graph;
    if (!g || !g->stalled) return CLINFER_OK;
    static const cl_int zero = 0;
    g->stalled = 0;
    g->stalls = true;
    clinfer_status st =
        cl_check(b,
                 clEnqueueWriteBuffer(b->queue, g->ctl, CL_TRUE, G_STALLED * sizeof(cl_int),
                                      sizeof zero, &zero, 0, NULL, NULL),
                 "OpenCL graph: clearing its stall flag");
    if (st != CLINFER_OK) return st;
    return err_fail(CLINFER_ERR_UNSUPPORTED,
                    "OpenCL graph launch: a work-group waited past its bound for tasks that never "
                    "finished, so this device does not run a launch's work-groups at once; the "
                    "step's results are lost, and this context launches per op from now on "
                    "(CLINFER_GRAPH=0 does so from the start)");
}

bool cl_graph_route(cl_backend_ctx *b, bool on) {
    if (!b->graph || b->options.graph == CLINFER_ON) return false;
    b->graph->off = !on;
    return true;
}

clinfer_status cl_graph_init(cl_backend_ctx *b) {
    /* The kernel's waiting rests on coherent memory between work-groups and on every
     * work-group that took a task running on: PoCL's CPU devices, whose work-groups run on
     * threads of their own. OpenCL promises neither (on Mesa's llvmpipe decode crawled
     * at 66 s a token), so elsewhere only where the graph option is on (a simulator such as
     * Oclgrind, to check the kernel's accesses). */
    bool forced = b->options.graph == CLINFER_ON;
    if ((!cl_device_is_pocl_cpu(&b->info) && !forced) || !cl_cpu_rows(b) ||
        b->options.graph == CLINFER_OFF)
        return CLINFER_OK;
    clinfer_status st = CLINFER_OK;
    struct cl_graph_state *g = calloc(1, sizeof *g);
    if (!g) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL graph: state");
    b->graph = g;
    size_t ctl_bytes = (size_t)(MAX_RECS + 2) * G_LINE * sizeof(int32_t);
    int32_t *zeros = calloc(1, ctl_bytes);
    g->recs = malloc(MAX_RECS * G_INTS * sizeof(int32_t));
    if (!zeros || !g->recs) CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL graph: records"));
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS)
        g->ctl = clCreateBuffer(b->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ctl_bytes,
                                zeros, &err);
    if (err != CL_SUCCESS)
        CHECK(err_fail(err, "OpenCL graph: clCreateBuffer failed: %s", clinfer_status_str(err)));
cleanup:
    free(zeros);
    return st;
}

void cl_graph_free(cl_backend_ctx *b) {
    struct cl_graph_state *g = b->graph;
    if (!g) return;
    for (int i = 0; i < g->n_programs; i++) {
        if (g->programs[i].kernel) clReleaseKernel(g->programs[i].kernel);
        if (g->programs[i].program) clReleaseProgram(g->programs[i].program);
    }
    free(g->recs);
    if (g->ctl) clReleaseMemObject(g->ctl);
    free(g);
    b->graph = NULL;
}
