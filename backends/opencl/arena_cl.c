/* Arenas: on CPU devices weights live in a few large buffers, each weight array a sub-buffer of
 * one (weights_cl.h), some of them on a weight cache file's data; and the allocation
 * limit that sizes every array. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "error.h"
#include "options.h"
#include "weights_cl.h"

void cl_release_region(cl_host_region *region) {
    if (--region->holders > 0) return;
    munmap(region->addr, region->size);
    free(region);
}

void cl_release_arena(cl_arena *arena) {
    if (--arena->holders > 0) return;
    if (arena->mem) clReleaseMemObject(arena->mem);      /* NULL: its memory was never filled */
    if (arena->region) cl_release_region(arena->region); /* after the buffer made on it */
    free(arena);
}

clinfer_status cl_arena_array(cl_arena *arena, size_t at, size_t bytes, const char *what,
                              weight_array *a) {
    cl_int err = CL_SUCCESS;
    cl_buffer_region region = {at, bytes};
    a->mem = clCreateSubBuffer(arena->mem, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &region,
                               &err);
    if (err != CL_SUCCESS) return cl_error(err, what);
    arena->holders++;
    a->arena = arena;
    a->offset = at;
    return CLINFER_OK;
}

uint64_t cl_alloc_limit(const cl_backend_ctx *b) {
    uint64_t limit = b->info.max_alloc ? b->info.max_alloc : UINT64_MAX;
    clinfer_dev_options dev;
    dev_options_get(&dev);
    if (dev.max_alloc > 0 && dev.max_alloc < limit) limit = dev.max_alloc;
    return limit;
}
