/* A loaded model: architecture hyperparameters read from GGUF metadata, weights checked against
 * the shapes those hyperparameters imply and uploaded once to the backend. The model owns the
 * backend, the mapped GGUF file (the vocabulary and chat template point into it) and the
 * vocabulary. Contexts (src/context.c) share it; it must outlive them. */
#ifndef CLINFER_MODEL_H
#define CLINFER_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "clinfer.h"
#include "gguf.h"
#include "moe.h"

struct clinfer_vocab;

typedef struct clinfer_arch clinfer_arch; /* arch.h */
typedef struct model_split model_split;   /* placement.h */

/* rope.scaling.type (src/rope.c) */
typedef enum {
    ROPE_SCALING_NONE,
    ROPE_SCALING_LINEAR,
    ROPE_SCALING_LLAMA3,
    ROPE_SCALING_YARN,
    ROPE_SCALING_LONGROPE,
} rope_scaling_type;

typedef struct {
    rope_scaling_type type;
    float factor;                            /* rope.scaling.factor; 1 for none */
    float attn_factor;                       /* rope.scaling.attn_factor; 1 without */
    float low_freq_factor, high_freq_factor; /* llama3 */
    float ext_factor, beta_fast, beta_slow;  /* yarn */
    uint32_t orig_ctx; /* rope.scaling.original_context_length (n_ctx_train without) */
} rope_scaling;

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
    rope_scaling rope_scaling;
    float rope_mscale; /* the rotated pairs' magnitude, as the ROPE op's mscale (0: 1) */
    float norm_eps;
    float attn_scale; /* the attention's scale of q.k; 0: 1 / sqrt(head_dim) */
    float embd_scale; /* token embeddings are multiplied by it; 0: not scaled (gemma3: sqrt) */
    /* Sliding-window attention: a local layer's tokens attend only to the last swa_window
     * positions (their own included) and rotate with their own rope base and scale. 0: none.
     * swa_period 0: every layer is local (mistral); p: layer il is global where
     * il % p == p - 1, local otherwise (gemma3: p = 6). */
    uint32_t swa_window, swa_period;
    float rope_freq_base_swa, rope_freq_scale_swa;
    moe_hparams moe; /* mixture of experts (src/moe.c) */
    /* Layers il with (il + 1) % no_rope_step == 0 do not rotate (smollm3: 4); 0: all rotate. */
    uint32_t no_rope_step;
    /* q_norm and k_norm span each token's whole q and k rows (olmo2), not each head. */
    bool qk_norm_rows;
    /* gemma2: attention scores and the logits are capped to c * tanh(x / c); 0: not capped. */
    float attn_softcap, final_softcap;
    /* granite: each sub-layer's output is multiplied by residual_scale before it joins the
     * residual stream, the logits are divided by logit_scale; 0: neither. */
    float residual_scale, logit_scale;
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
    clinfer_ref attn_sinks;     /* a logit per head joining the attention's softmax (gpt-oss) */
    /* RMS norms of the attention's and the feed-forward's output before each is added to the
     * residual stream (gemma3); absent: added as it is */
    clinfer_ref attn_post_norm, ffn_post_norm;
    clinfer_ref ffn_norm, ffn_norm_b;
    clinfer_matrix ffn_gate, ffn_up, ffn_down; /* no gate for gpt2 */
    clinfer_ref ffn_up_b, ffn_down_b;
    /* mixture of experts: the router (n_expert rows) and the experts' matrices, n_expert of
     * moe.n_ff rows each (down: of n_embd) stacked, expert e's from row e * rows */
    clinfer_matrix ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    /* optional biases (gpt-oss): the router's (n_expert), each expert's rows of the three,
     * expert e's from element e * rows */
    clinfer_ref ffn_gate_inp_b, ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
} clinfer_layer;

struct clinfer_model {
    char architecture[32];
    char name[128];
    clinfer_hparams hp;

    gguf_file *gguf;
    struct clinfer_vocab *vocab; /* NULL when the file has no tokenizer.ggml.model */

    clinfer_backend *backend; /* the (first) device's; with a split, the others' too: */
    model_split *split;       /* layers across devices (placement.h); NULL: all on backend */
    size_t device_index;      /* backend's OpenCL device, as clinfer_device_get_info's */
    clinfer_matrix tok_embd;
    clinfer_matrix pos_embd; /* gpt2 only */
    clinfer_matrix output;   /* shares tok_embd's buffer when the output is tied (on one device) */
    bool output_tied;
    clinfer_ref output_norm, output_norm_b;
    clinfer_layer *layers; /* n_layer */
    clinfer_buffer *vectors;
    /* in vectors: the ROPE op's factors (src/rope.c; buf NULL: none), and longrope's for long
     * contexts (rope_factors_for) */
    clinfer_ref rope_factors, rope_factors_long;

    uint64_t n_params;
    uint64_t weight_bytes; /* matrices as stored in the file plus the f32 vectors */
    bool verbose;
    clinfer_toggle profile; /* clinfer_backend_options.profile, for the contexts */

    /* The grammar mask trie (grammar_vocab.c), built by the first constrained sampler: contexts
     * of one model sample on several threads, so the lock guards the lazy build. */
    pthread_mutex_t gvocab_lock;
    bool gvocab_lock_ready;
    struct gvocab *gvocab;
};

/* The model a context evaluates (context.c). */
const clinfer_model *context_model(const clinfer_context *ctx);

#endif
