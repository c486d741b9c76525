/* The environment's part in the configuration; see options.h. */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

/* The kernel paths offered. gpu-subgroup (CLINFER_KERNEL_PATH_GPU_SUBGROUP) is not: it has no
 * kernels of its own yet, and every GPU runs gpu-local-reduce's. */
static const struct {
    clinfer_kernel_path path;
    const char *name;
} paths[] = {{CLINFER_KERNEL_PATH_CPU_ROWS, "cpu-rows"},
             {CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE, "gpu-local-reduce"}};
#define N_PATHS (sizeof paths / sizeof paths[0])

const char *kernel_path_name(clinfer_kernel_path path) {
    for (size_t k = 0; k < N_PATHS; k++)
        if (paths[k].path == path) return paths[k].name;
    return NULL;
}

const char *kernel_path_at(size_t index) {
    return index < N_PATHS ? paths[index].name : NULL;
}

clinfer_status clinfer_kernel_path_parse(const char *name, clinfer_kernel_path *out) {
    for (size_t k = 0; name && out && k < N_PATHS; k++)
        if (strcmp(name, paths[k].name) == 0) {
            *out = paths[k].path;
            return CLINFER_OK;
        }
    if (name && strcmp(name, "gpu-subgroup") == 0)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "kernel path 'gpu-subgroup' is not offered: it has no kernels of its own "
                        "yet (GPUs run gpu-local-reduce)");
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                    "kernel path '%s' is not one of cpu-rows, gpu-local-reduce",
                    name ? name : "(null)");
}

/* The variable's value; NULL when unset or empty. */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A 0/1 variable: off for "0", on otherwise; def when unset. */
static bool env_flag(const char *name, bool def) {
    const char *v = env(name);
    return v ? strcmp(v, "0") != 0 : def;
}

static clinfer_toggle env_toggle(const char *name) {
    const char *v = env(name);
    return !v ? CLINFER_DEFAULT : strcmp(v, "0") != 0 ? CLINFER_ON : CLINFER_OFF;
}

const char *options_device(void) {
    return env("CLINFER_DEVICE");
}

const char *options_cache_dir(void) {
    return env("CLINFER_CACHE_DIR");
}

clinfer_status options_resolve(const clinfer_backend_options *given, clinfer_backend_options *out) {
    *out = given ? *given : (clinfer_backend_options){0};
    if (!out->device || !*out->device) out->device = options_device();
    if (!out->cache_dir || !*out->cache_dir) out->cache_dir = options_cache_dir();
    if (!out->clblast) out->clblast = env_toggle("CLINFER_CLBLAST");
    if (!out->graph) out->graph = env_toggle("CLINFER_GRAPH");
    if (!out->profile) out->profile = env_toggle("CLINFER_PROFILE");
    clinfer_status st;
    if (out->kernel_path == CLINFER_KERNEL_PATH_DEFAULT && env("CLINFER_KERNEL_PATH") &&
        (st = clinfer_kernel_path_parse(env("CLINFER_KERNEL_PATH"), &out->kernel_path)) !=
            CLINFER_OK) {
        err_prefix("CLINFER_KERNEL_PATH");
        return st;
    }
    if (out->kernel_path == CLINFER_KERNEL_PATH_GPU_SUBGROUP)
        return clinfer_kernel_path_parse("gpu-subgroup", &out->kernel_path);
    if (!kernel_path_name(out->kernel_path) && out->kernel_path != CLINFER_KERNEL_PATH_DEFAULT)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "options: kernel path %d is unknown",
                        (int)out->kernel_path);
    return CLINFER_OK;
}

void options_profiling(clinfer_toggle profile, bool *table, const char **trace) {
    *table =
        profile == CLINFER_ON || (profile == CLINFER_DEFAULT && env_flag("CLINFER_PROFILE", false));
    *trace = env("CLINFER_TRACE");
}

void dev_options_get(clinfer_dev_options *out) {
    const char *max_alloc = env("CLINFER_MAX_ALLOC"), *interleave = env("CLINFER_INTERLEAVE");
    const char *cache_max = env("CLINFER_WEIGHT_CACHE_MAX"), *lanes = env("CLINFER_F32_LANES");
    const char *memory = env("CLINFER_DEVICE_MEMORY"), *wcache = env("CLINFER_WEIGHT_CACHE");
    *out = (clinfer_dev_options){
        .verbose = env_flag("CLINFER_VERBOSE", false),
        .cl_dir = env("CLINFER_CL_DIR"),
        .interleave = interleave && strcmp(interleave, "force") == 0 ? 2
                      : env_flag("CLINFER_INTERLEAVE", true)         ? 1
                                                                     : 0,
        .max_alloc = max_alloc ? strtoull(max_alloc, NULL, 10) : 0,
        .device_memory = memory ? strtoull(memory, NULL, 10) : 0,
        .print_plan = env("CLINFER_PRINT_PLAN") != NULL,
        .weight_cache = env_flag("CLINFER_WEIGHT_CACHE", true),
        .weight_cache_copy = wcache && strcmp(wcache, "copy") == 0,
        .weight_cache_max = (cache_max ? strtoull(cache_max, NULL, 10) : 16384) << 20,
        .f32_lanes = lanes && !strcmp(lanes, "8")    ? 8
                     : lanes && !strcmp(lanes, "16") ? 16
                                                     : 0,
        .gpu_legacy = env_flag("CLINFER_GPU_LEGACY", false),
    };
}
