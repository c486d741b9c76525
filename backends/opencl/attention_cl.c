/* Attention (cl/attention.cl): causal grouped-query attention over the KV cache, split into
 * chunks of positions where a head has many, optionally rotating q and the new keys and storing
 * them and v into the caches first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_q8_cl.h"
#include "error.h"
#include "fault.h"
#include "gpu_attention_cl.h"
#include "ops_cl.h"

/* Grows the scratch buffer to at least bytes. Kernels still queued on the old one keep it
 * alive: OpenCL frees a released buffer only after the commands using it. */
static clinfer_status ensure_scratch(cl_backend_ctx *b, size_t bytes) {
    struct cl_ops_state *ops = b->ops;
    if (ops->scratch_bytes >= bytes) return CLINFER_OK;
    if (ops->scratch) clReleaseMemObject(ops->scratch);
    ops->scratch = NULL;
    ops->scratch_bytes = 0;
    cl_int err = cl_fault("alloc");
    if (err == CL_SUCCESS)
        ops->scratch = clCreateBuffer(b->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS) ops->scratch_bytes = bytes;
    return cl_check(b, err, "clCreateBuffer(attention scratch, %zu bytes)", bytes);
}

clinfer_status cl_attention_scratch(cl_backend_ctx *b, size_t bytes, cl_mem *part) {
    clinfer_status st = ensure_scratch(b, bytes);
    *part = b->ops->scratch;
    return st;
}

/* Decode (one token) on the GPU paths runs attention_split (gpu_attention_cl.h), prompts
 * attention_tiled. */
static bool split_for(const cl_backend_ctx *b, const clinfer_op *op) {
    return b->ops->gpu_attn && op->attention.n == 1;
}

/* Attention splits the positions into chunks so that decode (n_head x 1 rows) still gives every
 * compute unit several work-items (cpu-rows) or work-groups (GPU paths); attention_merge then
 * combines the chunks' partial results. */
void cl_attention_chunks(const cl_backend_ctx *b, const clinfer_op *op, size_t *chunk,
                         size_t *n_chunks) {
    bool groups = b->ops->work_group_per_row;
    size_t rows = (size_t)op->attention.n_head * (size_t)op->attention.n;
    /* the positions from the first one token 0 sees (attn_span in cl/attention.clh) */
    int pos0 = op->attention.pos0, window = op->attention.window;
    int base = window > 0 && pos0 + 1 > window ? pos0 + 1 - window : 0;
    size_t positions = (size_t)(pos0 - base) + (size_t)op->attention.n;
    size_t units = b->info.compute_units ? b->info.compute_units : 1;
    /* attention_split (gpu_attention_cl.h) wants more, smaller chunks than attention_wg */
    bool split = split_for(b, op);
    size_t target = units * (split ? 8 : groups ? 4 : 16);
    size_t min_chunk = split ? 32 : groups ? b->ops->wg : 64;
    size_t want = rows >= target ? 1 : (target + rows - 1) / rows;
    *chunk = (positions + want - 1) / want;
    if (*chunk < min_chunk) *chunk = min_chunk;
    *n_chunks = (positions + *chunk - 1) / *chunk;
}

/* The attention kernel takes args, then chunk and part, then tail, then (cpu-rows) by8; the merge
 * takes the rounding arguments q8 (xq, xd, xf, want_f, round_q8). */
static clinfer_status attention_launch(cl_backend_ctx *b, kernel_id kernel, const cl_arg *args,
                                       size_t n_args, const cl_arg *tail, size_t n_tail,
                                       const cl_arg q8[5], const clinfer_op *op) {
    bool groups = b->ops->work_group_per_row;
    int n = op->attention.n, n_head = op->attention.n_head, head_dim = op->attention.head_dim;
    if (b->ops->gpu_attn && n > 1) return cl_gpu_attn_tiled(b, b->ops->gpu_attn, op);
    size_t rows = (size_t)n_head * (size_t)n, chunk, n_chunks;
    cl_attention_chunks(b, op, &chunk, &n_chunks);
    clinfer_status st = CLINFER_OK;
    cl_int chunk_arg = (cl_int)chunk;
    cl_mem part = op->attention.out.buf->mem; /* not read when there is one chunk */
    if (n_chunks > 1)
        CHECK(cl_attention_scratch(b, rows * n_chunks * ((size_t)head_dim + 2) * sizeof(float),
                                   &part));
    if (split_for(b, op)) return cl_gpu_attn_run(b, b->ops->gpu_attn, op, chunk, n_chunks, part);
    cl_arg all[40]; /* attention_rows takes 39 */
    memcpy(all, args, n_args * sizeof *args);
    all[n_args] = CL_ARG(chunk_arg);
    all[n_args + 1] = CL_ARG(part);
    memcpy(all + n_args + 2, tail, n_tail * sizeof *tail);
    /* Prefill without a window in one chunk: eights of tokens per work-item (attention_item8). */
    cl_int by8 = !groups && n_chunks == 1 && op->attention.window == 0 && n >= 8;
    if (!groups) all[n_args + 2 + n_tail++] = CL_ARG(by8);
    size_t local[3] = {groups ? b->ops->wg : 1, 1, 1};
    size_t global[3] = {(size_t)n_head * local[0], by8 ? (size_t)(n + 7) / 8 : (size_t)n, n_chunks};
    CHECK(cl_ops_launch(b, kernel, n_args + 2 + n_tail, all, 3, global, local));
    if (n_chunks > 1) {
        cl_int chunks_arg = (cl_int)n_chunks;
        cl_ulong o_off = op->attention.out.offset;
        cl_arg merge[] = {CL_ARG(part),
                          CL_ARG(chunks_arg),
                          CL_ARG(op->attention.out.buf->mem),
                          CL_ARG(o_off),
                          CL_ARG(op->attention.n),
                          CL_ARG(op->attention.n_head),
                          CL_ARG(op->attention.head_dim),
                          q8[0],
                          q8[1],
                          q8[2],
                          q8[3],
                          q8[4],
                          args[16],
                          args[17],
                          args[18]};
        size_t merge_local[2] = {1, 1}, merge_global[2] = {(size_t)n_head, (size_t)n};
        CHECK(cl_ops_launch(b, K_ATTN_MERGE, sizeof merge / sizeof *merge, merge, 2, merge_global,
                            merge_local));
    }
cleanup:
    return st;
}

/* An attention op's rotation and cache write as the rope launches it stands for, where the
 * attention kernel does not do them itself: in place, then the caller attends over q. One launch
 * when the keys follow the queries of a single token, as the executor lays them out. */
static clinfer_status attention_rope_launches(cl_backend_ctx *b, const clinfer_op *op,
                                              size_t q_total) {
    clinfer_ref q = op->attention.q, k_src = op->attention.rope.k_src;
    clinfer_op keys = attention_keys_rope(op);
    clinfer_op queries = keys;
    queries.rope.x = q;
    queries.rope.n_heads = op->attention.n_head;
    queries.rope.k_dst = (clinfer_ref){0};
    if (op->attention.n == 1 && k_src.buf == q.buf && k_src.offset == q.offset + q_total) {
        keys.rope.x = q;
        keys.rope.n_heads += op->attention.n_head;
        return cl_op_rope(b, &keys);
    }
    clinfer_status st = cl_op_rope(b, &queries);
    return st == CLINFER_OK ? cl_op_rope(b, &keys) : st;
}

clinfer_status cl_attention_limits(const clinfer_op *op) {
    int head_dim = op->attention.head_dim;
    if (head_dim % 8 || head_dim > MAX_HEAD_DIM)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL attention: head_dim %d must be a multiple of 8 and at most %d",
                        head_dim, MAX_HEAD_DIM);
    return CLINFER_OK;
}

bool cl_attention_rounds(const cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round) {
    /* whole blocks per head, where the cpu-rows kernels write out (elsewhere the ROUND_Q8 runs
     * alone) */
    size_t q_total =
        (size_t)op->attention.n * (size_t)op->attention.n_head * (size_t)op->attention.head_dim;
    return !b->ops->work_group_per_row && op->attention.head_dim % CLINFER_Q8_ACT_BLOCK == 0 &&
           cl_rounds(round, op->attention.out, q_total, 1);
}

clinfer_status cl_op_attention(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *round) {
    int n = op->attention.n, head_dim = op->attention.head_dim;
    bool f16 = op->attention.kv_type == CLINFER_DT_F16, rows = !b->ops->work_group_per_row;
    size_t q_total = (size_t)n * (size_t)op->attention.n_head * (size_t)head_dim;
    clinfer_status st = CLINFER_OK;
    CHECK(cl_attention_limits(op));
    bool rope = op->attention.rope.n_rot != 0, rope_in_kernel = rope && rows && n == 1;
    if (rope && !rope_in_kernel) CHECK(attention_rope_launches(b, op, q_total));
    /* Unused operands bind out's buffer, which the kernels then never touch through them. */
    cl_mem out = op->attention.out.buf->mem;
    cl_ulong offs[5];
    cl_arg args[CL_ATTN_HEAD_ARGS];
    cl_attention_head_args(op, offs, args);
    cl_mem k_src = rope_in_kernel ? op->attention.rope.k_src.buf->mem : out,
           v_src = rope_in_kernel ? op->attention.rope.v_src.buf->mem : out;
    cl_ulong k_src_off = rope_in_kernel ? op->attention.rope.k_src.offset : 0,
             v_src_off = rope_in_kernel ? op->attention.rope.v_src.offset : 0;
    cl_int n_rot = rope_in_kernel ? op->attention.rope.n_rot : 0, neox = op->attention.rope.neox;
    cl_int has_factors = rope_in_kernel && op->attention.rope.factors.buf;
    cl_mem factors = has_factors ? op->attention.rope.factors.buf->mem : out;
    cl_ulong factors_off = has_factors ? op->attention.rope.factors.offset : 0;
    cl_int round_q8 = round != NULL;               /* cl_attention_rounds */
    cl_q8_out q8 = {.q = out, .d = out, .f = out}; /* unwritten without round_q8 */
    if (round_q8) CHECK(cl_q8_out_begin(b, round, &q8));
    cl_arg tail[] = {CL_ARG(k_src),
                     CL_ARG(k_src_off),
                     CL_ARG(v_src),
                     CL_ARG(v_src_off),
                     CL_ARG(n_rot),
                     CL_ARG(op->attention.rope.freq_base),
                     CL_ARG(op->attention.rope.freq_scale),
                     CL_ARG(neox),
                     CL_ARG(factors),
                     CL_ARG(factors_off),
                     CL_ARG(has_factors),
                     CL_ARG(op->attention.rope.mscale),
                     CL_ARG(q8.q),
                     CL_ARG(q8.d),
                     CL_ARG(q8.f),
                     CL_ARG(q8.want_f),
                     CL_ARG(round_q8)};
    size_t n_tail = sizeof tail / sizeof *tail;
    CHECK(attention_launch(b, f16 ? K_ATTN_F16 : K_ATTN_F32, args, CL_ATTN_HEAD_ARGS, tail,
                           rows ? n_tail : 0, tail + n_tail - 5, op));
    if (round_q8) CHECK(cl_q8_out_end(b, &q8));
cleanup:
    return st;
}
