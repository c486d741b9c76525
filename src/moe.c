/* Mixture-of-experts feed-forwards (qwen3moe, olmoe, mixtral's llama files, gpt-oss): their
 * hyperparameters, tensors and ops. Each token's router logits (plus the router's bias where the
 * file has one) choose n_used of n_expert gated experts (MOE_ROUTE); the experts' gate, up and
 * down matrices of a layer are each one stacked weight, multiplied by the chosen experts' rows
 * only (MATMUL_ID, adding each expert's biases where the file has them), and the experts'
 * outputs are summed by their gates into the residual stream (MOE_SUM). */
#include <math.h>
#include <stdio.h>

#include "arch.h"
#include "error.h"

/* llama.cpp's expert_gating_func values */
enum { GGUF_GATING_SOFTMAX = 1, GGUF_GATING_SIGMOID = 2, GGUF_GATING_SOFTMAX_WEIGHT = 3 };

static const char *gating_name(uint32_t gating) {
    return gating == GGUF_GATING_SOFTMAX          ? "softmax"
           : gating == GGUF_GATING_SIGMOID        ? "sigmoid"
           : gating == GGUF_GATING_SOFTMAX_WEIGHT ? "softmax of the chosen"
                                                  : "unknown";
}

clinfer_status moe_read_hparams(const gguf_file *f, const char *arch, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    moe_hparams *moe = &hp->moe;
    /* the family's gating: llama.cpp's whatever the key says, so a file saying otherwise
     * contradicts its family */
    uint32_t family =
        hp->arch->moe_softmax_chosen ? GGUF_GATING_SOFTMAX_WEIGHT : GGUF_GATING_SOFTMAX;
    uint32_t gating = family;
    *moe = (moe_hparams){.n_ff = hp->n_ff, .norm = hp->arch->moe_norm};
    CHECK(arch_key_u32(f, arch, "expert_count", false, &moe->n_expert));
    CHECK(arch_key_u32(f, arch, "expert_used_count", false, &moe->n_used));
    CHECK(arch_key_u32(f, arch, "expert_feed_forward_length", false, &moe->n_ff));
    CHECK(arch_key_u32(f, arch, "expert_gating_func", false, &gating));
    CHECK(arch_key_f32(f, arch, "expert_weights_scale", false, &moe->scale));
    int experts = hp->arch->experts;
    if (moe->n_expert && experts == ARCH_DENSE)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.expert_count is %u, but %s has no mixture of experts", arch,
                        moe->n_expert, arch);
    if (!moe->n_expert && experts == ARCH_MOE)
        return err_fail(CLINFER_ERR_FORMAT, "model: %s needs %s.expert_count > 0", arch, arch);
    if (!moe->n_expert) {
        moe->n_used = 0;
        return CLINFER_OK;
    }
    if (moe->n_expert > CLINFER_MOE_MAX_EXPERTS || moe->n_used < 1 || moe->n_used > moe->n_expert)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.expert_used_count %u with expert_count %u: need 1 .. "
                        "expert_count, and expert_count at most %d",
                        arch, moe->n_used, moe->n_expert, CLINFER_MOE_MAX_EXPERTS);
    if (moe->n_ff < 1 || moe->n_ff > (1u << 20) ||
        (uint64_t)moe->n_ff * moe->n_expert > INT32_MAX ||
        (uint64_t)hp->n_embd * moe->n_expert > INT32_MAX)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.expert_feed_forward_length %u of %u experts is out of range",
                        arch, moe->n_ff, moe->n_expert);
    if (gating != family)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.expert_gating_func %u (%s) contradicts %s's %s gating (%u)",
                        arch, gating, gating_name(gating), arch, gating_name(family), family);
    moe->gating = family == GGUF_GATING_SOFTMAX ? CLINFER_MOE_SOFTMAX : CLINFER_MOE_SOFTMAX_CHOSEN;
    if (!isfinite(moe->scale) || moe->scale < 0.0f)
        return err_fail(CLINFER_ERR_FORMAT, "model: %s.expert_weights_scale %g", arch,
                        (double)moe->scale);
cleanup:
    return st;
}

/* Tensor name [k, rows, n_expert]: the experts' matrices, uploaded as one weight of n_expert *
 * rows rows. */
static clinfer_status load_experts(clinfer_loader *ld, const char *name, uint32_t k, uint32_t rows,
                                   clinfer_matrix *out) {
    const moe_hparams *moe = &ld->m->hp.moe;
    const gguf_tensor *t = gguf_find_tensor(ld->m->gguf, name);
    if (!t)
        return err_fail(CLINFER_ERR_FORMAT, "model: tensor '%s' is missing (expert_count %u)", name,
                        moe->n_expert);
    if (t->ne[0] != k || t->ne[1] != rows || t->ne[2] != moe->n_expert || t->ne[3] != 1)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], the "
                        "hyperparameters imply [%u, %u, %u] (expert_count %u, "
                        "expert_feed_forward_length %u)",
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], k, rows, moe->n_expert, moe->n_expert, moe->n_ff);
    return model_upload_rows(ld, t, name, 0, (int)(rows * moe->n_expert), out);
}

clinfer_status moe_load_ffn(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t E = hp->n_embd, F = hp->moe.n_ff;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    const gguf_tensor *router =
        model_find_shaped(ld->m, NAME("ffn_gate_inp.weight"), E, hp->moe.n_expert, true, &st);
    if (!router) {
        err_prefix("expert_count %u", hp->moe.n_expert);
        return st;
    }
    CHECK(model_upload_rows(ld, router, name, 0, (int)hp->moe.n_expert, &l->ffn_gate_inp));
    CHECK(model_load_vector(ld, NAME("ffn_gate_inp.bias"), hp->moe.n_expert, false,
                            &l->ffn_gate_inp_b));
    CHECK(load_experts(ld, NAME("ffn_gate_exps.weight"), E, F, &l->ffn_gate_exps));
    CHECK(load_experts(ld, NAME("ffn_up_exps.weight"), E, F, &l->ffn_up_exps));
    CHECK(load_experts(ld, NAME("ffn_down_exps.weight"), F, E, &l->ffn_down_exps));
    /* each expert's bias rows, [rows, n_expert] */
    CHECK(model_load_vectors(ld, NAME("ffn_gate_exps.bias"), F, hp->moe.n_expert, false,
                             &l->ffn_gate_exps_b));
    CHECK(model_load_vectors(ld, NAME("ffn_up_exps.bias"), F, hp->moe.n_expert, false,
                             &l->ffn_up_exps_b));
    CHECK(model_load_vectors(ld, NAME("ffn_down_exps.bias"), E, hp->moe.n_expert, false,
                             &l->ffn_down_exps_b));
#undef NAME
cleanup:
    return st;
}

/* ---- the forward pass ------------------------------------------------------------------- */

/* A MATMUL_ID of the experts' weight w (m rows each, bias rows where given) over x (x_rows rows
 * per token). */
static void expert_matmul(exec_builder *b, const clinfer_model *m, const exec_state *s,
                          const clinfer_matrix *w, clinfer_ref bias, int rows, clinfer_ref x,
                          int x_rows, clinfer_ref y, int n) {
    const moe_hparams *moe = &m->hp.moe;
    bool x_q8;
    x = exec_matmul_x(b, w->type, w->k, x, n * x_rows, &x_q8);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_MATMUL_ID,
                           .matmul_id = {.w = w->w,
                                         .x = x,
                                         .ids = exec_at(s->buf[EXEC_MOE_IDS], 0),
                                         .y = y,
                                         .m = rows,
                                         .k = w->k,
                                         .n = n,
                                         .n_used = (int)moe->n_used,
                                         .n_expert = (int)moe->n_expert,
                                         .x_rows = x_rows,
                                         .x_q8 = x_q8,
                                         .bias = bias}},
              0);
}

static void moe_ffn(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n,
                    clinfer_op_kind glu) {
    const clinfer_hparams *hp = &m->hp;
    const moe_hparams *moe = &hp->moe;
    const clinfer_layer *l = &m->layers[il];
    clinfer_buffer *const *buf = s->buf;
    int used = (int)moe->n_used, F = (int)moe->n_ff, E = (int)hp->n_embd;
    size_t count = (size_t)n * (size_t)used * (size_t)F;
    clinfer_ref x = exec_at(buf[EXEC_X], 0), xn = exec_at(buf[EXEC_XN], 0);
    clinfer_ref logits = exec_at(buf[EXEC_MOE_LOGITS], 0), ids = exec_at(buf[EXEC_MOE_IDS], 0),
                gates = exec_at(buf[EXEC_MOE_W], 0), out = exec_at(buf[EXEC_MOE_OUT], 0);
    clinfer_ref gate = exec_at(buf[EXEC_FF_A], 0), up = exec_at(buf[EXEC_FF_A], count);

    exec_norm(b, hp, x, l->ffn_norm, l->ffn_norm_b, xn, n);
    exec_matmul(b, &l->ffn_gate_inp, xn, logits, l->ffn_gate_inp_b, n, false);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_MOE_ROUTE,
                           .moe_route = {.logits = logits,
                                         .ids = ids,
                                         .weights = gates,
                                         .n = n,
                                         .n_expert = (int)moe->n_expert,
                                         .n_used = used,
                                         .gating = moe->gating,
                                         .norm = moe->norm,
                                         .scale = moe->scale}},
              0);
    expert_matmul(b, m, s, &l->ffn_gate_exps, l->ffn_gate_exps_b, F, xn, 1, gate, n);
    expert_matmul(b, m, s, &l->ffn_up_exps, l->ffn_up_exps_b, F, xn, 1, up, n);
    exec_push(
        b,
        (clinfer_op){.kind = glu,
                     .eltwise = {.a = gate, .b = up, .y = gate, .count = count, .b_count = count}},
        0);
    expert_matmul(b, m, s, &l->ffn_down_exps, l->ffn_down_exps_b, E, gate, used, out, n);
    exec_push(b,
              (clinfer_op){.kind = CLINFER_OP_MOE_SUM,
                           .moe_sum = {.x = out,
                                       .weights = gates,
                                       .y = x,
                                       .n = n,
                                       .n_used = used,
                                       .d = E,
                                       .accumulate = true}},
              0);
}

void exec_ffn(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n,
              clinfer_op_kind glu) {
    if (m->hp.moe.n_expert)
        moe_ffn(b, m, s, il, n, glu);
    else
        exec_gated_ffn(b, m, s, il, n, glu);
}

void moe_active(const clinfer_model *m, uint64_t *params, uint64_t *bytes) {
    const moe_hparams *moe = &m->hp.moe;
    *params = m->n_params;
    *bytes = m->weight_bytes;
    for (uint32_t il = 0; moe->n_expert && il < m->hp.n_layer; il++) {
        const clinfer_layer *l = &m->layers[il];
        const clinfer_matrix *exps[] = {&l->ffn_gate_exps, &l->ffn_up_exps, &l->ffn_down_exps};
        for (int i = 0; i < 3; i++) {
            uint64_t rows = (uint64_t)exps[i]->m, idle = moe->n_expert - moe->n_used;
            uint64_t elems = rows * (uint64_t)exps[i]->k;
            *params -= elems / moe->n_expert * idle;
            *bytes -=
                rows * dtype_row_bytes(exps[i]->type, (size_t)exps[i]->k) / moe->n_expert * idle;
        }
    }
}
