#include "tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "random.h"

#define SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's space */
#define MAX_TOKENS 400
#define TOKEN_LEN 32

/* Words whose every prefix is a token too, so SentencePiece merges reach the whole word. */
static const char *const words[] = {SPACE "hello", SPACE "world", SPACE "the",   SPACE "model",
                                    SPACE "runs",  SPACE "on",    SPACE "every", SPACE "device"};

typedef struct {
    char text[MAX_TOKENS][TOKEN_LEN];
    float score[MAX_TOKENS];
    int32_t type[MAX_TOKENS];
    uint32_t n;
} vocab;

static void add_token(vocab *v, const char *text, size_t len, int32_t type) {
    for (uint32_t i = 0; i < v->n; i++)
        if (strlen(v->text[i]) == len && !memcmp(v->text[i], text, len)) return;
    memcpy(v->text[v->n], text, len);
    v->text[v->n][len] = '\0';
    v->score[v->n] = -(float)v->n; /* earlier tokens merge first */
    v->type[v->n] = type;
    v->n++;
}

static void build_vocab(vocab *v) {
    memset(v, 0, sizeof *v);
    add_token(v, "<unk>", 5, 2);
    add_token(v, "<s>", 3, 3);
    add_token(v, "</s>", 4, 3);
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        add_token(v, t, strlen(t), 6);
    }
    add_token(v, SPACE, strlen(SPACE), 1);
    for (char c = 'a'; c <= 'z'; c++)
        add_token(v, &c, 1, 1);
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        for (size_t len = strlen(SPACE) + 1; len <= strlen(words[w]); len++)
            add_token(v, words[w], len, 1);
}

uint32_t tiny_model_n_vocab(void) {
    static vocab v;
    build_vocab(&v);
    return v.n;
}

void tiny_model_default(tiny_model_spec *s, const char *arch, clinfer_dtype type) {
    bool k_type = dtype_block_elems(type) == QK_K; /* rows of whole super-blocks */
    bool gpt2 = !strcmp(arch, "gpt2"), gemma3 = !strcmp(arch, "gemma3");
    bool mistral = !strcmp(arch, "mistral"), llama3 = !strcmp(arch, "llama3");
    bool yarn = !strcmp(arch, "yarn"), longrope = !strcmp(arch, "phi3-longrope");
    bool gemma2 = !strcmp(arch, "gemma2"), granite = !strcmp(arch, "granite");
    bool smollm3 = !strcmp(arch, "smollm3"), olmo2 = !strcmp(arch, "olmo2");
    bool gptoss = !strcmp(arch, "gpt-oss");
    *s = (tiny_model_spec){
        .arch = mistral || llama3 || !strcmp(arch, "mixtral") ? "llama"
                : yarn                                        ? "qwen2"
                : longrope                                    ? "phi3"
                                                              : arch,
        .type = type,
        .n_embd = k_type ? 256 : 64,
        .n_layer = gemma3    ? 3
                   : smollm3 ? 4
                             : 2,
        .n_head = 4,
        .n_head_kv = gpt2     ? 4
                     : gemma3 ? 1
                              : 2,
        .n_ff = k_type ? 256 : 128,
        .n_ctx = 128,
        .tied = gpt2 || gemma3 || gemma2 || smollm3,
        .seed = 42,
        .sliding_window = gemma3 || mistral || gemma2 || olmo2 || gptoss ? 4 : 0,
        .swa_pattern = gemma3  ? 3
                       : olmo2 ? 2
                               : 0,
        .rope_freq_base = gemma3 ? 1e6f : 10000.0f,
        .llama3_rope = llama3 ? TINY_ROPE_FREQS : 0,
        .rope_scaling = yarn || gptoss ? "yarn" : NULL,
        .longrope = longrope,
        .longrope_attn = longrope ? 1.2f : 0.0f,
        .attn_softcap = gemma2 ? 0.5f : 0.0f,
        .final_softcap = gemma2 ? 5.0f : 0.0f,
    };
    if (!strcmp(arch, "qwen3moe") || !strcmp(arch, "olmoe") || !strcmp(arch, "mixtral") || gptoss) {
        s->n_expert = 8;
        s->n_expert_used = strcmp(arch, "mixtral") && !gptoss ? 4 : 2;
    }
    if (granite)
        memcpy(s->granite_scales, (const float[]){2.0f, 0.5f, 4.0f, 0.3f}, 4 * sizeof(float));
}

#define LLAMA3_CTX 64 /* original_context_length: pairs of every kind in 8 of head size 16 */

/* Llama 3's factor of each of the pairs of a rotation of n_rot dims (Meta's formula, in double):
 * pairs turning faster than 4 times over the original context keep their frequency, those
 * turning less than once are slowed 8 times, those between blend linearly in 1 / factor. */
static void llama3_factors(float base, uint32_t n_rot, float *out) {
    for (uint32_t j = 0; j < n_rot / 2; j++) {
        double wavelen = 2 * 3.14159265358979323846 * pow(base, 2.0 * j / n_rot);
        double turns = LLAMA3_CTX / wavelen, smooth = (turns - 1.0) / (4.0 - 1.0);
        out[j] = turns > 4.0 ? 1.0f : turns < 1.0 ? 8.0f : (float)(1 / ((1 - smooth) / 8 + smooth));
    }
}

/* longrope's two tables and keys, where the spec has them. */
static void write_longrope(gguf_writer *w, const tiny_model_spec *s) {
    char key[96];
    uint32_t pairs = s->n_embd / s->n_head / 2;
    if (!s->longrope || pairs > 64) return;
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", s->arch);
    gw_kv_u32(w, key, 64);
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", s->arch);
    if (s->longrope_attn > 0.0f) gw_kv_f32(w, key, s->longrope_attn);
    float ones[64], slow[64];
    for (uint32_t j = 0; j < pairs; j++)
        ones[j] = 1.0f, slow[j] = 1.0f + 3.5f * (float)j / (float)pairs;
    gw_tensor(w, "rope_factors_long.weight", CLINFER_DT_F32, 1, (const int64_t[]){pairs}, slow);
    gw_tensor(w, "rope_factors_short.weight", CLINFER_DT_F32, 1, (const int64_t[]){pairs}, ones);
}

/* rope_freqs.weight (its factors) and the rope.scaling keys, as spec's llama3_rope says. */
static void write_llama3_rope(gguf_writer *w, const tiny_model_spec *s) {
    char key[96];
    uint32_t n_rot = s->n_embd / s->n_head;
    if (s->llama3_rope & TINY_ROPE_LLAMA3_KEYS) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", s->arch);
        gw_kv_str(w, key, "llama3");
        static const char *const names[] = {"factor", "low_freq_factor", "high_freq_factor"};
        static const float values[] = {8.0f, 1.0f, 4.0f};
        for (int i = 0; i < 3; i++) {
            snprintf(key, sizeof key, "%s.rope.scaling.%s", s->arch, names[i]);
            gw_kv_f32(w, key, values[i]);
        }
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", s->arch);
        gw_kv_u32(w, key, LLAMA3_CTX);
    }
    if (!(s->llama3_rope & TINY_ROPE_FREQS) ||
        (s->omit_tensor && !strcmp(s->omit_tensor, "rope_freqs.weight")))
        return;
    float factors[65] = {[64] = 1.0f};
    for (int j = 0; j < 64; j++)
        factors[j] = 1.0f;
    llama3_factors(s->rope_freq_base, n_rot, factors);
    uint32_t n =
        n_rot / 2 + (s->misshape_tensor && !strcmp(s->misshape_tensor, "rope_freqs.weight"));
    gw_tensor(w, "rope_freqs.weight", CLINFER_DT_F32, 1, (const int64_t[]){n}, factors);
}

/* The type of matrix `name`: the spec's, or in a mix one picked by an FNV-1a hash of the name;
 * a router F32, as llama.cpp's quantize keeps it (its logits pick experts: a rounding there would
 * move the choice). */
static clinfer_dtype matrix_type(const tiny_model_spec *s, const char *name) {
    if (strstr(name, "ffn_gate_inp")) return CLINFER_DT_F32;
    uint32_t h = 2166136261u;
    for (const char *c = name; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    int pick = s->n_mix > 0 ? (int)(h % (uint32_t)(s->n_mix + 1)) : 0;
    return pick ? s->mix[pick - 1] : s->type;
}

/* Rows of random values in [-scale, scale) stored as the spec's type (or its mix's): an m x k
 * matrix, or with n > 0 the [k, m, n] tensor of n experts' (a misshaped one has a row, or an
 * expert, too many). */
static int add_rows(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t k,
                    uint32_t m, uint32_t n, float scale) {
    if (s->omit_tensor && !strcmp(name, s->omit_tensor)) return 0;
    if (s->misshape_tensor && !strcmp(name, s->misshape_tensor)) *(n ? &n : &m) += 1;
    clinfer_dtype type = matrix_type(s, name);
    size_t row_bytes = dtype_row_bytes(type, k), rows = (size_t)m * (n ? n : 1);
    float *row = malloc(k * sizeof *row);
    uint8_t *data = malloc(row_bytes * rows);
    if (!row || !data) {
        free(row);
        free(data);
        fprintf(stderr, "tiny_model: no memory for %s\n", name);
        return -1;
    }
    for (size_t r = 0; r < rows; r++) {
        rng_fill(row, k, -scale, scale);
        quantize_row(type, row, data + r * row_bytes, k);
    }
    gw_tensor(w, name, type, n ? 3 : 2, (const int64_t[]){k, m, n}, data);
    free(row);
    free(data);
    return 0;
}

static int add_matrix(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t k,
                      uint32_t m, float scale) {
    return add_rows(w, s, name, k, m, 0, scale);
}

static int add_experts(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t k,
                       uint32_t m, float scale) {
    return add_rows(w, s, name, k, m, s->n_expert, scale);
}

/* An f32 vector: center + values in [-spread, spread). */
static int add_vector(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t n,
                      float center, float spread) {
    if (s->omit_tensor && !strcmp(name, s->omit_tensor)) return 0;
    if (s->misshape_tensor && !strcmp(name, s->misshape_tensor)) n++;
    float *v = malloc(n * sizeof *v);
    if (!v) {
        fprintf(stderr, "tiny_model: no memory for %s\n", name);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        v[i] = center + rng_uniform(-spread, spread);
    gw_tensor(w, name, CLINFER_DT_F32, 1, (const int64_t[]){n}, v);
    free(v);
    return 0;
}

/* Each expert's bias row of n (a tensor [n, n_expert]), values in [-0.3, 0.3). */
static int add_biases(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t n) {
    if (s->omit_tensor && !strcmp(name, s->omit_tensor)) return 0;
    uint32_t rows = s->n_expert + (s->misshape_tensor && !strcmp(name, s->misshape_tensor));
    float *v = malloc((size_t)n * rows * sizeof *v);
    if (!v) {
        fprintf(stderr, "tiny_model: no memory for %s\n", name);
        return -1;
    }
    rng_fill(v, (size_t)n * rows, -0.3f, 0.3f);
    gw_tensor(w, name, CLINFER_DT_F32, 2, (const int64_t[]){n, rows}, v);
    free(v);
    return 0;
}

static void write_metadata(gguf_writer *w, const tiny_model_spec *s, const vocab *v) {
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, s->arch), key)
    gw_kv_str(w, "general.architecture", s->arch);
    gw_kv_str(w, "general.name", "tiny test model");
    gw_kv_u32(w, KEY("context_length"), s->n_ctx);
    gw_kv_u32(w, KEY("embedding_length"), s->n_embd);
    gw_kv_u32(w, KEY("block_count"), s->n_layer);
    gw_kv_u32(w, KEY("feed_forward_length"), s->n_ff);
    gw_kv_u32(w, KEY("attention.head_count"), s->n_head);
    gw_kv_u32(w, KEY("attention.head_count_kv"), s->n_head_kv);
    if (s->n_expert) {
        gw_kv_u32(w, KEY("expert_count"), s->n_expert);
        gw_kv_u32(w, KEY("expert_used_count"), s->n_expert_used);
        gw_kv_u32(w, KEY("expert_feed_forward_length"), s->n_ff);
        /* softmax; gpt-oss's the softmax of the chosen */
        gw_kv_u32(w, KEY("expert_gating_func"), strcmp(s->arch, "gpt-oss") ? 1 : 3);
    }
    if (!strcmp(s->arch, "gpt2")) {
        gw_kv_f32(w, KEY("attention.layer_norm_epsilon"), 1e-5f);
    } else {
        gw_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
        gw_kv_f32(w, KEY("rope.freq_base"), s->rope_freq_base);
        if (s->sliding_window) gw_kv_u32(w, KEY("attention.sliding_window"), s->sliding_window);
        if (s->swa_pattern) gw_kv_u32(w, KEY("attention.sliding_window_pattern"), s->swa_pattern);
        gw_kv_u32(w, KEY("rope.dimension_count"), s->n_embd / s->n_head);
        if (s->attn_softcap != 0.0f) gw_kv_f32(w, KEY("attn_logit_softcapping"), s->attn_softcap);
        if (s->final_softcap != 0.0f)
            gw_kv_f32(w, KEY("final_logit_softcapping"), s->final_softcap);
        static const char *const scales[] = {"logit_scale", "residual_scale", "embedding_scale",
                                             "attention.scale"};
        for (int i = 0; i < 4; i++)
            if (s->granite_scales[i] != 0.0f) {
                snprintf(key, sizeof key, "%s.%s", s->arch, scales[i]);
                gw_kv_f32(w, key, s->granite_scales[i]);
            }
        if (s->rope_scaling) {
            gw_kv_str(w, KEY("rope.scaling.type"), s->rope_scaling);
            gw_kv_f32(w, KEY("rope.scaling.factor"), 2.0f);
            if (!strcmp(s->rope_scaling, "yarn"))
                gw_kv_u32(w, KEY("rope.scaling.original_context_length"), 32);
        }
    }
#undef KEY
    const char *texts[MAX_TOKENS];
    for (uint32_t i = 0; i < v->n; i++)
        texts[i] = v->text[i];
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, v->n);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", v->score, v->n);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", v->type, v->n);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
}

static int write_layer(gguf_writer *w, const tiny_model_spec *s, uint32_t il) {
    bool gpt2 = !strcmp(s->arch, "gpt2"), qwen2 = !strcmp(s->arch, "qwen2");
    bool qwen3 = !strcmp(s->arch, "qwen3") || !strcmp(s->arch, "qwen3moe");
    bool phi3 = !strcmp(s->arch, "phi3"), gemma3 = !strcmp(s->arch, "gemma3");
    bool olmoe = !strcmp(s->arch, "olmoe"), olmo2 = !strcmp(s->arch, "olmo2");
    bool gptoss = !strcmp(s->arch, "gpt-oss");
    bool post_norms = gemma3 || olmo2 || !strcmp(s->arch, "gemma2");
    uint32_t E = s->n_embd, F = s->n_ff, hd = s->n_embd / s->n_head;
    uint32_t q_dim = s->n_head * hd, kv_dim = s->n_head_kv * hd;
    float in_scale = 1.0f / sqrtf((float)E), ff_scale = 1.0f / sqrtf((float)F);
    char name[96];
    int rc = 0;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    if (!olmo2) rc |= add_vector(w, s, NAME("attn_norm.weight"), E, 1.0f, 0.2f);
    if (gpt2) {
        rc |= add_vector(w, s, NAME("attn_norm.bias"), E, 0.0f, 0.1f);
        rc |= add_matrix(w, s, NAME("attn_qkv.weight"), E, q_dim + 2 * kv_dim, in_scale);
        rc |= add_vector(w, s, NAME("attn_qkv.bias"), q_dim + 2 * kv_dim, 0.0f, 0.1f);
    } else if (phi3) { /* [q; k; v] in one matrix */
        rc |= add_matrix(w, s, NAME("attn_qkv.weight"), E, q_dim + 2 * kv_dim, in_scale);
    } else {
        rc |= add_matrix(w, s, NAME("attn_q.weight"), E, q_dim, in_scale);
        rc |= add_matrix(w, s, NAME("attn_k.weight"), E, kv_dim, in_scale);
        rc |= add_matrix(w, s, NAME("attn_v.weight"), E, kv_dim, in_scale);
        if (qwen2 || gptoss) {
            rc |= add_vector(w, s, NAME("attn_q.bias"), q_dim, 0.0f, 0.1f);
            rc |= add_vector(w, s, NAME("attn_k.bias"), kv_dim, 0.0f, 0.1f);
            rc |= add_vector(w, s, NAME("attn_v.bias"), kv_dim, 0.0f, 0.1f);
        }
        if (qwen3 || gemma3 || olmo2 || olmoe) { /* olmo2, olmoe: over the whole row */
            bool rows = olmo2 || olmoe;
            rc |= add_vector(w, s, NAME("attn_q_norm.weight"), rows ? q_dim : hd, 1.0f, 0.2f);
            rc |= add_vector(w, s, NAME("attn_k_norm.weight"), rows ? kv_dim : hd, 1.0f, 0.2f);
        }
    }
    rc |= add_matrix(w, s, NAME("attn_output.weight"), q_dim, E, in_scale);
    if (gpt2 || gptoss) rc |= add_vector(w, s, NAME("attn_output.bias"), E, 0.0f, 0.1f);
    /* gpt-oss: sinks about as large as the scores; its feed-forward's pre-norm is named
     * post_attention_norm */
    if (gptoss) rc |= add_vector(w, s, NAME("attn_sinks.weight"), s->n_head, 0.0f, 1.5f);
    if (post_norms || gptoss)
        rc |= add_vector(w, s, NAME("post_attention_norm.weight"), E, 1.0f, 0.2f);
    if (!olmo2 && !gptoss) rc |= add_vector(w, s, NAME("ffn_norm.weight"), E, 1.0f, 0.2f);
    if (s->n_expert) { /* the router, then the experts in place of one ffn */
        rc |= add_matrix(w, s, NAME("ffn_gate_inp.weight"), E, s->n_expert, in_scale);
        rc |= add_experts(w, s, NAME("ffn_gate_exps.weight"), E, F, in_scale);
        rc |= add_experts(w, s, NAME("ffn_up_exps.weight"), E, F, in_scale);
        rc |= add_experts(w, s, NAME("ffn_down_exps.weight"), F, E, ff_scale);
        if (gptoss) { /* [rows, n_expert] bias tensors, the router's [n_expert] */
            rc |= add_vector(w, s, NAME("ffn_gate_inp.bias"), s->n_expert, 0.0f, 0.5f);
            rc |= add_biases(w, s, NAME("ffn_gate_exps.bias"), F);
            rc |= add_biases(w, s, NAME("ffn_up_exps.bias"), F);
            rc |= add_biases(w, s, NAME("ffn_down_exps.bias"), E);
        }
        if (post_norms) rc |= add_vector(w, s, NAME("post_ffw_norm.weight"), E, 1.0f, 0.2f);
        return rc;
    }
    if (gpt2)
        rc |= add_vector(w, s, NAME("ffn_norm.bias"), E, 0.0f, 0.1f);
    else if (!phi3)
        rc |= add_matrix(w, s, NAME("ffn_gate.weight"), E, F, in_scale);
    rc |=
        add_matrix(w, s, NAME("ffn_up.weight"), E, phi3 ? 2 * F : F, in_scale); /* phi3: gate; up */
    if (gpt2) rc |= add_vector(w, s, NAME("ffn_up.bias"), F, 0.0f, 0.1f);
    rc |= add_matrix(w, s, NAME("ffn_down.weight"), F, E, ff_scale);
    if (gpt2) rc |= add_vector(w, s, NAME("ffn_down.bias"), E, 0.0f, 0.1f);
    if (post_norms) rc |= add_vector(w, s, NAME("post_ffw_norm.weight"), E, 1.0f, 0.2f);
#undef NAME
    return rc;
}

int tiny_model_write(const tiny_model_spec *s, const char *path) {
    static vocab v;
    build_vocab(&v);
    gguf_writer *w = gw_new();
    if (!w) return -1;
    rng_seed(s->seed);
    write_metadata(w, s, &v);
    write_llama3_rope(w, s);
    write_longrope(w, s);
    int rc = add_matrix(w, s, "token_embd.weight", s->n_embd, v.n, 1.0f);
    if (!strcmp(s->arch, "gpt2"))
        rc |= add_matrix(w, s, "position_embd.weight", s->n_embd, s->n_ctx, 0.5f);
    for (uint32_t il = 0; il < s->n_layer; il++)
        rc |= write_layer(w, s, il);
    rc |= add_vector(w, s, "output_norm.weight", s->n_embd, 1.0f, 0.2f);
    if (!strcmp(s->arch, "gpt2")) rc |= add_vector(w, s, "output_norm.bias", s->n_embd, 0.0f, 0.1f);
    if (!s->tied)
        rc |= add_matrix(w, s, "output.weight", s->n_embd, v.n, 1.0f / sqrtf((float)s->n_embd));
    if (!rc && gw_write_file(w, path) != 0) {
        fprintf(stderr, "tiny_model: cannot write %s\n", path);
        rc = -1;
    }
    gw_free(w);
    return rc ? -1 : 0;
}

clinfer_status tiny_model_decode(clinfer_model *m, const clinfer_context_params *cp, int n_prompt,
                                 int n_decode, float *out) {
    clinfer_context *ctx = NULL;
    const float *logits;
    size_t n_vocab = 0;
    int32_t *ids = malloc((size_t)(n_prompt + n_decode) * sizeof *ids);
    if (!ids) return CLINFER_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < n_prompt + n_decode; i++)
        ids[i] = 3 + (i * 53) % 250;
    clinfer_status st = clinfer_context_create(m, cp, &ctx);
    if (st == CLINFER_OK) st = clinfer_eval(ctx, ids, (size_t)n_prompt);
    for (int i = 0; st == CLINFER_OK && i <= n_decode; i++) {
        st = clinfer_get_logits(ctx, &logits, &n_vocab);
        if (st == CLINFER_OK) memcpy(out + (size_t)i * n_vocab, logits, n_vocab * sizeof *out);
        if (st == CLINFER_OK && i < n_decode) st = clinfer_eval(ctx, &ids[n_prompt + i], 1);
    }
    clinfer_context_free(ctx);
    free(ids);
    return st;
}

clinfer_status tiny_model_load(const char *path, clinfer_backend_kind kind, clinfer_toggle graph,
                               clinfer_model **out) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    p.options.graph = graph;
    return clinfer_model_load(path, &p, out);
}

void *tiny_model_run_job(void *arg) {
    tiny_model_job *j = arg;
    j->st = tiny_model_decode(j->model, NULL, j->n_prompt, j->n_decode, j->logits);
    return NULL;
}
