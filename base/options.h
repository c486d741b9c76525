/* Configuration: the backend options with the environment's defaults filled in, and the
 * developer switches that only the environment sets. Every CLINFER_* variable the library reads
 * is read in options.c (the fault-injection hook, backends/opencl/fault.c, reads its own). */
#ifndef CLINFER_OPTIONS_H
#define CLINFER_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "clinfer.h"

/* *out = given (NULL: all defaults) with each field at its default taken from the environment;
 * CLINFER_ERR_INVALID_ARGUMENT where a variable's value is not one it can take. Strings point
 * into given or the environment. */
clinfer_status options_resolve(const clinfer_backend_options *given, clinfer_backend_options *out);

/* The device spec of CLINFER_DEVICE and the directory of CLINFER_CACHE_DIR; NULL when unset. */
const char *options_device(void);
const char *options_cache_dir(void);

/* "cpu-rows", ...; NULL for CLINFER_KERNEL_PATH_DEFAULT, a path not offered or a value out of
 * range. kernel_path_at: the index-th path offered, NULL past the last. */
const char *kernel_path_name(clinfer_kernel_path path);
const char *kernel_path_at(size_t index);

/* What a context (and its queue) made now profiles, given the profile option: the table (the
 * option, else CLINFER_PROFILE) and the Chrome trace (CLINFER_TRACE's file; NULL: none). */
void options_profiling(clinfer_toggle profile, bool *table, const char **trace);

/* Switches for development, read from the environment at each call. */
typedef struct {
    bool verbose;       /* CLINFER_VERBOSE: backend decisions on stderr */
    const char *cl_dir; /* CLINFER_CL_DIR: kernel sources from files, not the embedded copy */
    /* CLINFER_INTERLEAVE: CPU weights interleaved by rows where the device has integer kernels
     * for the layout (1, the default), never ("0"), or for every type with a kernel over the
     * layout ("force", 2: tests on devices without the integer kernels, Oclgrind) */
    int interleave;
    uint64_t max_alloc; /* CLINFER_MAX_ALLOC: a lower limit per allocation; 0: none */
    /* CLINFER_DEVICE_MEMORY: bytes, a smaller memory of every OpenCL device than its own (tests
     * of placement); 0: none */
    uint64_t device_memory;
    bool print_plan;   /* CLINFER_PRINT_PLAN: each new plan on stderr */
    bool weight_cache; /* CLINFER_WEIGHT_CACHE (default on): re-laid-out weights on disk */
    /* CLINFER_WEIGHT_CACHE=copy: its files read into memory of the process's own, which a
     * truncation of the file cannot take away, rather than used on their mapping */
    bool weight_cache_copy;
    /* CLINFER_WEIGHT_CACHE_MAX: MiB all weight cache files may take (default 16384) */
    uint64_t weight_cache_max;
    /* CLINFER_F32_LANES: 8 or 16, the f32 vector width of the CPU kernels (cl/f32_lanes.clh) in
     * place of the CPU's own (16 with AVX-512, else 8), so that tests run the other width on any
     * CPU; 0 (unset or another value): the CPU's */
    int f32_lanes;
    /* CLINFER_GPU_LEGACY: the GPU paths' kernels from before issue 46 (attention_wg,
     * matvec_wg for every type), to measure old against new on one device */
    bool gpu_legacy;
} clinfer_dev_options;

void dev_options_get(clinfer_dev_options *out);

#endif
