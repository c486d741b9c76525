/* What every OpenCL file launches through: kernel arguments and the enqueue (cl_launch), errors
 * turned into statuses (cl_check: a device or queue that is gone marks the context lost, and
 * every later call returns CLINFER_ERR_DEVICE_LOST; cl_error for setup), buffers, sync, and the
 * kernel timing hooks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cl_backend.h"
#include "device.h"
#include "error.h"
#include "fault.h"

clinfer_status cl_error(cl_int err, const char *what) {
    if (err == CL_SUCCESS) return CLINFER_OK;
    return err_fail(err, "OpenCL: %s failed: %s (%d)", what, clinfer_status_str(err), err);
}

clinfer_status cl_create_buffer(cl_backend_ctx *b, cl_mem_flags flags, size_t bytes, void *host,
                                cl_mem *out) {
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS) *out = clCreateBuffer(b->context, flags, bytes, host, &err);
    if (err != CL_SUCCESS)
        return err_fail(err, "OpenCL: clCreateBuffer(%zu bytes) failed: %s (%d)", bytes,
                        clinfer_status_str(err), err);
    return CLINFER_OK;
}

/* Kernels still queued on a released buffer keep it alive until they finish. */
clinfer_status cl_ensure_scratch(cl_backend_ctx *b, scratch *sc, size_t bytes) {
    if (sc->bytes >= bytes) return CLINFER_OK;
    if (sc->mem) clReleaseMemObject(sc->mem);
    sc->mem = NULL;
    sc->bytes = 0;
    clinfer_status st = cl_create_buffer(b, CL_MEM_READ_WRITE, bytes, NULL, &sc->mem);
    if (st == CLINFER_OK) sc->bytes = bytes;
    return st;
}

void cl_note_lost(cl_backend_ctx *b, clinfer_status st) {
    if (st != CL_OUT_OF_RESOURCES && st != CL_INVALID_COMMAND_QUEUE) return;
    pthread_mutex_lock(&b->shared->lock);
    if (!b->shared->lost) {
        b->shared->lost = true;
        snprintf(b->shared->lost_reason, sizeof b->shared->lost_reason, "%s", clinfer_last_error());
    }
    pthread_mutex_unlock(&b->shared->lock);
}

clinfer_status cl_check(cl_backend_ctx *b, cl_int err, const char *fmt, ...) {
    if (err == CL_SUCCESS) return CLINFER_OK;
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    err_fail(err, "OpenCL: %s failed: %s (%d)", what, clinfer_status_str(err), err);
    cl_note_lost(b, err);
    return err;
}

clinfer_status cl_check_alive(const cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    pthread_mutex_lock(&b->shared->lock);
    if (b->shared->lost)
        st = err_fail(CLINFER_ERR_DEVICE_LOST,
                      "OpenCL: the device failed earlier (%s); create a new backend",
                      b->shared->lost_reason);
    pthread_mutex_unlock(&b->shared->lock);
    return st;
}

/* ---- turns: one queue's kernels in flight at a time on PoCL's CPU driver -------------------- */

/* PoCL 3.1's CPU driver (Debian bookworm's) keeps one loaded copy of a kernel per work-group size
 * and grid width; a launch takes the first copy wide enough and moves it to the front of the
 * list, but its end releases the first copy of that size in the list, whichever width. With
 * launches of one kernel in flight from two queues at once (two contexts or two models decoding
 * at the same time), the wrong copy's count drops below zero and PoCL aborts the process
 * (`found->ref_count > 0` in pocl_release_dlhandle_cache; test_contexts hit it about 1 run in 20).
 * So on PoCL CPU devices the process lets one queue at a time have kernels in flight: a queue
 * that wants its turn first waits for the holder's queue to finish. Costs nothing to one context
 * alone (each kernel there runs on every core anyway); only switching queues waits. */
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static cl_command_queue turn_queue; /* the queue that may have kernels in flight; NULL: none */
static unsigned long turn_launches; /* launches into turn_queue so far */

static bool takes_turns(const cl_backend_ctx *b) {
    return cl_device_is_pocl_cpu(&b->info);
}

void cl_turn_begin(cl_backend_ctx *b) {
    if (!takes_turns(b)) return;
    pthread_mutex_lock(&turn_lock);
    while (turn_queue && turn_queue != b->queue) {
        /* finished with no launch into it since: its kernels are done, the turn is free */
        cl_command_queue holder = turn_queue;
        unsigned long launches = turn_launches;
        clRetainCommandQueue(holder);
        pthread_mutex_unlock(&turn_lock);
        clFinish(holder); /* its errors are its owner's to see */
        clReleaseCommandQueue(holder);
        pthread_mutex_lock(&turn_lock);
        if (turn_queue == holder && turn_launches == launches) turn_queue = NULL;
    }
    turn_queue = b->queue;
}

void cl_turn_end(cl_backend_ctx *b) {
    if (!takes_turns(b)) return;
    turn_launches++;
    pthread_mutex_unlock(&turn_lock);
}

void cl_turn_leave(cl_backend_ctx *b) {
    if (!takes_turns(b)) return;
    pthread_mutex_lock(&turn_lock);
    if (turn_queue == b->queue) turn_queue = NULL;
    pthread_mutex_unlock(&turn_lock);
}

/* ---- launches ------------------------------------------------------------------------------ */

void cl_ref_args(const clinfer_ref *refs, size_t n, cl_ulong *offs, cl_arg *args) {
    for (size_t i = 0; i < n; i++) {
        offs[i] = refs[i].offset;
        args[2 * i] = CL_ARG(refs[i].buf->mem);
        args[2 * i + 1] = CL_ARG(offs[i]);
    }
}

clinfer_status cl_launch(cl_backend_ctx *b, cl_kernel kernel, const char *name, const cl_arg *args,
                         size_t n_args, cl_uint dims, const size_t *global, const size_t *local) {
    clinfer_status st = CLINFER_OK;
    for (size_t i = 0; i < n_args; i++)
        CHECK(cl_check(b, clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value),
                       "clSetKernelArg(%s, %zu)", name, i));
    cl_event event = NULL;
    cl_int err = cl_fault("enqueue");
    if (err == CL_SUCCESS) {
        cl_turn_begin(b);
        err = clEnqueueNDRangeKernel(b->queue, kernel, dims, NULL, global, local, 0, NULL,
                                     cl_timing_slot(b, &event));
        cl_turn_end(b);
    }
    CHECK(cl_check(b, err, "clEnqueueNDRangeKernel(%s)", name));
    CHECK(cl_timing_keep(b, event));
cleanup:
    return st;
}

clinfer_status cl_sync(void *ctx) {
    cl_backend_ctx *b = ctx;
    clinfer_status st = cl_check_alive(b);
    if (st != CLINFER_OK) {
        /* lost, the queue may still hold writes from host memory its caller frees next */
        clFinish(b->queue);
        return st;
    }
    return cl_check(b, clFinish(b->queue), "clFinish");
}

/* ---- kernel timing --------------------------------------------------------------------- */

clinfer_status cl_timing_keep(cl_backend_ctx *b, cl_event event) {
    cl_timing *t = &b->timing;
    if (!event) return CLINFER_OK;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        cl_timed_launch *grown = realloc(t->launches, cap * sizeof *grown);
        if (!grown) {
            clReleaseEvent(event);
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: %zu profiling events", cap);
        }
        t->launches = grown;
        t->cap = cap;
    }
    t->launches[t->n++] = (cl_timed_launch){event, t->op};
    return CLINFER_OK;
}

bool cl_timing_mark(void *ctx, size_t op_index) {
    cl_backend_ctx *b = ctx;
    b->timing.recording = b->timing.enabled;
    b->timing.op = op_index;
    return b->timing.enabled;
}

/* Adds one launch's START and END (ns) to its op's record. */
static void add_launch(cl_timing *t, clinfer_op_timing *o, cl_ulong start, cl_ulong end) {
    if (!t->origin) t->origin = start;
    /* signed: an event queued before the first one collected may start earlier */
    double s = (double)(cl_long)(start - t->origin) / 1e6,
           e = (double)(cl_long)(end - t->origin) / 1e6;
    o->ms += e - s;
    if (!o->launches || s < o->start) o->start = s;
    if (!o->launches || e > o->end) o->end = e;
    o->launches++;
}

clinfer_status cl_timing_collect(void *ctx, clinfer_op_timing *ops, size_t n_ops) {
    cl_backend_ctx *b = ctx;
    cl_timing *t = &b->timing;
    clinfer_status st = cl_sync(b);
    for (size_t i = 0; i < n_ops; i++)
        ops[i] = (clinfer_op_timing){0};
    for (size_t i = 0; i < t->n; i++) {
        cl_ulong start = 0, end = 0;
        cl_event e = t->launches[i].event;
        if (st == CLINFER_OK)
            st = cl_check(
                b,
                clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL),
                "clGetEventProfilingInfo(START)");
        if (st == CLINFER_OK)
            st = cl_check(
                b, clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL),
                "clGetEventProfilingInfo(END)");
        if (st == CLINFER_OK && t->launches[i].op < n_ops)
            add_launch(t, &ops[t->launches[i].op], start, end);
        clReleaseEvent(e);
    }
    t->n = 0;
    t->recording = false;
    return st;
}
