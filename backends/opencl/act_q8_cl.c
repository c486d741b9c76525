/* The 8-bit activations of x_q8 matmuls (act_q8_cl.h). */
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
    scratch *bufs[] = {&s->act.q,   &s->act.d,   &s->act.f, &s->spare.q,
                       &s->spare.d, &s->spare.f, &s->xo};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->mem) clReleaseMemObject(bufs[i]->mem);
    cl_kernel rounding[] = {s->quantize, s->rmsnorm_q8, s->glu_q8};
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++)
        if (rounding[i]) clReleaseKernel(rounding[i]);
    if (s->program) clReleaseProgram(s->program);
    free(s);
    b->act = NULL;
}

void cl_act_forget(cl_backend_ctx *b) {
    if (b->act) b->act->act.x = NULL;
}

/* Makes room in act for count rounded activations (and their f32 form with *want_f): the
 * arguments xq, xd, xf and want_f of the kernels in quantize.cl go to args[0 .. 4), pointing at
 * the caller's *want_f. */
clinfer_status cl_act_into(cl_backend_ctx *b, act_q8 *act, size_t count, int *want_f,
                           cl_arg args[4]) {
    clinfer_status st = CLINFER_OK;
    act->x = NULL;
    CHECK(cl_ensure_scratch(b, &act->q, count));
    CHECK(cl_ensure_scratch(b, &act->d, count / CLINFER_Q8_ACT_BLOCK * 2 * sizeof(float)));
    if (*want_f) CHECK(cl_ensure_scratch(b, &act->f, count * sizeof(float)));
    args[0] = (cl_arg){sizeof(cl_mem), &act->q.mem};
    args[1] = (cl_arg){sizeof(cl_mem), &act->d.mem};
    args[2] = (cl_arg){sizeof(cl_mem), *want_f ? &act->f.mem : &act->q.mem}; /* unwritten if not */
    args[3] = (cl_arg){sizeof(int), want_f};
cleanup:
    return st;
}

static clinfer_status act_args(cl_backend_ctx *b, size_t count, int *want_f, cl_arg args[4]) {
    return cl_act_into(b, &b->act->act, count, want_f, args);
}

/* Spans of a K-quant's x: their rounding writes Q6_K's group offsets xo too (round_q8.clh). */
static bool has_offsets(int span) {
    return span == QK_K / CLINFER_Q8_ACT_BLOCK;
}

/* Room in the state's xo for the offsets of count values. */
static clinfer_status ensure_offsets(cl_backend_ctx *b, size_t count) {
    return cl_ensure_scratch(b, &b->act->xo, count / 16 * sizeof(int));
}

clinfer_status cl_act_q8_offsets(cl_backend_ctx *b, size_t count, cl_mem *xo) {
    clinfer_status st = ensure_offsets(b, count);
    *xo = b->act->xo.mem;
    return st;
}

cl_mem cl_act_q8_xo(const cl_backend_ctx *b) {
    return has_offsets(b->act->act.span) ? b->act->xo.mem : b->act->act.q.mem;
}

/* The last argument of quantize.cl's kernels, xo: where K-quant spans write their offsets, else
 * a buffer they leave unwritten. */
static clinfer_status xo_arg(cl_backend_ctx *b, size_t count, int span, cl_arg *arg) {
    struct cl_act_state *s = b->act;
    *arg = (cl_arg){sizeof(cl_mem), &s->act.q.mem};
    if (!has_offsets(span)) return CLINFER_OK;
    *arg = (cl_arg){sizeof(cl_mem), &s->xo.mem}; /* the field: ensure_offsets may replace it */
    return ensure_offsets(b, count);
}

/* Rounds the op's x to 8 bits (quantize.cl) unless the last op left it so; with want_f the f32
 * form d * q too (and for a K-quant's x always Q6_K's offsets). */
clinfer_status cl_quantize_x(cl_backend_ctx *b, const clinfer_op *op, int want_f) {
    act_q8 *act = &b->act->act;
    size_t count = (size_t)op->matmul.n * (size_t)op->matmul.k;
    size_t block = dtype_q8_act_block(op->matmul.w->weight->layout.type);
    cl_mem x = op->matmul.x.buf->mem;
    int x_off = (int)op->matmul.x.offset, span = (int)(block / CLINFER_Q8_ACT_BLOCK);
    if (act->x == x && act->x_off == op->matmul.x.offset && act->count == count &&
        act->span == span && (act->has_f || !want_f))
        return CLINFER_OK;
    clinfer_status st = CLINFER_OK;
    cl_arg args[8] = {{sizeof(cl_mem), &x}, {sizeof(int), &x_off}};
    CHECK(act_args(b, count, &want_f, args + 2));
    args[6] = (cl_arg){sizeof(int), &span};
    CHECK(xo_arg(b, count, span, &args[7]));
    size_t global[2] = {count / block, 1};
    CHECK(cl_launch(b, b->act->quantize, "quantize_q8_act", args, 8, 2, global, NULL));
    *act = (act_q8){.q = act->q,
                    .d = act->d,
                    .f = act->f,
                    .x = x,
                    .x_off = op->matmul.x.offset,
                    .count = count,
                    .has_f = want_f,
                    .span = span};
cleanup:
    return st;
}

/* The op's rounding block (y_q8) where quantize.cl's kernels take it, else 0. */
static int round_block_of(const clinfer_op *op) {
    int block;
    size_t count; /* a norm's rows round apart */
    if (op->kind == CLINFER_OP_RMSNORM) {
        if (op->norm.n <= 0 || op->norm.y.buf == op->norm.x.buf) return 0; /* items read rows */
        block = op->norm.y_q8;
        count = (size_t)op->norm.d;
    } else if (op->kind == CLINFER_OP_SWIGLU || op->kind == CLINFER_OP_GEGLU) {
        block = op->eltwise.y_q8;
        count = op->eltwise.count;
    } else {
        return 0;
    }
    return block > 0 && block % CLINFER_Q8_ACT_BLOCK == 0 && count > 0 && count % block == 0 ? block
                                                                                             : 0;
}

bool cl_round_output(const clinfer_op *op) {
    return round_block_of(op) > 0;
}

clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    struct cl_act_state *s = b->act;
    int want_f = cl_act_q8_want_f(b), norm = op->kind == CLINFER_OP_RMSNORM;
    clinfer_ref y = norm ? op->norm.y : op->eltwise.y;
    size_t count = norm ? (size_t)op->norm.n * (size_t)op->norm.d : op->eltwise.count;
    cl_arg args[15];
    size_t n_args, global[2];
    cl_ulong off[3];
    int has_w = norm && op->norm.w.buf != NULL; /* the arguments point at these locals */
    int gelu = op->kind == CLINFER_OP_GEGLU, span = round_block_of(op) / CLINFER_Q8_ACT_BLOCK;
    if (norm) {
        const clinfer_ref *x = &op->norm.x, *w = &op->norm.w;
        off[0] = x->offset, off[1] = w->offset, off[2] = y.offset;
        cl_arg head[] = {{sizeof(cl_mem), &x->buf->mem},
                         {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), has_w ? &w->buf->mem : &x->buf->mem},
                         {sizeof(cl_ulong), &off[1]},
                         {sizeof(int), &has_w},
                         {sizeof(cl_mem), &y.buf->mem},
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
        const clinfer_ref *a = &op->eltwise.a, *g = &op->eltwise.b;
        off[0] = a->offset, off[1] = g->offset, off[2] = y.offset;
        cl_arg head[] = {{sizeof(cl_mem), &a->buf->mem},
                         {sizeof(cl_ulong), &off[0]},
                         {sizeof(cl_mem), &g->buf->mem},
                         {sizeof(cl_ulong), &off[1]},
                         {sizeof(cl_mem), &y.buf->mem},
                         {sizeof(cl_ulong), &off[2]},
                         {sizeof(int), &gelu}};
        n_args = sizeof head / sizeof head[0];
        memcpy(args, head, sizeof head);
        global[0] = count / CLINFER_Q8_ACT_BLOCK / span;
        global[1] = 1;
    }
    CHECK(act_args(b, count, &want_f, args + n_args));
    args[n_args + 4] = (cl_arg){sizeof(int), &span};
    CHECK(xo_arg(b, count, span, &args[n_args + 5]));
    CHECK(cl_launch(b, norm ? s->rmsnorm_q8 : s->glu_q8, norm ? "rmsnorm_q8_act" : "glu_q8_act",
                    args, (cl_uint)n_args + 6, 2, global, NULL));
    s->act = (act_q8){.q = s->act.q,
                      .d = s->act.d,
                      .f = s->act.f,
                      .x = y.buf->mem,
                      .x_off = y.offset,
                      .count = count,
                      .has_f = want_f,
                      .span = span};
cleanup:
    return st;
}

int cl_act_q8_want_f(const cl_backend_ctx *b) {
    return b->types->q8_dots !=
           1; /* the next matmul's kernel is not known: f32 kernels read d * q */
}

clinfer_status cl_act_q8_buffers(cl_backend_ctx *b, size_t count, cl_mem mem[3], int *want_f) {
    act_q8 *act = &b->act->act;
    cl_arg args[4];
    *want_f = cl_act_q8_want_f(b);
    clinfer_status st = act_args(b, count, want_f, args);
    mem[0] = act->q.mem;
    mem[1] = act->d.mem;
    mem[2] = *want_f ? act->f.mem : act->q.mem; /* unwritten if not */
    return st;
}

void cl_act_q8_made(cl_backend_ctx *b, clinfer_ref y, size_t count, int want_f, int span) {
    act_q8 *act = &b->act->act;
    *act = (act_q8){.q = act->q,
                    .d = act->d,
                    .f = act->f,
                    .x = y.buf->mem,
                    .x_off = y.offset,
                    .count = count,
                    .has_f = want_f,
                    .span = span};
}
