/* What a device takes before the backend builds its first kernel: a sub-device of the threads
 * asked for, and the loop probe that moves a device cutting loops short off cpu-rows. */
#include "cl_backend.h"

#include <stdio.h>

#include "error.h"
#include "log.h"
#include "opencl/fault.h"
#include "opencl/program.h"
#include "options.h"

/* options.threads of a CPU device: a sub-device of that many compute units, which the backend
 * and its instances run on (the root releases it). */
clinfer_status cl_use_threads(cl_backend_ctx *b) {
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

/* Whether every loop of a work-item runs to its end. Mesa's llvmpipe (rusticl 22.3; gallivm's
 * LP_MAX_TGSI_LOOP_ITERATIONS) gives a work-item 65535 loop iterations in all, shared by all its
 * loops, after which each loop ends at the end of its pass, silently: the cpu-rows kernels, where a
 * work-item takes whole rows and column tiles (gemm_panels: every column tile of its panels over
 * all of k), lose the rest of their sums (docs/DEVICES.md). The probe runs one loop of
 * LOOP_PROBE_N steps of a recurrence without closed form and counts them; *cut is the count where
 * it fell short, else 0. */
enum { LOOP_PROBE_N = 1 << 17 };

static clinfer_status loop_probe(cl_backend_ctx *b, unsigned *cut) {
    static const char src[] = "__kernel void loop_probe(__global uint *out, int n) {\n"
                              "    uint x = 1, i = 0;\n"
                              "    for (; i < (uint)n; i++) x = x * 1664525u + 1013904223u;\n"
                              "    out[0] = i;\n"
                              "    out[1] = x;\n"
                              "}\n";
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_command_queue queue = NULL;
    cl_mem out = NULL;
    cl_uint got[2] = {0, 0}, want = 1;
    int n = LOOP_PROBE_N;
    size_t one = 1;
    for (int i = 0; i < n; i++)
        want = want * 1664525u + 1013904223u;
    CHECK(cl_program_build_source(b->context, b->device, &b->info, b->cache_dir, "loop_probe", src,
                                  NULL, &program));
    kernel = clCreateKernel(program, "loop_probe", &err);
    CHECK(cl_check(b, err, "clCreateKernel(loop_probe)"));
    queue = clCreateCommandQueue(b->context, b->device, 0, &err);
    CHECK(cl_check(b, err, "clCreateCommandQueue(%s)", b->info.name));
    out = clCreateBuffer(b->context, CL_MEM_READ_WRITE, sizeof got, NULL, &err);
    CHECK(cl_check(b, err, "clCreateBuffer(loop_probe)"));
    err = clSetKernelArg(kernel, 0, sizeof out, &out);
    if (err == CL_SUCCESS) err = clSetKernelArg(kernel, 1, sizeof n, &n);
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &one, &one, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(queue, out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL);
    CHECK(cl_check(b, err, "the loop probe on %s", b->info.name));
    cl_int fake = cl_fault("loop-cut"); /* tests: a device that stops after that many */
    if (fake > 0 && (cl_uint)fake < got[0]) got[0] = (cl_uint)fake;
    *cut = got[0] == (cl_uint)n && got[1] == want ? 0 : got[0] ? got[0] : 1;
cleanup:
    if (out) clReleaseMemObject(out);
    if (queue) clReleaseCommandQueue(queue);
    if (kernel) clReleaseKernel(kernel);
    if (program) clReleaseProgram(program);
    return st;
}

/* cpu-rows on a device whose loops are cut short (loop_probe) computes garbage; unless the path
 * was asked for, the device takes gpu-local-reduce, whose work-items each take a share of a
 * row or tile (at most about k + k / 16 iterations: gemm_tiled), and so no graph launches. */
clinfer_status cl_check_loops(cl_backend_ctx *b) {
    unsigned cut = 0;
    if (!cl_cpu_rows(b)) return CLINFER_OK;
    clinfer_status st = loop_probe(b, &cut);
    if (st != CLINFER_OK || !cut) return st;
    if (b->options.kernel_path != CLINFER_KERNEL_PATH_DEFAULT) {
        log_msg(CLINFER_LOG_WARN,
                "OpenCL: '%s' ends a work-item's loops after %u iterations in all; the cpu-rows "
                "path, as asked, will compute wrong results",
                b->info.name, cut);
        return CLINFER_OK;
    }
    b->path = CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE;
    snprintf(b->info.kernel_path, sizeof b->info.kernel_path, "%s", kernel_path_name(b->path));
    log_msg(CLINFER_LOG_DEBUG,
            "OpenCL: '%s' ends a work-item's loops after %u iterations in all: gpu-local-reduce "
            "instead of cpu-rows",
            b->info.name, cut);
    return CLINFER_OK;
}
