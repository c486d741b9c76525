/* What an op record is called and what it writes (backend.h): read by the verifier, which compares
 * every output of every op across two backends, and by the OpenCL fault hook that corrupts one. */
#include "backend.h"

const char *op_kind_name(clinfer_op_kind kind) {
    static const char *const names[CLINFER_OP_COUNT] = {
        [CLINFER_OP_MATMUL] = "matmul",
        [CLINFER_OP_EMBED] = "embed",
        [CLINFER_OP_RMSNORM] = "rmsnorm",
        [CLINFER_OP_LAYERNORM] = "layernorm",
        [CLINFER_OP_ROPE] = "rope",
        [CLINFER_OP_STORE] = "store",
        [CLINFER_OP_ATTENTION] = "attention",
        [CLINFER_OP_ADD] = "add",
        [CLINFER_OP_GELU] = "gelu",
        [CLINFER_OP_SWIGLU] = "swiglu",
        [CLINFER_OP_GEGLU] = "geglu",
        [CLINFER_OP_ROUND_Q8] = "round_q8",
        [CLINFER_OP_MOE_ROUTE] = "moe_route",
        [CLINFER_OP_MATMUL_ID] = "matmul_id",
        [CLINFER_OP_MOE_SUM] = "moe_sum",
        [CLINFER_OP_SCALE] = "scale",
        [CLINFER_OP_SWIGLU_OAI] = "swiglu_oai",
    };
    return (unsigned)kind < CLINFER_OP_COUNT ? names[kind] : "?";
}

static clinfer_op_output f32_rows(const char *name, clinfer_ref ref, size_t count, int tokens) {
    return (clinfer_op_output){name, ref, count, CLINFER_DT_F32, tokens};
}

/* The rows [pos0, pos0 + n) of both caches that a rotation with a cache write fills. */
static size_t cache_rows(clinfer_op_output *out, clinfer_ref k, clinfer_ref v, size_t count,
                         clinfer_dtype type, int n) {
    out[0] = (clinfer_op_output){"k cache", k, count, type, n};
    out[1] = (clinfer_op_output){"v cache", v, count, type, n};
    return 2;
}

size_t op_outputs(const clinfer_op *op, clinfer_op_output out[CLINFER_OP_MAX_OUTPUTS]) {
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
        out[0] =
            f32_rows("y", op->matmul.y, (size_t)op->matmul.n * (size_t)op->matmul.m, op->matmul.n);
        return 1;
    case CLINFER_OP_EMBED:
        out[0] = f32_rows("y", op->embed.y, (size_t)op->embed.n * (size_t)op->embed.k, op->embed.n);
        return 1;
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        out[0] = f32_rows("y", op->norm.y, (size_t)op->norm.n * (size_t)op->norm.d, op->norm.n);
        return 1;
    case CLINFER_OP_ROPE: {
        int n = op->rope.n;
        out[0] = f32_rows("x", op->rope.x, (size_t)n * op->rope.n_heads * op->rope.head_dim, n);
        if (!op->rope.k_dst.buf) return 1;
        size_t kv = (size_t)n * op->rope.kv_heads * op->rope.head_dim;
        return 1 + cache_rows(out + 1, op->rope.k_dst, op->rope.v_dst, kv, op->rope.kv_type, n);
    }
    case CLINFER_OP_STORE:
        out[0] = (clinfer_op_output){"dst", op->store.dst, op->store.count, op->store.dst_type, 0};
        return 1;
    case CLINFER_OP_ATTENTION: {
        int n = op->attention.n;
        size_t head = (size_t)op->attention.head_dim;
        out[0] = f32_rows("out", op->attention.out, (size_t)n * op->attention.n_head * head, n);
        if (!op->attention.rope.n_rot) return 1;
        clinfer_op keys = attention_keys_rope(op); /* where the new rows go */
        size_t kv = (size_t)n * op->attention.n_kv_head * head;
        return 1 + cache_rows(out + 1, keys.rope.k_dst, keys.rope.v_dst, kv, keys.rope.kv_type, n);
    }
    CLINFER_OP_ELTWISE_CASES:
        out[0] = f32_rows("y", op->eltwise.y, op->eltwise.count, 0);
        return 1;
    case CLINFER_OP_ROUND_Q8:
        out[0] = f32_rows("y", op->round_q8.y, (size_t)op->round_q8.n * (size_t)op->round_q8.k,
                          op->round_q8.n);
        return 1;
    case CLINFER_OP_MOE_ROUTE: {
        int n = op->moe_route.n;
        size_t count = (size_t)n * (size_t)op->moe_route.n_used;
        out[0] = f32_rows("weights", op->moe_route.weights, count, n);
        /* int32, compared as the bits of f32 (4 bytes each): any other expert is far off */
        out[1] = f32_rows("ids", op->moe_route.ids, count, n);
        return 2;
    }
    case CLINFER_OP_MATMUL_ID: {
        int n = op->matmul_id.n;
        out[0] = f32_rows("y", op->matmul_id.y,
                          (size_t)n * (size_t)op->matmul_id.n_used * (size_t)op->matmul_id.m, n);
        return 1;
    }
    case CLINFER_OP_MOE_SUM:
        out[0] = f32_rows("y", op->moe_sum.y, (size_t)op->moe_sum.n * (size_t)op->moe_sum.d,
                          op->moe_sum.n);
        return 1;
    default:
        return 0;
    }
}
