/* Hostile input at the model level, on the reference backend: tiny models whose metadata lies
 * (hyperparameters contradicting tensor shapes, absurd layer or head counts, special token ids
 * out of range, scores shorter than the vocabulary; Llama 3, YaRN and longrope rotations whose
 * factor tensors and rope.scaling keys contradict each other or are broken; gemma2 soft-caps and
 * granite scales that are missing, negative, 0 or not finite; gpt-oss files without their
 * window or sinks, or with a gating not theirs) are rejected with a
 * message naming the field; prompts that are empty, longer than the context, invalid UTF-8 or hold
 * NUL bytes go through tokenize, eval and generate with a clear error or correctly.
 *
 * test_hostile_model DIR also writes every bad model into DIR (for the CLI check). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "half.h"
#include "tiny_model.h"

/* One metadata change: the u32 key gets value, or the array key keeps its first arr_n
 * elements. */
typedef struct {
    const char *name;
    const char *key;
    uint32_t value;
    uint64_t arr_n;
    const char *expect; /* the message must contain this */
} bad_model;

static const bad_model cases[] = {
    {"embd-contradicts-shapes", "llama.embedding_length", 96, 0, "'token_embd.weight' has shape"},
    {"ff-contradicts-shapes", "llama.feed_forward_length", 100, 0, "'blk.0.ffn_gate.weight'"},
    {"layers-beyond-tensors", "llama.block_count", 3, 0, "'blk.2.attn_norm.weight' is missing"},
    {"layers-absurd", "llama.block_count", 100000, 0, "llama.block_count = 100000"},
    {"layers-zero", "llama.block_count", 0, 0, "llama.block_count = 0"},
    {"heads-absurd", "llama.attention.head_count", 1u << 20, 0,
     "llama.attention.head_count = 1048576"},
    {"heads-zero", "llama.attention.head_count", 0, 0, "llama.attention.head_count = 0"},
    {"kv-heads-above-heads", "llama.attention.head_count_kv", 8, 0,
     "llama.attention.head_count_kv = 8"},
    {"kv-heads-not-divisor", "llama.attention.head_count_kv", 3, 0, "head_count_kv 3"},
    {"embd-absurd", "llama.embedding_length", 0xFFFFFFFFu, 0,
     "llama.embedding_length = 4294967295"},
    {"context-zero", "llama.context_length", 0, 0, "llama.context_length = 0"},
    {"rope-dims-odd", "llama.rope.dimension_count", 15, 0, "llama.rope.dimension_count 15"},
    {"bos-out-of-range", "tokenizer.ggml.bos_token_id", 5000, 0,
     "tokenizer.ggml.bos_token_id = 5000"},
    /* The tiny vocabulary has 321 tokens: 321 is one past the last id. */
    {"eos-out-of-range", "tokenizer.ggml.eos_token_id", 321, 0,
     "tokenizer.ggml.eos_token_id = 321 is not a token id"},
    {"eos-not-int32", "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu, 0, "tokenizer.ggml.eos_token_id"},
    {"unk-out-of-range", "tokenizer.ggml.unknown_token_id", 100000, 0,
     "tokenizer.ggml.unknown_token_id"},
    {"scores-shorter-than-vocab", "tokenizer.ggml.scores", 0, 100,
     "'tokenizer.ggml.scores' has 100 elements"},
    {"token-types-shorter-than-vocab", "tokenizer.ggml.token_type", 0, 7, "token_type"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* A tiny model with a rope variant whose rotation contradicts itself, or of an architecture whose
 * own parameters are broken: one key's value changed (u32 or f32, as the key is; an absent key
 * added as f32) or left out, or a factor tensor changed or left out. Bases: Llama 3
 * (rope_freqs.weight and the llama3 rope.scaling keys), YaRN, phi3 longrope, gemma2 (its
 * soft-caps), granite (its scales), olmo2, the mixtures of experts qwen3moe, mixtral and
 * gpt-oss. */
typedef enum { FREQS_AS_IS, FREQS_ZERO_FIRST, FREQS_BF16, FREQS_DROP } freqs_change;
typedef enum {
    BASE_LLAMA3,
    BASE_YARN,
    BASE_LONGROPE,
    BASE_GEMMA2,
    BASE_GRANITE,
    BASE_OLMO2,
    BASE_QWEN3MOE,
    BASE_MIXTRAL,
    BASE_GPTOSS,
    N_BASES
} rope_base;

typedef struct {
    const char *name;
    rope_base base;
    const char *key; /* NULL: none */
    double value;
    bool drop;
    freqs_change freqs; /* of tensor */
    const char *tensor;
    const char *expect;
} bad_rope;

#define FREQS "rope_freqs.weight"

static const bad_rope rope_cases[] = {
    {"rope-freqs-vs-dims", BASE_LLAMA3, "llama.rope.dimension_count", 8, false, FREQS_AS_IS, NULL,
     "rope.dimension_count 8 implies [4]"},
    {"rope-llama3-no-high-freq", BASE_LLAMA3, "llama.rope.scaling.high_freq_factor", 0, true,
     FREQS_AS_IS, NULL, "llama3 needs llama.rope.scaling.high_freq_factor, which is missing"},
    {"rope-llama3-no-factor", BASE_LLAMA3, "llama.rope.scaling.factor", 0, true, FREQS_AS_IS, NULL,
     "llama3 needs llama.rope.scaling.factor"},
    {"rope-llama3-vs-freqs", BASE_LLAMA3, "llama.rope.scaling.factor", 4, false, FREQS_AS_IS, NULL,
     "but llama.rope.scaling (llama3, factor 4"},
    {"rope-llama3-low-above-high", BASE_LLAMA3, "llama.rope.scaling.low_freq_factor", 5, false,
     FREQS_AS_IS, NULL, "low_freq_factor 5 and high_freq_factor 4"},
    {"rope-llama3-context-zero", BASE_LLAMA3, "llama.rope.scaling.original_context_length", 0,
     false, FREQS_AS_IS, NULL, "original_context_length is 0"},
    {"rope-freqs-zero", BASE_LLAMA3, NULL, 0, false, FREQS_ZERO_FIRST, FREQS,
     "'rope_freqs.weight' element 0 is 0"},
    {"rope-freqs-bf16", BASE_LLAMA3, NULL, 0, false, FREQS_BF16, FREQS,
     "'rope_freqs.weight' is BF16, not F32 or F16"},
    {"rope-yarn-no-factor", BASE_YARN, "qwen2.rope.scaling.factor", 0, true, FREQS_AS_IS, NULL,
     "yarn needs qwen2.rope.scaling.factor"},
    {"rope-yarn-betas-crossed", BASE_YARN, "qwen2.rope.scaling.yarn_beta_slow", 64, false,
     FREQS_AS_IS, NULL, "yarn_beta_fast 32 must exceed yarn_beta_slow 64"},
    {"rope-attn-factor-zero", BASE_YARN, "qwen2.rope.scaling.attn_factor", 0, false, FREQS_AS_IS,
     NULL, "qwen2.rope.scaling.attn_factor 0 is not positive"},
    {"rope-longrope-no-short", BASE_LONGROPE, NULL, 0, false, FREQS_DROP,
     "rope_factors_short.weight", "'rope_factors_short.weight' is missing"},
    {"rope-longrope-long-zero", BASE_LONGROPE, NULL, 0, false, FREQS_ZERO_FIRST,
     "rope_factors_long.weight", "'rope_factors_long.weight' element 0 is 0"},
    {"rope-longrope-vs-dims", BASE_LONGROPE, "phi3.rope.dimension_count", 8, false, FREQS_AS_IS,
     NULL, "'rope_factors_short.weight' has shape [8, 1, 1, 1]"},
    {"gemma2-attn-softcap-negative", BASE_GEMMA2, "gemma2.attn_logit_softcapping", -1, false,
     FREQS_AS_IS, NULL, "gemma2.attn_logit_softcapping -1: a soft-cap must be positive and finite"},
    {"gemma2-final-softcap-nan", BASE_GEMMA2, "gemma2.final_logit_softcapping", NAN, false,
     FREQS_AS_IS, NULL, "nan: a soft-cap must be positive and finite"},
    {"gemma2-attn-softcap-zero", BASE_GEMMA2, "gemma2.attn_logit_softcapping", 0, false,
     FREQS_AS_IS, NULL, "gemma2.attn_logit_softcapping 0: a soft-cap must be positive"},
    {"gemma2-rope-base-swa-zero", BASE_GEMMA2, "gemma2.rope.freq_base_swa", 0, false, FREQS_AS_IS,
     NULL, "gemma2.rope.freq_base_swa 0 is not positive"},
    {"granite-no-logit-scale", BASE_GRANITE, "granite.logit_scale", 0, true, FREQS_AS_IS, NULL,
     "granite.logit_scale is missing"},
    {"granite-logit-scale-zero", BASE_GRANITE, "granite.logit_scale", 0, false, FREQS_AS_IS, NULL,
     "granite.logit_scale 0 must be positive and finite"},
    {"granite-residual-scale-inf", BASE_GRANITE, "granite.residual_scale", INFINITY, false,
     FREQS_AS_IS, NULL, "granite.residual_scale inf must be positive (or 0: none) and finite"},
    {"granite-embedding-scale-negative", BASE_GRANITE, "granite.embedding_scale", -4, false,
     FREQS_AS_IS, NULL, "granite.embedding_scale -4 must be positive"},
    {"granite-attention-scale-nan", BASE_GRANITE, "granite.attention.scale", NAN, false,
     FREQS_AS_IS, NULL, "granite.attention.scale nan must be positive"},
    {"olmo2-rope-base-swa-negative", BASE_OLMO2, "olmo2.rope.freq_base_swa", -1, false, FREQS_AS_IS,
     NULL, "olmo2.rope.freq_base_swa -1 is not positive"},
    {"moe-count-vs-tensors", BASE_QWEN3MOE, "qwen3moe.expert_count", 16, false, FREQS_AS_IS, NULL,
     "expert_count 16: model: tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 8, 1, 1]"},
    {"moe-count-missing", BASE_QWEN3MOE, "qwen3moe.expert_count", 0, true, FREQS_AS_IS, NULL,
     "qwen3moe needs qwen3moe.expert_count > 0"},
    {"moe-used-above-count", BASE_QWEN3MOE, "qwen3moe.expert_used_count", 9, false, FREQS_AS_IS,
     NULL, "qwen3moe.expert_used_count 9 with expert_count 8"},
    {"moe-ff-vs-tensors", BASE_QWEN3MOE, "qwen3moe.expert_feed_forward_length", 64, false,
     FREQS_AS_IS, NULL,
     "'blk.0.ffn_gate_exps.weight' has shape [64, 128, 8, 1], the hyperparameters imply [64, 64, "
     "8] (expert_count 8, expert_feed_forward_length 64)"},
    {"moe-gating-sigmoid", BASE_QWEN3MOE, "qwen3moe.expert_gating_func", 2, false, FREQS_AS_IS,
     NULL, "qwen3moe.expert_gating_func 2 (sigmoid) contradicts qwen3moe's softmax gating"},
    {"moe-mixtral-no-used", BASE_MIXTRAL, "llama.expert_used_count", 0, true, FREQS_AS_IS, NULL,
     "llama.expert_used_count 0 with expert_count 8"},
    {"moe-mixtral-count-vs-tensors", BASE_MIXTRAL, "llama.expert_count", 4, false, FREQS_AS_IS,
     NULL, "expert_count 4: model: tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 8, 1, 1]"},
    {"gptoss-gating-softmax", BASE_GPTOSS, "gpt-oss.expert_gating_func", 1, false, FREQS_AS_IS,
     NULL,
     "gpt-oss.expert_gating_func 1 (softmax) contradicts gpt-oss's softmax of the chosen gating "
     "(3)"},
    {"gptoss-no-window", BASE_GPTOSS, "gpt-oss.attention.sliding_window", 0, true, FREQS_AS_IS,
     NULL, "gpt-oss.attention.sliding_window is missing or 0"},
    {"gptoss-window-zero", BASE_GPTOSS, "gpt-oss.attention.sliding_window", 0, false, FREQS_AS_IS,
     NULL, "gpt-oss.attention.sliding_window is missing or 0"},
    {"gptoss-no-sinks", BASE_GPTOSS, NULL, 0, false, FREQS_DROP, "blk.1.attn_sinks.weight",
     "'blk.1.attn_sinks.weight' is missing"},
};
#define N_ROPE_CASES (sizeof rope_cases / sizeof rope_cases[0])

static char good_path[64], base_paths[N_BASES][64];

/* Copies one kv of the source file, with the case's change when it names this key. */
static void copy_kv(gguf_writer *w, const gguf_file *f, const gguf_kv *kv, const bad_model *c) {
    char key[256], *text = NULL;
    snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
    bool hit = c && !strcmp(key, c->key);
    if (kv->type == GGUF_TYPE_STRING) {
        gguf_str s = {"", 0};
        gguf_get_str(f, key, &s);
        text = malloc(s.len + 1);
        if (text) {
            memcpy(text, s.ptr, s.len);
            text[s.len] = '\0';
            gw_kv_str(w, key, text);
        }
    } else if (kv->type != GGUF_TYPE_ARRAY) {
        uint64_t v = 0;
        memcpy(&v, kv->data, gguf_type_size(kv->type));
        if (hit) v = c->value;
        gw_kv_scalar(w, key, kv->type, &v);
    } else {
        uint64_t n = hit && c->arr_n < kv->arr_n ? c->arr_n : kv->arr_n;
        if (kv->arr_type == GGUF_TYPE_STRING) {
            const char **strs = calloc(n ? n : 1, sizeof *strs);
            char *pool = NULL;
            size_t pool_len = 0;
            for (uint64_t i = 0; i < n; i++)
                pool_len += gguf_arr_str(kv, i).len + 1;
            pool = malloc(pool_len ? pool_len : 1);
            for (uint64_t i = 0, at = 0; strs && pool && i < n; i++) {
                gguf_str s = gguf_arr_str(kv, i);
                memcpy(pool + at, s.ptr, s.len);
                pool[at + s.len] = '\0';
                strs[i] = pool + at;
                at += s.len + 1;
            }
            if (strs && pool) gw_kv_arr_str(w, key, strs, n);
            free(strs);
            free(pool);
        } else {
            size_t bytes = n * gguf_type_size(kv->arr_type);
            void *values = malloc(bytes ? bytes : 1);
            if (values) {
                memcpy(values, kv->data, bytes);
                gw_kv_arr(w, key, kv->arr_type, values, n);
            }
            free(values);
        }
    }
    free(text);
}

/* Writes the valid tiny model with the case's metadata change to path; 0 on success. */
static int write_case(const bad_model *c, const char *path) {
    gguf_file *f = NULL;
    if (gguf_open(good_path, &f) != CLINFER_OK) return -1;
    gguf_writer *w = gw_new();
    int rc = -1;
    if (!w) goto done;
    bool found = false;
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        found |= gguf_str_eq(kv->key, c->key);
        copy_kv(w, f, kv, c);
    }
    if (!found) {
        fprintf(stderr, "case %s: the tiny model has no key %s\n", c->name, c->key);
        goto done;
    }
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        gw_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
    }
    rc = gw_write_file(w, path);
done:
    gw_free(w);
    gguf_close(f);
    return rc;
}

/* Writes the Llama 3 tiny model with the rope case's change to path; 0 on success. */
static int write_rope_case(const bad_rope *c, const char *path) {
    gguf_file *f = NULL;
    if (gguf_open(base_paths[c->base], &f) != CLINFER_OK) return -1;
    gguf_writer *w = gw_new();
    int rc = -1;
    if (!w) goto done;
    bool found = false;
    for (size_t i = 0; i < gguf_kv_count(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        bool hit = c->key && gguf_str_eq(kv->key, c->key);
        found |= hit;
        if (!hit) {
            copy_kv(w, f, kv, NULL);
        } else if (!c->drop && kv->type == GGUF_TYPE_FLOAT32) {
            gw_kv_f32(w, c->key, (float)c->value);
        } else if (!c->drop) {
            gw_kv_u32(w, c->key, (uint32_t)c->value);
        }
    }
    if (c->key && !found && !c->drop) gw_kv_f32(w, c->key, (float)c->value); /* an added key */
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (!c->tensor || strcmp(name, c->tensor)) {
            gw_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
            continue;
        }
        if (c->freqs == FREQS_DROP) continue;
        float v[64];
        uint16_t half[64];
        size_t n = (size_t)t->ne[0];
        memcpy(v, t->data, n * sizeof *v);
        if (c->freqs == FREQS_ZERO_FIRST) v[0] = 0.0f;
        for (size_t j = 0; j < n; j++)
            half[j] = f32_to_bf16(v[j]);
        if (c->freqs == FREQS_ZERO_FIRST)
            gw_tensor(w, name, CLINFER_DT_F32, 1, t->ne, v);
        else
            gw_tensor(w, name, CLINFER_DT_BF16, 1, t->ne, half);
    }
    rc = gw_write_file(w, path);
done:
    gw_free(w);
    gguf_close(f);
    return rc;
}

static clinfer_status load_ref(const char *path, clinfer_model **m) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = CLINFER_BACKEND_REFERENCE;
    return clinfer_model_load(path, &p, m);
}

static void test_bad_models(const char *dump_dir) {
    for (size_t i = 0; i < N_CASES; i++) {
        const bad_model *c = &cases[i];
        char path[4096];
        if (dump_dir)
            snprintf(path, sizeof path, "%s/model-%02zu-%s.gguf", dump_dir, i, c->name);
        else
            snprintf(path, sizeof path, "hostile_%d_%s.gguf", (int)getpid(), c->name);
        if (write_case(c, path) != 0) {
            EXPECT(0, "case %s: cannot write %s", c->name, path);
            continue;
        }
        clinfer_model *m = NULL;
        clinfer_status st = load_ref(path, &m);
        EXPECT(st == CLINFER_ERR_FORMAT && !m, "case %s: status %s (%s)", c->name,
               clinfer_status_str(st), clinfer_last_error());
        EXPECT(strstr(clinfer_last_error(), c->expect), "case %s: message \"%s\" lacks \"%s\"",
               c->name, clinfer_last_error(), c->expect);
        clinfer_model_free(m);
        if (!dump_dir) remove(path);
    }
    for (size_t i = 0; i < N_ROPE_CASES; i++) {
        const bad_rope *c = &rope_cases[i];
        char path[4096];
        if (dump_dir)
            snprintf(path, sizeof path, "%s/model-%02zu-%s.gguf", dump_dir, N_CASES + i, c->name);
        else
            snprintf(path, sizeof path, "hostile_%d_%s.gguf", (int)getpid(), c->name);
        if (write_rope_case(c, path) != 0) {
            EXPECT(0, "case %s: cannot write %s", c->name, path);
            continue;
        }
        clinfer_model *m = NULL;
        clinfer_status st = load_ref(path, &m);
        EXPECT(st == CLINFER_ERR_FORMAT && !m, "case %s: status %s (%s)", c->name,
               clinfer_status_str(st), clinfer_last_error());
        EXPECT(strstr(clinfer_last_error(), c->expect), "case %s: message \"%s\" lacks \"%s\"",
               c->name, clinfer_last_error(), c->expect);
        clinfer_model_free(m);
        if (!dump_dir) remove(path);
    }
}

/* ---- prompts ----------------------------------------------------------------------------- */

/* Tokenizes text of len bytes (no BOS); the pieces must give back " " + text (SentencePiece
 * adds a space in front); then the tokens evaluate and generation goes on from them. */
static void check_prompt(clinfer_model *m, const char *what, const char *text, size_t len) {
    int32_t ids[256];
    size_t n = 0;
    char back[512];
    size_t back_len = 0;
    EXPECT_OK(clinfer_tokenize(m, text, len, false, false, ids, 256, &n));
    EXPECT(n > 0 && n <= 256, "%s: %zu tokens", what, n);
    for (size_t i = 0; i < n && i < 256; i++) {
        size_t piece = 0;
        EXPECT_OK(
            clinfer_token_to_piece(m, ids[i], back + back_len, sizeof back - back_len, &piece));
        back_len += piece;
    }
    EXPECT(back_len == len + 1 && !memcmp(back + 1, text, len), "%s: pieces give %zu bytes", what,
           back_len);
    clinfer_context *ctx = NULL;
    EXPECT_OK(clinfer_context_create(m, NULL, &ctx));
    if (!ctx) return;
    clinfer_generate_stats stats;
    EXPECT_OK(clinfer_generate(ctx, ids, n, 4, NULL, NULL, NULL, &stats));
    EXPECT(clinfer_context_n_past(ctx) == n + stats.n_generated, "%s: n_past %u", what,
           clinfer_context_n_past(ctx));
    clinfer_context_free(ctx);
}

static void test_prompts(clinfer_model *m) {
    int32_t ids[512];
    size_t n = 99;

    /* Empty: no tokens, or just BOS; an empty generate on a fresh context has nothing to
     * continue from and says so; an empty eval is refused. */
    EXPECT_OK(clinfer_tokenize(m, "", 0, false, false, ids, 512, &n));
    EXPECT(n == 0, "empty text gives %zu tokens", n);
    EXPECT_OK(clinfer_tokenize(m, NULL, 0, true, false, ids, 512, &n));
    EXPECT(n == 1 && ids[0] == clinfer_token_bos(m), "empty text with BOS: %zu tokens", n);
    clinfer_context *ctx = NULL;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 32;
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    if (!ctx) return;
    clinfer_status st = clinfer_generate(ctx, ids, 0, 4, NULL, NULL, NULL, NULL);
    EXPECT(
        st == CLINFER_ERR_INVALID_ARGUMENT && strstr(clinfer_last_error(), "nothing to continue"),
        "empty generate on a fresh context: %s (%s)", clinfer_status_str(st), clinfer_last_error());
    st = clinfer_eval(ctx, ids, 0);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT && strstr(clinfer_last_error(), "no tokens"),
           "empty eval: %s (%s)", clinfer_status_str(st), clinfer_last_error());
    /* After a prompt, an empty one continues the sequence. */
    EXPECT_OK(clinfer_generate(ctx, ids, 1, 2, NULL, NULL, NULL, NULL));
    uint32_t past = clinfer_context_n_past(ctx);
    EXPECT_OK(clinfer_generate(ctx, ids, 0, 2, NULL, NULL, NULL, NULL));
    EXPECT(clinfer_context_n_past(ctx) >= past, "n_past %u after %u", clinfer_context_n_past(ctx),
           past);

    /* Longer than the context: refused up front, nothing evaluated, the context still works. */
    char longer[400];
    for (size_t i = 0; i < sizeof longer; i++)
        longer[i] = (char)('a' + i % 26);
    EXPECT_OK(clinfer_tokenize(m, longer, sizeof longer, true, false, ids, 512, &n));
    EXPECT(n > cp.n_ctx, "%zu tokens", n);
    clinfer_context_reset(ctx);
    st = clinfer_generate(ctx, ids, n, 1, NULL, NULL, NULL, NULL);
    EXPECT(st == CLINFER_ERR_CONTEXT_FULL && strstr(clinfer_last_error(), "do not fit"),
           "long prompt: %s (%s)", clinfer_status_str(st), clinfer_last_error());
    EXPECT(clinfer_context_n_past(ctx) == 0, "n_past %u after a refused prompt",
           clinfer_context_n_past(ctx));
    st = clinfer_eval(ctx, ids, n);
    EXPECT(st == CLINFER_ERR_CONTEXT_FULL, "long eval: %s", clinfer_status_str(st));
    EXPECT(clinfer_context_n_past(ctx) == 0, "n_past %u", clinfer_context_n_past(ctx));
    EXPECT_OK(clinfer_generate(ctx, ids, 8, 4, NULL, NULL, NULL, NULL));
    /* Exactly filling the context is fine; one more is not. */
    clinfer_context_reset(ctx);
    EXPECT_OK(clinfer_eval(ctx, ids, cp.n_ctx));
    st = clinfer_eval(ctx, ids, 1);
    EXPECT(st == CLINFER_ERR_CONTEXT_FULL, "a token past a full context: %s",
           clinfer_status_str(st));
    clinfer_context_free(ctx);

    /* A capacity too small says how many are needed. */
    st = clinfer_tokenize(m, longer, sizeof longer, true, false, ids, 4, &n);
    EXPECT(st == CLINFER_ERR_BUFFER_TOO_SMALL && n > 4, "capacity 4: %s, %zu needed",
           clinfer_status_str(st), n);

    static const char invalid[] = "\xff\xfe caf\xc3 \xe2\x82 \xed\xa0\x80 \xc0\xaf end\x80";
    check_prompt(m, "invalid UTF-8", invalid, sizeof invalid - 1);
    static const char nul[] = "hello\0world\0\0the";
    check_prompt(m, "embedded NUL", nul, sizeof nul - 1);
    static const char only_nul[] = "\0";
    check_prompt(m, "a lone NUL", only_nul, 1);
}

int main(int argc, char **argv) {
    const char *dump_dir = argc > 1 ? argv[1] : NULL;
    snprintf(good_path, sizeof good_path, "hostile_%d_good.gguf", (int)getpid());
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    if (tiny_model_write(&spec, good_path) != 0) {
        fprintf(stderr, "cannot write %s\n", good_path);
        return 1;
    }
    clinfer_model *m = NULL;
    EXPECT_OK(load_ref(good_path, &m));
    if (m) test_prompts(m);
    clinfer_model_free(m);
    static const char *const bases[N_BASES] = {"llama3",   "yarn",    "phi3-longrope",
                                               "gemma2",   "granite", "olmo2",
                                               "qwen3moe", "mixtral", "gpt-oss"};
    for (int b = 0; b < N_BASES; b++) {
        snprintf(base_paths[b], sizeof base_paths[b], "hostile_%d_%s.gguf", (int)getpid(),
                 bases[b]);
        tiny_model_default(&spec, bases[b], CLINFER_DT_Q8_0);
        if (b == BASE_LLAMA3) spec.llama3_rope = TINY_ROPE_FREQS | TINY_ROPE_LLAMA3_KEYS;
        if (tiny_model_write(&spec, base_paths[b]) != 0) {
            fprintf(stderr, "cannot write %s\n", base_paths[b]);
            return 1;
        }
        m = NULL;
        EXPECT_OK(load_ref(base_paths[b], &m)); /* the unchanged file loads */
        clinfer_model_free(m);
    }
    test_bad_models(dump_dir);
    remove(good_path);
    for (int b = 0; b < N_BASES; b++)
        remove(base_paths[b]);
    return finish("test_hostile_model");
}
