/* A context's devices: the instance of each device's backend its model runs on (one, or a split
 * model's several: src/placement.h), and the context's buffers there: on each, the activations
 * and token ids (the logits on the head's device only), and the KV cache of its layers. */
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "placement.h"

/* CL_DEVICE_MAX_MEM_ALLOC_SIZE is at least this on every OpenCL device */
#define KV_GROUP_BYTES ((size_t)128 << 20)

clinfer_status context_check_fits(const clinfer_model *m, const clinfer_memory_plan *plan) {
    clinfer_model_placement pl;
    clinfer_status st = clinfer_model_get_placement(m, &pl);
    for (uint32_t d = 0; d < pl.n_devices && st == CLINFER_OK; d++) {
        const clinfer_backend *be = model_device_backend(m, d);
        uint64_t memory = be->i->memory ? be->i->memory(be->ctx) : 0;
        uint64_t weights = pl.devices[d].weight_bytes;
        uint64_t kv = plan->kv_bytes / m->hp.n_layer * pl.devices[d].n_layers;
        uint64_t need = weights + kv + plan->scratch_bytes;
        if (!memory || need <= memory) continue;
        uint64_t per_token = kv / plan->n_ctx;
        uint64_t room =
            memory > weights + plan->scratch_bytes ? memory - weights - plan->scratch_bytes : 0;
        char where[300] = "";
        if (pl.n_devices > 1)
            snprintf(where, sizeof where, " on device %zu (%s, layers %u-%u)", pl.devices[d].index,
                     pl.devices[d].device, pl.devices[d].first_layer,
                     pl.devices[d].first_layer + pl.devices[d].n_layers - 1);
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY,
                      "context: n_ctx %u needs a %.1f MiB KV cache and %.1f MiB of scratch beside "
                      "%.1f MiB of weights%s, more than the device's %.1f MiB; n_ctx %llu at most "
                      "would fit",
                      plan->n_ctx, kv / 1048576.0, plan->scratch_bytes / 1048576.0,
                      weights / 1048576.0, where, memory / 1048576.0,
                      (unsigned long long)(per_token ? room / per_token : 0));
    }
    return st;
}

/* The activation buffers and token ids on device dev (the logits on the head's alone). */
static clinfer_status create_scratch(clinfer_context *c, uint32_t dev, const size_t *sizes) {
    clinfer_status st = CLINFER_OK;
    const clinfer_backend *be = context_backend(c, dev);
    exec_state *s = context_state(c, dev);
    bool head = model_part_device(c->model, (int)c->model->hp.n_layer) == dev;
    for (int i = 0; i < EXEC_COUNT && st == CLINFER_OK; i++)
        if (sizes[i] && (head || i != EXEC_LOGITS))
            st = be->i->buffer_alloc(be->ctx, sizes[i], &s->buf[i]);
    if (st != CLINFER_OK || !s->buf[EXEC_POS_IDS]) return st;
    int32_t *positions = malloc((size_t)c->n_ctx * sizeof *positions);
    if (!positions)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context: no memory for %u positions", c->n_ctx);
    for (uint32_t i = 0; i < c->n_ctx; i++)
        positions[i] = (int32_t)i;
    st = be->i->buffer_write(be->ctx, s->buf[EXEC_POS_IDS], 0, (size_t)c->n_ctx * sizeof *positions,
                             positions);
    free(positions);
    return st;
}

/* Each layer's K and V cache on its device: layers of a device share buffers of at most
 * KV_GROUP_BYTES (few buffers: a graph launch names every buffer of a decode step; none past
 * what every OpenCL device can allocate). */
static clinfer_status create_caches(clinfer_context *c, bool kv_f32) {
    clinfer_status st = CLINFER_OK;
    const clinfer_hparams *hp = &c->model->hp;
    exec_state *s = &c->state;
    /* elements per layer: each sequence's n_ctx rows after the one before */
    size_t cache = (size_t)c->n_seq * c->n_ctx * hp->n_head_kv * hp->head_dim;
    size_t cache_bytes = cache * kv_elem_bytes(kv_f32);
    uint32_t per_buf = cache_bytes < KV_GROUP_BYTES ? (uint32_t)(KV_GROUP_BYTES / cache_bytes) : 1;
    s->k_cache = calloc(hp->n_layer, sizeof *s->k_cache);
    s->v_cache = calloc(hp->n_layer, sizeof *s->v_cache);
    c->kv_bufs = calloc(2 * (size_t)hp->n_layer, sizeof *c->kv_bufs);
    c->kv_buf_dev = calloc(hp->n_layer, sizeof *c->kv_buf_dev);
    if (!s->k_cache || !s->v_cache || !c->kv_bufs || !c->kv_buf_dev)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context: no memory for %u cache handles",
                        hp->n_layer);
    uint32_t in_buf = 0;
    for (uint32_t il = 0; il < hp->n_layer && st == CLINFER_OK; il++, in_buf++) {
        uint32_t dev = model_part_device(c->model, (int)il);
        if (il == 0 || in_buf == per_buf || c->kv_buf_dev[c->n_kv_bufs - 1] != dev) {
            uint32_t layers = 1; /* the layers of dev from il on, per_buf at most */
            while (layers < per_buf && il + layers < hp->n_layer &&
                   model_part_device(c->model, (int)(il + layers)) == dev)
                layers++;
            const clinfer_backend *be = context_backend(c, dev);
            uint32_t g = c->n_kv_bufs++;
            c->kv_buf_dev[g] = dev;
            st = be->i->buffer_alloc(be->ctx, layers * cache_bytes, &c->kv_bufs[2 * g]);
            if (st == CLINFER_OK)
                st = be->i->buffer_alloc(be->ctx, layers * cache_bytes, &c->kv_bufs[2 * g + 1]);
            in_buf = 0;
        }
        uint32_t g = c->n_kv_bufs - 1;
        s->k_cache[il] = (clinfer_ref){c->kv_bufs[2 * g], in_buf * cache};
        s->v_cache[il] = (clinfer_ref){c->kv_bufs[2 * g + 1], in_buf * cache};
    }
    return st;
}

clinfer_status context_devices_create(clinfer_context *c, bool kv_f32) {
    clinfer_status st = CLINFER_OK;
    const clinfer_model *m = c->model;
    uint32_t n_dev = model_n_devices(m);
    size_t sizes[EXEC_COUNT];
    exec_buffer_sizes(&m->hp, c->n_ctx, c->n_batch, c->n_logit_rows,
                      c->state.activations != CLINFER_ACT_F32, sizes);
    c->state.kv_type = kv_f32 ? CLINFER_DT_F32 : CLINFER_DT_F16;
    c->state.n_ctx = c->n_ctx;
    if (n_dev > 1) {
        c->more = calloc(n_dev - 1, sizeof *c->more);
        c->hidden = malloc((size_t)c->n_batch * m->hp.n_embd * sizeof *c->hidden);
        if (!c->more || !c->hidden)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "context: no memory for %u devices", n_dev);
    }
    for (uint32_t d = 0; d < n_dev && st == CLINFER_OK; d++) {
        const clinfer_backend *be = model_device_backend(m, d);
        st = be->i->instance(be->ctx, d ? &c->more[d - 1].backend : &c->backend);
    }
    for (uint32_t d = 0; d < n_dev && st == CLINFER_OK; d++)
        st = create_scratch(c, d, sizes);
    if (st == CLINFER_OK) st = create_caches(c, kv_f32);
    for (uint32_t d = 1; d < n_dev && st == CLINFER_OK; d++) { /* the same but for its buffers */
        exec_state *s = &c->more[d - 1].state;
        clinfer_buffer *buf[EXEC_COUNT];
        memcpy(buf, s->buf, sizeof buf);
        *s = c->state;
        memcpy(s->buf, buf, sizeof buf);
        s->vectors = m->split->dev[d].vectors;
    }
    return st;
}

void context_devices_free(clinfer_context *c) {
    uint32_t n_dev = c->model ? model_n_devices(c->model) : 1;
    for (uint32_t d = 0; d < n_dev; d++) {
        if (d && !c->more) break;
        const clinfer_backend *be = context_backend(c, d);
        exec_state *s = context_state(c, d);
        for (int i = 0; be && i < EXEC_COUNT; i++)
            if (s->buf[i]) be->i->buffer_free(be->ctx, s->buf[i]);
    }
    for (uint32_t g = 0; c->kv_bufs && g < c->n_kv_bufs; g++) {
        const clinfer_backend *be = context_backend(c, c->kv_buf_dev[g]);
        for (int i = 0; i < 2; i++)
            if (be && c->kv_bufs[2 * g + i]) be->i->buffer_free(be->ctx, c->kv_bufs[2 * g + i]);
    }
}
