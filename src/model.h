/* A loaded model: architecture hyperparameters read from GGUF metadata, weights checked against
 * the shapes those hyperparameters imply and uploaded once to the backend. The model owns the
 * backend, the mapped GGUF file (the vocabulary and chat template point into it) and the
 * vocabulary. Contexts (src/context.c) share it; it must outlive them. */
#ifndef CLINFER_MODEL_H
#define CLINFER_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "clinfer.h"
#include "gguf.h"

struct clinfer_vocab;

typedef struct clinfer_arch clinfer_arch; /* arch.h */

typedef struct {
    const clinfer_arch *arch;
    uint32_t n_vocab;
    uint32_t n_ctx_train; /* gpt2: also the rows of position_embd */
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head, n_head_kv;
    uint32_t head_dim; /* n_embd / n_head unless attention.key_length says otherwise */
    uint32_t n_ff;
    uint32_t n_rot; /* rope.dimension_count: leading dims of each head that rotate; 0: no rope */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling, else 1 */
    bool rope_neox;
    float norm_eps;
    float attn_scale; /* the attention's scale of q.k; 0: 1 / sqrt(head_dim) */
    float embd_scale; /* token embeddings are multiplied by it; 0: not scaled (gemma3: sqrt) */
    /* Sliding-window attention: a local layer's tokens attend only to the last swa_window
     * positions (their own included) and rotate with their own rope base and scale. 0: none.
     * swa_period 0: every layer is local (mistral); p: layer il is global where
     * il % p == p - 1, local otherwise (gemma3: p = 6). */
    uint32_t swa_window, swa_period;
    float rope_freq_base_swa, rope_freq_scale_swa;
} clinfer_hparams;

/* A weight matrix on the backend: m output rows of k input elements (GGUF ne[0] = k), rows
 * row0 .. row0 + m - 1 of w. Matrices of one type and k that the same input multiplies (q, k, v;
 * gate, up) share one weight, stacked in that order, so that one matmul can run them together;
 * the one with row0 == 0 owns it. */
typedef struct {
    clinfer_buffer *w;
    clinfer_dtype type;
    int m, k;
    int row0;
} clinfer_matrix;

/* Norm weights and biases are f32 vectors packed into one small buffer (model->vectors);
 * a ref with buf == NULL is an absent optional vector. */
typedef struct {
    clinfer_ref attn_norm, attn_norm_b;
    clinfer_matrix wq, wk, wv, wo; /* gpt2's fused attn_qkv is split into wq/wk/wv at load */
    clinfer_ref bq, bk, bv, bo;
    clinfer_ref q_norm, k_norm; /* RMS norms of each query and key head before rope (qwen3) */
    /* RMS norms of the attention's and the feed-forward's output before each is added to the
     * residual stream (gemma3); absent: added as it is */
    clinfer_ref attn_post_norm, ffn_post_norm;
    clinfer_ref ffn_norm, ffn_norm_b;
    clinfer_matrix ffn_gate, ffn_up, ffn_down; /* no gate for gpt2 */
    clinfer_ref ffn_up_b, ffn_down_b;
} clinfer_layer;

struct clinfer_model {
    char architecture[32];
    char name[128];
    clinfer_hparams hp;

    gguf_file *gguf;
    struct clinfer_vocab *vocab; /* NULL when the file has no tokenizer.ggml.model */

    clinfer_backend *backend;
    clinfer_matrix tok_embd;
    clinfer_matrix pos_embd; /* gpt2 only */
    clinfer_matrix output;   /* shares tok_embd's buffer when the output is tied */
    bool output_tied;
    clinfer_ref output_norm, output_norm_b;
    clinfer_layer *layers; /* n_layer */
    clinfer_buffer *vectors;

    uint64_t n_params;
    uint64_t weight_bytes; /* matrices as stored in the file plus the f32 vectors */
    bool verbose;
    clinfer_toggle profile; /* clinfer_backend_options.profile, for the contexts */
};

/* The model a context evaluates (context.c). */
const clinfer_model *context_model(const clinfer_context *ctx);

#endif
