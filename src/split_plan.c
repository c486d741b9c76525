/* Plans across devices (split_plan.h). */
#include "split_plan.h"

#include <stdlib.h>

#include "error.h"

clinfer_status split_plan_build(const clinfer_context *c, int n, const exec_layout *layout,
                                split_plan **out) {
    clinfer_status st = CLINFER_OK;
    model_span spans[MODEL_MAX_SPANS];
    split_plan *p = calloc(1, sizeof *p);
    if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "executor: no memory for a plan");
    p->n_seg = model_spans(c->model, spans);
    for (size_t s = 0; s < p->n_seg; s++) {
        split_segment *g = &p->seg[s];
        *g = (split_segment){NULL, spans[s].first, spans[s].end, spans[s].dev};
        CHECK(exec_plan_build_parts(c->model, context_state(c, g->dev), n, layout, g->first, g->end,
                                    &g->plan));
    }
    *out = p;
    p = NULL;
cleanup:
    split_plan_free(p);
    return st;
}

void split_plan_free(split_plan *p) {
    for (size_t s = 0; p && s < p->n_seg; s++)
        exec_plan_free(p->seg[s].plan);
    free(p);
}

/* Whether segment s runs in a walk with or without the head: not where it holds the head
 * alone and the walk has none. */
static bool runs(const split_plan *p, size_t s, bool with_logits) {
    return exec_plan_len(p->seg[s].plan, with_logits) > 0;
}

clinfer_status split_plan_cross(clinfer_context *c, const split_plan *p, size_t s) {
    clinfer_status st = CLINFER_OK;
    const split_segment *from = &p->seg[s - 1], *to = &p->seg[s];
    const clinfer_backend *a = context_backend(c, from->dev), *b = context_backend(c, to->dev);
    size_t bytes = (size_t)exec_plan_rows(to->plan) * c->model->hp.n_embd * sizeof(float);
    CHECK(a->i->buffer_read(a->ctx, context_state(c, from->dev)->buf[EXEC_X], 0, bytes, c->hidden));
    /* Queued where the backend can: c->hidden is next written by the read of this device's
     * output (its next boundary's or the next step's), and the walk that called this waits for
     * the last device it ran on (batch.c), so the copy is done before then. */
    CHECK(backend_write_queued(b, context_state(c, to->dev)->buf[EXEC_X], 0, bytes, c->hidden));
cleanup:
    if (st != CLINFER_OK)
        err_prefix("executor: the hidden state from device %u to device %u", from->dev, to->dev);
    return st;
}

clinfer_status split_plan_run(clinfer_context *c, split_plan *p, int pos0, bool with_logits) {
    clinfer_status st = CLINFER_OK;
    size_t s = 0;
    for (; s < p->n_seg && runs(p, s, with_logits); s++) {
        if (s) CHECK(split_plan_cross(c, p, s));
        CHECK(exec_plan_run(context_backend(c, p->seg[s].dev), p->seg[s].plan, pos0, with_logits,
                            c->profile));
    }
cleanup:
    if (st != CLINFER_OK && s > 0) { /* a queued crossing done before c->hidden is written again */
        const clinfer_backend *be = context_backend(c, p->seg[s].dev);
        be->i->sync(be->ctx);
    }
    return st;
}

clinfer_status split_plan_prepare(clinfer_context *c, split_plan *p, bool with_logits) {
    clinfer_status st = CLINFER_OK;
    for (size_t s = 0; s < p->n_seg && runs(p, s, with_logits); s++)
        CHECK(exec_plan_prepare(context_backend(c, p->seg[s].dev), p->seg[s].plan, with_logits));
cleanup:
    return st;
}
