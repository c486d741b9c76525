/* The building blocks of loading (declared in arch.h), used by model.c and the architectures:
 * "<arch>.<suffix>" keys (the rope's hyperparameters: rope.c), tensors found by shape and uploaded
 * (alone, as row ranges, stacked) or converted to f32 vectors; then the tensor groups that
 * several architectures load alike: q, k and v, each head's q and k norms, the post-norms, gate
 * and up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "error.h"

/* ---- hyperparameters --------------------------------------------------------------------- */

/* Writes "<arch>.<suffix>" into key; false when the key is optional and the file lacks it, so
 * that the caller's default stands. */
static bool arch_key(const gguf_file *f, const char *arch, const char *suffix, bool required,
                     char *key, size_t size) {
    snprintf(key, size, "%s.%s", arch, suffix);
    return required || gguf_find_kv(f, key);
}

clinfer_status arch_key_u32(const gguf_file *f, const char *arch, const char *suffix, bool required,
                            uint32_t *out) {
    char key[128];
    return arch_key(f, arch, suffix, required, key, sizeof key) ? gguf_get_u32(f, key, out)
                                                                : CLINFER_OK;
}

clinfer_status arch_key_f32(const gguf_file *f, const char *arch, const char *suffix, bool required,
                            float *out) {
    char key[128];
    return arch_key(f, arch, suffix, required, key, sizeof key) ? gguf_get_f32(f, key, out)
                                                                : CLINFER_OK;
}

clinfer_status arch_read_swa(const gguf_file *f, const char *arch, uint32_t period, float base_swa,
                             clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    hp->swa_period = period;
    hp->rope_freq_base_swa = base_swa;
    CHECK(arch_key_u32(f, arch, "attention.sliding_window", false, &hp->swa_window));
    CHECK(arch_key_u32(f, arch, "attention.sliding_window_pattern", false, &hp->swa_period));
    CHECK(arch_key_f32(f, arch, "rope.freq_base_swa", false, &hp->rope_freq_base_swa));
    if (!(hp->rope_freq_base_swa > 0.0f) || !isfinite(hp->rope_freq_base_swa))
        CHECK(err_fail(CLINFER_ERR_FORMAT, "%s.rope.freq_base_swa %g is not positive", arch,
                       (double)hp->rope_freq_base_swa));
cleanup:
    return st;
}

/* ---- tensors ----------------------------------------------------------------------------- */

const gguf_tensor *model_find_shaped(const clinfer_model *m, const char *name, int64_t ne0,
                                     int64_t ne1, bool required, clinfer_status *st) {
    *st = CLINFER_OK;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (required) *st = err_fail(CLINFER_ERR_FORMAT, "model: tensor '%s' is missing", name);
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        *st = err_fail(CLINFER_ERR_FORMAT,
                       "model: tensor '%s' has shape [%lld, %lld, %lld, %lld], the "
                       "hyperparameters imply [%lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)ne0, (long long)ne1);
        return NULL;
    }
    return t;
}

clinfer_status model_upload_rows(clinfer_loader *ld, const gguf_tensor *t, const char *name,
                                 int row0, int rows, clinfer_matrix *out) {
    clinfer_model *m = ld->m;
    if (!dtype_is_weight(t->type))
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "model: tensor '%s' is %s, a type clinfer reads but cannot run: convert "
                        "the file to F16 or a quantized type first (clinfer quantize)",
                        name, dtype_name(t->type));
    if (!ld->upload) return CLINFER_OK;
    int k = (int)t->ne[0];
    size_t row_bytes = dtype_row_bytes(t->type, (size_t)k);
    const uint8_t *data = (const uint8_t *)t->data + (size_t)row0 * row_bytes;
    clinfer_status st = ld->be->i->weight_create(ld->be->ctx, t->type, rows, k, data, &out->w);
    if (st != CLINFER_OK) {
        err_prefix("model: uploading '%s' (%s, %d x %d)", name, dtype_name(t->type), rows, k);
        return st;
    }
    /* every backend's buffer starts with its head (backend.h) */
    if (!((const clinfer_buffer_head *)out->w)->in_place) /* the backend holds a copy now */
        gguf_release(m->gguf, data, (size_t)rows * row_bytes);
    out->type = t->type;
    out->m = rows;
    out->k = k;
    m->weight_bytes += (uint64_t)rows * row_bytes;
    return CLINFER_OK;
}

clinfer_status model_load_matrix(clinfer_loader *ld, const char *name, uint32_t k, uint32_t rows,
                                 bool required, clinfer_matrix *out) {
    clinfer_status st;
    const gguf_tensor *t = model_find_shaped(ld->m, name, k, rows, required, &st);
    if (!t) return st;
    return model_upload_rows(ld, t, name, 0, (int)rows, out);
}

clinfer_matrix matrix_rows_of(const clinfer_matrix *whole, int row0, int m) {
    return (clinfer_matrix){whole->w, whole->type, m, whole->k, row0};
}

/* Whether the n tensors' rows follow one another in the file: then they are stacked as they
 * lie, with no copy. */
static bool adjacent(const gguf_tensor *const *t, const uint32_t *rows, size_t n,
                     size_t row_bytes) {
    for (size_t j = 1; j < n; j++)
        if ((const uint8_t *)t[j]->data !=
            (const uint8_t *)t[j - 1]->data + rows[j - 1] * row_bytes)
            return false;
    return true;
}

clinfer_status model_load_stacked(clinfer_loader *ld, const char *const *names,
                                  const uint32_t *rows, size_t n, uint32_t k,
                                  clinfer_matrix *const *out) {
    clinfer_status st = CLINFER_OK;
    const gguf_tensor *t[4];
    for (size_t i = 0; i < n; i++)
        if (!(t[i] = model_find_shaped(ld->m, names[i], k, rows[i], true, &st))) return st;
    for (size_t i = 0, end; i < n; i = end) {
        size_t row_bytes = dtype_row_bytes(t[i]->type, k), total = 0;
        for (end = i; end < n && t[end]->type == t[i]->type; end++)
            total += rows[end];
        if (end == i + 1) { /* nothing to stack with */
            CHECK(model_upload_rows(ld, t[i], names[i], 0, (int)rows[i], out[i]));
            continue;
        }
        if (!ld->upload) continue;
        gguf_tensor stacked = *t[i];
        stacked.ne[1] = (int64_t)total;
        const clinfer_backend *be = ld->be;
        /* a weight the backend has cached is not read: no copy to stack */
        bool cached =
            be->i->weight_cached && be->i->weight_cached(be->ctx, t[i]->type, (int)total, (int)k);
        if (!cached && !adjacent(t + i, rows + i, end - i, row_bytes)) {
            if (ld->stack_size < total * row_bytes) {
                free(ld->stack);
                ld->stack_size = 0;
                if (!(ld->stack = malloc(total * row_bytes)))
                    CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model: %zu bytes to stack '%s'",
                                   total * row_bytes, names[i]));
                ld->stack_size = total * row_bytes;
            }
            stacked.data = ld->stack;
            for (size_t j = i, at = 0; j < end; at += rows[j++]) {
                memcpy(ld->stack + at * row_bytes, t[j]->data, rows[j] * row_bytes);
                gguf_release(ld->m->gguf, t[j]->data, rows[j] * row_bytes);
            }
        }
        CHECK(model_upload_rows(ld, &stacked, names[i], 0, (int)total, out[i]));
        clinfer_matrix whole = *out[i];
        for (size_t j = i, row0 = 0; j < end; row0 += rows[j++])
            *out[j] = matrix_rows_of(&whole, (int)row0, (int)rows[j]);
    }
cleanup:
    return st;
}

/* Converts a tensor of rows vectors of n elements to f32 into the stage; *out points at it. */
clinfer_status model_load_vectors(clinfer_loader *ld, const char *name, uint32_t n, uint32_t rows,
                                  bool required, clinfer_ref *out) {
    clinfer_status st;
    const gguf_tensor *t = model_find_shaped(ld->m, name, n, rows, required, &st);
    if (!t) return st;
    if (ld->upload) {
        dequantize_row(t->type, t->data, ld->host + ld->used, (size_t)n * rows);
        *out = (clinfer_ref){ld->vectors, ld->used};
    }
    ld->used += (size_t)n * rows;
    return CLINFER_OK;
}

clinfer_status model_load_vector(clinfer_loader *ld, const char *name, uint32_t n, bool required,
                                 clinfer_ref *out) {
    return model_load_vectors(ld, name, n, 1, required, out);
}

/* ---- tensor groups ----------------------------------------------------------------------- */

clinfer_status arch_load_qkv(clinfer_loader *ld, uint32_t il, bool qkv_bias) {
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
    CHECK(model_load_stacked(ld, qkv_names, rows, 3, hp->n_embd, outs));
    clinfer_ref *const biases[] = {&l->bq, &l->bk, &l->bv};
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "blk.%u.attn_%s.bias", il, suffix[i]);
        CHECK(model_load_vector(ld, names[i], rows[i], qkv_bias, biases[i]));
    }
cleanup:
    return st;
}

/* Layer il's two required vectors blk.<il>.<a> (n_a elements) and blk.<il>.<b> (n_b). */
static clinfer_status load_layer_pair(clinfer_loader *ld, uint32_t il, const char *a, uint32_t n_a,
                                      clinfer_ref *out_a, const char *b, uint32_t n_b,
                                      clinfer_ref *out_b) {
    char name[96];
    snprintf(name, sizeof name, "blk.%u.%s", il, a);
    clinfer_status st = model_load_vector(ld, name, n_a, true, out_a);
    if (st != CLINFER_OK) return st;
    snprintf(name, sizeof name, "blk.%u.%s", il, b);
    return model_load_vector(ld, name, n_b, true, out_b);
}

clinfer_status arch_load_head_norms(clinfer_loader *ld, uint32_t il) {
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t q_n = hp->qk_norm_rows ? hp->n_head * hp->head_dim : hp->head_dim,
             k_n = hp->qk_norm_rows ? hp->n_head_kv * hp->head_dim : hp->head_dim;
    return load_layer_pair(ld, il, "attn_q_norm.weight", q_n, &l->q_norm, "attn_k_norm.weight", k_n,
                           &l->k_norm);
}

clinfer_status arch_load_post_norms(clinfer_loader *ld, uint32_t il) {
    clinfer_layer *l = &ld->m->layers[il];
    uint32_t n = ld->m->hp.n_embd;
    return load_layer_pair(ld, il, "post_attention_norm.weight", n, &l->attn_post_norm,
                           "post_ffw_norm.weight", n, &l->ffn_post_norm);
}

clinfer_status arch_load_qkv_post(clinfer_loader *ld, uint32_t il, bool head_norms) {
    clinfer_status st = CLINFER_OK;
    CHECK(arch_load_qkv(ld, il, false));
    if (head_norms) CHECK(arch_load_head_norms(ld, il));
    CHECK(arch_load_post_norms(ld, il));
cleanup:
    return st;
}

clinfer_status arch_load_qkv_plain(clinfer_loader *ld, uint32_t il) {
    return arch_load_qkv(ld, il, false);
}

clinfer_status arch_load_qkv_normed(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = arch_load_qkv(ld, il, false);
    return st == CLINFER_OK ? arch_load_head_norms(ld, il) : st;
}

clinfer_status arch_load_qkv_post_normed(clinfer_loader *ld, uint32_t il) {
    return arch_load_qkv_post(ld, il, true);
}

clinfer_status arch_load_gate_up(clinfer_loader *ld, uint32_t il) {
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    char gate[96], up[96];
    snprintf(gate, sizeof gate, "blk.%u.ffn_gate.weight", il);
    snprintf(up, sizeof up, "blk.%u.ffn_up.weight", il);
    const char *const names[] = {gate, up};
    const uint32_t rows[] = {hp->n_ff, hp->n_ff};
    clinfer_matrix *const outs[] = {&l->ffn_gate, &l->ffn_up};
    return model_load_stacked(ld, names, rows, 2, hp->n_embd, outs);
}
