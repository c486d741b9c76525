/* OpenCL device enumeration, capabilities, kernel path and selection: the public device API
 * of clinfer.h. Every platform and device is enumerated once per process through the ICD
 * loader; later calls read the cached table. */
#include "device.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "options.h"

enum { MAX_PLATFORMS = 16, MAX_DEVICES = 64 };

static const char no_platform_message[] =
    "no OpenCL platform found (install an OpenCL driver; for CPUs: pocl-opencl-icd)";

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    clinfer_device_info info; /* kernel_path as the capabilities choose it, before overrides */
    clinfer_kernel_path path; /* the same */
} device_entry;

static struct {
    device_entry devices[MAX_DEVICES];
    size_t count;
    char message[512]; /* why there are no devices, or which platforms failed to answer */
} registry;

static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

/* Appends a note to registry.message ("; "-separated), silently truncating. */
static void note(const char *fmt, const char *what, cl_int err) {
    size_t used = strlen(registry.message);
    if (used + 2 >= sizeof registry.message) return;
    if (used) {
        strcpy(registry.message + used, "; ");
        used += 2;
    }
    snprintf(registry.message + used, sizeof registry.message - used, fmt, what,
             clinfer_status_str(err), err);
}

/* A platform (device == NULL) or device string property, allocated; NULL on failure. */
static char *info_string(cl_platform_id platform, cl_device_id device, cl_uint param) {
    size_t size = 0;
    cl_int err = device ? clGetDeviceInfo(device, param, 0, NULL, &size)
                        : clGetPlatformInfo(platform, param, 0, NULL, &size);
    if (err != CL_SUCCESS) return NULL;
    char *s = calloc(1, size + 1);
    if (!s) return NULL;
    err = device ? clGetDeviceInfo(device, param, size, s, NULL)
                 : clGetPlatformInfo(platform, param, size, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return NULL;
    }
    return s;
}

/* Whether the space-separated extension list names ext exactly (not as a prefix). */
static bool has_extension(const char *list, const char *ext) {
    size_t n = strlen(ext);
    for (const char *p = list; (p = strstr(p, ext)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

static bool contains_nocase(const char *haystack, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = haystack; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return n == 0;
}

/* PoCL first: it runs on CPUs whose PCI vendor id would otherwise say Intel or AMD. */
static clinfer_vendor classify_vendor(cl_uint vendor_id, const char *vendor, const char *platform) {
    if (contains_nocase(platform, "Portable Computing Language") || contains_nocase(vendor, "pocl"))
        return CLINFER_VENDOR_POCL;
    static const struct {
        cl_uint id;
        const char *name;
        clinfer_vendor vendor;
    } vendors[] = {
        {0x10DE, "NVIDIA", CLINFER_VENDOR_NVIDIA},
        {0x1002, "Advanced Micro Devices", CLINFER_VENDOR_AMD},
        {0x1022, "AMD", CLINFER_VENDOR_AMD},
        {0x8086, "Intel", CLINFER_VENDOR_INTEL},
        {0x1027F00, "Apple", CLINFER_VENDOR_APPLE},
        {0x13B5, "ARM", CLINFER_VENDOR_ARM},
        {0x5143, "Qualcomm", CLINFER_VENDOR_QUALCOMM},
    };
    for (size_t i = 0; i < sizeof vendors / sizeof vendors[0]; i++)
        if (vendor_id == vendors[i].id || contains_nocase(vendor, vendors[i].name))
            return vendors[i].vendor;
    return CLINFER_VENDOR_OTHER;
}

bool cl_device_is_pocl_cpu(const clinfer_device_info *info) {
    return info->vendor == CLINFER_VENDOR_POCL && info->type == CLINFER_DEVICE_CPU;
}

int cl_device_pocl_major(const clinfer_device_info *info) {
    const char *v =
        info->vendor == CLINFER_VENDOR_POCL ? strstr(info->platform_version, "PoCL ") : NULL;
    return v && isdigit((unsigned char)v[5]) ? atoi(v + 5) : 0;
}

static clinfer_device_type classify_type(cl_device_type type) {
    if (type & CL_DEVICE_TYPE_GPU) return CLINFER_DEVICE_GPU;
    if (type & CL_DEVICE_TYPE_CPU) return CLINFER_DEVICE_CPU;
    if (type & CL_DEVICE_TYPE_ACCELERATOR) return CLINFER_DEVICE_ACCELERATOR;
    return CLINFER_DEVICE_OTHER;
}

/* The kernel variant follows from what the device reports, never from its name. */
static clinfer_kernel_path capability_kernel_path(const clinfer_device_info *info) {
    return info->type == CLINFER_DEVICE_CPU ? CLINFER_KERNEL_PATH_CPU_ROWS
                                            : CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE;
}

/* Fills e->info and e->path; returns the failing OpenCL error (e->info is then incomplete). */
static cl_int describe_device(device_entry *e, const char *platform_name,
                              const char *platform_version) {
    clinfer_device_info *info = &e->info;
    cl_device_type type = 0;
    cl_uint vendor_id = 0, cus = 0, clock = 0, vec_float = 0, vec_half = 0;
    cl_ulong global_mem = 0, local_mem = 0, max_alloc = 0;
    size_t wg = 0;
    const struct {
        cl_device_info param;
        void *value;
        size_t size;
    } fixed[] = {
        {CL_DEVICE_TYPE, &type, sizeof type},
        {CL_DEVICE_VENDOR_ID, &vendor_id, sizeof vendor_id},
        {CL_DEVICE_MAX_COMPUTE_UNITS, &cus, sizeof cus},
        {CL_DEVICE_MAX_CLOCK_FREQUENCY, &clock, sizeof clock},
        {CL_DEVICE_GLOBAL_MEM_SIZE, &global_mem, sizeof global_mem},
        {CL_DEVICE_LOCAL_MEM_SIZE, &local_mem, sizeof local_mem},
        {CL_DEVICE_MAX_MEM_ALLOC_SIZE, &max_alloc, sizeof max_alloc},
        {CL_DEVICE_MAX_WORK_GROUP_SIZE, &wg, sizeof wg},
        {CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, &vec_float, sizeof vec_float},
        {CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, &vec_half, sizeof vec_half},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        cl_int err =
            clGetDeviceInfo(e->device, fixed[i].param, fixed[i].size, fixed[i].value, NULL);
        if (err != CL_SUCCESS) return err;
    }

    const struct {
        cl_device_info param;
        char *dst;
        size_t size;
    } strings[] = {
        {CL_DEVICE_NAME, info->name, sizeof info->name},
        {CL_DEVICE_VENDOR, info->vendor_name, sizeof info->vendor_name},
        {CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version},
        {CL_DEVICE_VERSION, info->device_version, sizeof info->device_version},
        {CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version, sizeof info->opencl_c_version},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        char *s = info_string(NULL, e->device, strings[i].param);
        if (!s) return CL_INVALID_DEVICE;
        snprintf(strings[i].dst, strings[i].size, "%s", s);
        free(s);
    }
    char *extensions = info_string(NULL, e->device, CL_DEVICE_EXTENSIONS);
    if (!extensions) return CL_INVALID_DEVICE;

    snprintf(info->platform, sizeof info->platform, "%s", platform_name);
    snprintf(info->platform_version, sizeof info->platform_version, "%s", platform_version);
    info->vendor = classify_vendor(vendor_id, info->vendor_name, platform_name);
    info->type = classify_type(type);
    info->compute_units = cus;
    info->clock_mhz = clock;
    clinfer_dev_options dev;
    dev_options_get(&dev); /* a test's smaller device: every figure of its memory follows */
    info->global_mem =
        dev.device_memory && dev.device_memory < global_mem ? dev.device_memory : global_mem;
    info->local_mem = local_mem;
    info->max_alloc = max_alloc;
    info->max_work_group_size = wg;
    info->preferred_vector_width_float = vec_float;
    info->preferred_vector_width_half = vec_half;
    info->fp16 = has_extension(extensions, "cl_khr_fp16");
    info->fp64 = has_extension(extensions, "cl_khr_fp64");
    info->subgroups = has_extension(extensions, "cl_khr_subgroups") ||
                      has_extension(extensions, "cl_intel_subgroups");
    info->int_dot = has_extension(extensions, "cl_khr_integer_dot_product");
    free(extensions);
    e->path = capability_kernel_path(info);
    snprintf(info->kernel_path, sizeof info->kernel_path, "%s", kernel_path_name(e->path));
    return CL_SUCCESS;
}

static void enumerate_platform(cl_platform_id platform) {
    char *name = info_string(platform, NULL, CL_PLATFORM_NAME);
    char *version = info_string(platform, NULL, CL_PLATFORM_VERSION);
    cl_device_id ids[MAX_DEVICES];
    cl_uint n = 0;
    cl_int err = CL_OUT_OF_HOST_MEMORY;
    if (name && version) err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, MAX_DEVICES, ids, &n);
    if (err == CL_DEVICE_NOT_FOUND) n = 0;
    if (n > MAX_DEVICES) /* n is the platform's total, which may exceed what ids holds */
        n = MAX_DEVICES;
    else if (err != CL_SUCCESS)
        note("platform '%s' did not list its devices: %s (%d)", name ? name : "?", err);
    for (cl_uint i = 0; err == CL_SUCCESS && i < n && registry.count < MAX_DEVICES; i++) {
        device_entry *e = &registry.devices[registry.count];
        memset(e, 0, sizeof *e);
        e->platform = platform;
        e->device = ids[i];
        cl_int derr = describe_device(e, name, version);
        if (derr == CL_SUCCESS)
            registry.count++;
        else
            note("a device of platform '%s' did not describe itself: %s (%d)", name, derr);
    }
    free(name);
    free(version);
}

static void enumerate(void) {
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &n);
    /* -1001 (CL_PLATFORM_NOT_FOUND_KHR) is the ICD loader's way to say "none installed". */
    if (err != CL_SUCCESS && err != -1001) {
        snprintf(registry.message, sizeof registry.message, "%s; clGetPlatformIDs: %s (%d)",
                 no_platform_message, clinfer_status_str(err), err);
        return;
    }
    if (err != CL_SUCCESS || n == 0) {
        snprintf(registry.message, sizeof registry.message, "%s", no_platform_message);
        return;
    }
    for (cl_uint p = 0; p < n && p < MAX_PLATFORMS; p++)
        enumerate_platform(platforms[p]);
    if (registry.count == 0 && registry.message[0] == '\0')
        snprintf(registry.message, sizeof registry.message,
                 "no OpenCL device found on %u platform(s)", n);
}

/* Enumerates on first use; fails with the reason when there is no device at all. */
static clinfer_status ensure_devices(void) {
    pthread_once(&registry_once, enumerate);
    if (registry.count == 0) return err_fail(CLINFER_ERR_NO_PLATFORM, "%s", registry.message);
    return CLINFER_OK;
}

static clinfer_status lookup(size_t index, const device_entry **out) {
    clinfer_status st = ensure_devices();
    if (st != CLINFER_OK) return st;
    if (index >= registry.count)
        return err_fail(CLINFER_ERR_NOT_FOUND, "device index %zu out of range (%zu devices)", index,
                        registry.count);
    *out = &registry.devices[index];
    return CLINFER_OK;
}

clinfer_status clinfer_device_count(size_t *count) {
    if (!count)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "clinfer_device_count: count is NULL");
    /* No device is not an error here: the message stays in clinfer_last_error(). */
    ensure_devices();
    *count = registry.count;
    return CLINFER_OK;
}

clinfer_status cl_device_get_info(size_t index, clinfer_kernel_path path, clinfer_device_info *info,
                                  clinfer_kernel_path *chosen) {
    const device_entry *e = NULL;
    clinfer_status st = lookup(index, &e);
    if (st != CLINFER_OK) return st;
    *info = e->info;
    if (path == CLINFER_KERNEL_PATH_DEFAULT) path = e->path;
    snprintf(info->kernel_path, sizeof info->kernel_path, "%s", kernel_path_name(path));
    if (chosen) *chosen = path;
    return CLINFER_OK;
}

clinfer_status clinfer_device_get_info(size_t index, clinfer_device_info *info) {
    if (!info)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "clinfer_device_get_info: info is NULL");
    clinfer_backend_options o;
    clinfer_status st = options_resolve(NULL, &o);
    return st == CLINFER_OK ? cl_device_get_info(index, o.kernel_path, info, NULL) : st;
}

clinfer_status cl_device_handles(size_t index, cl_platform_id *platform, cl_device_id *device) {
    const device_entry *e = NULL;
    clinfer_status st = lookup(index, &e);
    if (st != CLINFER_OK) return st;
    if (platform) *platform = e->platform;
    if (device) *device = e->device;
    return CLINFER_OK;
}

/* Strength order of the default choice: GPUs first, then compute units x clock. */
static int type_rank(clinfer_device_type type) {
    return type == CLINFER_DEVICE_GPU           ? 3
           : type == CLINFER_DEVICE_ACCELERATOR ? 2
           : type == CLINFER_DEVICE_CPU         ? 1
                                                : 0;
}

static bool stronger(const clinfer_device_info *a, const clinfer_device_info *b) {
    if (type_rank(a->type) != type_rank(b->type)) return type_rank(a->type) > type_rank(b->type);
    return (uint64_t)a->compute_units * a->clock_mhz > (uint64_t)b->compute_units * b->clock_mhz;
}

/* The strongest device accepted by the filter (type 0: any type; name NULL: any name). */
static bool strongest(clinfer_device_type type, const char *name, size_t *index) {
    bool found = false;
    for (size_t i = 0; i < registry.count; i++) {
        const clinfer_device_info *info = &registry.devices[i].info;
        if ((type && info->type != type) || (name && !contains_nocase(info->name, name))) continue;
        if (!found || stronger(info, &registry.devices[*index].info)) *index = i;
        found = true;
    }
    return found;
}

static bool all_digits(const char *s) {
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

clinfer_status clinfer_device_select(const char *spec, size_t *index, char *reason,
                                     size_t reason_size) {
    if (!index)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "clinfer_device_select: index is NULL");
    clinfer_status st = ensure_devices();
    if (st != CLINFER_OK) return st;
    const char *origin = "the device spec";
    if (!spec || !*spec) {
        spec = options_device();
        origin = "CLINFER_DEVICE";
    }
    size_t chosen = 0;
    char why[256];
    if (!spec || !*spec) {
        strongest(0, NULL, &chosen);
        const clinfer_device_info *info = &registry.devices[chosen].info;
        snprintf(why, sizeof why,
                 "the strongest of %zu device(s): GPUs first, then compute units x clock "
                 "(%u x %u MHz)",
                 registry.count, info->compute_units, info->clock_mhz);
    } else if (all_digits(spec)) {
        chosen = strtoul(spec, NULL, 10);
        if (strlen(spec) > 6 || chosen >= registry.count)
            return err_fail(CLINFER_ERR_NOT_FOUND,
                            "%s '%s': no device with that index (%zu devices)", origin, spec,
                            registry.count);
        snprintf(why, sizeof why, "index %zu given by %s", chosen, origin);
    } else if (!strcasecmp(spec, "gpu") || !strcasecmp(spec, "cpu")) {
        clinfer_device_type type =
            tolower((unsigned char)spec[0]) == 'g' ? CLINFER_DEVICE_GPU : CLINFER_DEVICE_CPU;
        if (!strongest(type, NULL, &chosen))
            return err_fail(CLINFER_ERR_NOT_FOUND, "%s '%s': no such device among %zu", origin,
                            spec, registry.count);
        snprintf(why, sizeof why, "the strongest %s device, as %s '%s' asks", spec, origin, spec);
    } else {
        if (!strongest(0, spec, &chosen))
            return err_fail(CLINFER_ERR_NOT_FOUND,
                            "%s '%s' matches no device name (%zu devices; see `clinfer "
                            "devices`)",
                            origin, spec, registry.count);
        snprintf(why, sizeof why, "its name matches %s '%s'", origin, spec);
    }
    *index = chosen;
    if (reason && reason_size)
        snprintf(reason, reason_size, "device %zu '%s': %s", chosen,
                 registry.devices[chosen].info.name, why);
    return CLINFER_OK;
}
