/* What a plan holds (src/executor.c builds it, src/plan_run.c runs it); executor.h keeps it
 * opaque to everyone else. */
#ifndef CLINFER_PLAN_H
#define CLINFER_PLAN_H

#include "executor.h"

typedef struct {
    clinfer_op op;
    /* > 0: the op's position-dependent refs (STORE dst, ROPE k_dst and v_dst, EMBED ids)
     * advance by pos0 * stride */
    size_t pos_stride;
    int layer; /* exec_step's */
} plan_step;

struct exec_plan {
    int n;
    bool bound;            /* a layout plan: positions already in its ops */
    size_t n_body;         /* steps up to the last layer */
    size_t n_steps;        /* plus output norm and LM head */
    clinfer_op *walk;      /* n_steps: the ops of the walk under way, at its position */
    clinfer_dtype *w_type; /* n_steps: MATMUL and EMBED's weight type, for the profile */
    /* The walks without and with the head, as they were first run: checked against the
     * backend's supports_op, and made its own plan where it has plan_run (be made them). */
    bool checked[2];
    const clinfer_backend *be;
    void *native[2];
    plan_step steps[];
};

#endif
