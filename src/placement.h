/* A model's layers across devices (src/placement.c): which device runs each part of the forward
 * pass (the embeddings, each layer, the output head) and the backend of each device. A model on
 * one device has no split (model->split NULL) and runs as it always did. */
#ifndef CLINFER_PLACEMENT_H
#define CLINFER_PLACEMENT_H

#include "arch.h"
#include "model.h"

struct model_split {
    uint32_t n_dev;
    struct {
        clinfer_backend *backend; /* [0]: model->backend */
        clinfer_buffer *vectors;  /* the model's vectors, a copy on this device ([0]: model's) */
        size_t index;             /* as clinfer_device_get_info's */
        char spec[24];            /* the index as a device spec, for its backend's options */
        uint64_t weight_bytes;    /* of the weights it holds */
    } dev[CLINFER_MAX_DEVICES];
    uint32_t *layer_dev; /* [n_layer] */
    uint32_t head_dev;   /* the embeddings run on layer 0's device */
};

/* Creates the model's backends as p places its layers (an OpenCL model: p->placement, or a split
 * by memory where its weights do not fit the one device): m->backend, and m->split where they
 * span several devices. */
clinfer_status placement_create(clinfer_model *m, const clinfer_model_params *p);
/* Frees what placement_create made besides m->backend and m->vectors (after the weights). */
void placement_free(clinfer_model *m);

uint32_t model_n_devices(const clinfer_model *m);
clinfer_backend *model_device_backend(const clinfer_model *m, uint32_t dev);
/* The device of part: -1 the embeddings, 0 .. n_layer - 1 a layer, n_layer the output head. */
uint32_t model_part_device(const clinfer_model *m, int part);

/* The parts [first, end) that run on one device, one after another: a plan's segments. */
typedef struct {
    int first, end;
    uint32_t dev;
} model_span;
#define MODEL_MAX_SPANS (CLINFER_MAX_DEVICES + 1)
size_t model_spans(const clinfer_model *m, model_span spans[MODEL_MAX_SPANS]);

/* Before the loader reads part's tensors (as model_part_device numbers them): the weights and
 * vectors that follow go to its device's backend. */
void placement_enter(clinfer_loader *ld, int part);
/* After the last part: the bytes uploaded since the last placement_enter counted. */
void placement_account(clinfer_loader *ld);
/* Each other device's copy of the model's vectors of bytes: made before the upload pass (the
 * loader's refs name it), written with the staged host values after it. */
clinfer_status placement_vectors_alloc(clinfer_model *m, size_t bytes);
clinfer_status placement_vectors_write(clinfer_model *m, const float *host, size_t bytes);

/* The bytes that identify the part of the model on device dev, for its weight cache's key:
 * the parts it holds (none without a split). */
size_t placement_cache_key(const clinfer_model *m, uint32_t dev, uint8_t *key, size_t size);

#endif
