/* Report rows' op names (verify.h): found by comparing the op's operands with the model's tensors
 * and the context's caches, so that plans carry no names of their own. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "verify.h"

typedef struct {
    const char *name;
    const clinfer_matrix *w;
} named_matrix;

/* Appends the names of the matrices whose rows the matmul or embedding covers, '+'-separated (a
 * decode step's matmul runs a layer's stacked q, k and v, or gate and up, at once). */
static void matrix_names(const clinfer_op *op, const named_matrix *mats, size_t n, char *buf,
                         size_t size) {
    bool matmul = op->kind == CLINFER_OP_MATMUL;
    const clinfer_buffer *w = matmul ? op->matmul.w : op->embed.w;
    int row0 = matmul ? op->matmul.row0 : 0, m = matmul ? op->matmul.m : op->embed.m;
    const char *sep = " ";
    for (size_t i = 0; i < n; i++) {
        const clinfer_matrix *x = mats[i].w;
        if (x->w != w || x->m <= 0 || x->row0 < row0 || x->row0 >= row0 + m) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", sep, mats[i].name);
        sep = "+";
    }
}

static bool same(clinfer_ref a, clinfer_ref b) {
    return a.buf == b.buf && a.offset == b.offset;
}

void verify_label(const clinfer_model *m, const exec_state *s, const exec_step *step, char *buf,
                  size_t size) {
    const clinfer_op *op = &step->op;
    bool head = step->layer == (int)m->hp.n_layer, body = step->layer >= 0 && !head;
    const clinfer_layer *l = body ? &m->layers[step->layer] : NULL;
    snprintf(buf, size, "%s", op_kind_name(op->kind));
    size_t len = strlen(buf);
    switch (op->kind) {
    case CLINFER_OP_MATMUL:
    case CLINFER_OP_EMBED: {
        const named_matrix globals[] = {
            {head ? "output" : "token_embd", head ? &m->output : &m->tok_embd},
            {"position_embd", &m->pos_embd}};
        if (!l) {
            matrix_names(op, globals, head ? 1 : 2, buf, size);
            break;
        }
        const named_matrix mats[] = {{"attn_q", &l->wq},         {"attn_k", &l->wk},
                                     {"attn_v", &l->wv},         {"attn_output", &l->wo},
                                     {"ffn_gate", &l->ffn_gate}, {"ffn_up", &l->ffn_up},
                                     {"ffn_down", &l->ffn_down}};
        matrix_names(op, mats, sizeof mats / sizeof mats[0], buf, size);
        break;
    }
    case CLINFER_OP_RMSNORM:
    case CLINFER_OP_LAYERNORM:
        snprintf(buf + len, size - len, " %s",
                 head                                 ? "output_norm"
                 : l && same(op->norm.w, l->ffn_norm) ? "ffn_norm"
                                                      : "attn_norm");
        break;
    case CLINFER_OP_ROPE:
        snprintf(buf + len, size - len, " %s", op->rope.k_dst.buf ? "k" : "q");
        break;
    case CLINFER_OP_STORE:
        snprintf(buf + len, size - len, " %s",
                 l && op->store.dst.buf == s->k_cache[step->layer].buf ? "k" : "v");
        break;
    case CLINFER_OP_ATTENTION:
        if (op->attention.rope.n_rot) snprintf(buf + len, size - len, " (rope q k)");
        break;
    case CLINFER_OP_ROUND_Q8: { /* what it rounds, and per how many */
        clinfer_buffer *x = op->round_q8.x.buf;
        snprintf(buf + len, size - len, " %s/%d",
                 x == s->buf[EXEC_ATT]    ? "att"
                 : x == s->buf[EXEC_FF_A] ? "ffn"
                                          : "xn",
                 op->round_q8.block);
        break;
    }
    default:
        break;
    }
}
