/* Placement: which device runs each part of a model (clinfer_placement), the backends of those
 * devices, and what the loader needs to put each part's weights on its device. */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

uint32_t model_n_devices(const clinfer_model *m) {
    return m->split ? m->split->n_dev : 1;
}

clinfer_backend *model_device_backend(const clinfer_model *m, uint32_t dev) {
    return m->split ? m->split->dev[dev].backend : m->backend;
}

uint32_t model_part_device(const clinfer_model *m, int part) {
    const model_split *s = m->split;
    if (!s) return 0;
    if (part >= (int)m->hp.n_layer) return s->head_dev;
    return s->layer_dev[part < 0 ? 0 : part];
}

size_t model_spans(const clinfer_model *m, model_span spans[MODEL_MAX_SPANS]) {
    size_t n = 0;
    for (int part = -1; part <= (int)m->hp.n_layer; part++) {
        uint32_t dev = model_part_device(m, part);
        if (n && spans[n - 1].dev == dev)
            spans[n - 1].end = part + 1;
        else
            spans[n++] = (model_span){part, part + 1, dev};
    }
    return n;
}

void placement_account(clinfer_loader *ld) {
    clinfer_model *m = ld->m;
    if (!m->split || !ld->upload) return;
    m->split->dev[ld->dev].weight_bytes += m->weight_bytes - ld->bytes_seen;
    ld->bytes_seen = m->weight_bytes;
}

void placement_enter(clinfer_loader *ld, int part) {
    clinfer_model *m = ld->m;
    uint32_t dev = model_part_device(m, part);
    placement_account(ld);
    ld->dev = dev;
    ld->be = model_device_backend(m, dev);
    ld->vectors = m->split ? m->split->dev[dev].vectors : m->vectors;
}

/* ---- choosing the devices ---------------------------------------------------------------- */

/* The bytes of each part's tensors in the file: [0] the embeddings and what lies outside the
 * layers, [1 + il] layer il, [1 + n_layer] the head (its norm and output); *tied: the embeddings'
 * where the head reads them (tied), which a head on another device holds a copy of. */
static void part_bytes(const clinfer_model *m, uint64_t *bytes, uint64_t *tied_bytes) {
    uint32_t L = m->hp.n_layer;
    memset(bytes, 0, (L + 2) * sizeof *bytes);
    bool tied = !gguf_find_tensor(m->gguf, "output.weight");
    *tied_bytes = 0;
    for (size_t i = 0; i < gguf_tensor_count(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        unsigned il = 0;
        int used = 0;
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 95 ? t->name.len : 95),
                 t->name.ptr);
        if (sscanf(name, "blk.%u.%n", &il, &used) == 1 && used && il < L)
            bytes[1 + il] += t->size;
        else if (!strncmp(name, "output", 6))
            bytes[1 + L] += t->size;
        else
            bytes[0] += t->size;
        if (tied && !strcmp(name, "token_embd.weight")) *tied_bytes = t->size;
    }
}

typedef struct {
    size_t n;
    size_t index[CLINFER_MAX_DEVICES];
    float share[CLINFER_MAX_DEVICES];
    uint64_t memory[CLINFER_MAX_DEVICES];
    const char *spec[CLINFER_MAX_DEVICES]; /* the caller's, naming it (NULL: chosen here) */
    char name[CLINFER_MAX_DEVICES][128];
} device_list;

static clinfer_status add_device(device_list *l, size_t index, float share, const char *spec) {
    for (size_t i = 0; i < l->n; i++)
        if (l->index[i] == index)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "placement: device %zu ('%s') is listed twice", index, l->name[i]);
    clinfer_device_info info;
    clinfer_status st = clinfer_device_get_info(index, &info);
    if (st != CLINFER_OK) return st;
    l->index[l->n] = index;
    l->share[l->n] = share;
    l->memory[l->n] = info.global_mem;
    l->spec[l->n] = spec;
    snprintf(l->name[l->n++], sizeof l->name[0], "%s", info.name);
    return CLINFER_OK;
}

/* layer_dev by shares (all 0: by memory) over the listed devices, llama.cpp's tensor split:
 * layer il goes to the first device whose running share reaches il + 1/2 of the layers; the
 * head to the last device. */
static void split_by_shares(const device_list *l, uint32_t L, uint32_t *layer_dev,
                            uint32_t *head_dev) {
    double total = 0, run = 0;
    bool by_memory = true;
    for (size_t d = 0; d < l->n; d++)
        if (l->share[d] > 0) by_memory = false;
    for (size_t d = 0; d < l->n; d++)
        total += by_memory ? (double)l->memory[d] : l->share[d];
    uint32_t il = 0;
    for (size_t d = 0; d < l->n; d++) {
        run += by_memory ? (double)l->memory[d] : l->share[d];
        for (; il < L && (d + 1 == l->n || (il + 0.5) * total < run * L); il++)
            layer_dev[il] = (uint32_t)d;
    }
    *head_dev = (uint32_t)l->n - 1;
}

/* The CPU device -ngl leaves the first layers on: the first CPU device other than gpu. */
static bool cpu_device(size_t gpu, size_t *out) {
    size_t count = 0;
    clinfer_device_info info;
    clinfer_device_count(&count);
    for (size_t i = 0; i < count; i++)
        if (i != gpu && clinfer_device_get_info(i, &info) == CLINFER_OK &&
            info.type == CLINFER_DEVICE_CPU) {
            *out = i;
            return true;
        }
    return false;
}

/* The devices after chosen (already listed): an automatic split's. */
static clinfer_status all_devices(device_list *l, size_t chosen) {
    size_t count = 0;
    clinfer_status st = clinfer_device_count(&count);
    for (size_t i = 0; i < count && l->n < CLINFER_MAX_DEVICES && st == CLINFER_OK; i++)
        if (i != chosen) st = add_device(l, i, 0, NULL);
    return st;
}

/* Each device's weights within its memory; otherwise the refusal names the first that is not. */
static clinfer_status check_split_fits(const clinfer_model *m, const device_list *l,
                                       const uint32_t *layer_dev, uint32_t head_dev,
                                       const uint64_t *bytes, uint64_t tied_bytes) {
    uint32_t L = m->hp.n_layer;
    uint64_t held[CLINFER_MAX_DEVICES] = {0}, total = 0;
    if (head_dev != layer_dev[0]) held[head_dev] += tied_bytes, total += tied_bytes;
    for (uint32_t p = 0; p < L + 2; p++) {
        uint32_t d = p == 0 ? layer_dev[0] : p == L + 1 ? head_dev : layer_dev[p - 1];
        held[d] += bytes[p];
        total += bytes[p];
    }
    for (size_t d = 0; d < l->n; d++)
        if (held[d] > l->memory[d])
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                            "placement: the weights (%.1f MiB) do not fit across %zu device(s): "
                            "device %zu ('%s') would hold %.1f MiB of them, more than its %.1f MiB",
                            total / 1048576.0, l->n, l->index[d], l->name[d], held[d] / 1048576.0,
                            l->memory[d] / 1048576.0);
    return CLINFER_OK;
}

/* The devices and parts placement asks for: l, layer_dev and head_dev (one device: l->n 1). */
static clinfer_status choose(const clinfer_model *m, const clinfer_model_params *p, device_list *l,
                             uint32_t *layer_dev, uint32_t *head_dev) {
    const clinfer_placement *pl = &p->placement;
    uint32_t L = m->hp.n_layer;
    size_t chosen = 0, cpu = 0;
    clinfer_status st = CLINFER_OK;
    uint64_t bytes[1026], tied_bytes; /* n_layer <= 1024 (model.c) */
    part_bytes(m, bytes, &tied_bytes);
    memset(layer_dev, 0, L * sizeof *layer_dev);
    *head_dev = 0;
    if (pl->devices[0] && pl->n_gpu_layers > 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "placement: n_gpu_layers (-ngl) and a device list (--device A,B) "
                        "exclude each other");
    if (pl->n_gpu_layers < 0)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "placement: n_gpu_layers %d is negative",
                        (int)pl->n_gpu_layers);
    for (size_t d = 0; d < CLINFER_MAX_DEVICES; d++)
        if (!(pl->shares[d] >= 0 && pl->shares[d] < 1e30f))
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "placement: the share of device %zu is %g, not a number >= 0", d,
                            (double)pl->shares[d]);
    size_t n_listed = 0, n_shares = 0;
    for (size_t d = 0; d < CLINFER_MAX_DEVICES; d++) {
        if (pl->devices[d] && n_listed == d) n_listed++;
        if (pl->shares[d] != 0) n_shares = d + 1;
    }
    if (n_shares > n_listed)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "placement: the shares (--tensor-split) name %zu device(s), but the "
                        "device list (--device A,B) has %zu: shares are the listed devices'",
                        n_shares, n_listed);
    if (pl->devices[0]) {
        for (size_t d = 0; d < CLINFER_MAX_DEVICES && pl->devices[d] && st == CLINFER_OK; d++) {
            size_t index;
            if ((st = clinfer_device_select(pl->devices[d], &index, NULL, 0)) == CLINFER_OK)
                st = add_device(l, index, pl->shares[d], pl->devices[d]);
        }
        if (st != CLINFER_OK) return st;
        split_by_shares(l, L, layer_dev, head_dev);
        return check_split_fits(m, l, layer_dev, *head_dev, bytes, tied_bytes);
    }
    if ((st = clinfer_device_select(p->options.device, &chosen, NULL, 0)) != CLINFER_OK) return st;
    if (pl->n_gpu_layers > 0 && pl->n_gpu_layers <= (int32_t)L) {
        if (cpu_device(chosen, &cpu)) {
            CHECK(add_device(l, cpu, 0, NULL));
            CHECK(add_device(l, chosen, 0, p->options.device));
            for (uint32_t il = L - (uint32_t)pl->n_gpu_layers; il < L; il++)
                layer_dev[il] = 1;
            return CLINFER_OK; /* the head stays on the CPU device (0) */
        }
        log_msg(CLINFER_LOG_WARN,
                "placement: n_gpu_layers %d: no CPU device besides device %zu for the other "
                "layers, so all run there",
                (int)pl->n_gpu_layers, chosen);
    }
    CHECK(add_device(l, chosen, 0, p->options.device));
    uint64_t total = 0;
    for (uint32_t i = 0; i < L + 2; i++)
        total += bytes[i];
    if (total <= l->memory[0]) return CLINFER_OK;
    CHECK(all_devices(l, chosen));
    if (l->n == 1)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                        "placement: the weights (%.1f MiB) do not fit device %zu ('%s', %.1f "
                        "MiB), and there is no other device to split them across",
                        total / 1048576.0, chosen, l->name[0], l->memory[0] / 1048576.0);
    split_by_shares(l, L, layer_dev, head_dev);
    CHECK(check_split_fits(m, l, layer_dev, *head_dev, bytes, tied_bytes));
cleanup:
    return st;
}

/* Drops the devices that got no part, renumbering the rest. */
static void drop_unused(device_list *l, uint32_t L, uint32_t *layer_dev, uint32_t *head_dev) {
    uint32_t renumber[CLINFER_MAX_DEVICES] = {0};
    bool used[CLINFER_MAX_DEVICES] = {false};
    for (uint32_t il = 0; il < L; il++)
        used[layer_dev[il]] = true;
    used[*head_dev] = true;
    size_t n = 0;
    for (size_t d = 0; d < l->n; d++) {
        renumber[d] = (uint32_t)n;
        if (!used[d]) continue;
        l->index[n] = l->index[d];
        l->memory[n] = l->memory[d];
        l->spec[n] = l->spec[d];
        memcpy(l->name[n++], l->name[d], sizeof l->name[0]);
    }
    l->n = n;
    for (uint32_t il = 0; il < L; il++)
        layer_dev[il] = renumber[layer_dev[il]];
    *head_dev = renumber[*head_dev];
}

static clinfer_status create_one(const clinfer_model *m, clinfer_backend_kind kind,
                                 const clinfer_backend_options *options, clinfer_backend **out) {
    char reason[256] = "";
    clinfer_status st = backend_create(kind, options, reason, sizeof reason, out);
    if (st == CLINFER_OK && m->verbose) log_msg(CLINFER_LOG_INFO, "backend: %s", reason);
    return st;
}

/* The placement, a line per device, for the log. */
static void log_placement(const clinfer_model *m) {
    clinfer_model_placement pl;
    if (clinfer_model_get_placement(m, &pl) != CLINFER_OK) return;
    for (uint32_t d = 0; d < pl.n_devices; d++)
        log_msg(CLINFER_LOG_INFO, "placement: device %zu (%s): %u layers from %u%s%s",
                pl.devices[d].index, pl.devices[d].device, pl.devices[d].n_layers,
                pl.devices[d].first_layer, pl.devices[d].embeddings ? ", embeddings" : "",
                pl.devices[d].head ? ", head" : "");
}

/* Whether the caller asked for a placement (clinfer_placement not zeroed). */
static bool placement_asked(const clinfer_placement *pl) {
    bool asked = pl->devices[0] || pl->n_gpu_layers != 0;
    for (size_t d = 0; d < CLINFER_MAX_DEVICES; d++)
        asked = asked || pl->shares[d] != 0;
    return asked;
}

clinfer_status placement_create(clinfer_model *m, const clinfer_model_params *p) {
    clinfer_status st = CLINFER_OK;
    device_list l = {0};
    uint32_t L = m->hp.n_layer, head = 0;
    if (p->backend != CLINFER_BACKEND_OPENCL && placement_asked(&p->placement))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "placement: a device list (--device A,B), shares (--tensor-split) or "
                        "n_gpu_layers (-ngl) place layers on OpenCL devices, but the reference "
                        "backend (--reference) runs the whole model on the host");
    if (p->backend != CLINFER_BACKEND_OPENCL)
        return create_one(m, p->backend, &p->options, &m->backend);
    model_split *s = calloc(1, sizeof *s);
    uint32_t *layer_dev = calloc(L, sizeof *layer_dev);
    if (!s || !layer_dev) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "placement: no memory for %u layers", L);
        goto cleanup;
    }
    CHECK(choose(m, p, &l, layer_dev, &head));
    drop_unused(&l, L, layer_dev, &head);
    clinfer_backend_options options = p->options;
    m->device_index = l.index[0];
    if (l.n == 1) { /* no split: the one device, by the spec that named it */
        options.device = l.spec[0];
        CHECK(create_one(m, p->backend, &options, &m->backend));
        goto cleanup;
    }
    m->split = s;
    s->n_dev = (uint32_t)l.n;
    s->layer_dev = layer_dev;
    s->head_dev = head;
    layer_dev = NULL;
    s = NULL;
    for (uint32_t d = 0; d < m->split->n_dev; d++) {
        model_split *sp = m->split;
        sp->dev[d].index = l.index[d];
        snprintf(sp->dev[d].spec, sizeof sp->dev[d].spec, "%zu", l.index[d]);
        options.device = sp->dev[d].spec;
        CHECK(create_one(m, p->backend, &options, &sp->dev[d].backend));
        if (d == 0) m->backend = sp->dev[0].backend; /* model_free frees the others with it */
    }
    if (m->verbose) log_placement(m);
cleanup:
    free(s);
    free(layer_dev);
    return st;
}

void placement_free(clinfer_model *m) {
    model_split *s = m->split;
    if (!s) return;
    for (uint32_t d = 1; d < s->n_dev; d++) {
        clinfer_backend *be = s->dev[d].backend;
        if (be && s->dev[d].vectors) be->i->buffer_free(be->ctx, s->dev[d].vectors);
        backend_free(be);
    }
    free(s->layer_dev);
    free(s);
    m->split = NULL;
}

clinfer_status placement_vectors_alloc(clinfer_model *m, size_t bytes) {
    clinfer_status st = CLINFER_OK;
    for (uint32_t d = 0; m->split && d < m->split->n_dev && st == CLINFER_OK; d++) {
        clinfer_backend *be = m->split->dev[d].backend;
        if (d == 0)
            m->split->dev[0].vectors = m->vectors;
        else
            st = be->i->buffer_alloc(be->ctx, bytes, &m->split->dev[d].vectors);
    }
    return st;
}

clinfer_status placement_vectors_write(clinfer_model *m, const float *host, size_t bytes) {
    clinfer_status st = CLINFER_OK;
    for (uint32_t d = 0; d < model_n_devices(m) && st == CLINFER_OK; d++) {
        clinfer_backend *be = model_device_backend(m, d);
        clinfer_buffer *v = m->split ? m->split->dev[d].vectors : m->vectors;
        st = be->i->buffer_write(be->ctx, v, 0, bytes, host);
        if (m->split) m->split->dev[d].weight_bytes += bytes;
    }
    return st;
}

size_t placement_cache_key(const clinfer_model *m, uint32_t dev, uint8_t *key, size_t size) {
    size_t n = 0;
    for (int part = -1; m->split && part <= (int)m->hp.n_layer && n < size; part++)
        if (model_part_device(m, part) == dev) key[n++] = (uint8_t)(part + 1);
    return n;
}

clinfer_status clinfer_model_get_placement(const clinfer_model *m, clinfer_model_placement *out) {
    if (!m || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "model_get_placement: NULL");
    if (!m->backend)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "model_get_placement: the model was loaded vocab_only (no weights)");
    memset(out, 0, sizeof *out);
    out->n_devices = model_n_devices(m);
    for (uint32_t d = 0; d < out->n_devices; d++) {
        const clinfer_backend *be = model_device_backend(m, d);
        snprintf(out->devices[d].device, sizeof out->devices[d].device, "%s",
                 be->i->describe(be->ctx));
        out->devices[d].index = m->split ? m->split->dev[d].index : m->device_index;
        out->devices[d].weight_bytes = m->split ? m->split->dev[d].weight_bytes : m->weight_bytes;
        out->devices[d].embeddings = model_part_device(m, -1) == d;
        out->devices[d].head = model_part_device(m, (int)m->hp.n_layer) == d;
        bool seen = false;
        for (uint32_t il = 0; il < m->hp.n_layer; il++) {
            if (model_part_device(m, (int)il) != d) continue;
            if (!seen) out->devices[d].first_layer = il;
            seen = true;
            out->devices[d].n_layers++;
        }
    }
    return CLINFER_OK;
}
