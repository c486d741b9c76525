/* matvec.cl built once per weight type, on first use: the weight's layout depends on which of
 * its kernels the device's compiler made (matvec_q8_il, matvec_il_n). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "options.h"
#include "program.h"
#include "type_kernels_cl.h"

const char *cl_type_defines(clinfer_dtype type, char *buf, size_t size) {
    snprintf(buf, size, "-DWT_%s%s", dtype_name(type),
             dtype_takes_q8_act(type) ? " -DWT_Q8_ACT" : "");
    return buf;
}

static void release(type_kernels *t) {
    cl_kernel kernels[] = {t->matvec,      t->matvec_n, t->matvec_norm,  t->dequant,
                           t->matvec_q8,   t->gemm_q8,  t->matvec_q8_il, t->matvec_q8_il_norm,
                           t->matvec_il_n, t->stage_kq, t->gemm_kq};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i]) clReleaseKernel(kernels[i]);
    if (t->program) clReleaseProgram(t->program);
    if (t->gpu_program) clReleaseProgram(t->gpu_program);
    *t = (type_kernels){0};
}

/* On the GPU paths, matvec_gpu (cl/gpu_matvec.cl) in place of matvec_wg for the types it reads,
 * where the device runs its work-groups of GPU_MV_WG items. */
static clinfer_status gpu_matvec(cl_backend_ctx *b, clinfer_dtype type, type_kernels *t) {
    bool read = type == CLINFER_DT_F16 || type == CLINFER_DT_Q8_0 || type == CLINFER_DT_Q4_0 ||
                type == CLINFER_DT_Q4_1 || type == CLINFER_DT_Q4_K || type == CLINFER_DT_Q6_K;
    t->matvec_rows = 1;
    if (cl_cpu_rows(b) || b->types->gpu_legacy || !read || b->info.max_work_group_size < GPU_MV_WG)
        return CLINFER_OK;
    char options[128], defines[64];
    snprintf(options, sizeof options, "%s -DGMV_WG=%d",
             cl_type_defines(type, defines, sizeof defines), GPU_MV_WG);
    clinfer_status st = cl_build(b, "gpu_matvec.cl", options, &t->gpu_program);
    if (st != CLINFER_OK) return st;
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(t->gpu_program, "matvec_gpu", &err);
    size_t max_wg = 0;
    if (err == CL_SUCCESS)
        err = clGetKernelWorkGroupInfo(k, b->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_wg,
                                       &max_wg, NULL);
    if (err == CL_SUCCESS && max_wg >= GPU_MV_WG) { /* else matvec_wg stays */
        clReleaseKernel(t->matvec);
        t->matvec = k;
        t->matvec_rows = GPU_MV_ROWS;
        return CLINFER_OK;
    }
    if (k) clReleaseKernel(k);
    return cl_error(err, "matvec_gpu");
}

clinfer_status cl_build_type(cl_backend_ctx *b, clinfer_dtype type) {
    type_kernels *t = &b->types->types[type];
    if (t->program) return CLINFER_OK;
    char options[320], defines[64]; /* the fused norm of matvec_q8_il rounds as quantize.cl does */
    snprintf(options, sizeof options,
             "%s -DMV_WG=%zu -DMV_MAX_N=%d -DGQ_M=%d -DGQ_N=%d -DIL_COLS=%d -DILF_COLS=%d "
             "-DKQ_REC_BYTES=%d -DKQ_RECS=%d -cl-fp32-correctly-rounded-divide-sqrt",
             cl_type_defines(type, defines, sizeof defines), b->types->mv_wg, MATVEC_MAX_N,
             GEMM_Q8_M, GEMM_Q8_N, IL_COLS, IL_F32_COLS, KQ_REC_BYTES, KQ_RECS);
    clinfer_status st = cl_build(b, "matvec.cl", options, &t->program);
    cl_int err = CL_SUCCESS;
    if (st == CLINFER_OK)
        t->matvec = clCreateKernel(t->program, cl_cpu_rows(b) ? "matvec_rows" : "matvec_wg", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && cl_cpu_rows(b))
        t->matvec_n = clCreateKernel(t->program, "matvec_rows_n", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && cl_cpu_rows(b))
        t->matvec_norm = clCreateKernel(t->program, "matvec_rows_norm", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS)
        t->dequant = clCreateKernel(t->program, "dequant_rows", &err);
    if (st == CLINFER_OK && err == CL_SUCCESS && cl_cpu_rows(b)) {
        /* present only where matvec.cl compiled its AVX2 / AVX-512 integer paths */
        if (cl_program_has_kernel(t->program, "matvec_q8"))
            t->matvec_q8 = clCreateKernel(t->program, "matvec_q8", &err);
        if (err == CL_SUCCESS && t->matvec_q8) /* compiled alongside it */
            t->gemm_q8 = clCreateKernel(t->program, "gemm_q8", &err);
        if (err == CL_SUCCESS && cl_program_has_kernel(t->program, "gemm_kq")) {
            t->stage_kq = clCreateKernel(t->program, "stage_kq", &err);
            if (err == CL_SUCCESS) t->gemm_kq = clCreateKernel(t->program, "gemm_kq", &err);
        }
        if (err == CL_SUCCESS && b->types->interleave &&
            cl_program_has_kernel(t->program, "matvec_q8_il")) /* the types laid out by 16 rows */
            t->matvec_q8_il = clCreateKernel(t->program, "matvec_q8_il", &err);
        if (err == CL_SUCCESS && t->matvec_q8_il)
            t->matvec_q8_il_norm = clCreateKernel(t->program, "matvec_q8_il_norm", &err);
        if (err == CL_SUCCESS && b->types->interleave &&
            cl_program_has_kernel(t->program, "matvec_il_n"))
            t->matvec_il_n = clCreateKernel(t->program, "matvec_il_n", &err);
    }
    if (st == CLINFER_OK) st = cl_error(err, "clCreateKernel(matvec.cl)");
    if (st == CLINFER_OK) st = gpu_matvec(b, type, t);
    /* 1 while every type built so far that takes 8-bit x has integer dots (Q5_0 has none):
     * otherwise the roundings must also write d * q for the f32 kernels */
    if (st == CLINFER_OK && dtype_takes_q8_act(type))
        b->types->q8_dots = t->matvec_q8 != NULL && b->types->q8_dots != 0;
    if (st != CLINFER_OK) { /* leave nothing half-built: the next call tries again */
        err_prefix("building matvec.cl for %s", dtype_name(type));
        release(t);
    }
    return st;
}

clinfer_status cl_types_init(cl_backend_ctx *b) {
    struct cl_types *s = calloc(1, sizeof *s);
    if (!s) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: kernel state");
    b->types = s;
    clinfer_dev_options dev;
    dev_options_get(&dev);
    s->interleave = cl_cpu_rows(b) ? dev.interleave : 0; /* 2: forced (weights_cl.c) */
    s->gpu_legacy = dev.gpu_legacy;
    for (s->mv_wg = GPU_WG; s->mv_wg > 1 && s->mv_wg > b->info.max_work_group_size;)
        s->mv_wg /= 2;
    s->q8_dots = -1;
    return cl_build_type(b, CLINFER_DT_F32);
}

void cl_types_free(cl_backend_ctx *b) {
    if (!b->types) return;
    for (int i = 0; i < CLINFER_DT_ID_LIMIT; i++)
        release(&b->types->types[i]);
    free(b->types);
    b->types = NULL;
}

bool cl_types_int8_dots(const cl_backend_ctx *b) {
    for (int t = 0; b->types && t < CLINFER_DT_ID_LIMIT; t++)
        if (b->types->types[t].matvec_q8) return true;
    return false;
}
