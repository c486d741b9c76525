/* Fault injection on the OpenCL backend (CLINFER_FAULT="kind:N:ERR"): a failed buffer
 * allocation, program build or kernel enqueue returns the injected status; a lost device
 * (CL_OUT_OF_RESOURCES) makes every later call return CLINFER_ERR_DEVICE_LOST; the failed backend
 * frees cleanly (run under ASan or valgrind for the leak half) and a fresh backend works. A loop
 * probe that falls short moves a cpu-rows backend onto gpu-local-reduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"

#define CL_OUT_OF_RESOURCES -5
#define CL_MEM_OBJECT_ALLOCATION_FAILURE -4
#define CL_BUILD_PROGRAM_FAILURE -11

/* y = x + x = 2 * x on 16 floats; returns the op's status (after a sync when it was accepted). */
static clinfer_status double_op(clinfer_backend *b, clinfer_buffer *x, clinfer_buffer *y) {
    clinfer_op op = {.kind = CLINFER_OP_ADD};
    op.eltwise.a = op.eltwise.b = (clinfer_ref){x, 0};
    op.eltwise.y = (clinfer_ref){y, 0};
    op.eltwise.count = op.eltwise.b_count = 16;
    clinfer_status st = b->i->op(b->ctx, &op);
    return st == CLINFER_OK ? b->i->sync(b->ctx) : st;
}

/* A fresh backend computes y = 2x correctly. */
static void check_fresh_backend_works(const char *after) {
    clinfer_backend *b = NULL;
    clinfer_buffer *x = NULL, *y = NULL;
    float in[16], out[16] = {0};
    for (int i = 0; i < 16; i++)
        in[i] = (float)i - 3.5f;
    EXPECT_OK(cl_backend_create(0, NULL, &b));
    if (!b) return;
    EXPECT_OK(b->i->buffer_alloc(b->ctx, sizeof in, &x));
    EXPECT_OK(b->i->buffer_alloc(b->ctx, sizeof out, &y));
    if (x && y) {
        EXPECT_OK(b->i->buffer_write(b->ctx, x, 0, sizeof in, in));
        EXPECT_OK(double_op(b, x, y));
        EXPECT_OK(b->i->buffer_read(b->ctx, y, 0, sizeof out, out));
        for (int i = 0; i < 16; i++)
            EXPECT(out[i] == 2.0f * in[i], "after %s: y[%d] = %g, want %g", after, i, out[i],
                   2.0f * in[i]);
    }
    b->i->buffer_free(b->ctx, x);
    b->i->buffer_free(b->ctx, y);
    backend_free(b);
}

static void test_alloc_fault(void) {
    clinfer_backend *b = NULL;
    EXPECT_OK(cl_backend_create(0, NULL, &b));
    if (!b) return;
    clinfer_buffer *first = NULL, *second = NULL, *third = NULL;
    setenv("CLINFER_FAULT", "alloc:2:-4", 1);
    EXPECT_OK(b->i->buffer_alloc(b->ctx, 64, &first));
    clinfer_status st = b->i->buffer_alloc(b->ctx, 64, &second);
    EXPECT(st == CL_MEM_OBJECT_ALLOCATION_FAILURE && !second, "second alloc returned %s",
           clinfer_status_str(st));
    EXPECT(strstr(clinfer_last_error(), "clCreateBuffer"), "message: %s", clinfer_last_error());
    /* An allocation failure does not lose the device: the next one works. */
    EXPECT_OK(b->i->buffer_alloc(b->ctx, 64, &third));
    unsetenv("CLINFER_FAULT");
    b->i->buffer_free(b->ctx, first);
    b->i->buffer_free(b->ctx, third);
    backend_free(b);
    check_fresh_backend_works("an allocation failure");
}

static void test_enqueue_fault(void) {
    clinfer_backend *b = NULL;
    EXPECT_OK(cl_backend_create(0, NULL, &b));
    if (!b) return;
    clinfer_buffer *x = NULL, *y = NULL;
    EXPECT_OK(b->i->buffer_alloc(b->ctx, 64, &x));
    EXPECT_OK(b->i->buffer_alloc(b->ctx, 64, &y));
    setenv("CLINFER_FAULT", "enqueue:2:-5", 1);
    EXPECT_OK(double_op(b, x, y));
    clinfer_status st = double_op(b, x, y);
    EXPECT(st == CL_OUT_OF_RESOURCES, "second enqueue returned %s", clinfer_status_str(st));
    EXPECT(strstr(clinfer_last_error(), "clEnqueueNDRangeKernel"), "message: %s",
           clinfer_last_error());
    /* CL_OUT_OF_RESOURCES from a launch means the device is gone for this context. */
    st = double_op(b, x, y);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST, "op after the loss returned %s", clinfer_status_str(st));
    st = b->i->sync(b->ctx);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST, "sync after the loss returned %s",
           clinfer_status_str(st));
    float host[16];
    st = b->i->buffer_read(b->ctx, y, 0, sizeof host, host);
    EXPECT(st == CLINFER_ERR_DEVICE_LOST, "read after the loss returned %s",
           clinfer_status_str(st));
    unsetenv("CLINFER_FAULT");
    b->i->buffer_free(b->ctx, x);
    b->i->buffer_free(b->ctx, y);
    backend_free(b);
    check_fresh_backend_works("a lost device");
}

static void test_build_fault(void) {
    /* Counting restarts when the variable changes, so build 3 is the third of this create. */
    setenv("CLINFER_FAULT", "build:3:-11", 1);
    clinfer_backend *b = NULL;
    clinfer_status st = cl_backend_create(0, NULL, &b);
    EXPECT(st == CL_BUILD_PROGRAM_FAILURE && !b, "create with a failing build returned %s",
           clinfer_status_str(st));
    unsetenv("CLINFER_FAULT");
    backend_free(b);
    check_fresh_backend_works("a build failure");
}

/* A device that cuts a work-item's loops short (Mesa llvmpipe: 65535 iterations in all), as the
 * loop probe would see it: a backend on the cpu-rows path takes gpu-local-reduce instead, and
 * computes; one that was asked for cpu-rows keeps it; a GPU path runs no probe. */
static void test_loop_cut(void) {
    clinfer_backend *b = NULL;
    EXPECT_OK(cl_backend_create(0, NULL, &b));
    if (!b) return;
    bool cpu_rows = strstr(b->i->describe(b->ctx), ", cpu-rows") != NULL;
    backend_free(b);
    b = NULL;
    setenv("CLINFER_FAULT", "loop-cut:1:65535", 1);
    EXPECT_OK(cl_backend_create(0, NULL, &b));
    if (b) {
        const char *d = b->i->describe(b->ctx), *want = cpu_rows ? ", gpu-local-reduce" : ", gpu-";
        EXPECT(strstr(d, want), "a device that cuts loops short: '%s', want '%s'", d, want);
        backend_free(b);
    }
    check_fresh_backend_works("a loop probe that fell short");
    if (cpu_rows) {
        setenv("CLINFER_FAULT", "loop-cut:1:65534", 1); /* a new value: counting starts again */
        clinfer_backend_options o = {.kernel_path = CLINFER_KERNEL_PATH_CPU_ROWS};
        b = NULL;
        EXPECT_OK(cl_backend_create(0, &o, &b));
        EXPECT(b && strstr(b->i->describe(b->ctx), ", cpu-rows"), "cpu-rows asked for: '%s'",
               b ? b->i->describe(b->ctx) : "no backend");
        backend_free(b);
    }
    unsetenv("CLINFER_FAULT");
}

int main(void) {
    size_t count = 0;
    if (clinfer_device_count(&count) != CLINFER_OK || count == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        return 77;
    }
    test_alloc_fault();
    test_enqueue_fault();
    test_build_fault();
    test_loop_cut();
    return finish("test_cl_faults");
}
