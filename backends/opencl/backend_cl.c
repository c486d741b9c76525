/* The OpenCL backend: context and queue, buffers, the interface and op dispatch (the ops live
 * in ops_cl.c and attention_cl.c, matmul and embedding in matmul_cl.c), and the instances that
 * share a context and its programs. Kernels are enqueued on one in-order queue per instance
 * without waiting (on PoCL's CPU driver, queues take turns: launch_cl.c); sync is the only
 * clFinish. OpenCL errors pass through as the status; after
 * CL_OUT_OF_RESOURCES or CL_INVALID_COMMAND_QUEUE the device is marked lost for the backend and
 * its instances, and every later call returns CLINFER_ERR_DEVICE_LOST. */
#include "cl_backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "opencl/device.h"
#include "opencl/fault.h"
#include "opencl/graph_cl.h"
#include "opencl/matmul_cl.h"
#include "opencl/ops_cl.h"
#include "opencl/program.h"
#include "options.h"

/* options.threads of a CPU device: a sub-device of that many compute units, which the backend
 * and its instances run on (the root releases it). */
static clinfer_status use_threads(cl_backend_ctx *b) {
    cl_uint n = b->options.threads;
    if (!n || b->info.type != CLINFER_DEVICE_CPU || n >= b->info.compute_units) return CLINFER_OK;
    const cl_device_partition_property by_counts[] = {CL_DEVICE_PARTITION_BY_COUNTS, n,
                                                      CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
    cl_device_id sub = NULL;
    cl_uint got = 0;
    cl_int err = clCreateSubDevices(b->device, by_counts, 1, &sub, &got);
    if (err != CL_SUCCESS || got != 1)
        return err_fail(err != CL_SUCCESS ? err : CLINFER_ERR_UNSUPPORTED,
                        "OpenCL: %u threads of '%s' (a sub-device of %u compute units): %s", n,
                        b->info.name, n, clinfer_status_str(err));
    b->device = b->sub_device = sub;
    b->info.compute_units = n;
    return CLINFER_OK;
}

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
    cl_act_forget(ctx); /* a new buffer may reuse the handle */
    if (buf->weight) cl_weight_free(buf->weight);
    if (buf->mem) clReleaseMemObject(buf->mem);
    free(buf);
}

static clinfer_status cl_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      const void *src) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = op_check_transfer("OpenCL buffer write", buf, offset, bytes, src);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_act_forget(b);
    return cl_check(
        b, clEnqueueWriteBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL),
        "clEnqueueWriteBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                     void *dst) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = op_check_transfer("OpenCL buffer read", buf, offset, bytes, dst);
    if (st != CLINFER_OK || bytes == 0) return st;
    return cl_check(
        b, clEnqueueReadBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL),
        "clEnqueueReadBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_buffer_copy(void *ctx, clinfer_buffer *src, size_t src_offset,
                                     clinfer_buffer *dst, size_t dst_offset, size_t bytes) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK)
        st = op_check_copy("OpenCL buffer copy", src, src_offset, dst, dst_offset, bytes);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_act_forget(b); /* as a write: dst may hold a matmul's remembered x */
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
    cl_act_forget(b); /* a rounded copy the op kept of its output no longer matches it */
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
    if (st != CLINFER_OK) return st;
    if (op->kind != CLINFER_OP_MATMUL) cl_act_forget(b); /* it may write a matmul's x */
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        st = cl_matmul(b, op);
        break;
    case CLINFER_OP_EMBED:
        st = cl_embed(b, op);
        if (st == CLINFER_OK && op->embed.scale != 0.0f)
            st = cl_scale(b, op->embed.y, (size_t)op->embed.n * (size_t)op->embed.k,
                          op->embed.scale);
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
        st = cl_op_attention(b, op);
        break;
    case CLINFER_OP_ADD:
    case CLINFER_OP_GELU:
    case CLINFER_OP_SWIGLU:
    case CLINFER_OP_GEGLU:
        st = cl_op_eltwise(b, op);
        break;
    default:
        st = err_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: unknown op kind %d", (int)op->kind);
    }
    if (st == CLINFER_OK) st = corrupt_output(b, op);
    cl_note_lost(b, st);
    return st;
}

/* A run of ops in one launch of graph.cl where the device can, else a matmul and the RMSNORM of
 * its output in one launch where the matmul's kernel can end with it. */
static clinfer_status cl_op_run(void *ctx, const clinfer_op *ops, size_t n, size_t *taken) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    *taken = 0;
    if (st == CLINFER_OK && ops) st = cl_graph_run(b, ops, n, taken);
    if (st == CLINFER_OK && *taken == 0 && n >= 2 && ops[0].kind == CLINFER_OP_MATMUL &&
        ops[1].kind == CLINFER_OP_RMSNORM && op_check_operands(&ops[0]) == CLINFER_OK &&
        op_check_operands(&ops[1]) == CLINFER_OK) {
        bool fused;
        st = cl_matmul_norm(b, &ops[0], &ops[1], &fused);
        *taken = fused ? 2 : 0;
    }
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

/* A decode step of route pick took from t0 to now (the caller reads its logits next, so the wait
 * costs nothing); a switch of route is logged (CLINFER_VERBOSE). */
static clinfer_status route_done(cl_backend_ctx *b, int pick, double t0) {
    clinfer_status st = cl_sync(b);
    if (st != CLINFER_OK || !cl_route_record(&b->route, pick, clock_now_ms() - t0)) return st;
    cl_verbose("decode steps now in %s: a step took %.2f ms there, %.2f ms in %s (median)",
               pick == ROUTE_GRAPH ? "one graph launch" : "per-op launches",
               cl_route_median(&b->route, pick), cl_route_median(&b->route, !pick),
               pick == ROUTE_GRAPH ? "per-op launches" : "graph launches");
    return st;
}

/* A decode step takes the route's pick; a profiled one (hooks) is not timed for it. */
static clinfer_status cl_plan_run(void *ctx, void *plan, const clinfer_op *ops, size_t n,
                                  const clinfer_run_hooks *hooks) {
    cl_backend_ctx *b = ctx;
    const cl_plan *p = plan;
    int pick = cl_route_pick(&b->route);
    bool chosen = p->decode && cl_graph_route(b, pick == ROUTE_GRAPH) && !hooks;
    double t0 = chosen ? clock_now_ms() : 0;
    clinfer_status st = CLINFER_OK;
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
    if (chosen && st == CLINFER_OK) st = route_done(b, pick, t0);
    return st;
}

static void cl_plan_free(void *ctx, void *plan) {
    (void)ctx;
    free(plan);
}

static clinfer_status cl_supports_op(void *ctx, const clinfer_op *op) {
    (void)ctx;
    return op->kind == CLINFER_OP_ATTENTION ? cl_attention_limits(op) : cl_matmul_limits(op);
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
    .sync = cl_sync,
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
    CHECK(use_threads(b));
    b->context = clCreateContext(NULL, 1, &b->device, NULL, NULL, &err);
    CHECK(cl_check(b, err, "clCreateContext(%s)", b->info.name));
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
