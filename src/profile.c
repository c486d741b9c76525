/* The executor's profiler; see profile.h. */
#include "profile.h"

#include <stdlib.h>

#include "clock.h"
#include "error.h"
#include "options.h"

const char *exec_op_name(clinfer_op_kind kind) {
    /* the profile's row for runs of ops */
    return (int)kind == EXEC_PROFILE_GRAPH ? "graph" : op_kind_name(kind);
}

clinfer_status exec_profile_create(clinfer_toggle profile, exec_profile **out) {
    bool want_table;
    const char *trace;
    options_profiling(profile, &want_table, &trace);
    bool want_trace = trace != NULL;
    *out = NULL;
    if (!want_table && !want_trace) return CLINFER_OK;
    exec_profile *p = calloc(1, sizeof *p);
    if (!p) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "profile: no memory");
    if (want_trace) {
        if (!(p->trace = fopen(trace, "w"))) {
            free(p);
            return err_fail(CLINFER_ERR_IO, "profile: cannot write the trace file '%s'", trace);
        }
        fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", p->trace);
    }
    p->t_origin = clock_now_ms();
    p->table = want_table;
    *out = p;
    return CLINFER_OK;
}

static double f32_bytes(double elements) {
    return 4.0 * elements;
}

void exec_op_cost(const clinfer_op *op, clinfer_dtype w_type, double *bytes, double *flops) {
    double b = 0, f = 0;
    switch (op->kind) {
    case CLINFER_OP_MATMUL: {
        double m = op->matmul.m, k = op->matmul.k, n = op->matmul.n;
        b = m * (double)dtype_row_bytes(w_type, (size_t)op->matmul.k) + f32_bytes(n * k) +
            f32_bytes(n * m) * (op->matmul.accumulate ? 2 : 1) +
            (op->matmul.bias.buf ? f32_bytes(m) : 0);
        f = 2 * m * k * n;
        break;
    }
    case CLINFER_OP_EMBED: {
        double n = op->embed.n;
        b = n * (double)dtype_row_bytes(w_type, (size_t)op->embed.k) + f32_bytes(n * op->embed.k) +
            f32_bytes(n);
        break;
    }
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM: {
        double e = (double)op->norm.n * op->norm.d;
        b = f32_bytes(2 * e) + f32_bytes(op->norm.d) * (op->norm.b.buf ? 2 : 1);
        f = (op->kind == CLINFER_OP_RMSNORM ? 3 : 5) * e;
        break;
    }
    case CLINFER_OP_ROPE: {
        double rows = (double)op->rope.n * op->rope.n_heads;
        b = f32_bytes(2 * rows * op->rope.head_dim);
        if (op->rope.k_dst.buf) { /* k written, v read and written */
            double kv = (double)op->rope.n * op->rope.kv_heads * op->rope.head_dim;
            b += kv * (4 + 2 * (op->rope.kv_type == CLINFER_DT_F16 ? 2 : 4));
        }
        f = 3 * rows * op->rope.n_rot; /* a rotation: 4 multiplies, 2 adds per pair */
        break;
    }
    case CLINFER_OP_STORE:
        b = (double)op->store.count * (4 + (op->store.dst_type == CLINFER_DT_F16 ? 2 : 4));
        break;
    case CLINFER_OP_ATTENTION: {
        const double n = op->attention.n, pos0 = op->attention.pos0, dim = op->attention.head_dim;
        double kv_elem = op->attention.kv_type == CLINFER_DT_F16 ? 2 : 4;
        double attended = n * pos0 + n * (n + 1) / 2; /* cache rows, summed over the tokens */
        b = f32_bytes(2 * n * op->attention.n_head * dim) +
            2 * (pos0 + n) * op->attention.n_kv_head * dim * kv_elem;
        f = 4 * attended * op->attention.n_head * dim; /* q.k and p.v */
        if (op->attention.rope.n_rot) { /* as the ropes it stands for (see the ROPE case) */
            double kv = n * op->attention.n_kv_head * dim;
            b += kv * (4 + 2 * kv_elem);
            f +=
                3 * n * (op->attention.n_head + op->attention.n_kv_head) * op->attention.rope.n_rot;
        }
        break;
    }
    case CLINFER_OP_ADD:
    case CLINFER_OP_SWIGLU: {
        double c = (double)op->eltwise.count;
        b = f32_bytes(2 * c + (double)op->eltwise.b_count);
        f = (op->kind == CLINFER_OP_SWIGLU ? 5 : 1) * c;
        break;
    }
    case CLINFER_OP_GELU: {
        double c = (double)op->eltwise.count;
        b = f32_bytes(2 * c);
        f = 8 * c;
        break;
    }
    default:
        break;
    }
    *bytes = b;
    *flops = f;
}

clinfer_status exec_profile_walk(exec_profile *p, int n, size_t n_ops) {
    if (n_ops > p->timing_cap) {
        clinfer_op_timing *grown = realloc(p->timing, n_ops * sizeof *grown);
        if (grown) p->timing = grown;
        size_t *runs = grown ? realloc(p->runs, n_ops * sizeof *runs) : NULL;
        if (runs) p->runs = runs;
        if (!runs) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "profile: %zu op timings", n_ops);
        p->timing_cap = n_ops;
    }
    p->walk_n = n;
    p->walk_t0 = clock_now_ms();
    return CLINFER_OK;
}

void exec_profile_enqueued(exec_profile *p) {
    p->walk_enqueued = clock_now_ms();
}

void exec_profile_walk_end(exec_profile *p, bool timed) {
    exec_profile_walks *w = &p->walks[p->walk_n > 1];
    w->wall_ms += clock_now_ms() - p->walk_t0;
    if (timed) w->enqueue_ms += p->walk_enqueued - p->walk_t0;
    w->tokens += (uint64_t)p->walk_n;
    w->walks++;
    p->timed |= timed;
}

/* Row `row` gets ms of time and launches launches, and a trace event over [start, end) (ms from
 * time zero), for bytes and flops of work; a run (the graph row) of n_ops ops from first on. */
static void record(exec_profile *p, int row, double bytes, double flops, double ms,
                   uint32_t launches, double start, double end, size_t n_ops,
                   clinfer_op_kind first) {
    exec_profile_walks *w = &p->walks[p->walk_n > 1];
    w->op_ms += ms;
    w->launches += launches;
    p->ops[row]++;
    p->launches[row] += launches;
    p->ms[row] += ms;
    p->bytes[row] += bytes;
    p->flops[row] += flops;
    if (!p->trace || !launches) return;
    fprintf(p->trace,
            "%s{\"name\": \"%s\", \"cat\": \"op\", \"ph\": \"X\", \"pid\": 1, \"tid\": 1, "
            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"ms\": %.6f, \"launches\": %u, "
            "\"bytes\": %.0f, \"flops\": %.0f",
            p->n_events++ ? ",\n" : "", exec_op_name((clinfer_op_kind)row), 1e3 * start,
            1e3 * (end - start), ms, launches, bytes, flops);
    if (row == EXEC_PROFILE_GRAPH)
        fprintf(p->trace, ", \"ops\": %zu, \"first\": \"%s\"", n_ops, exec_op_name(first));
    fputs("}}", p->trace);
}

/* A run of n ops with its time: see EXEC_PROFILE_GRAPH. */
static void record_run(exec_profile *p, const clinfer_op *ops, size_t n,
                       const clinfer_dtype *w_type, double ms, uint32_t launches, double start,
                       double end) {
    double run_bytes = 0, run_flops = 0;
    for (size_t i = 0; i < n; i++) {
        double bytes, flops;
        exec_op_cost(&ops[i], w_type[i], &bytes, &flops);
        run_bytes += bytes;
        run_flops += flops;
        if (n > 2 || i > 0)
            record(p, ops[i].kind, n > 2 ? 0 : bytes, n > 2 ? 0 : flops, 0, 0, start, end, 1,
                   ops[i].kind);
        else
            record(p, ops[i].kind, bytes, flops, ms, launches, start, end, 1, ops[i].kind);
    }
    if (n > 2)
        record(p, EXEC_PROFILE_GRAPH, run_bytes, run_flops, ms, launches, start, end, n,
               ops[0].kind);
}

void exec_profile_ops(exec_profile *p, const clinfer_op *ops, size_t n, const clinfer_dtype *w_type,
                      double t0, double t1) {
    record_run(p, ops, n, w_type, t1 - t0, 1, t0 - p->t_origin, t1 - p->t_origin);
}

void exec_profile_device_ops(exec_profile *p, const clinfer_op *ops, size_t n,
                             const clinfer_op_timing *t, const clinfer_dtype *w_type) {
    record_run(p, ops, n, w_type, t->ms, t->launches, t->start, t->end);
}

static void print_walks(const exec_profile *p, int kind, FILE *out) {
    const exec_profile_walks *w = &p->walks[kind];
    if (!w->tokens) return;
    double tokens = (double)w->tokens, gaps = w->wall_ms - w->op_ms;
    fprintf(out,
            "  %s: %llu tokens in %llu walks: wall %.3f ms/token = %s %.3f ms + gaps %.3f ms "
            "(%.1f launches/token, gap per launch %.1f us)",
            kind ? "prefill" : "decode", (unsigned long long)w->tokens,
            (unsigned long long)w->walks, w->wall_ms / tokens, p->timed ? "kernels" : "ops",
            w->op_ms / tokens, gaps / tokens, (double)w->launches / tokens,
            w->launches ? 1e3 * gaps / (double)w->launches : 0.0);
    if (p->timed) /* the host's share: enqueueing runs on the cores a CPU device computes on */
        fprintf(out, "; host enqueue %.3f ms/token (%.1f us per launch)", w->enqueue_ms / tokens,
                w->launches ? 1e3 * w->enqueue_ms / (double)w->launches : 0.0);
    fputc('\n', out);
}

static void print_table(const exec_profile *p, FILE *out) {
    double total = 0;
    for (int k = 0; k < EXEC_PROFILE_ROWS; k++)
        total += p->ms[k];
    if (!p->walks[0].walks && !p->walks[1].walks) {
        fputs("profile: no plan walk completed\n", out);
        return;
    }
    fputs(p->timed ? "profile: kernel times from the device's clock, nothing waited for; launches "
                     "are kernels\n"
                   : "profile: host times, each op waited for (the backend cannot time its "
                     "kernels), so small ops include the wait; launches are ops\n",
          out);
    print_walks(p, 0, out);
    print_walks(p, 1, out);
    fprintf(out, "  %-9s %8s %9s %11s %6s %9s %9s %9s\n", "op", "ops", "launches",
            p->timed ? "kernel ms" : "op ms", "share", "us/op", "GB/s", "GFLOP/s");
    for (int k = 0; k < EXEC_PROFILE_ROWS; k++) {
        if (!p->ops[k]) continue;
        double s = p->ms[k] / 1e3;
        fprintf(out, "  %-9s %8llu %9llu %11.2f %5.1f%% %9.1f %9.2f %9.2f\n",
                exec_op_name((clinfer_op_kind)k), (unsigned long long)p->ops[k],
                (unsigned long long)p->launches[k], p->ms[k],
                total > 0 ? 100 * p->ms[k] / total : 0.0, 1e3 * p->ms[k] / (double)p->ops[k],
                s > 0 ? p->bytes[k] / s / 1e9 : 0.0, s > 0 ? p->flops[k] / s / 1e9 : 0.0);
    }
}

void exec_profile_free(exec_profile *p, FILE *out) {
    if (!p) return;
    if (p->table && out) print_table(p, out);
    if (p->trace) {
        fputs("\n]}\n", p->trace);
        if (fclose(p->trace) != 0 && out) fprintf(out, "profile: writing the trace failed\n");
    }
    free(p->timing);
    free(p->runs);
    free(p);
}
