/* Attention on the GPU paths (cl/gpu_attention.cl): flash-decoding, the positions of each
 * (head, token) split across work-groups and merged. Chosen on gpu-local-reduce devices unless
 * CLINFER_GPU_LEGACY keeps attention.cl's attention_wg (which ops_cl.c then runs). */
#ifndef CLINFER_GPU_ATTENTION_CL_H
#define CLINFER_GPU_ATTENTION_CL_H

#include "cl_backend.h"

struct cl_gpu_attn;

/* The arguments every attention kernel (attention.cl's too) begins with: q, k, v and out as
 * (buffer, offset), the offsets held in offs, then n, n_head, n_kv_head, head_dim, pos0, window,
 * scale and softcap, then the sinks (cl_attention_sink_args). */
enum { CL_ATTN_HEAD_ARGS = 19 };
void cl_attention_head_args(const clinfer_op *op, cl_ulong offs[5], cl_arg *args);
/* The three arguments of an attention op's sinks: the buffer (out's where it has none), the
 * offset (held in *off) and whether it has them; the merge kernels take them too. */
void cl_attention_sink_args(const clinfer_op *op, cl_ulong *off, cl_arg args[3]);

/* The programs for work-groups of wg items (a power of two, the ops' size); *out NULL where
 * CLINFER_GPU_LEGACY asks for the old kernel. */
clinfer_status cl_gpu_attn_create(cl_backend_ctx *b, size_t wg, struct cl_gpu_attn **out);
void cl_gpu_attn_free(struct cl_gpu_attn *g);
/* An attention op whose rotation, if any, has run (the kernels rotate nothing themselves) and
 * whose output no ROUND_Q8 rounds in the kernel, over chunks of chunk positions (n_chunks of
 * them; part holds their partial results where there are several: cl_attention_chunks). */
clinfer_status cl_gpu_attn_run(cl_backend_ctx *b, struct cl_gpu_attn *g, const clinfer_op *op,
                               size_t chunk, size_t n_chunks, cl_mem part);
/* The same for a prompt (n > 1): attention_tiled, tiles of tokens and of positions. */
clinfer_status cl_gpu_attn_tiled(cl_backend_ctx *b, struct cl_gpu_attn *g, const clinfer_op *op);

#endif
