/* Model loading: hyperparameters from GGUF metadata, every tensor checked against the shape they
 * imply, matrices uploaded once through the backend's weight_create, norm weights and biases
 * converted to f32 on the host and packed into one small buffer. The building blocks (an
 * architecture's keys, the rope, tensors found by shape and uploaded) are arch_load.c's. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "chat.h"
#include "error.h"
#include "grammar.h"
#include "log.h"
#include "names.h"
#include "placement.h"
#include "tokenizer.h"

/* ---- hyperparameters --------------------------------------------------------------------- */

static clinfer_status check_range(const char *arch, const char *what, uint32_t v, uint32_t lo,
                                  uint32_t hi) {
    if (v < lo || v > hi)
        return err_fail(CLINFER_ERR_FORMAT, "%s.%s = %u is outside %u .. %u", arch, what, v, lo,
                        hi);
    return CLINFER_OK;
}

static clinfer_status read_hparams(clinfer_model *m) {
    clinfer_status st = CLINFER_OK;
    const gguf_file *f = m->gguf;
    const char *a = m->architecture;
    clinfer_hparams *hp = &m->hp;
    uint32_t key_length = 0, value_length = 0;

    CHECK(arch_key_u32(f, a, "context_length", true, &hp->n_ctx_train));
    CHECK(arch_key_u32(f, a, "embedding_length", true, &hp->n_embd));
    CHECK(arch_key_u32(f, a, "block_count", true, &hp->n_layer));
    CHECK(arch_key_u32(f, a, "feed_forward_length", true, &hp->n_ff));
    CHECK(arch_key_u32(f, a, "attention.head_count", true, &hp->n_head));
    hp->n_head_kv = hp->n_head;
    CHECK(arch_key_u32(f, a, "attention.head_count_kv", false, &hp->n_head_kv));
    CHECK(arch_key_u32(f, a, "attention.key_length", false, &key_length));
    CHECK(arch_key_u32(f, a, "attention.value_length", false, &value_length));

    CHECK(check_range(a, "context_length", hp->n_ctx_train, 1, 1u << 24));
    CHECK(check_range(a, "embedding_length", hp->n_embd, 1, 1u << 16));
    CHECK(check_range(a, "block_count", hp->n_layer, 1, 1024));
    CHECK(check_range(a, "feed_forward_length", hp->n_ff, 1, 1u << 20));
    CHECK(check_range(a, "attention.head_count", hp->n_head, 1, 1024));
    CHECK(check_range(a, "attention.head_count_kv", hp->n_head_kv, 1, hp->n_head));
    if (hp->n_head % hp->n_head_kv)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.attention.head_count %u is not a multiple of "
                        "head_count_kv %u",
                        a, hp->n_head, hp->n_head_kv);
    if (key_length != value_length)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "model: %s.attention.key_length %u != value_length %u", a, key_length,
                        value_length);
    if (key_length) {
        hp->head_dim = key_length;
    } else {
        if (hp->n_embd % hp->n_head)
            return err_fail(CLINFER_ERR_FORMAT,
                            "model: %s.embedding_length %u is not a multiple of "
                            "attention.head_count %u",
                            a, hp->n_embd, hp->n_head);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    CHECK(check_range(a, "attention.key_length", hp->head_dim, 1, 1024));

    st = hp->arch->read_hparams(f, hp); /* its failures say where they come from */
    if (st == CLINFER_OK) st = moe_read_hparams(f, a, hp);
    if (st != CLINFER_OK) return st;
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return err_fail(CLINFER_ERR_FORMAT, "model: %s norm epsilon %g is outside (0, 1)", a,
                        (double)hp->norm_eps);
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

/* ---- tensors ----------------------------------------------------------------------------- */

/* Layer il: the tensors every architecture has (biases required where it has layer_norm), and
 * its own q, k, v and feed-forward inputs. */
static clinfer_status load_layer(clinfer_loader *ld, uint32_t il) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &ld->m->hp;
    clinfer_layer *l = &ld->m->layers[il];
    bool biases = hp->arch->layer_norm;
    uint32_t E = hp->n_embd, F = hp->n_ff, q_dim = hp->n_head * hp->head_dim;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    bool pre = !hp->arch->no_pre_norms;
    if (pre) CHECK(model_load_vector(ld, NAME("attn_norm.weight"), E, true, &l->attn_norm));
    if (pre) CHECK(model_load_vector(ld, NAME("attn_norm.bias"), E, biases, &l->attn_norm_b));
    CHECK(hp->arch->load_qkv(ld, il));
    CHECK(model_load_matrix(ld, NAME("attn_output.weight"), q_dim, E, true, &l->wo));
    CHECK(model_load_vector(ld, NAME("attn_output.bias"), E, biases, &l->bo));
    const char *ffn_norm = hp->arch->ffn_norm ? hp->arch->ffn_norm : "ffn_norm";
    snprintf(name, sizeof name, "blk.%u.%s.weight", il, ffn_norm);
    if (pre) CHECK(model_load_vector(ld, name, E, true, &l->ffn_norm));
    snprintf(name, sizeof name, "blk.%u.%s.bias", il, ffn_norm);
    if (pre) CHECK(model_load_vector(ld, name, E, biases, &l->ffn_norm_b));
    if (hp->moe.n_expert) return moe_load_ffn(ld, il); /* experts instead of one ffn */
    CHECK(hp->arch->load_ffn(ld, il));
    CHECK(model_load_vector(ld, NAME("ffn_up.bias"), F, biases, &l->ffn_up_b));
    CHECK(model_load_matrix(ld, NAME("ffn_down.weight"), F, E, true, &l->ffn_down));
    CHECK(model_load_vector(ld, NAME("ffn_down.bias"), E, biases, &l->ffn_down_b));
#undef NAME
cleanup:
    return st;
}

/* Tells the upload pass's progress: parts of n_layer + 2 done (the embeddings, each layer, the
 * output), which the callback may stop. */
static clinfer_status told(const clinfer_loader *ld, uint32_t parts) {
    if (!ld->upload || !ld->progress) return CLINFER_OK;
    float f = (float)parts / (float)(ld->m->hp.n_layer + 2);
    return ld->progress(f, ld->progress_user)
               ? CLINFER_OK
               : err_fail(CLINFER_ERR_ABORTED,
                          "model: the progress callback stopped the load at %.0f%%", 100 * f);
}

/* Before the upload pass reads the tensors of layer il (or, il < 0, those of no layer): each
 * made the process's own copy (gguf_claim), so that a model file truncated under the load is an
 * error, not SIGBUS, and the weights used in place stay after it. A part at a time: what the
 * backend copies is released as it goes, as without the claim. Quantized matrices that the
 * backend's weight cache supplies are not read, and not claimed. */
static clinfer_status claim_part(const clinfer_loader *ld, int il) {
    char prefix[24] = "blk.";
    int n = il < 0 ? 4 : snprintf(prefix, sizeof prefix, "blk.%d.", il);
    for (size_t i = 0; ld->upload && i < gguf_tensor_count(ld->m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(ld->m->gguf, i);
        bool in_part = t->name.len >= (uint64_t)n && !memcmp(t->name.ptr, prefix, (size_t)n);
        bool laid_out = t->type != CLINFER_DT_F32 && t->type != CLINFER_DT_F16 && t->ne[1] > 1;
        if (in_part == (il < 0) || (ld->cached && laid_out)) continue;
        clinfer_status st = gguf_claim(ld->m->gguf, t->data, (size_t)t->size);
        if (st != CLINFER_OK) {
            err_prefix("model: tensor '%.*s'", (int)t->name.len, t->name.ptr);
            return st;
        }
    }
    return CLINFER_OK;
}

/* One pass over every tensor of the model (see clinfer_loader). */
static clinfer_status load_all(clinfer_loader *ld) {
    clinfer_status st = CLINFER_OK;
    clinfer_model *m = ld->m;
    const clinfer_hparams *hp = &m->hp;
    uint32_t E = hp->n_embd;

    CHECK(told(ld, 0));
    CHECK(claim_part(ld, -1));
    placement_enter(ld, -1);
    CHECK(model_load_matrix(ld, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd));
    if (hp->arch->load_globals) CHECK(hp->arch->load_globals(ld));
    CHECK(model_load_rope_factors(ld));
    CHECK(told(ld, 1));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        CHECK(claim_part(ld, (int)il));
        placement_enter(ld, (int)il);
        CHECK(load_layer(ld, il));
        CHECK(told(ld, il + 2));
    }
    placement_enter(ld, (int)hp->n_layer);
    CHECK(model_load_vector(ld, "output_norm.weight", E, true, &m->output_norm));
    CHECK(model_load_vector(ld, "output_norm.bias", E, hp->arch->layer_norm, &m->output_norm_b));
    m->output_tied = !gguf_find_tensor(m->gguf, "output.weight");
    /* a head on another device than the embeddings reads a copy of them there */
    if (m->output_tied && model_part_device(m, -1) == model_part_device(m, (int)hp->n_layer))
        m->output = m->tok_embd;
    else
        CHECK(model_load_matrix(ld, m->output_tied ? "token_embd.weight" : "output.weight", E,
                                hp->n_vocab, true, &m->output));
    placement_account(ld);
    CHECK(told(ld, hp->n_layer + 2));
cleanup:
    return st;
}

/* The checking pass: every tensor against the hyperparameters, before any allocation. */
static clinfer_status check_tensors(clinfer_model *m, size_t *n_vectors) {
    clinfer_hparams *hp = &m->hp;
    const gguf_tensor *embd = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!embd) return err_fail(CLINFER_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing");
    if (embd->ne[1] < 1 || embd->ne[1] > INT32_MAX)
        return err_fail(CLINFER_ERR_FORMAT, "model: token_embd.weight has %lld rows",
                        (long long)embd->ne[1]);
    hp->n_vocab = (uint32_t)embd->ne[1];
    if (m->vocab && vocab_n_tokens(m->vocab) != hp->n_vocab)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: the tokenizer has %u tokens but token_embd.weight has %u rows",
                        (unsigned)vocab_n_tokens(m->vocab), hp->n_vocab);
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model: no memory for %u layers", hp->n_layer);
    clinfer_loader ld = {.m = m};
    clinfer_status st = load_all(&ld);
    *n_vectors = ld.used;
    return st;
}

static clinfer_status upload_tensors(clinfer_model *m, size_t n_vectors, bool cached,
                                     const clinfer_model_params *p) {
    clinfer_status st = CLINFER_OK;
    const clinfer_backend_i *bi = m->backend->i;
    clinfer_loader ld = {.m = m,
                         .upload = true,
                         .cached = cached,
                         .host = malloc(n_vectors * sizeof(float)),
                         .progress = p->progress,
                         .progress_user = p->progress_user};
    if (!ld.host) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model: no memory for %zu vector elements",
                      n_vectors);
        goto cleanup;
    }
    CHECK(bi->buffer_alloc(m->backend->ctx, n_vectors * sizeof(float), &m->vectors));
    CHECK(placement_vectors_alloc(m, n_vectors * sizeof(float)));
    CHECK(load_all(&ld));
    CHECK(placement_vectors_write(m, ld.host, n_vectors * sizeof(float)));
    m->weight_bytes += n_vectors * sizeof(float) * model_n_devices(m);
    for (size_t i = 0; i < gguf_tensor_count(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
cleanup:
    free(ld.host);
    free(ld.stack);
    return st;
}

/* Names the model to device dev's weight cache (backend.h) by its file's identity: device,
 * inode, size, modification time and the bytes before the tensor data; and, with a split, the
 * parts the device holds. */
static bool open_weight_cache(clinfer_model *m, uint32_t dev) {
    const clinfer_backend *be = model_device_backend(m, dev);
    uint64_t stat[4];
    const void *header = NULL;
    size_t header_size = 0, parts = m->hp.n_layer + 2;
    if (!be->i->weight_cache_open || !gguf_identity(m->gguf, stat, &header, &header_size))
        return false;
    uint8_t *id = malloc(sizeof stat + header_size + parts);
    if (!id) return false; /* no cache: the load goes on */
    memcpy(id, stat, sizeof stat);
    memcpy(id + sizeof stat, header, header_size);
    size_t key = placement_cache_key(m, dev, id + sizeof stat + header_size, parts);
    bool found = be->i->weight_cache_open(be->ctx, id, sizeof stat + header_size + key);
    free(id);
    return found;
}

/* Every device's weight cache opened; whether all found theirs (the loader then reads no
 * quantized matrix data). */
static bool open_weight_caches(clinfer_model *m) {
    bool all = true;
    for (uint32_t d = 0; d < model_n_devices(m); d++)
        all &= open_weight_cache(m, d);
    return all;
}

/* ---- load / free ------------------------------------------------------------------------- */

static clinfer_status parse_architecture(clinfer_model *m) {
    gguf_str s;
    clinfer_status st = gguf_get_str(m->gguf, "general.architecture", &s);
    if (st != CLINFER_OK) return st;
    if (!(m->hp.arch = arch_find(s))) {
        char names[256];
        names_list(arch_name_at, names, sizeof names);
        const char *closest = names_closest(arch_name_at, s.ptr, s.len);
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "model: architecture '%.*s' is not supported (%s are)%s%s",
                        (int)(s.len > 64 ? 64 : s.len), s.ptr, names, closest ? "; closest: " : "",
                        closest ? closest : "");
    }
    snprintf(m->architecture, sizeof m->architecture, "%s", m->hp.arch->name);
    return CLINFER_OK;
}

void clinfer_model_params_default(clinfer_model_params *params) {
    *params = (clinfer_model_params){.backend = CLINFER_BACKEND_OPENCL};
}

clinfer_status clinfer_model_load(const char *path, const clinfer_model_params *params,
                                  clinfer_model **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_model_params defaults;
    clinfer_model *m = NULL;
    if (!path || !out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "model_load: path and out are required");
    *out = NULL;
    if (!params) {
        clinfer_model_params_default(&defaults);
        params = &defaults;
    }
    m = calloc(1, sizeof *m);
    if (!m) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model_load: no memory");
    m->gvocab_lock_ready = pthread_mutex_init(&m->gvocab_lock, NULL) == 0;
    if (!m->gvocab_lock_ready) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model_load: no lock for the grammar vocabulary");
        goto cleanup;
    }
    m->verbose = params->verbose;
    m->profile = params->options.profile;

    CHECK(gguf_open(path, &m->gguf));
    if (params->vocab_only) {
        CHECK(vocab_load(m->gguf, &m->vocab));
        *out = m;
        return CLINFER_OK;
    }
    CHECK(parse_architecture(m));
    gguf_str name;
    if (gguf_find_kv(m->gguf, "general.name") &&
        gguf_get_str(m->gguf, "general.name", &name) == CLINFER_OK)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len > 127 ? 127 : name.len), name.ptr);
    CHECK(read_hparams(m));
    if (vocab_present(m->gguf)) CHECK(vocab_load(m->gguf, &m->vocab));
    size_t n_vectors = 0;
    CHECK(check_tensors(m, &n_vectors));
    CHECK(placement_create(m, params));
    const void *map = NULL;
    size_t map_size = 0;
    bool mapped = gguf_mapping(m->gguf, &map, &map_size);
    for (uint32_t d = 0; d < model_n_devices(m); d++) {
        clinfer_backend *be = model_device_backend(m, d);
        if (be->i->host_data && mapped) be->i->host_data(be->ctx, map, map_size);
    }
    CHECK(upload_tensors(m, n_vectors, open_weight_caches(m), params));
    for (uint32_t d = 0; d < model_n_devices(m); d++) {
        clinfer_backend *be = model_device_backend(m, d);
        if (be->i->weight_cache_close) be->i->weight_cache_close(be->ctx);
    }
    if (m->verbose) {
        const clinfer_hparams *hp = &m->hp;
        log_msg(CLINFER_LOG_INFO,
                "%s '%s': %u layers, n_embd %u, %u heads (%u kv, dim %u), n_ff %u, "
                "vocab %u, context %u",
                m->architecture, m->name, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv,
                hp->head_dim, hp->n_ff, hp->n_vocab, hp->n_ctx_train);
        clinfer_memory_plan plan;
        if (clinfer_model_memory_plan(m, NULL, &plan) == CLINFER_OK)
            log_msg(CLINFER_LOG_INFO,
                    "memory on %s: weights %.1f MiB; per context (n_ctx %u, n_batch "
                    "%u): KV cache %.1f MiB, scratch %.1f MiB",
                    m->backend->i->describe(m->backend->ctx), plan.weight_bytes / 1048576.0,
                    plan.n_ctx, plan.n_batch, plan.kv_bytes / 1048576.0,
                    plan.scratch_bytes / 1048576.0);
    }
    *out = m;
cleanup:
    if (st != CLINFER_OK) {
        err_prefix("loading '%s'", path);
        clinfer_model_free(m);
    }
    return st;
}

/* A matrix of part (as model_part_device numbers them) freed on its device. */
static void free_matrix(clinfer_model *m, int part, clinfer_matrix *w) {
    const clinfer_backend *be = model_device_backend(m, model_part_device(m, part));
    if (w->w && w->row0 == 0) be->i->buffer_free(be->ctx, w->w);
    w->w = NULL;
}

void clinfer_model_free(clinfer_model *m) {
    if (!m) return;
    if (m->backend) {
        for (uint32_t il = 0; m->layers && il < m->hp.n_layer; il++) {
            clinfer_layer *l = &m->layers[il];
            clinfer_matrix *ws[] = {&l->wq,          &l->wk,           &l->wv,
                                    &l->wo,          &l->ffn_gate,     &l->ffn_up,
                                    &l->ffn_down,    &l->ffn_gate_inp, &l->ffn_gate_exps,
                                    &l->ffn_up_exps, &l->ffn_down_exps};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                free_matrix(m, (int)il, ws[i]);
        }
        if (m->output.w != m->tok_embd.w) free_matrix(m, (int)m->hp.n_layer, &m->output);
        free_matrix(m, -1, &m->tok_embd);
        free_matrix(m, -1, &m->pos_embd);
        if (m->vectors) m->backend->i->buffer_free(m->backend->ctx, m->vectors);
        placement_free(m);
        backend_free(m->backend);
    }
    free(m->layers);
    gvocab_free(m->gvocab);
    if (m->gvocab_lock_ready) pthread_mutex_destroy(&m->gvocab_lock);
    vocab_free(m->vocab);
    gguf_close(m->gguf);
    free(m);
}

/* The file's part of clinfer_model_info. */
static void file_info(const gguf_file *f, clinfer_model_info *info) {
    info->gguf_version = gguf_version(f);
    info->file_bytes = gguf_file_size(f);
    gguf_str tmpl = {NULL, 0};
    chat_format format;
    if (gguf_find_kv(f, "tokenizer.chat_template"))
        snprintf(info->chat_format, sizeof info->chat_format, "%s",
                 gguf_get_str(f, "tokenizer.chat_template", &tmpl) == CLINFER_OK &&
                         chat_detect(tmpl.ptr, (size_t)tmpl.len, NULL, &format) == CLINFER_OK
                     ? chat_format_name(format)
                     : "unrecognised");
    info->n_tensors = (uint32_t)gguf_tensor_count(f);
    const size_t max_types = sizeof info->tensor_types / sizeof info->tensor_types[0];
    for (uint32_t type = 0; type < 64; type++) {
        uint32_t count = 0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            if ((uint32_t)t->type == type) count++, bytes += t->size;
        }
        if (!count || info->n_tensor_types == max_types) continue;
        snprintf(info->tensor_types[info->n_tensor_types].type, sizeof info->tensor_types[0].type,
                 "%s", dtype_name((clinfer_dtype)type));
        info->tensor_types[info->n_tensor_types].count = count;
        info->tensor_types[info->n_tensor_types++].bytes = bytes;
    }
}

clinfer_status clinfer_model_get_info(const clinfer_model *m, clinfer_model_info *info) {
    if (!m || !info) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "model_get_info: NULL argument");
    memset(info, 0, sizeof *info);
    snprintf(info->architecture, sizeof info->architecture, "%s", m->architecture);
    snprintf(info->name, sizeof info->name, "%s", m->name);
    info->n_vocab = m->hp.n_vocab;
    info->n_ctx_train = m->hp.n_ctx_train;
    info->n_embd = m->hp.n_embd;
    info->n_layer = m->hp.n_layer;
    info->n_head = m->hp.n_head;
    info->n_head_kv = m->hp.n_head_kv;
    info->n_ff = m->hp.n_ff;
    info->head_dim = m->hp.head_dim;
    info->n_rot = m->hp.n_rot;
    info->rope_freq_base = m->hp.rope_freq_base;
    info->norm_eps = m->hp.norm_eps;
    info->rope_neox = m->hp.rope_neox;
    rope_describe(m, info->rope_scaling, sizeof info->rope_scaling);
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    info->n_expert = m->hp.moe.n_expert;
    info->n_expert_used = m->hp.moe.n_used;
    moe_active(m, &info->n_params_active, &info->weight_bytes_active);
    for (uint32_t d = 0; m->backend && d < model_n_devices(m); d++) { /* "A | B" split */
        const clinfer_backend *be = model_device_backend(m, d);
        size_t used = strlen(info->backend);
        snprintf(info->backend + used, sizeof info->backend - used, "%s%s", d ? " | " : "",
                 be->i->describe(be->ctx));
    }
    file_info(m->gguf, info);
    if (!info->chat_format[0] && m->hp.arch && m->hp.arch->chat_format) /* as chat.c renders it */
        snprintf(info->chat_format, sizeof info->chat_format, "%s", m->hp.arch->chat_format);
    return CLINFER_OK;
}
