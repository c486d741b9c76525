/* 8-bit activations for x_q8 matmuls (act_q8_cl.c, cl/quantize.cl): x rounded before a
 * matmul, or the op before it rounding its own output, kept while consecutive matmuls read the
 * same x. */
#ifndef CLINFER_CL_ACT_Q8_H
#define CLINFER_CL_ACT_Q8_H

#include "cl_backend.h"

/* The 8-bit activations of the last x_q8 matmul (quantize.cl): q (char), d (float2 per block)
 * and, for kernels that take f32, f = d * q. Consecutive matmuls over the same x (q, k and v;
 * gate and up) reuse them, as does the matmul after an op that made them with its output
 * (cl_round_output); any other op may have written x, so cl_act_forget drops them. */
typedef struct {
    scratch q, d, f;
    cl_mem x; /* what they were made from; NULL: nothing valid */
    size_t x_off, count;
    int has_f;
    int span; /* blocks of 32 sharing one scale: 1, or 8 for a K-quant's x, whose offsets are
               * then in the state's xo (round_q8.clh) */
} act_q8;

struct cl_act_state {
    cl_program program; /* quantize.cl */
    cl_kernel quantize, rmsnorm_q8, glu_q8;
    act_q8 act;
    scratch xo;   /* Q6_K's offsets of act (int per 16 values), where act.span is 8 */
    act_q8 spare; /* where matvec_q8_il_norm rounds its output while it reads act (then swapped) */
};

clinfer_status cl_act_init(cl_backend_ctx *b);
void cl_act_free(cl_backend_ctx *b);
/* Drops the 8-bit activations kept for the next matmul over the same x: call before anything
 * that may write or free a buffer other than through a matmul. */
void cl_act_forget(cl_backend_ctx *b);
/* Makes room in act for count rounded values (the xq, xd, xf and want_f arguments of
 * quantize.cl's kernels in args); rounds a matmul op's x unless the op before left it so (with
 * want_f its f32 form too). */
clinfer_status cl_act_into(cl_backend_ctx *b, act_q8 *act, size_t count, int *want_f,
                           cl_arg args[4]);
clinfer_status cl_quantize_x(cl_backend_ctx *b, const clinfer_op *op, int want_f);
/* The integer kernels' xo argument: act's offsets where it has them, else a buffer not read. */
cl_mem cl_act_q8_xo(const cl_backend_ctx *b);
/* RMSNORM, SWIGLU and GEGLU ops with the y_q8 hint (backend.h) that one launch of quantize.cl can
 * run while rounding y for the next matmul, which then finds it made; cl_rounding_op runs one such
 * op, already checked. */
bool cl_round_output(const clinfer_op *op);
clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op);
/* For a kernel elsewhere that rounds its output y for the next x_q8 matmul (attention with
 * out_q8): cl_act_q8_buffers makes room for count rounded values and gives the xq, xd and xf
 * buffers and want_f of round_q8.clh's round_block; once the launch is enqueued,
 * cl_act_q8_made records y as rounded (span: act_q8's), so that matmul does not round it again. */
clinfer_status cl_act_q8_buffers(cl_backend_ctx *b, size_t count, cl_mem mem[3], int *want_f);
/* Room for the group offsets xo of count values rounded with a K-quant's span (round_q8.clh),
 * for a kernel that rounds such x itself (graph.cl); cl_act_q8_made's span says they are made. */
clinfer_status cl_act_q8_offsets(cl_backend_ctx *b, size_t count, cl_mem *xo);
int cl_act_q8_want_f(const cl_backend_ctx *b); /* the want_f cl_act_q8_buffers gives */
void cl_act_q8_made(cl_backend_ctx *b, clinfer_ref y, size_t count, int want_f, int span);

#endif
