/* The OpenCL backend: context and queue, buffers, the interface and op dispatch (the ops live
 * in ops_cl.c and attention_cl.c, matmul and embedding in matmul_cl.c), and the instances that
 * share a context and its programs. Kernels are enqueued on one in-order queue per instance
 * without waiting (on PoCL's CPU driver, queues take turns: launch_cl.c); sync is the only
 * clFinish. OpenCL errors pass through as the status; after
 * CL_OUT_OF_RESOURCES or CL_INVALID_COMMAND_QUEUE the device is marked lost for the backend and
 * its instances, and every later call returns CLINFER_ERR_DEVICE_LOST. */
#include "cl_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "opencl/device.h"
#include "opencl/fault.h"
#include "opencl/graph_cl.h"
#include "opencl/matmul_cl.h"
#include "opencl/moe_cl.h"
#include "opencl/ops_cl.h"
#include "opencl/program.h"
#include "options.h"

/* ---- buffers --------------------------------------------------------------------------- */

static clinfer_status cl_buffer_alloc(void *ctx, size_t bytes, clinfer_buffer **out) {
    cl_backend_ctx *b = ctx;
    clinfer_buffer *buf = NULL;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    *out = NULL;
    if (bytes == 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: buffer of 0 bytes requested");
    if (bytes > b->info.max_alloc)
        return err_fail(CL_INVALID_BUFFER_SIZE,
                        "OpenCL: buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                        "(%llu bytes) of %s",
                        bytes, (unsigned long long)b->info.max_alloc, b->info.name);
    buf = calloc(1, sizeof *buf);
    if (!buf) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: buffer record");
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS)
        buf->mem = clCreateBuffer(b->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CHECK(cl_check(b, err, "clCreateBuffer(%zu bytes)", bytes));
    buf->head.bytes = bytes;
    *out = buf;
    buf = NULL;
cleanup:
    free(buf);
    return st;
}

static void cl_buffer_free(void *ctx, clinfer_buffer *buf) {
    if (!buf) return;
    cl_moe_wrote(ctx, buf, NULL);
    cl_q8_side_free(buf);
    if (buf->weight) cl_weight_free(buf->weight);
    if (buf->mem) clReleaseMemObject(buf->mem);
    free(buf);
}

/* The end of a wait for the queue: a graph launch that stalled fails it; a decode step left
 * running (cl_plan_run) ends here. */
static clinfer_status waited(cl_backend_ctx *b, clinfer_status st) {
    if (st == CLINFER_OK) st = cl_graph_check(b);
    if (st != CLINFER_OK) {
        cl_route_drop(&b->route);
        return st;
    }
    int pick = b->route.running_route;
    if (cl_route_end(&b->route, clock_now_ms()))
        cl_verbose("decode steps now in %s: a step took %.2f ms there, %.2f ms in %s (median)",
                   pick == ROUTE_GRAPH ? "one graph launch" : "per-op launches",
                   cl_route_median(&b->route, pick), cl_route_median(&b->route, !pick),
                   pick == ROUTE_GRAPH ? "per-op launches" : "graph launches");
    return st;
}

/* The queue done, and no graph launch stalled. */
static clinfer_status cl_backend_sync(void *ctx) {
    return waited(ctx, cl_sync(ctx));
}

/* Before an enqueue other than the read that ends a running decode step: the step is waited for
 * first, so that its time is its own. */
static clinfer_status settle(cl_backend_ctx *b) {
    return b->route.running ? cl_backend_sync(b) : CLINFER_OK;
}

static clinfer_status write_buffer(cl_backend_ctx *b, clinfer_buffer *buf, size_t offset,
                                   size_t bytes, const void *src, cl_bool blocking) {
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = op_check_transfer("OpenCL buffer write", buf, offset, bytes, src);
    if (st == CLINFER_OK) st = settle(b);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_moe_wrote(b, buf, NULL);
    return cl_check(
        b, clEnqueueWriteBuffer(b->queue, buf->mem, blocking, offset, bytes, src, 0, NULL, NULL),
        "clEnqueueWriteBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      const void *src) {
    return write_buffer(ctx, buf, offset, bytes, src, CL_TRUE);
}

static clinfer_status cl_buffer_write_queued(void *ctx, clinfer_buffer *buf, size_t offset,
                                             size_t bytes, const void *src) {
    return write_buffer(ctx, buf, offset, bytes, src, CL_FALSE);
}

static clinfer_status cl_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                     void *dst) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = op_check_transfer("OpenCL buffer read", buf, offset, bytes, dst);
    if (st != CLINFER_OK || bytes == 0) return st;
    st = cl_check(
        b, clEnqueueReadBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL),
        "clEnqueueReadBuffer(%zu bytes at %zu)", bytes, offset);
    return waited(b, st); /* the queue is done up to the read */
}

static clinfer_status cl_buffer_copy(void *ctx, clinfer_buffer *src, size_t src_offset,
                                     clinfer_buffer *dst, size_t dst_offset, size_t bytes) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK)
        st = op_check_copy("OpenCL buffer copy", src, src_offset, dst, dst_offset, bytes);
    if (st == CLINFER_OK) st = settle(b);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_moe_wrote(b, dst, NULL);
    cl_int err = clEnqueueCopyBuffer(b->queue, src->mem, dst->mem, src_offset, dst_offset, bytes, 0,
                                     NULL, NULL);
    return cl_check(b, err, "clEnqueueCopyBuffer(%zu bytes from %zu to %zu)", bytes, src_offset,
                    dst_offset);
}

static clinfer_status cl_weight_create_i(void *ctx, clinfer_dtype type, int m, int k,
                                         const void *data, clinfer_buffer **out) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    st = cl_weight_create(b, type, m, k, data, out);
    cl_note_lost(b, st);
    return st;
}

static void cl_host_data_i(void *ctx, const void *base, size_t size) {
    cl_weight_host_data(ctx, base, size);
}

static bool cl_weight_cache_open_i(void *ctx, const void *id, size_t id_size) {
    return cl_wcache_open(ctx, id, id_size);
}

static bool cl_weight_cached_i(void *ctx, clinfer_dtype type, int m, int k) {
    return cl_check_alive(ctx) == CLINFER_OK && cl_weight_cached(ctx, type, m, k);
}

static void cl_weight_cache_close_i(void *ctx) {
    if (cl_check_alive(ctx) == CLINFER_OK)
        cl_wcache_close(ctx);
    else
        cl_wcache_free(ctx);
}

/* The test hook CLINFER_FAULT="corrupt-<op>:N:V" (fault.h): V over the op's first output, as a
 * kernel gone wrong would leave it. */
static clinfer_status corrupt_output(cl_backend_ctx *b, const clinfer_op *op) {
    char kind[32];
    snprintf(kind, sizeof kind, "corrupt-%s", op_kind_name(op->kind));
    cl_int value = cl_fault(kind);
    clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS];
    if (value == CL_SUCCESS || op_outputs(op, out) == 0 || out[0].count == 0) return CLINFER_OK;
    float f = (float)value;
    uint16_t h = f32_to_f16(f);
    bool half = out[0].type == CLINFER_DT_F16;
    size_t elem = half ? sizeof h : sizeof f;
    return cl_check(b,
                    clEnqueueFillBuffer(b->queue, out[0].ref.buf->mem, half ? (void *)&h : &f, elem,
                                        out[0].ref.offset * elem, out[0].count * elem, 0, NULL,
                                        NULL),
                    "clEnqueueFillBuffer(%s)", kind);
}

static clinfer_status cl_op(void *ctx, const clinfer_op *op) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = op_check_operands(op);
    if (st == CLINFER_OK) st = settle(b);
    if (st != CLINFER_OK) return st;
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        st = cl_matmul(b, op);
        break;
    case CLINFER_OP_EMBED:
        st = cl_embed(b, op);
        if (st == CLINFER_OK && op->embed.scale != 0.0f)
            st = cl_scale(b, op->embed.y, op->embed.y, (size_t)op->embed.n * (size_t)op->embed.k,
                          op->embed.scale, 0.0f);
        break;
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        st = cl_op_norm(b, op);
        break;
    case CLINFER_OP_ROPE:
        st = cl_op_rope(b, op);
        break;
    case CLINFER_OP_STORE:
        st = cl_op_store(b, op);
        break;
    case CLINFER_OP_ATTENTION:
        st = cl_op_attention(b, op, NULL);
        break;
    case CLINFER_OP_ROUND_Q8:
        st = cl_op_round_q8(b, op);
        break;
    case CLINFER_OP_MOE_ROUTE:
    case CLINFER_OP_MATMUL_ID:
    case CLINFER_OP_MOE_SUM:
        st = cl_op_moe(b, op);
        break;
    case CLINFER_OP_ADD:
    case CLINFER_OP_GELU:
    case CLINFER_OP_SWIGLU:
    case CLINFER_OP_GEGLU:
    case CLINFER_OP_SWIGLU_OAI:
        st = cl_op_eltwise(b, op);
        break;
    case CLINFER_OP_SCALE:
        st = cl_scale(b, op->eltwise.a, op->eltwise.y, op->eltwise.count, op->eltwise.scale,
                      op->eltwise.cap);
        break;
    default:
        st = err_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: unknown op kind %d", (int)op->kind);
    }
    if (st == CLINFER_OK) st = corrupt_output(b, op);
    cl_moe_wrote(b, NULL, op);
    cl_note_lost(b, st);
    return st;
}

/* The ops at the head of ops[0 .. n) that one launch can run with the results of their own: a
 * matmul and the RMSNORM of its output (and the ROUND_Q8 of the norm's y), or an op and the
 * ROUND_Q8 of its output. Ops that fail their check are left to cl_op, which reports them. */
static clinfer_status fused_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, size_t *taken) {
    size_t len = n < 3 ? n : 3;
    for (size_t i = 0; i < len; i++)
        if (op_check_operands(&ops[i]) != CLINFER_OK) len = i;
    if (len < 2) return CLINFER_OK;
    const clinfer_op *next = &ops[1], *round = len > 2 ? &ops[2] : NULL;
    switch (ops[0].kind) {
    case CLINFER_OP_MATMUL:
        if (next->kind != CLINFER_OP_RMSNORM) return CLINFER_OK;
        if (round && round->kind != CLINFER_OP_ROUND_Q8) round = NULL;
        return cl_matmul_norm(b, &ops[0], next, round, taken);
    case CLINFER_OP_ATTENTION:
        if (next->kind != CLINFER_OP_ROUND_Q8 || !cl_attention_rounds(b, &ops[0], next))
            return CLINFER_OK;
        *taken = 2;
        return cl_op_attention(b, &ops[0], next);
    default:
        if (!cl_round_fusable(&ops[0], next)) return CLINFER_OK;
        *taken = 2;
        return cl_rounding_op(b, &ops[0], next);
    }
}

/* A run of ops in one launch of graph.cl where the device can, else the fusions of fused_run. */
static clinfer_status cl_op_run(void *ctx, const clinfer_op *ops, size_t n, size_t *taken) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    *taken = 0;
    if (st == CLINFER_OK) st = settle(b);
    if (st == CLINFER_OK && ops) st = cl_graph_run(b, ops, n, taken);
    if (st == CLINFER_OK && *taken == 0 && ops) st = fused_run(b, ops, n, taken);
    /* the fault hook sees an op that rounds its output as cl_op's ops (the rounding keeps the
     * values it was made from) */
    if (st == CLINFER_OK && *taken == 2 && ops[1].kind == CLINFER_OP_ROUND_Q8)
        st = corrupt_output(b, &ops[0]);
    for (size_t i = 0; ops && i < *taken; i++)
        cl_moe_wrote(b, NULL, &ops[i]);
    cl_note_lost(b, st);
    return st;
}

/* ---- plans (backend.h's plan_create .. plan_free) ------------------------------------------ */

typedef struct {
    bool decode; /* one token's step with its logits: route picks graph or per-op launches */
} cl_plan;

static clinfer_status cl_plan_create(void *ctx, const clinfer_op *ops, size_t n, bool decode,
                                     bool kept, void **out) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = cl_q8_check_walk(ops, n);
    if (st != CLINFER_OK) return st;
    cl_plan *p = calloc(1, sizeof *p);
    if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: plan");
    p->decode = decode;
    /* A kept decode step's graph programs now, so that none compiles while the first answer
     * streams (a batch layout's plan, made for one step, would encode its walk twice). Where a
     * run ends, the next op may start one: as plan_run tries it, or a program whose weight types
     * cover it. */
    for (size_t i = 0; decode && kept && i < n;) {
        size_t len = cl_graph_prepare(b, ops + i, n - i);
        i += len ? len : 1;
    }
    *out = p;
    return CLINFER_OK;
}

/* A decode step takes the route's pick and is timed until the read of its output (waited: a
 * switch of route is logged, CLINFER_VERBOSE); a profiled one (hooks) is not timed for it. */
static clinfer_status cl_plan_run(void *ctx, void *plan, const clinfer_op *ops, size_t n,
                                  const clinfer_run_hooks *hooks) {
    cl_backend_ctx *b = ctx;
    const cl_plan *p = plan;
    clinfer_status st = settle(b);
    if (st != CLINFER_OK) return st;
    int pick = cl_route_pick(&b->route);
    bool chosen = p->decode && cl_graph_route(b, pick == ROUTE_GRAPH) && !hooks;
    double t0 = chosen ? clock_now_ms() : 0;
    for (size_t i = 0, taken = 0; i < n && st == CLINFER_OK; i += taken) {
        if (hooks) hooks->begin(hooks->user, i);
        st = cl_op_run(b, ops + i, n - i, &taken);
        if (st == CLINFER_OK && taken == 0) {
            st = cl_op(b, &ops[i]);
            taken = 1;
        }
        if (st == CLINFER_OK && hooks) st = hooks->end(hooks->user, i, taken);
        if (st != CLINFER_OK) err_prefix("op %zu (%s)", i, op_kind_name(ops[i].kind));
    }
    if (chosen && st == CLINFER_OK) cl_route_start(&b->route, pick, t0);
    return st;
}

static void cl_plan_free(void *ctx, void *plan) {
    (void)ctx;
    free(plan);
}

static clinfer_status cl_supports_op(void *ctx, const clinfer_op *op) {
    (void)ctx;
    switch (op->kind) {
    case CLINFER_OP_ATTENTION:
        return cl_attention_limits(op);
    case CLINFER_OP_ROUND_Q8:
        return cl_round_q8_limits(op);
    case CLINFER_OP_MATMUL_ID:
        return cl_moe_limits(op);
    default:
        return cl_matmul_limits(op);
    }
}

static const char *cl_name(void *ctx) {
    (void)ctx;
    return "opencl";
}

static const char *cl_describe(void *ctx) {
    cl_backend_ctx *b = ctx;
    return b->description;
}

static void cl_destroy(void *ctx) {
    cl_backend_ctx *b = ctx;
    if (!b) return;
    if (b->queue) {
        clFinish(b->queue);
        cl_turn_leave(b);
    }
    for (size_t i = 0; i < b->timing.n; i++)
        clReleaseEvent(b->timing.launches[i].event);
    free(b->timing.launches);
    cl_graph_free(b);
    cl_moe_free(b);
    cl_matmul_free(b);
    cl_act_free(b);
    cl_store_free(b);
    cl_types_free(b);
    cl_ops_free(b->ops);
    if (b->queue) clReleaseCommandQueue(b->queue);
    if (b->owns_shared) cl_shared_free(b->shared);
    if (b->context) clReleaseContext(b->context);
    if (b->sub_device) clReleaseDevice(b->sub_device);
    free(b);
}

static clinfer_status cl_instance(void *ctx, clinfer_backend **out);

static uint64_t cl_memory(void *ctx) {
    const cl_backend_ctx *b = ctx;
    return b->info.global_mem;
}

static bool cl_int8_dots(void *ctx) {
    return cl_types_int8_dots(ctx);
}

static const clinfer_backend_i cl_interface = {
    .api_version = CLINFER_BACKEND_API,
    .name = cl_name,
    .describe = cl_describe,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_copy = cl_buffer_copy,
    .weight_create = cl_weight_create_i,
    .op = cl_op,
    .sync = cl_backend_sync,
    .destroy = cl_destroy,
    .timing_mark = cl_timing_mark,
    .op_run = cl_op_run,
    .timing_collect = cl_timing_collect,
    .instance = cl_instance,
    .memory = cl_memory,
    .host_data = cl_host_data_i,
    .plan_create = cl_plan_create,
    .plan_run = cl_plan_run,
    .plan_free = cl_plan_free,
    .supports_op = cl_supports_op,
    .weight_cache_open = cl_weight_cache_open_i,
    .weight_cached = cl_weight_cached_i,
    .weight_cache_close = cl_weight_cache_close_i,
    .int8_dots = cl_int8_dots,
    .buffer_write_queued = cl_buffer_write_queued,
};

/* What a backend and its instances each have: a queue (timing kernels where a context made now
 * would profile: src/profile.h) and the kernels and scratch of every op family. b has its device,
 * context and programs; on failure the caller destroys b. */
static clinfer_status open_queue(cl_backend_ctx *b, clinfer_backend **out) {
    clinfer_status st = CLINFER_OK;
    cl_int err;
    clinfer_backend *backend = calloc(1, sizeof *backend);
    if (!backend) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: backend");
    bool table;
    const char *trace;
    options_profiling(b->options.profile, &table, &trace);
    b->timing.enabled = table || trace;
    b->queue = clCreateCommandQueue(b->context, b->device,
                                    b->timing.enabled ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    CHECK(cl_check(b, err, "clCreateCommandQueue(%s)", b->info.name));
    cl_route_init(&b->route);
    CHECK(cl_ops_init(b));
    CHECK(cl_types_init(b));
    CHECK(cl_store_init(b));
    CHECK(cl_act_init(b));
    CHECK(cl_matmul_init(b));
    CHECK(cl_graph_init(b));
    CHECK(cl_moe_init(b));
    backend->i = &cl_interface;
    backend->ctx = b;
    *out = backend;
    return CLINFER_OK;
cleanup:
    free(backend);
    return st;
}

/* The root's device, context, options and programs, with a queue of its own. */
static clinfer_status cl_instance(void *ctx, clinfer_backend **out) {
    const cl_backend_ctx *root = ctx;
    if (!out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: NULL output handle");
    *out = NULL;
    clinfer_status st = cl_check_alive(root);
    if (st != CLINFER_OK) return st;
    cl_backend_ctx *b = calloc(1, sizeof *b);
    if (!b) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: backend context");
    b->platform = root->platform;
    b->device = root->device;
    b->info = root->info;
    b->path = root->path;
    memcpy(b->description, root->description, sizeof b->description);
    b->options = root->options;
    memcpy(b->cache_dir, root->cache_dir, sizeof b->cache_dir);
    if (b->options.cache_dir) b->options.cache_dir = b->cache_dir;
    b->shared = root->shared;
    b->context = root->context;
    clRetainContext(b->context);
    if ((st = open_queue(b, out)) != CLINFER_OK) {
        cl_destroy(b);
        return st;
    }
    /* the kernels of the root's weight types, as the root made them when it made the weights */
    for (int t = 0; st == CLINFER_OK && t < CLINFER_DT_ID_LIMIT; t++)
        if (root->types->types[t].program) st = cl_build_type(b, (clinfer_dtype)t);
    if (st != CLINFER_OK) {
        backend_free(*out);
        *out = NULL;
    }
    return st;
}

/* Profiling events need a queue created for them: done where the profiler is asked for
 * (src/profile.h) when the backend is created. */
clinfer_status cl_backend_create(size_t device_index, const clinfer_backend_options *options,
                                 clinfer_backend **out) {
    clinfer_status st = CLINFER_OK;
    cl_int err;
    if (!out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: NULL output handle");
    *out = NULL;
    cl_backend_ctx *b = calloc(1, sizeof *b);
    if (!b) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: backend context");
    CHECK(cl_shared_create(&b->shared));
    b->owns_shared = true;
    CHECK(options_resolve(options, &b->options));
    if (b->options.cache_dir) {
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s", b->options.cache_dir);
        b->options.cache_dir = b->cache_dir;
    }
    CHECK(cl_device_handles(device_index, &b->platform, &b->device));
    CHECK(cl_device_get_info(device_index, b->options.kernel_path, &b->info, &b->path));
    CHECK(cl_use_threads(b));
    b->context = clCreateContext(NULL, 1, &b->device, NULL, NULL, &err);
    CHECK(cl_check(b, err, "clCreateContext(%s)", b->info.name));
    CHECK(cl_check_loops(b));
    char threads[32] = "";
    if (b->sub_device)
        snprintf(threads, sizeof threads, ", %u thread%s", b->info.compute_units,
                 b->info.compute_units == 1 ? "" : "s");
    snprintf(b->description, sizeof b->description, "OpenCL: %s (%s, %s%s)", b->info.name,
             b->info.vendor == CLINFER_VENDOR_POCL ? "PoCL" : b->info.platform, b->info.kernel_path,
             threads);
    CHECK(open_queue(b, out));
    return CLINFER_OK;
cleanup:
    cl_destroy(b);
    return st;
}
