/* CLBlast for f32 GEMM where the tuning table says it wins (cl_matmul_init): its SGEMM, and the
 * reference count of contexts that use it, which empties its program cache with the last. */
#ifdef CLINFER_WITH_CLBLAST
#include <clblast_c.h>
#include <pthread.h>

#include "error.h"
#include "matmul_cl.h"

/* CLBlast keeps its compiled programs in a process-wide cache keyed by context, each holding
 * its context: left there they pile up with every backend made, and CLBlast's static
 * destructors release them at exit after the OpenCL runtime may be gone (heap corruption under
 * oclgrind). So the last live context using CLBlast empties the cache before its own context
 * is released; a later one compiles CLBlast's kernels again. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;
static int clblast_users;

void cl_clblast_hold(void) {
    pthread_mutex_lock(&clblast_lock);
    clblast_users++;
    pthread_mutex_unlock(&clblast_lock);
}

void cl_clblast_drop(void) {
    pthread_mutex_lock(&clblast_lock);
    if (--clblast_users == 0) CLBlastClearCache(); /* its status has nowhere to go */
    pthread_mutex_unlock(&clblast_lock);
}

/* f32 GEMM through CLBlast's SGEMM (bias_fill first where there is a bias). */
clinfer_status cl_clblast_gemm(cl_backend_ctx *b, cl_mem w, int w_off, int rows, const mm_args *a) {
    struct cl_matmul_state *s = b->mm;
    clinfer_status st = CLINFER_OK;
    if (a->flags & F_BIAS) {
        size_t global[2] = {(size_t)rows, (size_t)a->n};
        cl_arg fill[] = {{sizeof(cl_mem), &a->y},    {sizeof(int), &a->y_off},
                         {sizeof(int), &a->ldy},     {sizeof(int), &rows},
                         {sizeof(cl_mem), &a->bias}, {sizeof(int), &a->bias_off},
                         {sizeof(int), &a->flags}};
        st = cl_launch(b, s->bias_fill, "bias_fill", fill, sizeof fill / sizeof fill[0], 2, global,
                       NULL);
        if (st != CLINFER_OK) return st;
    }
    /* Row-major y[n][rows] = x[n][k] . w[rows][k]^T; beta 1 keeps the y to accumulate onto
     * or what bias_fill wrote. The event is its last kernel's (CLBlast issue 159): the
     * profile counts any pad/transpose kernels it runs besides as gaps. */
    cl_event event = NULL;
    cl_turn_begin(b);
    CLBlastStatusCode cs =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, (size_t)a->n,
                     (size_t)rows, (size_t)a->k, 1.0f, a->x, (size_t)a->x_off, (size_t)a->k, w,
                     (size_t)w_off, (size_t)a->k, a->flags ? 1.0f : 0.0f, a->y, (size_t)a->y_off,
                     (size_t)a->ldy, &b->queue, cl_timing_slot(b, &event));
    cl_turn_end(b);
    if (cs != CLBlastSuccess)
        /* OpenCL errors pass through; CLBlast's own codes (<= -1000) are not device faults */
        return err_fail(cs < 0 && cs > -1000 ? cs : CLINFER_ERR_UNSUPPORTED,
                        "OpenCL matmul: CLBlastSgemm(%d x %d x %d) failed with %d", a->n, rows,
                        a->k, (int)cs);
    return cl_timing_keep(b, event);
}
#endif
