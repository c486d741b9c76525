/* Runtime builds of the OpenCL C sources under cl/ (embedded at build time) with per-device
 * -D options, backed by an on-disk binary cache (program.c). */
#ifndef CLINFER_CL_PROGRAM_H
#define CLINFER_CL_PROGRAM_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdbool.h>

#include "clinfer.h"
#include "params.h"

/* Builds the source named source_name ("matvec.cl"): the embedded copy, or the file of that
 * name in $CLINFER_CL_DIR when set (development), through the binary cache in cache_dir (NULL:
 * clinfer_backend_options' default). Its lines `#include "NAME"` are replaced by the
 * cl/ header NAME (common.clh), taken from the same place. Options: cl_program_params(info), then
 * extra_options (may be NULL), then -cl-std=CL1.2. A failed compile returns CLINFER_ERR_BUILD
 * with the build log in clinfer_last_error(). *out is released by the caller. */
clinfer_status cl_program_build(cl_context ctx, cl_device_id dev, const clinfer_device_info *info,
                                const char *cache_dir, const char *source_name,
                                const char *extra_options, cl_program *out);

/* Told before a program is compiled from source (not found in the cache): seconds on CPUs. */
typedef struct {
    void (*compiling)(const char *source_name, void *user);
    void *user;
} cl_compile_hook;

/* cl_program_build, calling hook (NULL: none) before a compile from source. */
clinfer_status cl_program_build_hooked(cl_context ctx, cl_device_id dev,
                                       const clinfer_device_info *info, const char *cache_dir,
                                       const char *source_name, const char *extra_options,
                                       const cl_compile_hook *hook, cl_program *out);

/* The same for source text the caller holds; name only labels messages and logs. */
clinfer_status cl_program_build_source(cl_context ctx, cl_device_id dev,
                                       const clinfer_device_info *info, const char *cache_dir,
                                       const char *name, const char *source,
                                       const char *extra_options, cl_program *out);

/* Whether program (built) defines a kernel called name: for kernels that the build's defines
 * may leave out, asked here rather than by a clCreateKernel that fails, which is API misuse to
 * checkers such as Oclgrind's. */
bool cl_program_has_kernel(cl_program program, const char *name);

/* Process-wide counts of cache hits and of builds from source (misses), for tests and logs. */
void cl_program_cache_stats(unsigned *hits, unsigned *misses);

/* A line on stderr (after "clinfer: ") when CLINFER_VERBOSE is set (options.h): builds, cache hits,
 * and what the backend falls back from. */
void cl_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
