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
    bool mistral = !strcmp(arch, "mistral");
    *s = (tiny_model_spec){
        .arch = mistral ? "llama" : arch,
        .type = type,
        .n_embd = k_type ? 256 : 64,
        .n_layer = gemma3 ? 3 : 2,
        .n_head = 4,
        .n_head_kv = gpt2     ? 4
                     : gemma3 ? 1
                              : 2,
        .n_ff = k_type ? 256 : 128,
        .n_ctx = 128,
        .tied = gpt2 || gemma3,
        .seed = 42,
        .sliding_window = gemma3 || mistral ? 4 : 0,
        .swa_pattern = gemma3 ? 3 : 0,
        .rope_freq_base = gemma3 ? 1e6f : 10000.0f,
    };
}

/* The type of matrix `name`: the spec's, or in a mix one picked by an FNV-1a hash of the name. */
static clinfer_dtype matrix_type(const tiny_model_spec *s, const char *name) {
    uint32_t h = 2166136261u;
    for (const char *c = name; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    int pick = s->n_mix > 0 ? (int)(h % (uint32_t)(s->n_mix + 1)) : 0;
    return pick ? s->mix[pick - 1] : s->type;
}

/* Rows of random values in [-scale, scale) stored as the spec's type (or its mix's). */
static int add_matrix(gguf_writer *w, const tiny_model_spec *s, const char *name, uint32_t k,
                      uint32_t m, float scale) {
    if (s->omit_tensor && !strcmp(name, s->omit_tensor)) return 0;
    if (s->misshape_tensor && !strcmp(name, s->misshape_tensor)) m++;
    clinfer_dtype type = matrix_type(s, name);
    size_t row_bytes = dtype_row_bytes(type, k);
    float *row = malloc(k * sizeof *row);
    uint8_t *data = malloc(row_bytes * m);
    if (!row || !data) {
        free(row);
        free(data);
        fprintf(stderr, "tiny_model: no memory for %s\n", name);
        return -1;
    }
    for (uint32_t r = 0; r < m; r++) {
        rng_fill(row, k, -scale, scale);
        quantize_row(type, row, data + r * row_bytes, k);
    }
    gw_tensor(w, name, type, 2, (const int64_t[]){k, m}, data);
    free(row);
    free(data);
    return 0;
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
    if (!strcmp(s->arch, "gpt2")) {
        gw_kv_f32(w, KEY("attention.layer_norm_epsilon"), 1e-5f);
    } else {
        gw_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
        gw_kv_f32(w, KEY("rope.freq_base"), s->rope_freq_base);
        if (s->sliding_window) gw_kv_u32(w, KEY("attention.sliding_window"), s->sliding_window);
        if (s->swa_pattern) gw_kv_u32(w, KEY("attention.sliding_window_pattern"), s->swa_pattern);
        gw_kv_u32(w, KEY("rope.dimension_count"), s->n_embd / s->n_head);
        if (s->rope_scaling) {
            gw_kv_str(w, KEY("rope.scaling.type"), s->rope_scaling);
            gw_kv_f32(w, KEY("rope.scaling.factor"), 2.0f);
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
    bool qwen3 = !strcmp(s->arch, "qwen3"), phi3 = !strcmp(s->arch, "phi3");
    bool gemma3 = !strcmp(s->arch, "gemma3");
    uint32_t E = s->n_embd, F = s->n_ff, hd = s->n_embd / s->n_head;
    uint32_t q_dim = s->n_head * hd, kv_dim = s->n_head_kv * hd;
    float in_scale = 1.0f / sqrtf((float)E), ff_scale = 1.0f / sqrtf((float)F);
    char name[96];
    int rc = 0;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    rc |= add_vector(w, s, NAME("attn_norm.weight"), E, 1.0f, 0.2f);
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
        if (qwen2) {
            rc |= add_vector(w, s, NAME("attn_q.bias"), q_dim, 0.0f, 0.1f);
            rc |= add_vector(w, s, NAME("attn_k.bias"), kv_dim, 0.0f, 0.1f);
            rc |= add_vector(w, s, NAME("attn_v.bias"), kv_dim, 0.0f, 0.1f);
        }
        if (qwen3 || gemma3) {
            rc |= add_vector(w, s, NAME("attn_q_norm.weight"), hd, 1.0f, 0.2f);
            rc |= add_vector(w, s, NAME("attn_k_norm.weight"), hd, 1.0f, 0.2f);
        }
    }
    rc |= add_matrix(w, s, NAME("attn_output.weight"), q_dim, E, in_scale);
    if (gpt2) rc |= add_vector(w, s, NAME("attn_output.bias"), E, 0.0f, 0.1f);
    if (gemma3) rc |= add_vector(w, s, NAME("post_attention_norm.weight"), E, 1.0f, 0.2f);
    rc |= add_vector(w, s, NAME("ffn_norm.weight"), E, 1.0f, 0.2f);
    if (gpt2)
        rc |= add_vector(w, s, NAME("ffn_norm.bias"), E, 0.0f, 0.1f);
    else if (!phi3)
        rc |= add_matrix(w, s, NAME("ffn_gate.weight"), E, F, in_scale);
    rc |=
        add_matrix(w, s, NAME("ffn_up.weight"), E, phi3 ? 2 * F : F, in_scale); /* phi3: gate; up */
    if (gpt2) rc |= add_vector(w, s, NAME("ffn_up.bias"), F, 0.0f, 0.1f);
    rc |= add_matrix(w, s, NAME("ffn_down.weight"), F, E, ff_scale);
    if (gpt2) rc |= add_vector(w, s, NAME("ffn_down.bias"), E, 0.0f, 0.1f);
    if (gemma3) rc |= add_vector(w, s, NAME("post_ffw_norm.weight"), E, 1.0f, 0.2f);
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
