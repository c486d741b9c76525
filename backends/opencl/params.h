/* The per-device parameter table (params.c) and the -D options every program for a device
 * gets. */
#ifndef CLINFER_CL_PARAMS_H
#define CLINFER_CL_PARAMS_H

#include "clinfer.h"

/* One row of the per-device parameter table: the most specific matching row wins
 * (device name > architecture > vendor > the default row). The values reach the kernels as
 * -D options (see cl_program_params) and the host reads them here to size launches. */
typedef struct cl_device_params {
    clinfer_vendor vendor; /* CLINFER_VENDOR_OTHER with arch and device NULL: the default */
    const char *arch;      /* substring of the device name naming its architecture; NULL: any */
    const char *device;    /* exact device name; NULL: any */
    unsigned rows_per_wi;  /* -DROWS_PER_WI: matrix rows one work-item reduces (cpu-rows) */
    unsigned local_size;   /* -DLOCAL_SIZE: work-group size of row-parallel kernels */
} cl_device_params;

const cl_device_params *cl_device_params_for(const clinfer_device_info *info);

/* The -D options every program for this device gets: the kernel path
 * (-DCLINFER_PATH_CPU_ROWS=1 or -DCLINFER_PATH_GPU_LOCAL_REDUCE=1),
 * -DCLINFER_FP16=0/1 (cl_khr_fp16), -DROWS_PER_WI and -DLOCAL_SIZE, and -DCLINFER_VNNI=1 and
 * -DCLINFER_F32_LANES=8/16 where they apply. Valid until this thread's next call. */
const char *cl_program_params(const clinfer_device_info *info);

#endif
