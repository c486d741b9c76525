/* Device layer: enumeration sees a device with sane values, status names match the CL header,
 * selection by index / type / name / environment, the kernel-path override, and the selftest
 * kernel builds through cl_program_build, runs and adds correctly. */
#define _GNU_SOURCE /* strcasestr */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "opencl/device.h"
#include "opencl/program.h"

/* Every name the CL header defines must come back for its own value. */
#define NAMED(code)                                                                                \
    { code, #code }
static const struct {
    clinfer_status code;
    const char *name;
} named_codes[] = {
    NAMED(CL_DEVICE_NOT_FOUND),
    NAMED(CL_DEVICE_NOT_AVAILABLE),
    NAMED(CL_COMPILER_NOT_AVAILABLE),
    NAMED(CL_MEM_OBJECT_ALLOCATION_FAILURE),
    NAMED(CL_OUT_OF_RESOURCES),
    NAMED(CL_OUT_OF_HOST_MEMORY),
    NAMED(CL_PROFILING_INFO_NOT_AVAILABLE),
    NAMED(CL_MEM_COPY_OVERLAP),
    NAMED(CL_IMAGE_FORMAT_MISMATCH),
    NAMED(CL_IMAGE_FORMAT_NOT_SUPPORTED),
    NAMED(CL_BUILD_PROGRAM_FAILURE),
    NAMED(CL_MAP_FAILURE),
    NAMED(CL_MISALIGNED_SUB_BUFFER_OFFSET),
    NAMED(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
    NAMED(CL_COMPILE_PROGRAM_FAILURE),
    NAMED(CL_LINKER_NOT_AVAILABLE),
    NAMED(CL_LINK_PROGRAM_FAILURE),
    NAMED(CL_DEVICE_PARTITION_FAILED),
    NAMED(CL_KERNEL_ARG_INFO_NOT_AVAILABLE),
    NAMED(CL_INVALID_VALUE),
    NAMED(CL_INVALID_DEVICE_TYPE),
    NAMED(CL_INVALID_PLATFORM),
    NAMED(CL_INVALID_DEVICE),
    NAMED(CL_INVALID_CONTEXT),
    NAMED(CL_INVALID_QUEUE_PROPERTIES),
    NAMED(CL_INVALID_COMMAND_QUEUE),
    NAMED(CL_INVALID_HOST_PTR),
    NAMED(CL_INVALID_MEM_OBJECT),
    NAMED(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR),
    NAMED(CL_INVALID_IMAGE_SIZE),
    NAMED(CL_INVALID_SAMPLER),
    NAMED(CL_INVALID_BINARY),
    NAMED(CL_INVALID_BUILD_OPTIONS),
    NAMED(CL_INVALID_PROGRAM),
    NAMED(CL_INVALID_PROGRAM_EXECUTABLE),
    NAMED(CL_INVALID_KERNEL_NAME),
    NAMED(CL_INVALID_KERNEL_DEFINITION),
    NAMED(CL_INVALID_KERNEL),
    NAMED(CL_INVALID_ARG_INDEX),
    NAMED(CL_INVALID_ARG_VALUE),
    NAMED(CL_INVALID_ARG_SIZE),
    NAMED(CL_INVALID_KERNEL_ARGS),
    NAMED(CL_INVALID_WORK_DIMENSION),
    NAMED(CL_INVALID_WORK_GROUP_SIZE),
    NAMED(CL_INVALID_WORK_ITEM_SIZE),
    NAMED(CL_INVALID_GLOBAL_OFFSET),
    NAMED(CL_INVALID_EVENT_WAIT_LIST),
    NAMED(CL_INVALID_EVENT),
    NAMED(CL_INVALID_OPERATION),
    NAMED(CL_INVALID_GL_OBJECT),
    NAMED(CL_INVALID_BUFFER_SIZE),
    NAMED(CL_INVALID_MIP_LEVEL),
    NAMED(CL_INVALID_GLOBAL_WORK_SIZE),
    NAMED(CL_INVALID_PROPERTY),
    NAMED(CL_INVALID_IMAGE_DESCRIPTOR),
    NAMED(CL_INVALID_COMPILER_OPTIONS),
    NAMED(CL_INVALID_LINKER_OPTIONS),
    NAMED(CL_INVALID_DEVICE_PARTITION_COUNT),
    NAMED(CLINFER_OK),
    NAMED(CLINFER_ERR_INVALID_ARGUMENT),
    NAMED(CLINFER_ERR_OUT_OF_MEMORY),
    NAMED(CLINFER_ERR_IO),
    NAMED(CLINFER_ERR_FORMAT),
    NAMED(CLINFER_ERR_UNSUPPORTED),
    NAMED(CLINFER_ERR_NO_PLATFORM),
    NAMED(CLINFER_ERR_BUILD),
    NAMED(CLINFER_ERR_DEVICE_LOST),
    NAMED(CLINFER_ERR_NOT_FOUND),
    NAMED(CLINFER_ERR_CONTEXT_FULL),
    NAMED(CLINFER_ERR_BUFFER_TOO_SMALL),
};
#undef NAMED

static void test_status_names(void) {
    for (size_t i = 0; i < sizeof named_codes / sizeof named_codes[0]; i++)
        EXPECT(!strcmp(clinfer_status_str(named_codes[i].code), named_codes[i].name), "%d -> %s",
               named_codes[i].code, clinfer_status_str(named_codes[i].code));
    EXPECT(strstr(clinfer_status_str(-12345), "-12345") != NULL, "unknown -> %s",
           clinfer_status_str(-12345));
}

/* Checks the fields of every device; returns the index of a CPU device or count. */
static size_t check_devices(size_t count) {
    size_t cpu = count;
    for (size_t i = 0; i < count; i++) {
        clinfer_device_info info;
        EXPECT_OK(clinfer_device_get_info(i, &info));
        printf("device %zu: %s / %s, %u CUs @ %u MHz, %llu MiB (max alloc %llu MiB), %s, %s\n", i,
               info.platform, info.name, info.compute_units, info.clock_mhz,
               (unsigned long long)(info.global_mem >> 20),
               (unsigned long long)(info.max_alloc >> 20), info.opencl_c_version, info.kernel_path);
        EXPECT(info.name[0] && info.platform[0] && info.driver_version[0], "empty strings");
        EXPECT(!strncmp(info.opencl_c_version, "OpenCL C ", 9), "'%s'", info.opencl_c_version);
        EXPECT(!strncmp(info.device_version, "OpenCL ", 7), "'%s'", info.device_version);
        EXPECT(info.compute_units >= 1, "%u compute units", info.compute_units);
        EXPECT(info.global_mem > 0 && info.max_alloc > 0 && info.max_alloc <= info.global_mem,
               "global %llu max alloc %llu", (unsigned long long)info.global_mem,
               (unsigned long long)info.max_alloc);
        EXPECT(info.local_mem > 0 && info.max_work_group_size >= 1, "local %llu wg %zu",
               (unsigned long long)info.local_mem, info.max_work_group_size);
        EXPECT(info.preferred_vector_width_float >= 1, "vec %u", info.preferred_vector_width_float);
        if (info.type == CLINFER_DEVICE_CPU) {
            EXPECT(!strcmp(info.kernel_path, "cpu-rows"), "CPU path %s", info.kernel_path);
            if (cpu == count) cpu = i;
        } else {
            EXPECT(!strncmp(info.kernel_path, "gpu-", 4), "path %s", info.kernel_path);
        }
        if (strstr(info.platform, "Portable Computing Language"))
            EXPECT(info.vendor == CLINFER_VENDOR_POCL, "PoCL vendor %d", info.vendor);
        cl_platform_id platform = NULL;
        cl_device_id device = NULL;
        EXPECT_OK(cl_device_handles(i, &platform, &device));
        EXPECT(platform && device, "handles");
    }
    clinfer_device_info info;
    EXPECT(clinfer_device_get_info(count, &info) == CLINFER_ERR_NOT_FOUND, "index past the end");
    return cpu;
}

static void test_selection(size_t count, size_t cpu) {
    size_t index = count;
    char reason[256] = "";
    unsetenv("CLINFER_DEVICE");
    EXPECT_OK(clinfer_device_select(NULL, &index, reason, sizeof reason));
    EXPECT(index < count && strstr(reason, "strongest"), "default %zu: %s", index, reason);
    printf("default: %s\n", reason);

    EXPECT_OK(clinfer_device_select("cpu", &index, reason, sizeof reason));
    EXPECT(index == cpu || cpu == count, "cpu -> %zu", index);
    EXPECT(clinfer_device_select("999", &index, NULL, 0) == CLINFER_ERR_NOT_FOUND, "bad index");
    EXPECT(clinfer_device_select("no such device xyz", &index, NULL, 0) == CLINFER_ERR_NOT_FOUND,
           "bad name");
    EXPECT(strstr(clinfer_last_error(), "no such device xyz") != NULL, "%s", clinfer_last_error());

    clinfer_device_info last;
    EXPECT_OK(clinfer_device_get_info(count - 1, &last));
    char spec[16];
    snprintf(spec, sizeof spec, "%zu", count - 1);
    EXPECT_OK(clinfer_device_select(spec, &index, NULL, 0));
    EXPECT(index == count - 1, "index spec %s -> %zu", spec, index);

    /* A name substring, through the environment, in another case. */
    char part[8] = "";
    for (size_t i = 0; i < 4 && last.name[i]; i++)
        part[i] = (char)(last.name[i] ^ ((last.name[i] >= 'a' && last.name[i] <= 'z') ? 0x20 : 0));
    setenv("CLINFER_DEVICE", part, 1);
    EXPECT_OK(clinfer_device_select("", &index, reason, sizeof reason));
    EXPECT(strstr(reason, "CLINFER_DEVICE") != NULL, "%s", reason);
    clinfer_device_info chosen;
    EXPECT_OK(clinfer_device_get_info(index, &chosen));
    EXPECT(strcasestr(chosen.name, part) != NULL, "'%s' chose '%s'", part, chosen.name);
    unsetenv("CLINFER_DEVICE");

    setenv("CLINFER_KERNEL_PATH", "gpu-local-reduce", 1);
    EXPECT_OK(clinfer_device_get_info(0, &chosen));
    EXPECT(!strcmp(chosen.kernel_path, "gpu-local-reduce"), "override -> %s", chosen.kernel_path);
    /* no kernels of its own: not offered, and saying so */
    setenv("CLINFER_KERNEL_PATH", "gpu-subgroup", 1);
    EXPECT(clinfer_device_get_info(0, &chosen) == CLINFER_ERR_UNSUPPORTED &&
               strstr(clinfer_last_error(), "not offered"),
           "gpu-subgroup: %s", clinfer_last_error());
    setenv("CLINFER_KERNEL_PATH", "fastest", 1);
    EXPECT(clinfer_device_get_info(0, &chosen) == CLINFER_ERR_INVALID_ARGUMENT, "bad override");
    EXPECT(strstr(clinfer_last_error(), "fastest") != NULL, "%s", clinfer_last_error());
    unsetenv("CLINFER_KERNEL_PATH");
}

/* Builds cl/selftest.cl for the device and checks vector_add on a size that is not a multiple
 * of the work-group size. */
static void test_selftest_kernel(size_t index) {
    enum { N = 1000 };
    clinfer_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_int err = CL_SUCCESS;
    cl_context ctx = NULL;
    cl_command_queue queue = NULL;
    cl_program prog = NULL;
    cl_kernel kernel = NULL;
    cl_mem buf[3] = {NULL, NULL, NULL};
    static float a[N], b[N], c[N];
    EXPECT_OK(clinfer_device_get_info(index, &info));
    EXPECT_OK(cl_device_handles(index, &platform, &device));
    const char *params = cl_program_params(&info);
    EXPECT(strstr(params, "-DCLINFER_PATH_") && strstr(params, "-DROWS_PER_WI="), "%s", params);
    if (info.type == CLINFER_DEVICE_CPU)
        EXPECT(strstr(params, "-DCLINFER_PATH_CPU_ROWS=1") != NULL, "%s", params);

    ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    EXPECT(err == CL_SUCCESS, "clCreateContext: %s", clinfer_status_str(err));
    if (err != CL_SUCCESS) return;
    queue = clCreateCommandQueue(ctx, device, 0, &err);
    EXPECT(err == CL_SUCCESS, "clCreateCommandQueue: %s", clinfer_status_str(err));
    clinfer_status st,
        built = cl_program_build(ctx, device, &info, NULL, "selftest.cl", NULL, &prog);
    EXPECT_OK(built);
    cl_program missing = NULL;
    st = cl_program_build(ctx, device, &info, NULL, "missing.cl", NULL, &missing);
    EXPECT(st == (getenv("CLINFER_CL_DIR") ? CLINFER_ERR_IO : CLINFER_ERR_NOT_FOUND) && !missing,
           "missing source: %s", clinfer_status_str(st));
    if (built == CLINFER_OK)
        EXPECT(cl_program_has_kernel(prog, "vector_add") && !cl_program_has_kernel(prog, "vector"),
               "cl_program_has_kernel: vector_add");
    /* a program without kernels (NVIDIA's driver crashed when asked its kernel names) */
    const char *none = "/* nothing */\n";
    cl_int empty_err; /* err still says whether the queue exists, for the run below */
    cl_program empty = clCreateProgramWithSource(ctx, 1, &none, NULL, &empty_err);
    if (empty_err == CL_SUCCESS && clBuildProgram(empty, 1, &device, "", NULL, NULL) == CL_SUCCESS)
        EXPECT(!cl_program_has_kernel(empty, "vector_add"), "a kernel in an empty program");
    if (empty) clReleaseProgram(empty);
    if (built == CLINFER_OK && err == CL_SUCCESS) {
        for (int i = 0; i < N; i++) {
            a[i] = (float)i * 0.5f;
            b[i] = (float)(N - i) * 0.25f;
        }
        for (int i = 0; i < 3; i++)
            buf[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof a, NULL, &err);
        kernel = clCreateKernel(prog, "vector_add", &err);
        EXPECT(err == CL_SUCCESS, "clCreateKernel: %s", clinfer_status_str(err));
        cl_uint n = N;
        size_t local = 64, global = (N + local - 1) / local * local;
        err |= clEnqueueWriteBuffer(queue, buf[0], CL_FALSE, 0, sizeof a, a, 0, NULL, NULL);
        err |= clEnqueueWriteBuffer(queue, buf[1], CL_FALSE, 0, sizeof b, b, 0, NULL, NULL);
        for (cl_uint i = 0; i < 3; i++)
            err |= clSetKernelArg(kernel, i, sizeof(cl_mem), &buf[i]);
        err |= clSetKernelArg(kernel, 3, sizeof n, &n);
        err |= clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, &local, 0, NULL, NULL);
        err |= clEnqueueReadBuffer(queue, buf[2], CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
        EXPECT(err == CL_SUCCESS, "running vector_add failed");
        int wrong = 0;
        for (int i = 0; i < N; i++)
            wrong += c[i] != a[i] + b[i];
        EXPECT(wrong == 0, "%d of %d sums wrong", wrong, N);
    }
    for (int i = 0; i < 3; i++)
        if (buf[i]) clReleaseMemObject(buf[i]);
    if (kernel) clReleaseKernel(kernel);
    if (prog) clReleaseProgram(prog);
    if (queue) clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
}

/* The inline assembly of cl/cpu_vec.clh (CLINFER_VNNI) only for PoCL 3's CPU device, on a
 * host with AVX512-VNNI: PoCL 5.0 aborts the process on inline assembly. */
static void test_pocl_vnni(void) {
    static const struct {
        clinfer_vendor vendor;
        const char *version;
        int major;
    } cases[] = {
        {CLINFER_VENDOR_POCL, "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, LLVM 15.0.6", 3},
        {CLINFER_VENDOR_POCL, "OpenCL 3.0 PoCL 5.0+debian  Linux, None+Asserts, LLVM 16.0.6", 5},
        {CLINFER_VENDOR_POCL, "OpenCL 3.0 PoCL 6.0  Linux, Release, LLVM 18.1.8", 6},
        {CLINFER_VENDOR_POCL, "OpenCL 1.2 pocl", 0},
        {CLINFER_VENDOR_NVIDIA, "OpenCL 3.0 CUDA 13.0.98", 0},
    };
    bool host_vnni = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    host_vnni = __builtin_cpu_supports("avx512vnni");
#endif
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clinfer_device_info info = {.vendor = cases[i].vendor, .type = CLINFER_DEVICE_CPU};
        snprintf(info.platform_version, sizeof info.platform_version, "%s", cases[i].version);
        snprintf(info.kernel_path, sizeof info.kernel_path, "cpu-rows");
        EXPECT(cl_device_pocl_major(&info) == cases[i].major, "PoCL major of '%s': %d",
               cases[i].version, cl_device_pocl_major(&info));
        bool vnni = strstr(cl_program_params(&info), "-DCLINFER_VNNI=1") != NULL;
        bool want = host_vnni && cases[i].vendor == CLINFER_VENDOR_POCL && cases[i].major == 3;
        EXPECT(vnni == want, "'%s': CLINFER_VNNI %d, want %d", cases[i].version, vnni, want);
    }
}

/* The first enumeration raced by several threads: all see the same devices. */
static void *count_devices(void *out) {
    clinfer_device_info info;
    size_t *count = out;
    if (clinfer_device_count(count) != CLINFER_OK ||
        (*count && clinfer_device_get_info(*count - 1, &info) != CLINFER_OK))
        *count = (size_t)-1;
    return NULL;
}

static void test_concurrent_enumeration(void) {
    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    size_t counts[THREADS];
    for (int i = 0; i < THREADS; i++)
        EXPECT(pthread_create(&threads[i], NULL, count_devices, &counts[i]) == 0, "thread");
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 1; i < THREADS; i++)
        EXPECT(counts[i] == counts[0] && counts[i] != (size_t)-1, "thread %d saw %zu, not %zu", i,
               counts[i], counts[0]);
}

/* Run with OCL_ICD_VENDORS pointing at an empty folder and OCL_ICD_FILENAMES unset: zero devices,
 * a clear message, and every call that needs a device fails cleanly. */
static int expect_no_platform(void) {
    size_t count = 99, index = 0;
    EXPECT_OK(clinfer_device_count(&count));
    EXPECT(count == 0, "%zu devices without any ICD", count);
    EXPECT(strstr(clinfer_last_error(), "no OpenCL platform found (install an OpenCL driver; "
                                        "for CPUs: pocl-opencl-icd)") != NULL,
           "message: %s", clinfer_last_error());
    clinfer_device_info info;
    cl_device_id device = NULL;
    EXPECT(clinfer_device_get_info(0, &info) == CLINFER_ERR_NO_PLATFORM, "get_info");
    EXPECT(clinfer_device_select(NULL, &index, NULL, 0) == CLINFER_ERR_NO_PLATFORM, "select");
    EXPECT(cl_device_handles(0, NULL, &device) == CLINFER_ERR_NO_PLATFORM && !device, "handles");
    return finish("test_device --no-platform");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--no-platform")) return expect_no_platform();
    test_status_names();
    test_pocl_vnni();
    test_concurrent_enumeration();
    size_t count = 0;
    EXPECT_OK(clinfer_device_count(&count));
    if (count == 0) {
        fprintf(stderr, "skipped: %s\n", clinfer_last_error());
        return 77;
    }
    size_t cpu = check_devices(count);
    test_selection(count, cpu);
    test_selftest_kernel(cpu < count ? cpu : 0);
    return finish("test_device");
}
