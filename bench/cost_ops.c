/* cost_ops (bench/, built as build/cost_ops): one op of a decode step, once, on the OpenCL
 * device, for tools/cost_model.sh, which runs it under Oclgrind with its plugin
 * (tools/cost_model_plugin.cpp) counting each launch. Prints one JSON object: the op, its shape
 * and the bytes it must read (weights as stored, or the KV cache), so that the plugin's counts
 * become per-byte figures.
 *
 * usage: cost_ops matvec TYPE M K
 *        cost_ops attention N_HEAD N_KV_HEAD HEAD_DIM N POS0 [f16]
 * The matvec is y = W x over f32 x (n = 1); the attention attends n tokens from pos0 over
 * caches of pos0 + n positions (f32, or f16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend.h"
#include "cli.h"
#include "clinfer.h"
#include "half.h"
#include "opencl/cl_backend.h" /* the weight's size as stored */
#include "quant.h"

/* A buffer of count floats, filled with small values. */
static clinfer_status filled(clinfer_backend *be, size_t count, size_t elem, clinfer_buffer **out) {
    unsigned char *data = malloc(count * elem);
    if (!data) return CLINFER_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < count; i++) {
        float f = (float)(i % 13) / 13.0f - 0.5f;
        if (elem == 2) {
            uint16_t h = f32_to_f16(f);
            memcpy(data + 2 * i, &h, 2);
        } else
            memcpy(data + 4 * i, &f, 4);
    }
    clinfer_status st = be->i->buffer_alloc(be->ctx, count * elem, out);
    if (st == CLINFER_OK) st = be->i->buffer_write(be->ctx, *out, 0, count * elem, data);
    free(data);
    return st;
}

static int matvec(clinfer_backend *be, const char *type_name, int m, int k) {
    clinfer_dtype type = CLINFER_DT_ID_LIMIT;
    for (uint32_t t = 0; t < CLINFER_DT_ID_LIMIT; t++)
        if (dtype_is_weight((clinfer_dtype)t) &&
            !strcasecmp(type_name, dtype_name((clinfer_dtype)t)))
            type = (clinfer_dtype)t;
    if (type == CLINFER_DT_ID_LIMIT) return cli_error("'%s' is not a weight type", type_name);
    if (m < 1 || k < 1 || k % (int)dtype_block_elems(type))
        return cli_error("%d x %d: k must be whole %s blocks", m, k, dtype_name(type));
    size_t row = dtype_row_bytes(type, (size_t)k);
    float *f = malloc((size_t)k * sizeof *f);
    unsigned char *data = malloc(row * (size_t)m);
    clinfer_buffer *w = NULL, *x = NULL, *y = NULL;
    clinfer_status st = f && data ? CLINFER_OK : CLINFER_ERR_OUT_OF_MEMORY;
    for (int r = 0; st == CLINFER_OK && r < m; r++) {
        for (int i = 0; i < k; i++)
            f[i] = (float)(((long)i * 7919 + (long)r * 104729) % 2001 - 1000) / 1000.0f;
        quantize_row(type, f, data + row * (size_t)r, (size_t)k);
    }
    if (st == CLINFER_OK) st = be->i->weight_create(be->ctx, type, m, k, data, &w);
    if (st == CLINFER_OK) st = filled(be, (size_t)k, 4, &x);
    if (st == CLINFER_OK) st = be->i->buffer_alloc(be->ctx, (size_t)m * 4, &y);
    clinfer_op op = {.kind = CLINFER_OP_MATMUL,
                     .matmul = {.w = w, .x = {x, 0}, .y = {y, 0}, .m = m, .k = k, .n = 1}};
    if (st == CLINFER_OK) st = be->i->op(be->ctx, &op);
    if (st == CLINFER_OK) st = be->i->sync(be->ctx);
    if (st == CLINFER_OK)
        printf("{\"op\": \"matvec\", \"type\": \"%s\", \"m\": %d, \"k\": %d, \"bytes\": %zu}\n",
               dtype_name(type), m, k, w->head.bytes);
    if (w) be->i->buffer_free(be->ctx, w);
    if (x) be->i->buffer_free(be->ctx, x);
    if (y) be->i->buffer_free(be->ctx, y);
    free(f);
    free(data);
    return st == CLINFER_OK ? 0 : cli_error("matvec: %s", clinfer_last_error());
}

static int attention(clinfer_backend *be, int n_head, int n_kv, int head_dim, int n, int pos0,
                     bool f16) {
    if (n_head < 1 || n_kv < 1 || n_head % n_kv || head_dim < 8 || n < 1 || pos0 < 0)
        return cli_error("attention %d/%d heads of %d, %d tokens from %d: not a valid shape",
                         n_head, n_kv, head_dim, n, pos0);
    size_t q_total = (size_t)n * n_head * head_dim;
    size_t kv_total = (size_t)(pos0 + n) * n_kv * head_dim, elem = f16 ? 2 : 4;
    clinfer_buffer *q = NULL, *kc = NULL, *vc = NULL, *out = NULL;
    clinfer_status st = filled(be, q_total, 4, &q);
    if (st == CLINFER_OK) st = filled(be, kv_total, elem, &kc);
    if (st == CLINFER_OK) st = filled(be, kv_total, elem, &vc);
    if (st == CLINFER_OK) st = be->i->buffer_alloc(be->ctx, q_total * 4, &out);
    clinfer_op op = {.kind = CLINFER_OP_ATTENTION};
    op.attention.q = (clinfer_ref){q, 0};
    op.attention.k = (clinfer_ref){kc, 0};
    op.attention.v = (clinfer_ref){vc, 0};
    op.attention.out = (clinfer_ref){out, 0};
    op.attention.kv_type = f16 ? CLINFER_DT_F16 : CLINFER_DT_F32;
    op.attention.n = n;
    op.attention.n_head = n_head;
    op.attention.n_kv_head = n_kv;
    op.attention.head_dim = head_dim;
    op.attention.pos0 = pos0;
    op.attention.scale = 0.125f;
    if (st == CLINFER_OK) st = be->i->op(be->ctx, &op);
    if (st == CLINFER_OK) st = be->i->sync(be->ctx);
    if (st == CLINFER_OK)
        printf("{\"op\": \"attention\", \"heads\": %d, \"kv_heads\": %d, \"head_dim\": %d, "
               "\"n\": %d, \"pos0\": %d, \"kv\": \"%s\", \"bytes\": %zu}\n",
               n_head, n_kv, head_dim, n, pos0, f16 ? "f16" : "f32", 2 * kv_total * elem);
    clinfer_buffer *bufs[] = {q, kc, vc, out};
    for (int i = 0; i < 4; i++)
        if (bufs[i]) be->i->buffer_free(be->ctx, bufs[i]);
    return st == CLINFER_OK ? 0 : cli_error("attention: %s", clinfer_last_error());
}

int main(int argc, char **argv) {
    cli_program = "cost_ops";
    bool is_matvec = argc == 5 && !strcmp(argv[1], "matvec");
    bool is_attention = (argc == 7 || argc == 8) && !strcmp(argv[1], "attention");
    if (!is_matvec && !is_attention) {
        fprintf(stderr, "usage: cost_ops matvec TYPE M K\n"
                        "       cost_ops attention N_HEAD N_KV_HEAD HEAD_DIM N POS0 [f16]\n");
        return 2;
    }
    size_t index = 0;
    char reason[256];
    if (clinfer_device_select(NULL, &index, reason, sizeof reason) != CLINFER_OK)
        return cli_error("no device: %s", clinfer_last_error());
    clinfer_backend *be = NULL;
    if (cl_backend_create(index, NULL, &be) != CLINFER_OK)
        return cli_error("%s", clinfer_last_error());
    fprintf(stderr, "cost_ops: %s\n", be->i->describe(be->ctx));
    int rc = is_matvec ? matvec(be, argv[2], atoi(argv[3]), atoi(argv[4]))
                       : attention(be, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                                   atoi(argv[6]), argc == 8 && !strcmp(argv[7], "f16"));
    backend_free(be);
    return rc;
}
