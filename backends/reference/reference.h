/* Internals of the reference backend, shared by its files:
 *   reference.c       backend object, host buffers, weights and op dispatch
 *   reference_ops.c   the arithmetic of every op on plain host pointers
 *   moe_ref.c         that of the mixture-of-experts ops
 *
 * The reference backend is the numeric oracle of the project: plain single-threaded C on the
 * host, written to be obviously correct first and reasonably quick second. The functions in
 * reference_ops.c trust their arguments: op_check_operands has validated every pointer and size. */
#ifndef CLINFER_REFERENCE_H
#define CLINFER_REFERENCE_H

#include "backend.h"

struct clinfer_buffer {
    clinfer_buffer_head head; /* weights (head.weight) hold raw GGUF rows */
    void *data;
    clinfer_dtype type; /* weights: element type of the rows */
    size_t row_bytes;   /* weights: bytes of one row */
};

/* ---- reference_ops.c: y, x... are host pointers already offset to the operand's start ---- */

/* sum of a[i] * b[i], f32 with several accumulators */
float ref_dot(const float *a, const float *b, size_t n);

/* xq = x rounded to 8 bits per block of `block` elements and read back as d * q (ROUND_Q8);
 * count % block == 0, so rows of k % block == 0 elements round independently */
void ref_round_q8(const float *x, float *xq, size_t count, size_t block);
/* y[n][m] (+)= x[n][k] . W[row0 .. row0 + m)[k]^T + bias[m]; row: scratch for k floats */
void ref_matmul(const clinfer_buffer *w, int row0, int m, const float *x, float *y,
                const float *bias, int n, bool accumulate, float *row);
/* y[n][k] = W[ids[i]] * scale (0: 1); ids already checked against W's rows */
void ref_embed(const clinfer_buffer *w, const int32_t *ids, float *y, int n, float scale);

/* w may be NULL: a scale of 1; b may be NULL: no bias */
void ref_rmsnorm(const float *x, const float *w, float *y, int n, int d, float eps);
void ref_layernorm(const float *x, const float *w, const float *b, float *y, int n, int d,
                   float eps);
/* factors may be NULL: none; mscale 0 stands for 1 (see the ROPE op) */
void ref_rope(float *x, int n, int n_heads, int head_dim, int n_rot, int pos0, float freq_base,
              float freq_scale, bool neox, const float *factors, float mscale);
void ref_store(const float *src, void *dst, clinfer_dtype dst_type, size_t count);
/* k_cache, v_cache in kv_type; window, softcap and sinks as the ATTENTION op's (0, NULL: none);
 * scratch: pos0 + n + 2 * head_dim floats */
void ref_attention(const float *q, const void *k_cache, const void *v_cache, float *out,
                   clinfer_dtype kv_type, int n, int n_head, int n_kv_head, int head_dim, int pos0,
                   int window, float scale, float softcap, const float *sinks, float *scratch);
/* OP_SCALE: y = a * scale, capped where cap > 0 */
void ref_scale(const float *a, float *y, size_t count, float scale, float cap);
/* OP_ADD, OP_GELU, OP_SWIGLU, OP_GEGLU, OP_SWIGLU_OAI; b is used by all but GELU */
void ref_eltwise(clinfer_op_kind kind, const float *a, const float *b, float *y, size_t count,
                 size_t b_count);

/* ---- moe_ref.c: the mixture-of-experts ops as backend.h states them ---- */
void ref_moe_route(const float *logits, int32_t *ids, float *weights, int n, int n_expert,
                   int n_used, int gating, bool norm, float scale);
/* bias may be NULL: none; row: scratch for k floats */
void ref_matmul_id(const clinfer_buffer *w, const float *x, const int32_t *ids, const float *bias,
                   float *y, int m, int n, int n_used, int n_expert, int x_rows, float *row);
void ref_moe_sum(const float *x, const float *weights, float *y, int n, int n_used, int d,
                 bool accumulate);

#endif
