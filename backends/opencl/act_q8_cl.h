/* 8-bit activations (act_q8_cl.c, cl/quantize.cl): the ROUND_Q8 op, alone or fused into the op
 * that wrote its x, and the 8-bit form it leaves beside its y for the x_q8 matmuls over y. That
 * form needs no invalidation: a plan holds no write to y between the ROUND_Q8 and its matmuls
 * (backend.h; plan_create checks it), and for ops run one by one that is the caller's
 * contract. */
#ifndef CLINFER_CL_ACT_Q8_H
#define CLINFER_CL_ACT_Q8_H

#include "cl_backend.h"

/* The 8-bit form of what the last ROUND_Q8 into a buffer wrote there (its y: offset, count, span),
 * from the first block on: q (char), d (float2 per block of 32: d, d * sum q) and, for a K-quant's
 * span of 8 blocks with one scale, Q6_K's group offsets xo (round_q8.clh). The kernels write the
 * f32 values d * q from the first element of what they are given: y itself where it starts its
 * buffer, else f, copied to y after. Made on first use with room for the whole buffer, freed
 * with it. */
typedef struct cl_q8_side {
    scratch q, d, xo, f;
    size_t offset, count;
    int span; /* 0: nothing rounded into the buffer yet */
} cl_q8_side;

struct cl_act_state {
    cl_program program; /* quantize.cl */
    cl_kernel quantize, rmsnorm_q8, glu_q8;
};

clinfer_status cl_act_init(cl_backend_ctx *b);
void cl_act_free(cl_backend_ctx *b);
/* Frees buf's 8-bit form (buffer_free). */
void cl_q8_side_free(clinfer_buffer *buf);

/* Where a kernel rounds for the ROUND_Q8 op `round` (checked): the arguments xq, xd, xf and
 * want_f of round_q8.clh (want_f 1: y gets d * q), then span and xo (the q buffer where span has
 * no offsets). cl_q8_out_begin makes room beside round's y; once the launch is enqueued,
 * cl_q8_out_end copies the f32 values where y does not start its buffer and records what the
 * form holds. */
typedef struct {
    cl_mem q, d, f, xo;
    cl_int want_f, span;
    const clinfer_op *round;
} cl_q8_out;
clinfer_status cl_q8_out_begin(cl_backend_ctx *b, const clinfer_op *round, cl_q8_out *o);
clinfer_status cl_q8_out_end(cl_backend_ctx *b, const cl_q8_out *o);
/* Records that the form beside round's y holds what round made (cl_q8_out_end's last step, for
 * a launch that rounds without a copy: graph.cl's). */
void cl_q8_made(const clinfer_op *round);

/* The 8-bit form an x_q8 matmul op (checked) reads: its x's, which must be what a ROUND_Q8 of
 * the weight's block made of exactly x (else CLINFER_ERR_INVALID_ARGUMENT naming the contract). */
clinfer_status cl_q8_x(const clinfer_op *matmul, const cl_q8_side **side);
/* The integer kernels' xo argument: side's offsets where its span has them, else q, not read. */
cl_mem cl_q8_xo(const cl_q8_side *side);

/* CLINFER_OK where every x_q8 matmul of the walk ops[0 .. n) (each checked) reads the y of a
 * ROUND_Q8 of its weight's block before it, exactly its x, with nothing written there between;
 * else CLINFER_ERR_INVALID_ARGUMENT naming the matmul: what makes the 8-bit form a fact of the
 * plan rather than a cache (plan_create). */
clinfer_status cl_q8_check_walk(const clinfer_op *ops, size_t n);
/* Whether `round` (a ROUND_Q8) rounds exactly the count values at y in spans of span blocks. */
bool cl_rounds(const clinfer_op *round, clinfer_ref y, size_t count, int span);
/* This backend's limit on a valid ROUND_Q8 op: x indexed by int (quantize_q8_act). */
clinfer_status cl_round_q8_limits(const clinfer_op *round);
/* Runs a ROUND_Q8 op (checked) alone: quantize.cl's quantize_q8_act. */
clinfer_status cl_op_round_q8(cl_backend_ctx *b, const clinfer_op *round);
/* Whether one launch of quantize.cl can run op (an RMSNORM, SWIGLU, GEGLU or SWIGLU_OAI) and
 * round its y for `round` as it writes it; cl_rounding_op runs the pair, both checked. */
bool cl_round_fusable(const clinfer_op *op, const clinfer_op *round);
clinfer_status cl_rounding_op(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round);

#endif
