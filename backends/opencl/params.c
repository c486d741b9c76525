/* Per-device parameters: a table keyed by vendor, architecture and device name, always with a
 * default row, and the -D options every program gets from it and from the device's capabilities
 * (params.h). */
#include "params.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "options.h"

/* Starting values; kernels that need more knobs add a column here, not a name test in code. */
static const cl_device_params device_params[] = {
    /* Any device: one row per work-item, a work-group size every OpenCL 1.2 device accepts. */
    {CLINFER_VENDOR_OTHER, NULL, NULL, 1, 64},
    /* PoCL on CPUs: a work-item streams contiguous rows with wide loads; small fixed
     * work-groups keep >= 4x compute-units groups and one compiled work-group function. */
    {CLINFER_VENDOR_POCL, NULL, NULL, 2, 8},
};

static int params_score(const cl_device_params *p, const clinfer_device_info *info) {
    if (p->vendor != CLINFER_VENDOR_OTHER && p->vendor != info->vendor) return -1;
    if ((p->arch && !strstr(info->name, p->arch)) || (p->device && strcmp(info->name, p->device)))
        return -1;
    return (p->device ? 4 : 0) + (p->arch ? 2 : 0) + (p->vendor != CLINFER_VENDOR_OTHER);
}

const cl_device_params *cl_device_params_for(const clinfer_device_info *info) {
    const cl_device_params *best = &device_params[0];
    int best_score = 0;
    for (size_t i = 1; i < sizeof device_params / sizeof device_params[0]; i++) {
        int score = params_score(&device_params[i], info);
        if (score > best_score) {
            best = &device_params[i];
            best_score = score;
        }
    }
    return best;
}

/* Whether kernels may use AVX512-VNNI through inline assembly (CLINFER_VNNI, cl/cpu_vec.clh):
 * PoCL's CPU device runs on this host, so the host's CPU is asked, not PoCL's LLVM, which may
 * know the CPU only by an older name without VNNI (skylake-avx512 for a Sapphire Rapids class
 * Xeon) and then never emits it. Only on PoCL 3, where it was checked: PoCL 5.0 (Ubuntu 24.04,
 * LLVM 16) aborts the whole process on any inline assembly in a kernel (docs/DEVICES.md). */
static bool host_vnni(const clinfer_device_info *info) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return cl_device_is_pocl_cpu(info) && cl_device_pocl_major(info) == 3 &&
           __builtin_cpu_supports("avx512vnni");
#else
    (void)info;
    return false;
#endif
}

const char *cl_program_params(const clinfer_device_info *info) {
    static _Thread_local char options[256];
    clinfer_dev_options dev;
    dev_options_get(&dev);
    char lanes[32] = "";
    if (dev.f32_lanes) snprintf(lanes, sizeof lanes, " -DCLINFER_F32_LANES=%d", dev.f32_lanes);
    char path[sizeof info->kernel_path];
    size_t i = 0;
    /* "cpu-rows" -> CLINFER_PATH_CPU_ROWS */
    for (; info->kernel_path[i] && i + 1 < sizeof path; i++)
        path[i] =
            info->kernel_path[i] == '-' ? '_' : (char)toupper((unsigned char)info->kernel_path[i]);
    path[i] = '\0';
    const cl_device_params *p = cl_device_params_for(info);
    snprintf(options, sizeof options,
             "-DCLINFER_PATH_%s=1 -DCLINFER_FP16=%d -DROWS_PER_WI=%u -DLOCAL_SIZE=%u%s%s", path,
             info->fp16 ? 1 : 0, p->rows_per_wi, p->local_size,
             host_vnni(info) ? " -DCLINFER_VNNI=1" : "", lanes);
    return options;
}
