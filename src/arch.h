/* Architectures: one file each, or per family (arch_llama.c: the llama family, arch_gemma.c:
 * gemma2 and gemma3, arch_smollm3.c, arch_granite.c, arch_olmo2.c, arch_gpt2.c), listed in arch.c.
 * An architecture says which hyperparameters and tensors it has and how a layer runs, through
 * the building blocks declared here: arch_load.c's loading (tensors checked against the
 * hyperparameters, then uploaded) and executor.c's plan builder (the ops of the forward pass).
 * Adding one: a file with its clinfer_arch, and a line in arch.c's table. */
#ifndef CLINFER_ARCH_H
#define CLINFER_ARCH_H

#include "executor.h"
#include "model.h"

typedef struct clinfer_loader clinfer_loader;
typedef struct exec_builder exec_builder;

struct clinfer_arch {
    const char *name;       /* general.architecture */
    bool layer_norm;        /* LayerNorm with biases (the output norm's too), else RMSNorm */
    bool learned_positions; /* position_embd rows: n_ctx cannot exceed n_ctx_train */
    bool gated_ffn;         /* gate and up rows: EXEC_FF_A holds both */
    /* Mixture-of-experts feed-forwards (src/moe.c): ARCH_DENSE (expert_count refused),
     * ARCH_MOE_OPTIONAL (llama: mixtral's files), ARCH_MOE (required); moe_norm: the chosen
     * gates are divided by their sum */
    int experts;
    bool moe_norm;
    /* the gates are a softmax over the chosen experts' logits only (gpt-oss), not over all */
    bool moe_softmax_chosen;
    /* its sub-layers read the residual stream as it is: no attn_norm, ffn_norm (olmo2, which
     * norms their outputs instead) */
    bool no_pre_norms;
    /* the tensor of the feed-forward's pre-norm: blk.N.<ffn_norm>.weight (NULL: ffn_norm;
     * gpt-oss: post_attention_norm) */
    const char *ffn_norm;
    /* The chat format (chat.h's names) of its files that have no tokenizer.chat_template
     * (NULL: none) */
    const char *chat_format;
    /* The hyperparameters beyond the ones every architecture has (model.c reads those). */
    clinfer_status (*read_hparams)(const gguf_file *f, clinfer_hparams *hp);
    /* The tensors besides token_embd, output_norm and output: those outside the layers (NULL:
     * none), then layer il's q, k, v and its feed-forward input weights (model.c loads the
     * norms, the output projection and ffn_down every layer has). */
    clinfer_status (*load_globals)(clinfer_loader *ld);
    clinfer_status (*load_qkv)(clinfer_loader *ld, uint32_t il);
    clinfer_status (*load_ffn)(clinfer_loader *ld, uint32_t il);
    /* The ops of the forward pass for n tokens: the embeddings (into EXEC_X), then layer il. */
    void (*embed)(exec_builder *b, const clinfer_model *m, const exec_state *s, int n);
    void (*layer)(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n);
};

/* The architecture named name; NULL for none (arch.c). */
const clinfer_arch *arch_find(gguf_str name);
/* The index-th architecture's name (from 0); NULL past the last. */
const char *arch_name_at(size_t index);

/* ---- loading (arch_load.c) -------------------------------------------------------- */

/* "<arch>.<suffix>" keys; an absent optional key leaves *out as it is. */
clinfer_status arch_key_u32(const gguf_file *f, const char *arch, const char *suffix, bool required,
                            uint32_t *out);
clinfer_status arch_key_f32(const gguf_file *f, const char *arch, const char *suffix, bool required,
                            float *out);
/* A sliding window as gemma's files give it: attention.sliding_window (hp->swa_window as it is
 * without), attention.sliding_window_pattern (period without; as llama.cpp reads it, 0 makes
 * every layer local, 1 every layer global) and rope.freq_base_swa (base_swa without; positive). */
clinfer_status arch_read_swa(const gguf_file *f, const char *arch, uint32_t period, float base_swa,
                             clinfer_hparams *hp);
/* The rotary embedding's hyperparameters: n_rot, freq_base, rope.scaling (rope.c). */
clinfer_status arch_read_rope(const gguf_file *f, const char *arch, clinfer_hparams *hp);

/* The tensors are read twice by the same code: a checking pass validates every shape against
 * the hyperparameters and counts the f32 vector elements, so that a broken file is rejected
 * before anything is allocated; the upload pass then creates the weights and stages the
 * vectors (norm weights, biases) on the host for one write into model->vectors. */
struct clinfer_loader {
    clinfer_model *m;
    bool upload;       /* false: the checking pass */
    float *host;       /* upload pass: the staged vectors */
    size_t used;       /* vector elements so far */
    uint8_t *stack;    /* upload pass: where model_load_stacked copies tensors that do not */
    size_t stack_size; /* follow one another, kept so that its pages fault once, not per layer */
    bool cached;       /* upload pass: the backend's weight cache lays out quantized matrices */
    /* upload pass: the backend that the part being read goes to, its copy of the vectors and
     * its device (placement_enter) */
    clinfer_backend *be;
    clinfer_buffer *vectors;
    uint32_t dev;
    uint64_t bytes_seen;                /* model->weight_bytes when the part began */
    clinfer_progress_callback progress; /* upload pass: told after each layer (may be NULL) */
    void *progress_user;
};

/* The tensor name of shape [ne0, ne1]; NULL with *st set where it is missing (*st OK where it
 * is optional) or shaped otherwise. */
const gguf_tensor *model_find_shaped(const clinfer_model *m, const char *name, int64_t ne0,
                                     int64_t ne1, bool required, clinfer_status *st);
/* A matrix of rows x k. */
clinfer_status model_load_matrix(clinfer_loader *ld, const char *name, uint32_t k, uint32_t rows,
                                 bool required, clinfer_matrix *out);
/* Rows [row0, row0 + rows) of tensor t as a weight of their own. */
clinfer_status model_upload_rows(clinfer_loader *ld, const gguf_tensor *t, const char *name,
                                 int row0, int rows, clinfer_matrix *out);
/* Matrices that multiply the same input (names[i]: rows[i] x k), stacking each run of
 * neighbours of one type into one weight (see clinfer_matrix). */
clinfer_status model_load_stacked(clinfer_loader *ld, const char *const *names,
                                  const uint32_t *rows, size_t n, uint32_t k,
                                  clinfer_matrix *const *out);
/* The rows [row0, row0 + m) of the weight `whole` holds, as a matrix of their own. */
clinfer_matrix matrix_rows_of(const clinfer_matrix *whole, int row0, int m);
/* The rotation's pair factors into model->rope_factors, from rope_freqs.weight or computed from
 * rope.scaling (rope.c); none for a plain rotation. */
clinfer_status model_load_rope_factors(clinfer_loader *ld);
/* The factors a context of n_ctx positions per sequence rotates with: longrope's long table
 * past rope.scaling.original_context_length, else model->rope_factors (rope.c). */
clinfer_ref rope_factors_for(const clinfer_model *m, uint32_t n_ctx);
/* The rope variant in words, for clinfer_model_info (rope.c). */
void rope_describe(const clinfer_model *m, char *buf, size_t size);
/* A vector of n elements, converted to f32. */
clinfer_status model_load_vector(clinfer_loader *ld, const char *name, uint32_t n, bool required,
                                 clinfer_ref *out);
/* The rows rows of n elements of a tensor [n, rows], converted to f32 one after another. */
clinfer_status model_load_vectors(clinfer_loader *ld, const char *name, uint32_t n, uint32_t rows,
                                  bool required, clinfer_ref *out);

/* ---- tensor groups several architectures share (arch_load.c) --------------------------- */

/* Layer il's attn_q, attn_k and attn_v stacked into one weight, with their biases (required
 * where qkv_bias, else optional). */
clinfer_status arch_load_qkv(clinfer_loader *ld, uint32_t il, bool qkv_bias);
/* Layer il's attn_q_norm and attn_k_norm: head_dim each, or with hp.qk_norm_rows a whole row
 * of q and of k. */
clinfer_status arch_load_head_norms(clinfer_loader *ld, uint32_t il);
/* Layer il's post_attention_norm and post_ffw_norm (gemma2, gemma3, olmo2). */
clinfer_status arch_load_post_norms(clinfer_loader *ld, uint32_t il);
/* Layer il's q, k and v (no biases), their norms where head_norms, and the post-norms (gemma2,
 * gemma3, olmo2). */
clinfer_status arch_load_qkv_post(clinfer_loader *ld, uint32_t il, bool head_norms);
/* load_qkv hooks several architectures share: q, k and v, their biases optional (llama,
 * smollm3, granite); those and the head norms (qwen3, qwen3moe, olmoe); those and the post-norms
 * (gemma3, olmo2). */
clinfer_status arch_load_qkv_plain(clinfer_loader *ld, uint32_t il);
clinfer_status arch_load_qkv_normed(clinfer_loader *ld, uint32_t il);
clinfer_status arch_load_qkv_post_normed(clinfer_loader *ld, uint32_t il);
/* Layer il's ffn_gate and ffn_up stacked into one weight. */
clinfer_status arch_load_gate_up(clinfer_loader *ld, uint32_t il);

/* The RMS norm's epsilon and the rope (arch_read_rope) of a llama-like architecture
 * (arch_llama.c). */
clinfer_status arch_read_rms_rope(const gguf_file *f, const char *arch, clinfer_hparams *hp);

/* ---- layers several architectures share (in the file of the family that had them first) --- */

/* Attention, then the SwiGLU feed-forward (arch_llama.c) or the GELU-gated one (arch_gemma.c). */
void arch_layer_swiglu(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n);
void arch_layer_geglu(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n);

enum { ARCH_DENSE, ARCH_MOE_OPTIONAL, ARCH_MOE };

/* ---- mixture of experts (moe.c) ------------------------------------------------------- */

/* expert_count, expert_used_count, expert_feed_forward_length, expert_gating_func and
 * expert_weights_scale into hp->moe, checked against the architecture's experts. */
clinfer_status moe_read_hparams(const gguf_file *f, const char *arch, clinfer_hparams *hp);
/* Layer il's router and experts (ffn_gate_inp, ffn_{gate,up,down}_exps, and their biases where
 * the file has them): its feed-forward. */
clinfer_status moe_load_ffn(clinfer_loader *ld, uint32_t il);
/* The parameters and weight bytes one token reads: the model's, less the experts it does not
 * choose (clinfer_model_info). */
void moe_active(const clinfer_model *m, uint64_t *params, uint64_t *bytes);
/* The feed-forward of layer il: exec_gated_ffn, or its experts' where the model has them (the
 * norm, router, routing, expert matmuls, glu and their gated sum added to the residual). */
void exec_ffn(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n,
              clinfer_op_kind glu);

/* ---- the forward pass (executor.c) ---------------------------------------------------- */

clinfer_ref exec_at(clinfer_buffer *buf, size_t offset);
/* Appends op; its position-dependent refs advance by pos0 * pos_stride (0: none). */
void exec_push(exec_builder *b, clinfer_op op, size_t pos_stride);
/* The x a matmul by a weight of type and k columns reads for n rows of x: x, or with 8-bit
 * activations (*x_q8) the y of a ROUND_Q8 of them, pushed now unless the last one holds them. */
clinfer_ref exec_matmul_x(exec_builder *b, clinfer_dtype type, int k, clinfer_ref x, int n,
                          bool *x_q8);
/* y = x . W^T (+ bias) (+= with accumulate), merged with the matmul before where it can be. */
void exec_matmul(exec_builder *b, const clinfer_matrix *w, clinfer_ref x, clinfer_ref y,
                 clinfer_ref bias, int n, bool accumulate);
/* The architecture's norm over rows of n_embd. */
void exec_norm(exec_builder *b, const clinfer_hparams *hp, clinfer_ref x, clinfer_ref w,
               clinfer_ref bias, clinfer_ref y, int n);
/* Rows ids (EXEC_IDS or EXEC_POS_IDS) of w into y, multiplied by scale (0: not). */
void exec_embed(exec_builder *b, const clinfer_matrix *w, clinfer_ref ids, clinfer_ref y, int n,
                float scale);
/* Rows of position_embd at the batch's positions (EXEC_POS_IDS) into EXEC_POS (gpt2). */
void exec_position_embed(exec_builder *b, const clinfer_model *m, const exec_state *s, int n);
/* The token ids' rows of token_embd into EXEC_X, scaled by hp.embd_scale: an arch's embed. */
void exec_token_embed(exec_builder *b, const clinfer_model *m, const exec_state *s, int n);
/* Norm, q/k/v (each head's q and k RMS-normed where the layer has q_norm, k_norm), the cache
 * writes (rotated where hp->n_rot, by the layer's rope base: see clinfer_hparams' sliding
 * window), attention (over the layer's window), and the output projection added to the
 * residual stream (normed first where the layer has attn_post_norm). */
void exec_attention_block(exec_builder *b, const clinfer_model *m, const exec_state *s, int il,
                          int n);
/* Norm, then down(act(gate(x)) * up(x)) with glu CLINFER_OP_SWIGLU or CLINFER_OP_GEGLU, added
 * to the residual stream (normed first where the layer has ffn_post_norm). */
void exec_gated_ffn(exec_builder *b, const clinfer_model *m, const exec_state *s, int il, int n,
                    clinfer_op_kind glu);

#endif
