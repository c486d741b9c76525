/* The OpenCL backend: context and queue, buffers, the interface and op dispatch (the ops live
 * in ops_cl.c and attention_cl.c, matmul and embedding in matmul_cl.c). Kernels are enqueued on one
 * in-order queue without waiting; sync is the only clFinish. OpenCL errors pass through as the
 * status; after CL_OUT_OF_RESOURCES or CL_INVALID_COMMAND_QUEUE the context is marked lost and
 * every later call returns CLINFER_ERR_DEVICE_LOST. */
#include "cl_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "opencl/device.h"
#include "opencl/fault.h"
#include "opencl/ops_cl.h"
#include "options.h"

/* ---- buffers --------------------------------------------------------------------------- */

static clinfer_status cl_buffer_alloc(void *ctx, size_t bytes, clinfer_buffer **out) {
    cl_backend_ctx *b = ctx;
    clinfer_buffer *buf = NULL;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) return st;
    *out = NULL;
    if (bytes == 0)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: buffer of 0 bytes requested");
    if (bytes > b->info.max_alloc)
        return clinfer_fail(CL_INVALID_BUFFER_SIZE,
                            "OpenCL: buffer of %zu bytes exceeds CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                            "(%llu bytes) of %s",
                            bytes, (unsigned long long)b->info.max_alloc, b->info.name);
    buf = calloc(1, sizeof *buf);
    if (!buf) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: buffer record");
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
    cl_matmul_forget(ctx); /* a new buffer may reuse the handle */
    if (buf->weight) cl_weight_free(buf->weight);
    if (buf->mem) clReleaseMemObject(buf->mem);
    free(buf);
}

static clinfer_status cl_buffer_write(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                      const void *src) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK)
        st = clinfer_transfer_check("OpenCL buffer write", buf, offset, bytes, src);
    if (st != CLINFER_OK || bytes == 0) return st;
    cl_matmul_forget(b);
    return cl_check(
        b, clEnqueueWriteBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL),
        "clEnqueueWriteBuffer(%zu bytes at %zu)", bytes, offset);
}

static clinfer_status cl_buffer_read(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                     void *dst) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK)
        st = clinfer_transfer_check("OpenCL buffer read", buf, offset, bytes, dst);
    if (st != CLINFER_OK || bytes == 0) return st;
    return cl_check(
        b, clEnqueueReadBuffer(b->queue, buf->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL),
        "clEnqueueReadBuffer(%zu bytes at %zu)", bytes, offset);
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

static clinfer_status cl_op(void *ctx, const clinfer_op *op) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st == CLINFER_OK) st = clinfer_op_check(op);
    if (st != CLINFER_OK) return st;
    if (op->kind != CLINFER_OP_MATMUL) cl_matmul_forget(b); /* it may write a matmul's x */
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        st = cl_matmul(b, op);
        break;
    case CLINFER_OP_EMBED:
        st = cl_embed(b, op);
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
        st = cl_op_eltwise(b, op);
        break;
    default:
        st =
            clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: unknown op kind %d", (int)op->kind);
    }
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
        ops[1].kind == CLINFER_OP_RMSNORM && clinfer_op_check(&ops[0]) == CLINFER_OK &&
        clinfer_op_check(&ops[1]) == CLINFER_OK) {
        bool fused;
        st = cl_matmul_norm(b, &ops[0], &ops[1], &fused);
        *taken = fused ? 2 : 0;
    }
    cl_note_lost(b, st);
    return st;
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
    if (b->queue) clFinish(b->queue);
    for (size_t i = 0; i < b->timing.n; i++)
        clReleaseEvent(b->timing.launches[i].event);
    free(b->timing.launches);
    cl_graph_free(b);
    if (b->mm) cl_matmul_free(b);
    cl_ops_free(b->ops);
    if (b->queue) clReleaseCommandQueue(b->queue);
    if (b->context) clReleaseContext(b->context);
    free(b);
}

static const clinfer_backend_i cl_interface = {
    .api_version = CLINFER_BACKEND_API,
    .name = cl_name,
    .describe = cl_describe,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .weight_create = cl_weight_create_i,
    .op = cl_op,
    .sync = cl_sync,
    .destroy = cl_destroy,
    .timing_mark = cl_timing_mark,
    .op_run = cl_op_run,
    .timing_collect = cl_timing_collect,
};

/* Profiling events need a queue created for them: done where the profiler is asked for
 * (src/profile.h) when the backend is created. */
clinfer_status clinfer_backend_opencl_create(size_t device_index,
                                             const clinfer_backend_options *options,
                                             clinfer_backend **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_backend *backend = NULL;
    cl_backend_ctx *b = NULL;
    cl_int err;
    if (!out) return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "OpenCL: NULL output handle");
    *out = NULL;
    backend = calloc(1, sizeof *backend);
    b = calloc(1, sizeof *b);
    if (!backend || !b) CHECK(clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: backend context"));
    CHECK(clinfer_options_resolve(options, &b->options));
    if (b->options.cache_dir) {
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s", b->options.cache_dir);
        b->options.cache_dir = b->cache_dir;
    }
    CHECK(cl_device_handles(device_index, &b->platform, &b->device));
    CHECK(cl_device_get_info(device_index, b->options.kernel_path, &b->info));
    b->context = clCreateContext(NULL, 1, &b->device, NULL, NULL, &err);
    CHECK(cl_check(b, err, "clCreateContext(%s)", b->info.name));
    clinfer_dev_options dev;
    clinfer_dev_options_get(&dev);
    b->timing.enabled = b->options.profile == CLINFER_ON || dev.trace;
    b->queue = clCreateCommandQueue(b->context, b->device,
                                    b->timing.enabled ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    CHECK(cl_check(b, err, "clCreateCommandQueue(%s)", b->info.name));
    snprintf(b->description, sizeof b->description, "OpenCL: %s (%s, %s)", b->info.name,
             b->info.vendor == CLINFER_VENDOR_POCL ? "PoCL" : b->info.platform,
             b->info.kernel_path);
    CHECK(cl_ops_init(b));
    CHECK(cl_matmul_init(b));
    CHECK(cl_graph_init(b));
    backend->i = &cl_interface;
    backend->ctx = b;
    *out = backend;
    return CLINFER_OK;
cleanup:
    cl_destroy(b);
    free(backend);
    return st;
}
