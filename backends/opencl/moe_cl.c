/* The mixture-of-experts ops (moe_cl.h). MATMUL_ID reads the op's expert ids back to the host
 * (a wait on the device, one per op), sorts the (token, slot) pairs by expert and runs, per
 * expert chosen, one MATMUL over that expert's rows (row0 = e * m) and its pairs' inputs (with
 * the expert's bias row, where the op has biases), through
 * every path the matmul family has (8-bit integer dots, GEMM for many tokens): a decode step
 * reads only the chosen experts' rows, a prompt each chosen expert's once. Inputs that do not
 * lie where one matmul can read them are gathered into scratch first (and rounded again for
 * x_q8: the values are a ROUND_Q8's d * q, so the rounding gives them back), outputs scattered
 * back where their slots are. */
#include <stdlib.h>
#include <string.h>

#include "act_q8_cl.h"
#include "error.h"
#include "matmul_cl.h"
#include "moe_cl.h"
#include "weights_cl.h"

struct cl_moe_state {
    cl_program program;
    cl_kernel route, gather, scatter, sum;
    int32_t *ids; /* the op's ids, read back */
    /* what ids holds: the ids of the last MATMUL_ID, kept for the next ones over the same ids
     * (a layer's gate, up and down) while nothing writes there (cl_moe_wrote) */
    const clinfer_buffer *ids_buf;
    size_t ids_offset, ids_count;
    int32_t *order; /* [2][slots]: per expert, its pairs' input rows, then their output rows */
    int *start;     /* [n_expert + 1]: where each expert's pairs begin in order */
    size_t slots_cap, experts_cap;
    scratch rows; /* order on the device */
    clinfer_buffer xf, xq,
        y; /* operands of the ops it runs: gathered inputs, their rounding, an expert's outputs */
};

clinfer_status cl_moe_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    struct cl_moe_state *s = calloc(1, sizeof *s);
    if (!s) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL: mixture-of-experts state");
    b->moe = s;
    CHECK(cl_build(b, "moe.cl", "", &s->program));
    const struct {
        cl_kernel *kernel;
        const char *name;
    } kernels[] = {{&s->route, "moe_route"},
                   {&s->gather, "moe_gather"},
                   {&s->scatter, "moe_scatter"},
                   {&s->sum, "moe_sum"}};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        *kernels[i].kernel = clCreateKernel(s->program, kernels[i].name, &err);
        CHECK(cl_error(err, kernels[i].name));
    }
cleanup:
    return st;
}

static void scratch_free(clinfer_buffer *s) {
    cl_q8_side_free(s);
    if (s->mem) clReleaseMemObject(s->mem);
    memset(s, 0, sizeof *s);
}

void cl_moe_free(cl_backend_ctx *b) {
    struct cl_moe_state *s = b->moe;
    if (!s) return;
    cl_kernel kernels[] = {s->route, s->gather, s->scatter, s->sum};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i]) clReleaseKernel(kernels[i]);
    if (s->program) clReleaseProgram(s->program);
    if (s->rows.mem) clReleaseMemObject(s->rows.mem);
    clinfer_buffer *bufs[] = {&s->xf, &s->xq, &s->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        scratch_free(bufs[i]);
    free(s->ids);
    free(s->order);
    free(s->start);
    free(s);
    b->moe = NULL;
}

/* sc grown to hold count floats (its 8-bit form, sized for the buffer, goes with the old one). */
static clinfer_status scratch_floats(cl_backend_ctx *b, clinfer_buffer *sc, size_t count) {
    size_t bytes = count * sizeof(float);
    if (sc->head.bytes >= bytes) return CLINFER_OK;
    scratch_free(sc);
    clinfer_status st = cl_create_buffer(b, CL_MEM_READ_WRITE, bytes, NULL, &sc->mem);
    if (st == CLINFER_OK) sc->head.bytes = bytes;
    return st;
}

static clinfer_status host_room(struct cl_moe_state *s, size_t slots, size_t experts) {
    if (slots > s->slots_cap) {
        free(s->ids);
        free(s->order);
        s->ids = malloc(slots * sizeof *s->ids);
        s->order = malloc(2 * slots * sizeof *s->order);
        s->slots_cap = s->ids && s->order ? slots : 0;
        if (!s->slots_cap)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul_id: %zu slots", slots);
    }
    if (experts + 1 > s->experts_cap) {
        free(s->start);
        s->start = malloc((experts + 1) * sizeof *s->start);
        s->experts_cap = s->start ? experts + 1 : 0;
        if (!s->start)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul_id: %zu experts", experts);
    }
    return CLINFER_OK;
}

/* ---- routing and the gated sum ---------------------------------------------------------- */

static clinfer_status run_route(cl_backend_ctx *b, const clinfer_op *op) {
    const clinfer_ref refs[] = {op->moe_route.logits, op->moe_route.ids, op->moe_route.weights};
    cl_ulong offs[3];
    cl_int norm = op->moe_route.norm;
    /* the refs' (buffer, offset) pairs first, then the shape */
    cl_arg args[12] = {[6] = CL_ARG(op->moe_route.n),
                       CL_ARG(op->moe_route.n_expert),
                       CL_ARG(op->moe_route.n_used),
                       CL_ARG(op->moe_route.gating),
                       CL_ARG(norm),
                       CL_ARG(op->moe_route.scale)};
    cl_ref_args(refs, 3, offs, args);
    size_t global = (size_t)op->moe_route.n;
    return cl_launch(b, b->moe->route, "moe_route", args, 12, 1, &global, NULL);
}

static clinfer_status run_sum(cl_backend_ctx *b, const clinfer_op *op) {
    const clinfer_ref refs[] = {op->moe_sum.x, op->moe_sum.weights, op->moe_sum.y};
    cl_ulong offs[3];
    cl_int accumulate = op->moe_sum.accumulate;
    cl_arg args[9] = {[6] = CL_ARG(op->moe_sum.n_used), CL_ARG(op->moe_sum.d), CL_ARG(accumulate)};
    cl_ref_args(refs, 3, offs, args);
    size_t global[2] = {(size_t)op->moe_sum.d, (size_t)op->moe_sum.n};
    return cl_launch(b, b->moe->sum, "moe_sum", args, 9, 2, global, NULL);
}

/* ---- the expert-indexed matmul ---------------------------------------------------------- */

/* Counting sort of the op's slots by expert into s->order (input rows, then output rows) and
 * s->start; slots whose id is out of range are left out (their rows are zeroed). */
static void group_slots(struct cl_moe_state *s, const clinfer_op *op, size_t slots) {
    int n_expert = op->matmul_id.n_expert, used = op->matmul_id.n_used;
    memset(s->start, 0, ((size_t)n_expert + 1) * sizeof *s->start);
    for (size_t i = 0; i < slots; i++)
        if (s->ids[i] >= 0 && s->ids[i] < n_expert) s->start[s->ids[i] + 1]++;
    for (int e = 0; e < n_expert; e++)
        s->start[e + 1] += s->start[e];
    int *next = s->start; /* advanced per placed slot, then moved back */
    for (size_t i = 0; i < slots; i++) {
        int e = s->ids[i];
        if (e < 0 || e >= n_expert) continue;
        int at = next[e]++;
        s->order[at] = op->matmul_id.x_rows == 1 ? (int32_t)(i / (size_t)used) : (int32_t)i;
        s->order[slots + at] = (int32_t)i;
    }
    for (int e = n_expert; e > 0; e--)
        s->start[e] = s->start[e - 1];
    s->start[0] = 0;
}

static clinfer_status gather(cl_backend_ctx *b, const clinfer_op *op, int first, int count) {
    struct cl_moe_state *s = b->moe;
    cl_ulong x_off = op->matmul_id.x.offset;
    cl_int k = op->matmul_id.k;
    cl_arg args[] = {CL_ARG(op->matmul_id.x.buf->mem),
                     CL_ARG(x_off),
                     CL_ARG(s->rows.mem),
                     CL_ARG(first),
                     CL_ARG(k),
                     CL_ARG(s->xf.mem)};
    size_t global[2] = {(size_t)k, (size_t)count};
    return cl_launch(b, s->gather, "moe_gather", args, 6, 2, global, NULL);
}

static clinfer_status scatter(cl_backend_ctx *b, const clinfer_op *op, int first, int count) {
    struct cl_moe_state *s = b->moe;
    cl_ulong y_off = op->matmul_id.y.offset;
    cl_int m = op->matmul_id.m;
    cl_arg args[] = {CL_ARG(s->y.mem),
                     CL_ARG(s->rows.mem),
                     CL_ARG(first),
                     CL_ARG(m),
                     CL_ARG(op->matmul_id.y.buf->mem),
                     CL_ARG(y_off)};
    size_t global[2] = {(size_t)m, (size_t)count};
    return cl_launch(b, s->scatter, "moe_scatter", args, 6, 2, global, NULL);
}

/* Expert e's count pairs from order[first ..]: one matmul over rows e * m .. of w. */
static clinfer_status run_expert(cl_backend_ctx *b, const clinfer_op *op, int e, int first,
                                 int count, size_t slots) {
    struct cl_moe_state *s = b->moe;
    clinfer_status st = CLINFER_OK;
    int k = op->matmul_id.k, m = op->matmul_id.m;
    bool x_q8 = op->matmul_id.x_q8;
    /* x as one matmul reads it: in place for one row of f32 x, or where x is a ROUND_Q8's y of
     * exactly one row; else the rows gathered, rounded again for x_q8 */
    clinfer_ref x = op->matmul_id.x;
    size_t x_whole = (size_t)op->matmul_id.n * (size_t)op->matmul_id.x_rows;
    if (count == 1 && (!x_q8 || x_whole == 1)) {
        x.offset += (size_t)s->order[first] * (size_t)k;
    } else if (count == 1) { /* x_q8, one row: rounded straight from where it lies */
        clinfer_op round = {
            .kind = CLINFER_OP_ROUND_Q8,
            .round_q8 = {.x = {x.buf, x.offset + (size_t)s->order[first] * k},
                         .y = {&s->xq, 0},
                         .n = 1,
                         .k = k,
                         .block = (int)dtype_q8_act_block(op->matmul_id.w->weight->layout.type)}};
        CHECK(cl_op_round_q8(b, &round));
        x = round.round_q8.y;
    } else {
        CHECK(gather(b, op, first, count));
        x = (clinfer_ref){&s->xf, 0};
        if (x_q8) {
            clinfer_op round = {.kind = CLINFER_OP_ROUND_Q8,
                                .round_q8 = {.x = x,
                                             .y = {&s->xq, 0},
                                             .n = count,
                                             .k = k,
                                             .block = (int)dtype_q8_act_block(
                                                 op->matmul_id.w->weight->layout.type)}};
            CHECK(cl_op_round_q8(b, &round));
            x = round.round_q8.y;
        }
    }
    clinfer_ref y = {op->matmul_id.y.buf,
                     op->matmul_id.y.offset + (size_t)s->order[slots + first] * (size_t)m};
    if (count > 1) y = (clinfer_ref){&s->y, 0};
    clinfer_ref bias = op->matmul_id.bias; /* the expert's row of it */
    if (bias.buf) bias.offset += (size_t)e * (size_t)m;
    clinfer_op mm = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = op->matmul_id.w,
                                .x = x,
                                .y = y,
                                .bias = bias,
                                .m = m,
                                .k = k,
                                .n = count,
                                .row0 = e * m,
                                .x_q8 = x_q8}};
    CHECK(cl_matmul(b, &mm));
    if (count > 1) CHECK(scatter(b, op, (int)slots + first, count));
cleanup:
    return st;
}

static clinfer_status run_matmul_id(cl_backend_ctx *b, const clinfer_op *op) {
    struct cl_moe_state *s = b->moe;
    clinfer_status st = CLINFER_OK;
    size_t slots = (size_t)op->matmul_id.n * (size_t)op->matmul_id.n_used;
    size_t k = (size_t)op->matmul_id.k, m = (size_t)op->matmul_id.m;
    CHECK(host_room(s, slots, (size_t)op->matmul_id.n_expert));
    clinfer_ref ids = op->matmul_id.ids;
    if (s->ids_buf != ids.buf || s->ids_offset != ids.offset || s->ids_count != slots) {
        s->ids_buf = NULL;
        CHECK(cl_check(b,
                       clEnqueueReadBuffer(b->queue, ids.buf->mem, CL_TRUE,
                                           ids.offset * sizeof(int32_t), slots * sizeof(int32_t),
                                           s->ids, 0, NULL, NULL),
                       "clEnqueueReadBuffer(matmul_id ids)"));
        s->ids_buf = ids.buf;
        s->ids_offset = ids.offset;
        s->ids_count = slots;
    }
    group_slots(s, op, slots);
    /* the largest group sizes the scratch */
    size_t most = 0;
    for (int e = 0; e < op->matmul_id.n_expert; e++) {
        size_t c = (size_t)(s->start[e + 1] - s->start[e]);
        if (c > most) most = c;
    }
    CHECK(scratch_floats(b, &s->xf, most * k));
    CHECK(scratch_floats(b, &s->xq, most * k));
    CHECK(scratch_floats(b, &s->y, most * m));
    CHECK(cl_ensure_scratch(b, &s->rows, 2 * slots * sizeof(int32_t)));
    CHECK(cl_check(b,
                   clEnqueueWriteBuffer(b->queue, s->rows.mem, CL_TRUE, 0,
                                        2 * slots * sizeof(int32_t), s->order, 0, NULL, NULL),
                   "clEnqueueWriteBuffer(matmul_id rows)"));
    for (size_t i = 0; i < slots; i++) /* out-of-range ids: zero rows */
        if (s->ids[i] < 0 || s->ids[i] >= op->matmul_id.n_expert) {
            float zero = 0.0f;
            CHECK(
                cl_check(b,
                         clEnqueueFillBuffer(b->queue, op->matmul_id.y.buf->mem, &zero, sizeof zero,
                                             (op->matmul_id.y.offset + i * m) * sizeof(float),
                                             m * sizeof(float), 0, NULL, NULL),
                         "clEnqueueFillBuffer(matmul_id zero row)"));
        }
    for (int e = 0; e < op->matmul_id.n_expert; e++) {
        int first = s->start[e], count = s->start[e + 1] - first;
        if (count) CHECK(run_expert(b, op, e, first, count, slots));
    }
cleanup:
    return st;
}

void cl_moe_wrote(cl_backend_ctx *b, const clinfer_buffer *buf, const clinfer_op *op) {
    struct cl_moe_state *s = b->moe;
    if (!s || !s->ids_buf) return;
    clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS];
    size_t n = op ? op_outputs(op, out) : 0;
    bool gone = buf == s->ids_buf;
    clinfer_ref held = {(clinfer_buffer *)s->ids_buf, s->ids_offset};
    for (size_t i = 0; i < n && !gone; i++)
        gone = refs_overlap(out[i].ref, out[i].count, held, s->ids_count);
    if (gone) s->ids_buf = NULL;
}

clinfer_status cl_op_moe(cl_backend_ctx *b, const clinfer_op *op) {
    switch (op->kind) {
    case CLINFER_OP_MOE_ROUTE:
        return run_route(b, op);
    case CLINFER_OP_MATMUL_ID:
        return run_matmul_id(b, op);
    default:
        return run_sum(b, op);
    }
}

clinfer_status cl_moe_limits(const clinfer_op *op) {
    if (op->kind != CLINFER_OP_MATMUL_ID) return CLINFER_OK;
    size_t slots = (size_t)op->matmul_id.n * (size_t)op->matmul_id.n_used;
    size_t x = (size_t)op->matmul_id.n * (size_t)op->matmul_id.x_rows * (size_t)op->matmul_id.k;
    size_t y = slots * (size_t)op->matmul_id.m;
    if (op->matmul_id.x.offset + x > INT32_MAX || op->matmul_id.y.offset + y > INT32_MAX ||
        2 * slots > INT32_MAX)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL matmul_id: operands past int indexing (x ends at %zu, y at %zu)",
                        op->matmul_id.x.offset + x, op->matmul_id.y.offset + y);
    return CLINFER_OK;
}
