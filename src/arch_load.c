/* The building blocks of loading (declared in arch.h), used by model.c and the architectures:
 * "<arch>.<suffix>" keys and the rope's hyperparameters, tensors found by shape and uploaded
 * (alone, as row ranges, stacked) or converted to f32 vectors; then the tensor groups that
 * several architectures load alike: q, k and v, each head's q and k norms, gate and up. */
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

/* Linear position interpolation is the scaling the rope op can do; YaRN and the like would
 * silently give wrong output, so they are refused. */
static clinfer_status read_rope_scaling(const gguf_file *f, const char *arch, float *freq_scale) {
    clinfer_status st = CLINFER_OK;
    char key[128];
    gguf_str type = {"none", 4};
    float factor = 0.0f;
    *freq_scale = 1.0f;
    if (arch_key(f, arch, "rope.scaling.type", false, key, sizeof key))
        CHECK(gguf_get_str(f, key, &type));
    if (gguf_str_eq(type, "none")) return CLINFER_OK;
    if (!gguf_str_eq(type, "linear"))
        return err_fail(CLINFER_ERR_UNSUPPORTED, "%s '%.*s' is not supported", key,
                        (int)(type.len > 32 ? 32 : type.len), type.ptr);
    CHECK(arch_key_f32(f, arch, "rope.scaling.factor", true, &factor));
    if (!(factor >= 1.0f && factor <= 1024.0f))
        return err_fail(CLINFER_ERR_FORMAT, "%s.rope.scaling.factor %g is outside 1 .. 1024", arch,
                        (double)factor);
    *freq_scale = 1.0f / factor;
cleanup:
    return st;
}

clinfer_status arch_read_rope(const gguf_file *f, const char *a, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    hp->rope_freq_base = 10000.0f;
    CHECK(arch_key_f32(f, a, "rope.freq_base", false, &hp->rope_freq_base));
    hp->n_rot = hp->head_dim;
    CHECK(arch_key_u32(f, a, "rope.dimension_count", false, &hp->n_rot));
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.rope.dimension_count %u must be even and at most "
                        "the head size %u",
                        a, hp->n_rot, hp->head_dim);
    if (!(hp->rope_freq_base > 0.0f) || !isfinite(hp->rope_freq_base))
        return err_fail(CLINFER_ERR_FORMAT, "model: %s.rope.freq_base %g is not positive", a,
                        (double)hp->rope_freq_base);
    CHECK(read_rope_scaling(f, a, &hp->rope_freq_scale));
    /* per-dimension rope frequency factors (Llama 3.1's, phi3 128k's): not supported */
    static const char *const factors[] = {"rope_freqs.weight", "rope_factors_long.weight",
                                          "rope_factors_short.weight"};
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++)
        if (gguf_find_tensor(f, factors[i]))
            return err_fail(CLINFER_ERR_UNSUPPORTED,
                            "model: tensor '%s' (per-dimension rope frequency factors) is not "
                            "supported",
                            factors[i]);
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
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
    clinfer_status st =
        m->backend->i->weight_create(m->backend->ctx, t->type, rows, k, data, &out->w);
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
        const clinfer_backend *be = ld->m->backend;
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

/* Converts a vector tensor of n elements to f32 into the stage; *out points at it. */
clinfer_status model_load_vector(clinfer_loader *ld, const char *name, uint32_t n, bool required,
                                 clinfer_ref *out) {
    clinfer_status st;
    const gguf_tensor *t = model_find_shaped(ld->m, name, n, 1, required, &st);
    if (!t) return st;
    if (ld->upload) {
        dequantize_row(t->type, t->data, ld->host + ld->used, n);
        *out = (clinfer_ref){ld->m->vectors, ld->used};
    }
    ld->used += n;
    return CLINFER_OK;
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

clinfer_status arch_load_head_norms(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    clinfer_layer *l = &ld->m->layers[il];
    char q_norm[96], k_norm[96];
    snprintf(q_norm, sizeof q_norm, "blk.%u.attn_q_norm.weight", il);
    snprintf(k_norm, sizeof k_norm, "blk.%u.attn_k_norm.weight", il);
    CHECK(model_load_vector(ld, q_norm, ld->m->hp.head_dim, true, &l->q_norm));
    CHECK(model_load_vector(ld, k_norm, ld->m->hp.head_dim, true, &l->k_norm));
cleanup:
    return st;
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
