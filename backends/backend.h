/* The interface every backend implements (reference C, OpenCL). A backend knows buffers, weights
 * and ops; it never knows what a layer or a model is. The executor builds a plan of op records
 * once and walks it per batch.
 *
 * Tensors are row-major. Activations are f32. Offsets in a clinfer_ref count elements of the
 * tensor's element type (f32 for activations, int32 for ids, the cache type for KV caches). */
#ifndef CLINFER_BACKEND_H
#define CLINFER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "quant.h"

/* Defined by each backend, starting with a clinfer_buffer_head: what op_check_operands needs to
 * measure operands without knowing the backend. */
typedef struct clinfer_buffer clinfer_buffer;
typedef struct clinfer_backend clinfer_backend;

typedef struct {
    size_t bytes;  /* its size (weights: as stored) */
    bool weight;   /* made by weight_create (then m rows of k elements) */
    bool in_place; /* a weight that reads the caller's data where it lies (see host_data) */
    int m, k;
} clinfer_buffer_head;

typedef struct {
    clinfer_buffer *buf; /* NULL: absent (optional operands) */
    size_t offset;       /* in elements */
} clinfer_ref;

/* Whether count_a elements from a and count_b from b share an element. */
static inline bool refs_overlap(clinfer_ref a, size_t count_a, clinfer_ref b, size_t count_b) {
    return a.buf == b.buf && a.offset < b.offset + count_b && b.offset < a.offset + count_a;
}

typedef enum {
    CLINFER_OP_MATMUL,     /* y[n][m] (+)= x[n][k] . W[row0 .. row0 + m)[k]^T + bias[m] */
    CLINFER_OP_EMBED,      /* y[n][k] = W[ids[i]][:] * scale, dequantized */
    CLINFER_OP_RMSNORM,    /* y[n][d] = x / sqrt(mean(x^2) + eps) * w */
    CLINFER_OP_LAYERNORM,  /* y[n][d] = (x - mean) / sqrt(var + eps) * w + b */
    CLINFER_OP_ROPE,       /* x[n][heads][head_dim] rotated in place at positions pos0 + i,
                            * optionally storing keys and values into KV caches */
    CLINFER_OP_STORE,      /* dst[i] = (dst type) src[i], i < count: KV cache writes */
    CLINFER_OP_ATTENTION,  /* causal grouped-query attention over a KV cache */
    CLINFER_OP_ADD,        /* y[i] = a[i] + b[i % b_count] */
    CLINFER_OP_GELU,       /* y = gelu(a), tanh approximation */
    CLINFER_OP_SWIGLU,     /* y[i] = silu(a[i]) * b[i] */
    CLINFER_OP_GEGLU,      /* y[i] = gelu(a[i]) * b[i], gelu as GELU's */
    CLINFER_OP_SCALE,      /* y[i] = a[i] * scale, then cap * tanh(y[i] / cap) where cap > 0 */
    CLINFER_OP_ROUND_Q8,   /* y = x rounded to 8 bits per block (quant_q8_act), as d * q */
    CLINFER_OP_MOE_ROUTE,  /* each token's n_used experts by its router logits, and their gates */
    CLINFER_OP_MATMUL_ID,  /* per token and slot: a matmul by the rows of the expert ids name */
    CLINFER_OP_MOE_SUM,    /* y[n][d] (+)= sum over j of weights[n][j] * x[n][j][d] */
    CLINFER_OP_SWIGLU_OAI, /* y[i] = swiglu_oai(a[i], b[i]): gpt-oss's clamped SwiGLU, below */
    CLINFER_OP_COUNT
} clinfer_op_kind;

/* The case labels of the element-wise ops (their operands are op->eltwise), for the switches over
 * kinds that treat them alike (op_check.c, op_info.c, graph_encode_cl.c): a new one joins here. */
#define CLINFER_OP_ELTWISE_CASES                                                                   \
    case CLINFER_OP_ADD:                                                                           \
    case CLINFER_OP_GELU:                                                                          \
    case CLINFER_OP_SWIGLU:                                                                        \
    case CLINFER_OP_GEGLU:                                                                         \
    case CLINFER_OP_SWIGLU_OAI:                                                                    \
    case CLINFER_OP_SCALE

typedef struct clinfer_op {
    clinfer_op_kind kind;
    union {
        struct {
            clinfer_buffer *w; /* from weight_create: rows of k elements, row0 + m or more */
            clinfer_ref x, y, bias;
            int m, k, n;
            int row0;        /* the first weight row used: one weight can hold several matrices */
            bool accumulate; /* y += instead of y = (fuses a residual add) */
            /* x is 8-bit activations: the y of a ROUND_Q8 op of block dtype_q8_act_block(w's
             * type) over exactly these n * k elements, with nothing written to them since, so
             * that a backend may read the 8-bit form it made there (integer dot products on
             * quantized weights) instead of the f32 values d * q, which are the same numbers.
             * A plan's walk must hold that ROUND_Q8 before the matmul (plan_create may refuse a
             * walk that does not); for ops run one by one it is the caller's contract. Only
             * for k a multiple of the block. */
            bool x_q8;
        } matmul;
        struct {
            clinfer_buffer *w;
            clinfer_ref ids, y; /* ids: int32 */
            int m, k, n;        /* m = rows of W, for bounds checks */
            float scale;        /* 0 stands for 1: no scaling (gemma3: sqrt(k)) */
        } embed;
        struct {
            clinfer_ref x, w, b, y; /* w optional (a scale of 1); b: layernorm only, optional */
            int n, d;
            float eps;
        } norm;
        struct {
            clinfer_ref x;
            int n, n_heads, head_dim, n_rot; /* first n_rot dims of each head rotate */
            int pos0;
            float freq_base, freq_scale;
            bool neox; /* pairs (j, j + n_rot/2) instead of (2j, 2j+1) */
            /* Optional f32 [n_rot / 2] (buf NULL: none): pair j's angle is divided by
             * factors[j] (Llama 3's rope_freqs, longrope, YaRN's ramp); and mscale multiplies
             * the rotated pairs (YaRN's, longrope's magnitude; 0 stands for 1). */
            clinfer_ref factors;
            float mscale;
            /* Optional KV cache write, saving a store launch each for k and v (k_dst.buf NULL:
             * none). With kv_dim = kv_heads * head_dim, after rotating, the last kv_heads heads
             * of token t's row of x (its keys) go to k_dst + t * kv_dim, and v_src + t * kv_dim
             * (kv_dim f32 values) to v_dst + t * kv_dim, both converted to kv_type (f32 or f16).
             * 0 < kv_heads <= n_heads; v_src must not overlap x, and k_dst and v_dst lie in
             * buffers of their own (neither x's, v_src's nor each other's). */
            clinfer_ref k_dst, v_src, v_dst;
            int kv_heads;
            clinfer_dtype kv_type;
        } rope;
        struct {
            clinfer_ref src; /* f32 */
            clinfer_ref dst; /* f32 or f16 */
            clinfer_dtype dst_type;
            size_t count;
        } store;
        struct {
            clinfer_ref q, k, v, out; /* q, out: [n][n_head][head_dim]; k, v: caches */
            clinfer_dtype kv_type;    /* f32 or f16; caches are [pos][n_kv_head][head_dim] */
            int n, n_head, n_kv_head, head_dim;
            int pos0; /* tokens already in the cache: token i attends to 0 .. pos0 + i */
            /* > 0: a sliding window, token i attends only to the window positions that end at
             * its own, pos0 + i - window + 1 .. pos0 + i (those >= 0); 0: all. */
            int window;
            /* out lies in neither cache's buffer: other items read the caches while it is
             * written. */
            float scale;
            /* > 0: each score s = scale * q.k is capped to softcap * tanh(s / softcap) before
             * the softmax (gemma2); 0: none. */
            float softcap;
            /* Optional f32 [n_head] (buf NULL: none), apart from out: head h's softmax takes one
             * more logit, sinks[h], that has no value (gpt-oss's attention sinks), so that its
             * weights e^s / (sum of e^s + e^sinks[h]) may sum to less than 1. */
            clinfer_ref sinks;
            /* Optional rotation and cache write first (rope.n_rot 0: none), one launch less
             * per layer in decode: q and the new keys k_src are rotated as CLINFER_OP_ROPE does
             * at positions pos0 + i, then the keys and v_src are stored into the caches k and
             * v at positions pos0 .. pos0 + n - 1, converted to kv_type, and attention runs as
             * above. k_src and v_src are f32 [n][n_kv_head][head_dim], apart from q and each
             * other, and neither they nor q lie in a cache's buffer (nor the caches in one).
             * Afterwards q and k_src hold unspecified values: a backend may rotate them in
             * place. */
            struct {
                int n_rot; /* the first n_rot dims of each head rotate */
                float freq_base, freq_scale;
                bool neox;
                clinfer_ref k_src, v_src;
                clinfer_ref factors; /* as the ROPE op's */
                float mscale;
            } rope;
        } attention;
        struct {
            clinfer_ref a, b, y;
            size_t count, b_count; /* b_count: ADD only */
            float scale, cap;      /* SCALE only (reads no b) */
        } eltwise;
        struct {
            /* y[n][k] = x's blocks of `block` elements (32, or 256 for the K-quants'
             * dtype_q8_act_block) rounded as quant_q8_act does and read back as d * q: the
             * x of x_q8 matmuls. k % block == 0; y lies apart from x. A backend may keep the
             * 8-bit form beside y for those matmuls. */
            clinfer_ref x, y;
            int n, k, block;
        } round_q8;
        struct {
            /* Mixture-of-experts routing (src/moe.c builds it): per token t, ids[t][0 ..
             * n_used) are the experts of the n_used largest logits[t][:], largest first (ties:
             * the lower index; a NaN logit never wins over another), and weights[t][j] the gate
             * of ids[t][j]: SOFTMAX p = softmax(logits[t]) over all n_expert, SIGMOID
             * p = sigmoid(logit), SOFTMAX_CHOSEN softmax over the chosen logits only; with norm
             * divided by their sum (at least 6.103515625e-5, llama.cpp's clamp); then times
             * scale (0 stands for 1). n_used <= n_expert <= CLINFER_MOE_MAX_EXPERTS. */
            clinfer_ref logits, ids, weights; /* f32 [n][n_expert], int32 and f32 [n][n_used] */
            int n, n_expert, n_used;
            int gating; /* clinfer_moe_gating */
            bool norm;
            float scale;
        } moe_route;
        struct {
            /* y[t][j][m] = x_row(t, j) . W[ids[t][j] * m + 0 .. m)[k]^T for t < n, j < n_used:
             * w stacks n_expert matrices of m rows (expert e's are rows e * m ..), and x_row is
             * x[t] where x_rows is 1 (every expert of a token reads its row), x[t][j] where it
             * is n_used. An id outside [0, n_expert) gives a row of zeros. x_q8 as the MATMUL's,
             * the ROUND_Q8 over all n * x_rows * k elements of x. Only the chosen experts' rows
             * need be read; a backend may group the (t, j) of one expert. bias: optional f32
             * [n_expert][m] (buf NULL: none), apart from y: expert e's row bias[e] is added to
             * each of its outputs (an id out of range adds nothing). */
            clinfer_buffer *w;
            clinfer_ref x, ids, y; /* ids: int32 [n][n_used] */
            clinfer_ref bias;
            int m, k, n, n_used, n_expert, x_rows;
            bool x_q8;
        } matmul_id;
        struct {
            /* y[t][0 .. d) (+)= sum over j < n_used, in that order, of weights[t][j] *
             * x[t][j][0 .. d): the experts' outputs mixed by their gates (fuses a residual add
             * with accumulate). y lies apart from x and weights. */
            clinfer_ref x, weights, y;
            int n, n_used, d;
            bool accumulate;
        } moe_sum;
    };
} clinfer_op;

/* SWIGLU_OAI (gpt-oss's experts, as llama.cpp's swiglu_oai): with g = min(a, limit) and
 * u = b clamped to [-limit, limit], y = g / (1 + e^(-alpha g)) * (u + 1). */
#define CLINFER_SWIGLU_OAI_ALPHA 1.702f
#define CLINFER_SWIGLU_OAI_LIMIT 7.0f

/* The gate functions of MOE_ROUTE. */
typedef enum {
    CLINFER_MOE_SOFTMAX,
    CLINFER_MOE_SIGMOID,
    CLINFER_MOE_SOFTMAX_CHOSEN,
    CLINFER_MOE_GATING_COUNT
} clinfer_moe_gating;
#define CLINFER_MOE_MAX_EXPERTS 1024

/* The ROPE op that an ATTENTION op with rope (attention.rope.n_rot > 0) stands for, rotating
 * the new keys (k_src) and storing them and v_src into the caches at pos0: what a backend runs
 * before attending where it does not rotate in the attention itself. Its queries are rotated by
 * the same op with x = q, n_heads = n_head and no cache write (k_dst.buf NULL). */
static inline clinfer_op attention_keys_rope(const clinfer_op *a) {
    size_t at = (size_t)a->attention.pos0 * a->attention.n_kv_head * a->attention.head_dim;
    return (clinfer_op){.kind = CLINFER_OP_ROPE,
                        .rope = {.x = a->attention.rope.k_src,
                                 .n = a->attention.n,
                                 .n_heads = a->attention.n_kv_head,
                                 .head_dim = a->attention.head_dim,
                                 .n_rot = a->attention.rope.n_rot,
                                 .pos0 = a->attention.pos0,
                                 .freq_base = a->attention.rope.freq_base,
                                 .freq_scale = a->attention.rope.freq_scale,
                                 .neox = a->attention.rope.neox,
                                 .factors = a->attention.rope.factors,
                                 .mscale = a->attention.rope.mscale,
                                 .k_dst = {a->attention.k.buf, a->attention.k.offset + at},
                                 .v_src = a->attention.rope.v_src,
                                 .v_dst = {a->attention.v.buf, a->attention.v.offset + at},
                                 .kv_heads = a->attention.n_kv_head,
                                 .kv_type = a->attention.kv_type}};
}

/* backends/op_info.c: "matmul", "rmsnorm", ... ("?" for none). */
const char *op_kind_name(clinfer_op_kind kind);

/* One region an op writes: what verification compares between backends (src/verify.c) and what
 * the OpenCL fault hook corrupts (the first). */
typedef struct {
    const char *name;   /* "y", "x" (in place), "out", "dst", "k cache", "v cache" */
    clinfer_ref ref;    /* as bound for the run: caches at the rows written */
    size_t count;       /* elements */
    clinfer_dtype type; /* CLINFER_DT_F32, or the cache type */
    int tokens;         /* the token rows it holds, count / tokens each; 0: not in the record
                         * (STORE and the element-wise ops) */
} clinfer_op_output;

#define CLINFER_OP_MAX_OUTPUTS 3

/* backends/op_info.c: fills out with the regions op writes, its main output first (then ROPE's and
 * a rotating ATTENTION's cache rows), and returns how many. For a well-formed op (op_check). */
size_t op_outputs(const clinfer_op *op, clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS]);

/* backends/op_check.c: CLINFER_OK where op is well formed as this file defines it (shapes,
 * operands inside their buffers, weights, cache types, the overlaps the ops forbid), else
 * CLINFER_ERR_INVALID_ARGUMENT with a message naming the op, operand and values. Every backend's
 * op and op_run call it before anything else; a backend checks only its own device limits. */
clinfer_status op_check_operands(const clinfer_op *op);

/* backends/op_check.c: the same for a host transfer (buffer_write, buffer_read; what names it in
 * messages): bytes at offset inside a plain (non-weight) buffer, a host pointer where bytes > 0. */
clinfer_status op_check_transfer(const char *what, const clinfer_buffer *buf, size_t offset,
                                 size_t bytes, const void *host);

/* backends/op_check.c: the same for buffer_copy: both ranges inside plain buffers, and apart
 * where src and dst are one buffer. */
clinfer_status op_check_copy(const char *what, const clinfer_buffer *src, size_t src_offset,
                             const clinfer_buffer *dst, size_t dst_offset, size_t bytes);

/* The kernel time of one op as the device measured it (timing_collect). */
typedef struct {
    double ms;         /* summed END - START of its launches */
    double start, end; /* ms since the backend's first timed launch: its first START, last END */
    uint32_t launches; /* kernels it enqueued (0: none, e.g. an empty op) */
} clinfer_op_timing;

/* Told around each run of ops that a walk launches together (plan_run's, for the profiler):
 * begin before the run that starts at op first, end after it with the ops it took; a status
 * other than CLINFER_OK from end stops the walk with it. */
typedef struct {
    void (*begin)(void *user, size_t first);
    clinfer_status (*end)(void *user, size_t first, size_t taken);
    void *user;
} clinfer_run_hooks;

typedef struct clinfer_backend_i {
    int api_version; /* CLINFER_BACKEND_API */
    const char *(*name)(void *ctx);
    /* Describes the device and kernel path in one line, for logs and bench output. */
    const char *(*describe)(void *ctx);
    clinfer_status (*buffer_alloc)(void *ctx, size_t bytes, clinfer_buffer **out);
    void (*buffer_free)(void *ctx, clinfer_buffer *buf);
    /* Host transfers (op_check_transfer first). */
    clinfer_status (*buffer_write)(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                   const void *src);
    clinfer_status (*buffer_read)(void *ctx, clinfer_buffer *buf, size_t offset, size_t bytes,
                                  void *dst);
    /* bytes from src at src_offset to dst at dst_offset on the device, ordered with the ops
     * (op_check_copy first): KV cache rows shared between sequences. */
    clinfer_status (*buffer_copy)(void *ctx, clinfer_buffer *src, size_t src_offset,
                                  clinfer_buffer *dst, size_t dst_offset, size_t bytes);
    /* A weight matrix of m rows x k elements in a GGUF type; the backend may re-lay it out
     * or split it across allocations. Freed with buffer_free. */
    clinfer_status (*weight_create)(void *ctx, clinfer_dtype type, int m, int k, const void *data,
                                    clinfer_buffer **out);
    /* Enqueues one op (op_check_operands first); may run asynchronously until sync. */
    clinfer_status (*op)(void *ctx, const clinfer_op *op);
    clinfer_status (*sync)(void *ctx);
    void (*destroy)(void *ctx);
    /* Another backend on the same device, for one more thread: it has its own queue, kernel
     * objects and scratch, and shares this one's compiled kernels; the weights made on this one
     * before it, and this one's buffers, may be its ops' operands. Each may be driven by its own
     * thread at once. This one must outlive it (a context's backend, made from its model's once
     * the weights are loaded: src/context.c). */
    clinfer_status (*instance)(void *ctx, clinfer_backend **out);
    /* Optional (NULL: unknown): the bytes of device memory its buffers draw from, so that a
     * context that cannot fit is refused before it is allocated (host memory overcommits). */
    uint64_t (*memory)(void *ctx);
    /* Optional (NULL: the backend cannot time its kernels), for the profiler, which otherwise
     * has to wait for the device after each op. timing_mark tags the launches of the ops
     * enqueued after it with op_index, starting a recording if none is open; false where this
     * instance cannot time (nothing recorded). timing_collect waits for the device, fills
     * ops[0, n_ops) from the recorded launches (those tagged >= n_ops are dropped) and ends the
     * recording; call it after a failed op too. */
    bool (*timing_mark)(void *ctx, size_t op_index);
    clinfer_status (*timing_collect)(void *ctx, clinfer_op_timing *ops, size_t n_ops);
    /* Optional (NULL: one launch per op): enqueues a run of ops at the head of ops[0 .. n) in
     * fewer launches where the backend can (a matmul and the norm of its output in one; on CPU
     * devices a whole decode step in one), with the results of running them one by one;
     * *taken says how many (0: none, and nothing is enqueued: the caller runs ops[0] alone). */
    clinfer_status (*op_run)(void *ctx, const clinfer_op *ops, size_t n, size_t *taken);
    /* Optional (NULL: weights are always copied): declares that host memory [base, base + size)
     * (a mapped model file) stays readable and unchanged until this backend is destroyed, so
     * weight_create may use data inside it in place instead of copying it; such weights have
     * head.in_place set, and the caller must keep those pages (no madvise DONTNEED). */
    void (*host_data)(void *ctx, const void *base, size_t size);
    /* Optional (NULL: the executor runs each walk through op_run and op): a walk that runs again
     * and again with the same ops (a plan's; only their positions change) as a plan of the
     * backend's own. plan_create takes the walk's ops once; kept says the plan will run again and
     * again (not a batch layout's, made for one step), so that the backend may prepare what they
     * need now (programs built before the first run, not during it); decode says each run is one
     * token's step whose output is read right after it (the logits, or a split's hidden state
     * for the next device), which a backend with two ways to run such steps may time to choose
     * between them, to the end of that read. plan_run runs the walk once (ops: the
     * plan's n ops bound to this run's positions, each checked as op checks it) and may wait for
     * the device; with hooks (NULL: none) it tells them of each run of ops it launches, and
     * times nothing of its own. plan_free drops the plan. */
    clinfer_status (*plan_create)(void *ctx, const clinfer_op *ops, size_t n, bool decode,
                                  bool kept, void **plan);
    clinfer_status (*plan_run)(void *ctx, void *plan, const clinfer_op *ops, size_t n,
                               const clinfer_run_hooks *hooks);
    void (*plan_free)(void *ctx, void *plan);
    /* Optional (NULL: every well-formed op): CLINFER_OK where this backend can run op (well
     * formed: op_check_operands), else CLINFER_ERR_UNSUPPORTED with a message naming the limit.
     * The executor asks it of every op of a walk before the walk's first run, so that a model the
     * device cannot run is refused with that message rather than failing part way. */
    clinfer_status (*supports_op)(void *ctx, const clinfer_op *op);
    /* Optional (NULL: weights are laid out at every load), for a backend that re-lays weights
     * out at weight_create: weight_cache_open names the model whose weight_create calls follow
     * by id (bytes that identify the model file's contents), so that the backend may keep the
     * weights as it laid them out in a cache file keyed by id and its device, and on a later
     * load use that file instead (it returns whether it found one: then weight_create of the
     * types it re-lays out reads no data, as long as the file matches); weight_cached says
     * whether the next weight_create, of type and m x k, will come from the cache without
     * reading its data (the caller may then pass any pointer inside the host data instead of
     * staging a copy); weight_cache_close ends the sequence (the backend writes the file where
     * it had none). No failure of the cache fails a load. */
    bool (*weight_cache_open)(void *ctx, const void *id, size_t id_size);
    bool (*weight_cached)(void *ctx, clinfer_dtype type, int m, int k);
    void (*weight_cache_close)(void *ctx);
    /* Optional (NULL: yes): whether matmuls over 8-bit activations run integer dot products for
     * some weight made so far. Where none does, kernels read the rounded activations back as
     * f32, so rounding them buys no speed and costs launches and accuracy (src/context.c's
     * default activations ask). */
    bool (*int8_dots)(void *ctx);
    /* Optional (NULL: buffer_write): buffer_write that may return before the copy is done, for
     * what each step writes (its token ids; a split's hidden state for the next device), where
     * a blocking write costs a wait. src must stay unchanged until this backend's next sync or
     * buffer_read has returned. */
    clinfer_status (*buffer_write_queued)(void *ctx, clinfer_buffer *buf, size_t offset,
                                          size_t bytes, const void *src);
} clinfer_backend_i;

#define CLINFER_BACKEND_API 3

struct clinfer_backend {
    const clinfer_backend_i *i;
    void *ctx;
};

/* buffer_write_queued where the backend has it, else buffer_write. */
static inline clinfer_status backend_write_queued(const clinfer_backend *be, clinfer_buffer *buf,
                                                  size_t offset, size_t bytes, const void *src) {
    return be->i->buffer_write_queued ? be->i->buffer_write_queued(be->ctx, buf, offset, bytes, src)
                                      : be->i->buffer_write(be->ctx, buf, offset, bytes, src);
}

/* A backend of kind (options NULL: the defaults; the OpenCL device is options->device, chosen
 * as clinfer_device_select does); reason receives a sentence saying which device and why.
 * The core (src/) creates backends only through this (backends/registry.c); the constructors
 * below are for it and for tests. */
clinfer_status backend_create(clinfer_backend_kind kind, const clinfer_backend_options *options,
                              char *reason, size_t reason_size, clinfer_backend **out);

clinfer_status ref_backend_create(clinfer_backend **out);
/* device_index as in clinfer_device_get_info; options NULL: the defaults (options.device is not
 * looked at: the caller chose device_index). */
clinfer_status cl_backend_create(size_t device_index, const clinfer_backend_options *options,
                                 clinfer_backend **out);
void backend_free(clinfer_backend *backend);

#endif
