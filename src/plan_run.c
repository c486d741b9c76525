/* Running a plan (executor.h): binding each step to the walk's position, then handing the walk
 * to the backend's own plan of it (plan_run) or its ops one run at a time, timed for the
 * profile. */
#include <stdio.h>

#include "clock.h"
#include "error.h"
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

int exec_plan_rows(const exec_plan *p) {
    return p->n;
}

/* Names the failed op i of a walk of end ops in the error message. */
static void op_failed(const exec_plan *p, const clinfer_op *op, size_t i, size_t end, int pos0) {
    err_prefix("executor: op %zu of %zu (%s, n %d, pos0 %d)", i, end, op_kind_name(op->kind), p->n,
               pos0);
}

/* Before a walk's first run: every op is one the backend can run (supports_op), and where the
 * backend runs walks itself, its plan of the walk. A bound plan (a batch layout's, made for one
 * step) is not checked ahead: op checks its ops as they run, and the context's decode plan, of
 * the same ops, was checked when the context was made. */
static clinfer_status first_run(const clinfer_backend *be, exec_plan *p, bool with_logits,
                                size_t end, int pos0) {
    clinfer_status st = CLINFER_OK;
    for (size_t i = 0; be->i->supports_op && !p->bound && !p->checked[with_logits] && i < end; i++)
        if ((st = op_check_operands(&p->walk[i])) != CLINFER_OK ||
            (st = be->i->supports_op(be->ctx, &p->walk[i])) != CLINFER_OK) {
            op_failed(p, &p->walk[i], i, end, pos0);
            return st;
        }
    p->checked[with_logits] = true;
    if (!be->i->plan_run || p->native[with_logits]) return CLINFER_OK;
    p->be = be;
    st = be->i->plan_create(be->ctx, p->walk, end, p->n == 1 && with_logits, !p->bound,
                            &p->native[with_logits]);
    if (st != CLINFER_OK) err_prefix("executor: a plan of %zu ops (n %d)", end, p->n);
    return st;
}

/* A walk being profiled: each run of ops is marked for the device's timing where the backend
 * times its kernels, else waited for and timed here. */
typedef struct {
    const clinfer_backend *be;
    exec_plan *p;
    exec_profile *profile;
    bool timed;
    double t0;
} profiled;

static void run_begin(void *user, size_t first) {
    profiled *w = user;
    if (w->timed) w->be->i->timing_mark(w->be->ctx, first);
    w->t0 = clock_now_ms();
}

static clinfer_status run_end(void *user, size_t first, size_t taken) {
    profiled *w = user;
    clinfer_status st = CLINFER_OK;
    w->profile->runs[first] = taken;
    if (!w->timed && (st = w->be->i->sync(w->be->ctx)) == CLINFER_OK)
        exec_profile_ops(w->profile, w->p->walk + first, taken, w->p->w_type + first, w->t0,
                         clock_now_ms());
    return st;
}

/* The walk's ops one run at a time: those the backend takes at once (op_run), else one op. */
static clinfer_status run_ops(const clinfer_backend *be, exec_plan *p, size_t end, int pos0,
                              const clinfer_run_hooks *hooks) {
    clinfer_status st = CLINFER_OK;
    size_t taken = 1;
    for (size_t i = 0; i < end && st == CLINFER_OK; i += taken) {
        if (hooks) hooks->begin(hooks->user, i);
        taken = 0;
        if (be->i->op_run) st = be->i->op_run(be->ctx, p->walk + i, end - i, &taken);
        if (st == CLINFER_OK && taken == 0) {
            st = be->i->op(be->ctx, &p->walk[i]);
            taken = 1;
        }
        if (st == CLINFER_OK && hooks) st = hooks->end(hooks->user, i, taken);
        if (st != CLINFER_OK) op_failed(p, &p->walk[i], i, end, pos0);
    }
    return st;
}

/* The walk through the backend's own plan of it where it has one, else run_ops. */
static clinfer_status run_walk(const clinfer_backend *be, exec_plan *p, bool with_logits, int pos0,
                               const clinfer_run_hooks *hooks) {
    size_t end = exec_plan_len(p, with_logits);
    if (!p->native[with_logits]) return run_ops(be, p, end, pos0, hooks);
    clinfer_status st = be->i->plan_run(be->ctx, p->native[with_logits], p->walk, end, hooks);
    if (st != CLINFER_OK)
        err_prefix("executor: a walk of %zu ops (n %d, pos0 %d)", end, p->n, pos0);
    return st;
}

clinfer_status exec_plan_prepare(const clinfer_backend *be, exec_plan *p, bool with_logits) {
    size_t end = exec_plan_len(p, with_logits);
    for (size_t i = 0; i < end; i++)
        p->walk[i] = step_op(p, i, 0);
    return first_run(be, p, with_logits, end, 0);
}

clinfer_status exec_plan_run(const clinfer_backend *be, exec_plan *p, int pos0, bool with_logits,
                             exec_profile *profile) {
    size_t end = exec_plan_len(p, with_logits);
    for (size_t i = 0; i < end; i++)
        p->walk[i] = step_op(p, i, pos0);
    clinfer_status st = first_run(be, p, with_logits, end, pos0);
    if (st != CLINFER_OK) return st;
    if (!profile) return run_walk(be, p, with_logits, pos0, NULL);
    /* A backend that times its kernels runs the walk as unprofiled; else each run of ops is
     * waited for. */
    if ((st = exec_profile_walk(profile, p->n, end)) != CLINFER_OK) return st;
    profiled w = {be, p, profile, be->i->timing_mark && be->i->timing_mark(be->ctx, 0), 0};
    clinfer_run_hooks hooks = {run_begin, run_end, &w};
    st = run_walk(be, p, with_logits, pos0, &hooks);
    if (w.timed) return collect_timings(be, p, end, profile, st);
    if (st == CLINFER_OK) exec_profile_walk_end(profile, false);
    return st;
}

exec_step exec_plan_at(const exec_plan *p, size_t i, int pos0) {
    return (exec_step){.op = step_op(p, i, pos0),
                       .layer = p->steps[i].layer,
                       .first_row = i >= p->n_body ? p->n - 1 : 0,
                       .w_type = p->w_type[i]};
}

clinfer_status exec_plan_step(const clinfer_backend *be, const exec_plan *p, size_t i, int pos0) {
    clinfer_op ops[2] = {step_op(p, i, pos0)};
    clinfer_status st = CLINFER_OK;
    size_t taken = 0;
    /* Where the next step rounds this one's output, the two go as walks launch them (the backend
     * may round in this op's kernel, which then is what the step measures); the ROUND_Q8 runs
     * again alone as the next step. */
    if (be->i->op_run && i + 1 < p->n_steps) {
        ops[1] = step_op(p, i + 1, pos0);
        if (ops[1].kind == CLINFER_OP_ROUND_Q8) st = be->i->op_run(be->ctx, ops, 2, &taken);
    }
    if (st == CLINFER_OK && taken == 0) st = be->i->op(be->ctx, &ops[0]);
    if (st == CLINFER_OK) st = be->i->sync(be->ctx);
    if (st != CLINFER_OK) op_failed(p, &ops[0], i, p->n_steps, pos0);
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
            fprintf(out, " n %d heads %d/%d dim %d%s", op->attention.n, op->attention.n_head,
                    op->attention.n_kv_head, op->attention.head_dim,
                    op->attention.rope.n_rot ? " + rope and cache write" : "");
            break;
        case CLINFER_OP_ROUND_Q8:
            fprintf(out, " n %d k %d per %d", op->round_q8.n, op->round_q8.k, op->round_q8.block);
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
