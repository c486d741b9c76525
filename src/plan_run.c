/* Running a plan (executor.h): binding each step to the walk's position, handing runs of ops
 * to the backend, the decode route's choice (route.h) and the profile's timings. */
#include <stdio.h>

#include "error.h"
#include "log.h"
#include "options.h"
#include "plan.h"
#include "profile.h"

/* Step i's op at position pos0. */
static clinfer_op step_op(const exec_plan *p, size_t i, int pos0) {
    clinfer_op op = p->steps[i].op;
    if (p->bound) return op;
    size_t shift = (size_t)pos0 * p->steps[i].pos_stride;
    switch (op.kind) {
    case CLINFER_OP_ROPE:
        op.rope.pos0 = pos0;
        op.rope.k_dst.offset += shift;
        op.rope.v_dst.offset += shift;
        break;
    case CLINFER_OP_ATTENTION:
        op.attention.pos0 = pos0;
        break;
    case CLINFER_OP_STORE:
        op.store.dst.offset += shift;
        break;
    case CLINFER_OP_EMBED:
        op.embed.ids.offset += shift;
        break;
    default:
        break;
    }
    return op;
}

/* The end of a walk whose kernels the backend timed: one wait, then every op's kernel times;
 * st is the walk's status. */
static clinfer_status collect_timings(const clinfer_backend *be, const exec_plan *p, size_t end,
                                      exec_profile *profile, clinfer_status st) {
    exec_profile_enqueued(profile);
    if (st != CLINFER_OK) { /* end the recording, keeping the walk's error as the one reported */
        char error[1024];
        snprintf(error, sizeof error, "%s", clinfer_last_error());
        be->i->timing_collect(be->ctx, profile->timing, 0);
        return err_fail(st, "%s", error);
    }
    if ((st = be->i->timing_collect(be->ctx, profile->timing, end)) != CLINFER_OK) return st;
    exec_profile_walk_end(profile, true);
    for (size_t i = 0; i < end; i += profile->runs[i])
        exec_profile_device_ops(profile, p->walk + i, profile->runs[i], &profile->timing[i],
                                p->w_type + i);
    return CLINFER_OK;
}

size_t exec_plan_len(const exec_plan *p, bool with_logits) {
    return with_logits ? p->n_steps : p->n_body;
}

/* Names the failed op i of a walk of end ops in the error message. */
static void op_failed(const exec_plan *p, const clinfer_op *op, size_t i, size_t end, int pos0) {
    err_prefix("executor: op %zu of %zu (%s, n %d, pos0 %d)", i, end, op_kind_name(op->kind), p->n,
               pos0);
}

/* Whether a decode step's route was switched on be for route's pick (false: no choice here). */
static bool route_step(const clinfer_backend *be, const exec_route *route, int *pick) {
    *pick = exec_route_pick(route);
    return be->i->graph_route && be->i->graph_route(be->ctx, *pick == ROUTE_GRAPH);
}

/* Times a decode step of route pick from t0 to its end (the caller reads its logits next, so the
 * wait costs nothing) and logs a switch of route (CLINFER_VERBOSE). */
static clinfer_status route_done(const clinfer_backend *be, exec_route *route, int pick,
                                 double t0) {
    clinfer_status st = be->i->sync(be->ctx);
    if (st != CLINFER_OK || !exec_route_record(route, pick, exec_now_ms() - t0)) return st;
    clinfer_dev_options dev;
    dev_options_get(&dev);
    if (dev.verbose)
        log_msg(CLINFER_LOG_DEBUG,
                "decode steps now in %s: a step took %.2f ms there, %.2f ms in %s (median)",
                pick == ROUTE_GRAPH ? "one graph launch" : "per-op launches",
                exec_route_median(route, pick), exec_route_median(route, !pick),
                pick == ROUTE_GRAPH ? "per-op launches" : "graph launches");
    return st;
}

clinfer_status exec_plan_run(const clinfer_backend *be, exec_plan *p, int pos0, bool with_logits,
                             exec_profile *profile, exec_route *route) {
    size_t end = exec_plan_len(p, with_logits);
    clinfer_status st = CLINFER_OK;
    int pick = ROUTE_GRAPH; /* a profiled step takes the route, untimed */
    bool chosen = route && p->n == 1 && with_logits && route_step(be, route, &pick) && !profile;
    double t0 = chosen ? exec_now_ms() : 0;
    for (size_t i = 0; i < end; i++)
        p->walk[i] = step_op(p, i, pos0);
    /* A backend that times its kernels runs the walk as unprofiled; else each run of ops is
     * waited for. */
    bool timed = false;
    if (profile) {
        st = exec_profile_walk(profile, p->n, end);
        timed = st == CLINFER_OK && be->i->timing_mark && be->i->timing_mark(be->ctx, 0);
    }
    size_t taken = 1;
    for (size_t i = 0; i < end && st == CLINFER_OK; i += taken) {
        if (timed) be->i->timing_mark(be->ctx, i);
        double t0 = profile ? exec_now_ms() : 0;
        /* a run of ops in fewer launches where the backend can; its time counts as one */
        taken = 0;
        if (be->i->op_run) st = be->i->op_run(be->ctx, p->walk + i, end - i, &taken);
        if (st == CLINFER_OK && taken == 0) {
            st = be->i->op(be->ctx, &p->walk[i]);
            taken = 1;
        }
        if (profile) profile->runs[i] = taken;
        if (st == CLINFER_OK && profile && !timed && (st = be->i->sync(be->ctx)) == CLINFER_OK)
            exec_profile_ops(profile, p->walk + i, taken, p->w_type + i, t0, exec_now_ms());
        if (st != CLINFER_OK) op_failed(p, &p->walk[i], i, end, pos0);
    }
    if (timed) return collect_timings(be, p, end, profile, st);
    if (profile && st == CLINFER_OK) exec_profile_walk_end(profile, false);
    if (chosen && st == CLINFER_OK) st = route_done(be, route, pick, t0);
    return st;
}

exec_step exec_plan_at(const exec_plan *p, size_t i, int pos0) {
    return (exec_step){.op = step_op(p, i, pos0),
                       .layer = p->steps[i].layer,
                       .first_row = i >= p->n_body ? p->n - 1 : 0,
                       .w_type = p->w_type[i]};
}

clinfer_status exec_plan_step(const clinfer_backend *be, const exec_plan *p, size_t i, int pos0) {
    clinfer_op op = step_op(p, i, pos0);
    clinfer_status st = be->i->op(be->ctx, &op);
    if (st == CLINFER_OK) st = be->i->sync(be->ctx);
    if (st != CLINFER_OK) op_failed(p, &op, i, p->n_steps, pos0);
    return st;
}

void exec_plan_print(const exec_plan *p, FILE *out) {
    fprintf(out, "plan for %d tokens: %zu ops (%zu body + head)\n", p->n, p->n_steps, p->n_body);
    for (size_t i = 0; i < p->n_steps; i++) {
        const clinfer_op *op = &p->steps[i].op;
        fprintf(out, "  %4zu %-9s", i, exec_op_name(op->kind));
        switch (op->kind) {
        case CLINFER_OP_MATMUL:
            fprintf(out, " m %d k %d n %d%s%s%s", op->matmul.m, op->matmul.k, op->matmul.n,
                    op->matmul.bias.buf ? " +bias" : "", op->matmul.accumulate ? " +=" : "",
                    op->matmul.x_q8 ? " x q8" : "");
            break;
        case CLINFER_OP_ATTENTION:
            fprintf(out, " n %d heads %d/%d dim %d%s%s", op->attention.n, op->attention.n_head,
                    op->attention.n_kv_head, op->attention.head_dim,
                    op->attention.rope.n_rot ? " + rope and cache write" : "",
                    op->attention.out_q8 ? " out q8" : "");
            break;
        case CLINFER_OP_ROPE:
            fprintf(out, " n %d heads %d", op->rope.n, op->rope.n_heads);
            if (op->rope.k_dst.buf)
                fprintf(out, " + cache write of %d key heads and v -> %s", op->rope.kv_heads,
                        dtype_name(op->rope.kv_type));
            break;
        case CLINFER_OP_STORE:
            fprintf(out, " %zu -> %s", op->store.count, dtype_name(op->store.dst_type));
            break;
        default:
            break;
        }
        if (p->steps[i].pos_stride)
            fprintf(out, " (advances %zu per position)", p->steps[i].pos_stride);
        fputc('\n', out);
    }
}
