/* OpenCL fault injection for tests of the failure paths (issue 6).
 *
 * CLINFER_FAULT="kind:N:ERR[,kind:N:ERR...]" makes the Nth call site of that kind (counted from 1
 * since the variable last changed) fail with OpenCL error ERR. Kinds used by the backend:
 *   alloc    every clCreateBuffer
 *   build    every program build
 *   enqueue  every kernel enqueue
 *   loop-cut the loop probe of a backend on the cpu-rows path (backend_cl.c): ERR, a positive
 *            count, is how many iterations the probe reports, as a device that cuts loops short
 *   graph-stall  every graph launch (graph_cl.c): its last record waits on itself, so the launch
 *                stalls (ERR is not used)
 * and, to prove that verification (clinfer_verify) catches a kernel that computes garbage:
 *   corrupt-<op>  every op of that kind run alone (the backend's op, not op_run), op named as
 *                 op_kind_name does ("corrupt-rmsnorm"): ERR is instead a value written over
 *                 every element of the op's first output (op_outputs) after it ran */
#ifndef CLINFER_CL_FAULT_H
#define CLINFER_CL_FAULT_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

/* Counts one call of this kind; returns the error to inject, or CL_SUCCESS. */
cl_int cl_fault(const char *kind);

#endif
