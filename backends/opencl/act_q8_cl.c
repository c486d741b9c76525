/* The 8-bit activations of x_q8 matmuls (act_q8_cl.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "act_q8_cl.h"
#include "type_kernels_cl.h"
#include "weights_cl.h"

clinfer_status cl_act_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    struct cl_act_state *s = calloc(1, sizeof *s);
    if (!s) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: activation state");
    b->act = s;
    CHECK(cl_build(b, "quantize.cl", "-cl-fp32-correctly-rounded-divide-sqrt", &s->program));
    const struct {
        cl_kernel *kernel;
        const char *name;
    } rounding[] = {{&s->quantize, "quantize_q8_act"},
                    {&s->rmsnorm_q8, "rmsnorm_q8_act"},
                    {&s->glu_q8, "glu_q8_act"}};
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++) {
        *rounding[i].kernel = clCreateKernel(s->program, rounding[i].name, &err);
        CHECK(cl_error(err, rounding[i].name));
    }
cleanup:
    return st;
}

void cl_act_free(cl_backend_ctx *b) {
    struct cl_act_state *s = b->act;
    if (!s) return;
    cl_kernel rounding[] = {s->quantize, s->rmsnorm_q8, s->glu_q8};
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++)
        if (rounding[i]) clReleaseKernel(rounding[i]);
    if (s->program) clReleaseProgram(s->program);
    free(s);
    b->act = NULL;
}

void cl_q8_side_free(clinfer_buffer *buf) {
    cl_q8_side *side = buf->q8;
    if (!side) return;
    scratch *bufs[] = {&side->q, &side->d, &side->xo, &side->f};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->mem) clReleaseMemObject(bufs[i]->mem);
    free(side);
    buf->q8 = NULL;
}

/* Spans of a K-quant's x: their rounding writes Q6_K's group offsets xo too (round_q8.clh). */
static bool has_offsets(int span) {
    return span == QK_K / CLINFER_Q8_ACT_BLOCK;
}

static size_t round_count(const clinfer_op *round) {
    return (size_t)round->round_q8.n * (size_t)round->round_q8.k;
}

static int round_span(const clinfer_op *round) {
    return round->round_q8.block / CLINFER_Q8_ACT_BLOCK;
}

clinfer_status cl_q8_out_begin(cl_backend_ctx *b, const clinfer_op *round, cl_q8_out *o) {
    clinfer_status st = CLINFER_OK;
    clinfer_buffer *y = round->round_q8.y.buf;
    /* room for the whole buffer: the form never moves once made (a graph launch names it) */
    size_t values = y->head.bytes / sizeof(float);
    int span = round_span(round);
    if (!y->q8 && !(y->q8 = calloc(1, sizeof *y->q8)))
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: 8-bit activations' record");
    cl_q8_side *side = y->q8; /* what it holds stays until cl_q8_made: begin runs no kernel */
    CHECK(cl_ensure_scratch(b, &side->q, values));
    CHECK(cl_ensure_scratch(b, &side->d, values / CLINFER_Q8_ACT_BLOCK * 2 * sizeof(float)));
    if (has_offsets(span)) CHECK(cl_ensure_scratch(b, &side->xo, values / 16 * sizeof(int)));
    if (round->round_q8.y.offset) CHECK(cl_ensure_scratch(b, &side->f, values * sizeof(float)));
    *o = (cl_q8_out){.q = side->q.mem,
                     .d = side->d.mem,
                     .f = round->round_q8.y.offset ? side->f.mem : y->mem,
                     .xo = has_offsets(span) ? side->xo.mem : side->q.mem,
                     .want_f = 1,
                     .span = span,
                     .round = round};
cleanup:
    return st;
}

void cl_q8_made(const clinfer_op *round) {
    cl_q8_side *side = round->round_q8.y.buf->q8;
    side->offset = round->round_q8.y.offset;
    side->count = round_count(round);
    side->span = round_span(round);
}

clinfer_status cl_q8_out_end(cl_backend_ctx *b, const cl_q8_out *o) {
    clinfer_ref y = o->round->round_q8.y;
    size_t count = round_count(o->round);
    clinfer_status st = CLINFER_OK;
    if (y.offset)
        st = cl_check(b,
                      clEnqueueCopyBuffer(b->queue, y.buf->q8->f.mem, y.buf->mem, 0,
                                          y.offset * sizeof(float), count * sizeof(float), 0, NULL,
                                          NULL),
                      "clEnqueueCopyBuffer(rounded activations)");
    if (st == CLINFER_OK) cl_q8_made(o->round);
    return st;
}

clinfer_status cl_q8_x(const clinfer_op *matmul, const cl_q8_side **out) {
    clinfer_ref x = matmul->matmul.x;
    size_t count = (size_t)matmul->matmul.n * (size_t)matmul->matmul.k;
    int span =
        (int)(dtype_q8_act_block(matmul->matmul.w->weight->layout.type) / CLINFER_Q8_ACT_BLOCK);
    const cl_q8_side *side = x.buf->q8;
    *out = side;
    if (side && side->span == span && side->offset == x.offset && side->count == count)
        return CLINFER_OK;
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                    "OpenCL matmul: x_q8 x (%zu values at %zu) is not what a round_q8 of block %d "
                    "made last in its buffer",
                    count, x.offset, span * CLINFER_Q8_ACT_BLOCK);
}

cl_mem cl_q8_xo(const cl_q8_side *side) {
    return has_offsets(side->span) ? side->xo.mem : side->q.mem;
}

bool cl_rounds(const clinfer_op *round, clinfer_ref y, size_t count, int span) {
    return round->kind == CLINFER_OP_ROUND_Q8 && round->round_q8.x.buf == y.buf &&
           round->round_q8.x.offset == y.offset && round_count(round) == count &&
           round_span(round) == span;
}

/* The rounding arguments of quantize.cl's kernels, after theirs: xq, xd, xf, want_f, span, xo
 * (pointing into o). */
static void out_args(cl_q8_out *o, cl_arg args[6]) {
    args[0] = CL_ARG(o->q);
    args[1] = CL_ARG(o->d);
    args[2] = CL_ARG(o->f);
    args[3] = CL_ARG(o->want_f);
    args[4] = CL_ARG(o->span);
    args[5] = CL_ARG(o->xo);
}

clinfer_status cl_round_q8_limits(const clinfer_op *round) {
    size_t end = round->round_q8.x.offset + round_count(round);
    if (end > INT_MAX)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL round_q8: x ends at element %zu, past int indexing", end);
    return CLINFER_OK;
}

clinfer_status cl_op_round_q8(cl_backend_ctx *b, const clinfer_op *round) {
    clinfer_status st = CLINFER_OK;
    cl_q8_out o;
    cl_mem x = round->round_q8.x.buf->mem;
    int x_off = (int)round->round_q8.x.offset;
    CHECK(cl_round_q8_limits(round));
    CHECK(cl_q8_out_begin(b, round, &o));
    cl_arg args[8] = {CL_ARG(x), CL_ARG(x_off)};
    out_args(&o, args + 2);
    size_t global[2] = {round_count(round) / (size_t)round->round_q8.block, 1};
    CHECK(cl_launch(b, b->act->quantize, "quantize_q8_act", args, 8, 2, global, NULL));
    CHECK(cl_q8_out_end(b, &o));
cleanup:
    return st;
}

bool cl_round_fusable(const clinfer_op *op, const clinfer_op *round) {
    if (round->kind != CLINFER_OP_ROUND_Q8) return false;
    int span = round_span(round);
    if (op->kind == CLINFER_OP_RMSNORM) /* a norm in place: items read rows others write */
        return op->norm.y.buf != op->norm.x.buf && op->norm.d % round->round_q8.block == 0 &&
               cl_rounds(round, op->norm.y, (size_t)op->norm.n * (size_t)op->norm.d, span);
    if (op->kind == CLINFER_OP_SWIGLU || op->kind == CLINFER_OP_GEGLU ||
        op->kind == CLINFER_OP_SWIGLU_OAI)
        return cl_rounds(round, op->eltwise.y, op->eltwise.count, span);
    return false;
}

clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round) {
    clinfer_status st = CLINFER_OK;
    struct cl_act_state *s = b->act;
    int norm = op->kind == CLINFER_OP_RMSNORM;
    size_t count = round_count(round);
    cl_arg args[15];
    size_t n_args, global[2];
    cl_ulong off[3];
    cl_q8_out o;
    int has_w = norm && op->norm.w.buf != NULL; /* the arguments point at these locals */
    /* glu.clh's GLU function */
    int fn = op->kind == CLINFER_OP_SWIGLU_OAI ? 2 : op->kind == CLINFER_OP_GEGLU,
        span = round_span(round);
    if (norm) {
        const clinfer_ref *x = &op->norm.x, *w = &op->norm.w, *y = &op->norm.y;
        off[0] = x->offset, off[1] = w->offset, off[2] = y->offset;
        cl_arg head[] = {{sizeof(cl_mem), &x->buf->mem},
                         {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), has_w ? &w->buf->mem : &x->buf->mem},
                         {sizeof(cl_ulong), &off[1]},
                         {sizeof(int), &has_w},
                         {sizeof(cl_mem), &y->buf->mem},
                         {sizeof(cl_ulong), &off[2]},
                         {sizeof(int), &op->norm.d},
                         {sizeof(float), &op->norm.eps}};
        n_args = sizeof head / sizeof head[0];
        memcpy(args, head, sizeof head);
        /* an item per span of blocks, or on CPUs with rows to spare an item per row
         * (quantize.cl) */
        bool rows = cl_cpu_rows(b) && op->norm.n > 1;
        global[0] = rows ? 1 : (size_t)op->norm.d / CLINFER_Q8_ACT_BLOCK / span;
        global[1] = (size_t)op->norm.n;
    } else {
        const clinfer_ref *a = &op->eltwise.a, *g = &op->eltwise.b, *y = &op->eltwise.y;
        off[0] = a->offset, off[1] = g->offset, off[2] = y->offset;
        cl_arg head[] = {{sizeof(cl_mem), &a->buf->mem},
                         {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), &g->buf->mem},
                         {sizeof(cl_ulong), &off[1]},
                         {sizeof(cl_mem), &y->buf->mem},
                         {sizeof(cl_ulong), &off[2]},
                         {sizeof(int), &fn}};
        n_args = sizeof head / sizeof head[0];
        memcpy(args, head, sizeof head);
        global[0] = count / CLINFER_Q8_ACT_BLOCK / span;
        global[1] = 1;
    }
    CHECK(cl_q8_out_begin(b, round, &o));
    out_args(&o, args + n_args);
    CHECK(cl_launch(b, norm ? s->rmsnorm_q8 : s->glu_q8, norm ? "rmsnorm_q8_act" : "glu_q8_act",
                    args, (cl_uint)n_args + 6, 2, global, NULL));
    CHECK(cl_q8_out_end(b, &o));
cleanup:
    return st;
}

/* What each buffer's 8-bit form holds at a point of a walk (cl_q8_check_walk): the y of its last
 * ROUND_Q8, while nothing has written there since. */
enum { WALK_FORMS = 16 };
typedef struct {
    clinfer_ref y;
    size_t count;
    int block;
} walk_form;

/* Drops the forms that op's outputs overwrite (a ROUND_Q8's: every form of its y's buffer). */
static void walk_written(walk_form *forms, int *n, const clinfer_op *op) {
    clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS];
    size_t n_out = op_outputs(op, out);
    for (int i = 0; i < *n;) {
        bool gone = op->kind == CLINFER_OP_ROUND_Q8 && forms[i].y.buf == op->round_q8.y.buf;
        for (size_t j = 0; j < n_out && !gone; j++)
            gone = refs_overlap(out[j].ref, out[j].count, forms[i].y, forms[i].count);
        if (gone)
            forms[i] = forms[--*n];
        else
            i++;
    }
}

clinfer_status cl_q8_check_walk(const clinfer_op *ops, size_t n) {
    walk_form forms[WALK_FORMS];
    int n_forms = 0;
    for (size_t i = 0; i < n; i++) {
        const clinfer_op *op = &ops[i];
        if (op->kind == CLINFER_OP_MATMUL && op->matmul.x_q8 && op->matmul.w &&
            op->matmul.w->weight) { /* (an op that fails its check fails when run) */
            size_t count = (size_t)op->matmul.n * (size_t)op->matmul.k;
            int block = (int)dtype_q8_act_block(op->matmul.w->weight->layout.type), f = 0;
            while (f < n_forms && !(forms[f].y.buf == op->matmul.x.buf &&
                                    forms[f].y.offset == op->matmul.x.offset &&
                                    forms[f].count == count && forms[f].block == block))
                f++;
            if (f == n_forms)
                return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "OpenCL plan: op %zu (matmul, x_q8) reads x that no round_q8 of "
                                "block %d made before it, with nothing written there since",
                                i, block);
        }
        walk_written(forms, &n_forms, op);
        if (op->kind == CLINFER_OP_ROUND_Q8 && n_forms < WALK_FORMS)
            forms[n_forms++] = (walk_form){op->round_q8.y, round_count(op), op->round_q8.block};
    }
    return CLINFER_OK;
}
