/* The plan of a step of a context whose model is split across devices (src/placement.h): one
 * executor plan per run of parts on one device (a segment), each walked on that device's
 * instance, the hidden state (EXEC_X's rows) copied through the host from each segment's device
 * to the next one's. A model on one device has one segment: the executor's plan, run as it
 * always was. */
#ifndef CLINFER_SPLIT_PLAN_H
#define CLINFER_SPLIT_PLAN_H

#include "context.h"
#include "placement.h"

typedef struct {
    exec_plan *plan; /* parts [first, end) */
    int first, end;
    uint32_t dev;
} split_segment;

typedef struct split_plan {
    size_t n_seg;
    split_segment seg[MODEL_MAX_SPANS];
} split_plan;

/* The plan of n tokens (layout NULL: one sequence, positions bound at run) on c's devices. */
clinfer_status split_plan_build(const clinfer_context *c, int n, const exec_layout *layout,
                                split_plan **out);
void split_plan_free(split_plan *p);

/* exec_plan_run of each segment in turn on its device, the hidden state crossing between them;
 * without logits a segment of the head alone is not run. */
clinfer_status split_plan_run(clinfer_context *c, split_plan *p, int pos0, bool with_logits);
/* exec_plan_prepare of each segment. */
clinfer_status split_plan_prepare(clinfer_context *c, split_plan *p, bool with_logits);
/* Copies the hidden state of the plan's n rows from segment s - 1's device to segment s's. */
clinfer_status split_plan_cross(clinfer_context *c, const split_plan *p, size_t s);

#endif
