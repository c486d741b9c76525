/* The backends by kind (see backend_create in backend.h): the one place that names each
 * backend's constructor, so that the core (src/) asks for a backend without knowing any. */
#include <stdio.h>

#include "backend.h"
#include "error.h"

static clinfer_status create_opencl(const clinfer_backend_options *options, char *reason,
                                    size_t reason_size, clinfer_backend **out) {
    size_t index;
    clinfer_status st =
        clinfer_device_select(options ? options->device : NULL, &index, reason, reason_size);
    return st == CLINFER_OK ? cl_backend_create(index, options, out) : st;
}

static clinfer_status create_reference(const clinfer_backend_options *options, char *reason,
                                       size_t reason_size, clinfer_backend **out) {
    (void)options;
    snprintf(reason, reason_size, "the reference backend (plain C on the host)");
    return ref_backend_create(out);
}

static const struct {
    clinfer_backend_kind kind;
    clinfer_status (*create)(const clinfer_backend_options *options, char *reason,
                             size_t reason_size, clinfer_backend **out);
} backends[] = {
    {CLINFER_BACKEND_OPENCL, create_opencl},
    {CLINFER_BACKEND_REFERENCE, create_reference},
};

clinfer_status backend_create(clinfer_backend_kind kind, const clinfer_backend_options *options,
                              char *reason, size_t reason_size, clinfer_backend **out) {
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (backends[i].kind == kind) return backends[i].create(options, reason, reason_size, out);
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "model: unknown backend kind %d", (int)kind);
}
