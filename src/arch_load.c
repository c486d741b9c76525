/* Tensor groups that several architectures load alike (declared in arch.h): q, k and v, each
 * head's q and k norms, gate and up. */
#include <stdio.h>

#include "arch.h"
#include "error.h"

clinfer_status clinfer_load_qkv(clinfer_loader *ld, uint32_t il, bool qkv_bias) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char names[3][96];
    const char *const suffix[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        snprintf(names[i], sizeof names[i], "blk.%u.attn_%s.weight", il, suffix[i]);
    const char *const qkv_names[] = {names[0], names[1], names[2]};
    const uint32_t rows[] = {q_dim, kv_dim, kv_dim};
    clinfer_matrix *const outs[] = {&l->wq, &l->wk, &l->wv};
    CHECK(clinfer_load_stacked(ld, qkv_names, rows, 3, hp->n_embd, outs));
    clinfer_ref *const biases[] = {&l->bq, &l->bk, &l->bv};
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "blk.%u.attn_%s.bias", il, suffix[i]);
        CHECK(clinfer_load_vector(ld, names[i], rows[i], qkv_bias, biases[i]));
    }
cleanup:
    return st;
}

clinfer_status clinfer_load_head_norms(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    clinfer_layer *l = &ld->m->layers[il];
    char q_norm[96], k_norm[96];
    snprintf(q_norm, sizeof q_norm, "blk.%u.attn_q_norm.weight", il);
    snprintf(k_norm, sizeof k_norm, "blk.%u.attn_k_norm.weight", il);
    CHECK(clinfer_load_vector(ld, q_norm, ld->m->hp.head_dim, true, &l->q_norm));
    CHECK(clinfer_load_vector(ld, k_norm, ld->m->hp.head_dim, true, &l->k_norm));
cleanup:
    return st;
}

clinfer_status clinfer_load_gate_up(clinfer_loader *ld, uint32_t il) {
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    char gate[96], up[96];
    snprintf(gate, sizeof gate, "blk.%u.ffn_gate.weight", il);
    snprintf(up, sizeof up, "blk.%u.ffn_up.weight", il);
    const char *const names[] = {gate, up};
    const uint32_t rows[] = {hp->n_ff, hp->n_ff};
    clinfer_matrix *const outs[] = {&l->ffn_gate, &l->ffn_up};
    return clinfer_load_stacked(ld, names, rows, 2, hp->n_embd, outs);
}
