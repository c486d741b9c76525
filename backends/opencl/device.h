/* The OpenCL handles behind the public device indices (device.c). Enumeration happens once per
 * process; the handles stay valid for its lifetime (root devices need no release). */
#ifndef CLINFER_CL_DEVICE_H
#define CLINFER_CL_DEVICE_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "clinfer.h"

/* index as in clinfer_device_get_info. CLINFER_ERR_NOT_FOUND past the last device,
 * CLINFER_ERR_NO_PLATFORM when there is none. */
clinfer_status cl_device_handles(size_t index, cl_platform_id *platform, cl_device_id *device);
/* clinfer_device_get_info with the kernel path path (DEFAULT: the device's own choice), which
 * *chosen (may be NULL) tells too. */
clinfer_status cl_device_get_info(size_t index, clinfer_kernel_path path, clinfer_device_info *info,
                                  clinfer_kernel_path *chosen);
/* Whether the device is PoCL's CPU device: this host's own cores. */
bool cl_device_is_pocl_cpu(const clinfer_device_info *info);
/* PoCL's major version, from its platform version ("OpenCL 3.0 PoCL 5.0+debian ..."); 0 where
 * the platform is not PoCL or does not say. */
int cl_device_pocl_major(const clinfer_device_info *info);

#endif
