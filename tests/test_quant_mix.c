/* The type each tensor gets (src/quant_mix.c), on synthetic files of zeros built in memory: the
 * layers llama-quantize's "more bits" rule picks over 32 layers, the LM head, tied embeddings,
 * fused QKV, tensors never quantized, the row-length fallbacks, the 70B and 8-expert rules, and
 * the K mixes' attn_v / ffn_down / attn_output rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_writer.h"
#include "quantize.h"

#define MAX_TENSORS 512

typedef struct {
    gguf_writer *w;
    uint8_t *buf;
    gguf_file *f;
    quant_choice choices[MAX_TENSORS];
} model;

static gguf_writer *new_model(const char *arch, uint32_t n_layer) {
    gguf_writer *w = gw_new();
    char key[64];
    gw_kv_str(w, "general.architecture", arch);
    snprintf(key, sizeof key, "%s.block_count", arch);
    gw_kv_u32(w, key, n_layer);
    return w;
}

static void matrix(gguf_writer *w, const char *name, int64_t k, int64_t rows) {
    gw_tensor(w, name, CLINFER_DT_F32, 2, (const int64_t[]){k, rows}, NULL);
}

static void layer_matrix(gguf_writer *w, uint32_t il, const char *suffix, int64_t k) {
    char name[64];
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);
    matrix(w, name, k, 2);
}

/* Opens what w holds and chooses its types for ft (w is freed). */
static bool choose(model *m, gguf_writer *w, clinfer_file_type ft) {
    size_t len = 0;
    memset(m, 0, sizeof *m);
    if (gw_to_memory(w, &m->buf, &len) != 0 || gguf_open_memory(m->buf, len, &m->f) != CLINFER_OK) {
        EXPECT(0, "building the model: %s", clinfer_last_error());
        gw_free(w);
        return false;
    }
    gw_free(w);
    EXPECT(gguf_tensor_count(m->f) <= MAX_TENSORS, "too many tensors");
    clinfer_status st = quant_mix_choose(m->f, ft, m->choices);
    EXPECT(st == CLINFER_OK, "quant_mix_choose: %s", clinfer_last_error());
    return st == CLINFER_OK;
}

static void done(model *m) {
    gguf_close(m->f);
    free(m->buf);
}

static quant_choice choice_of(const model *m, const char *name) {
    for (size_t i = 0; i < gguf_tensor_count(m->f); i++)
        if (gguf_str_eq(gguf_tensor_at(m->f, i)->name, name)) return m->choices[i];
    EXPECT(0, "no tensor %s", name);
    return (quant_choice){CLINFER_DT_F32, false};
}

#define EXPECT_TYPE(m, name, want)                                                                 \
    do {                                                                                           \
        quant_choice c_ = choice_of(m, name);                                                      \
        EXPECT(c_.type == (want), "%s: %s, want %s", name, dtype_name(c_.type), dtype_name(want)); \
    } while (0)

static const char *const llama_mats[] = {"attn_q.weight",      "attn_k.weight",   "attn_v.weight",
                                         "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                         "ffn_down.weight"};
#define N_LLAMA_MATS (sizeof llama_mats / sizeof llama_mats[0])

/* A 32-layer llama of 256-wide matrices, with n_head query and n_head_kv KV heads. */
static gguf_writer *llama_32(uint32_t n_head, uint32_t n_head_kv) {
    gguf_writer *w = new_model("llama", 32);
    gw_kv_u32(w, "llama.attention.head_count", n_head);
    gw_kv_u32(w, "llama.attention.head_count_kv", n_head_kv);
    matrix(w, "token_embd.weight", 256, 4);
    for (uint32_t il = 0; il < 32; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.attn_norm.weight", il);
        gw_tensor(w, name, CLINFER_DT_F32, 1, (const int64_t[]){256}, NULL);
        for (size_t j = 0; j < N_LLAMA_MATS; j++)
            layer_matrix(w, il, llama_mats[j], 256);
    }
    matrix(w, "output.weight", 256, 4);
    return w;
}

/* llama-quantize's "more bits" layers of 32: the first and last 4 and every third from 6. */
static bool more_bits_32(uint32_t il) {
    return il < 4 || il >= 28 || (il >= 6 && (il - 6) % 3 == 0);
}

/* A 32-layer llama in Q4_K_M: attn_v and ffn_down get Q6_K in the "more bits" layers; everything
 * else Q4_K but the LM head (Q6_K) and the norms (F32). */
static void test_llama_32_layers(void) {
    model m;
    if (!choose(&m, llama_32(8, 8), CLINFER_FTYPE_Q4_K_M)) return;
    for (uint32_t il = 0; il < 32; il++) {
        for (size_t j = 0; j < N_LLAMA_MATS; j++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", il, llama_mats[j]);
            bool sensitive = !strcmp(llama_mats[j], "attn_v.weight") ||
                             !strcmp(llama_mats[j], "ffn_down.weight");
            EXPECT_TYPE(&m, name,
                        more_bits_32(il) && sensitive ? CLINFER_DT_Q6_K : CLINFER_DT_Q4_K);
        }
        char norm[64];
        snprintf(norm, sizeof norm, "blk.%u.attn_norm.weight", il);
        EXPECT_TYPE(&m, norm, CLINFER_DT_F32);
    }
    EXPECT_TYPE(&m, "token_embd.weight", CLINFER_DT_Q4_K);
    EXPECT_TYPE(&m, "output.weight", CLINFER_DT_Q6_K);
    done(&m);
}

/* The other K mixes over the same 32 layers (llama.cpp's rules for a llama that is no 70B and
 * no MoE), per tensor: attn_v in the first two layers, in the other "more bits" layers and in
 * the rest; ffn_down in the first two (32 / 16), the "more bits" ones and the rest; attn_output;
 * every other matrix (token_embd included). Q2_K's attn_v depends on grouped heads: Q4_K from 4
 * query heads per KV head (9 / 3 is 3). */
static void test_k_mixes(void) {
    enum { V01, V_MORE, V_REST, D01, D_MORE, D_REST, OUT, OTHER, N_PLACES };
    static const struct {
        clinfer_file_type ft;
        uint32_t n_head;
        clinfer_dtype want[N_PLACES];
    } cases[] = {
#define Q(t) CLINFER_DT_##t
        {CLINFER_FTYPE_Q2_K,
         9,
         {Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q2_K)}},
        {CLINFER_FTYPE_Q2_K,
         12,
         {Q(Q4_K), Q(Q4_K), Q(Q4_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q2_K)}},
        {CLINFER_FTYPE_Q3_K_S,
         9,
         {Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K), Q(Q3_K)}},
        {CLINFER_FTYPE_Q3_K_M,
         9,
         {Q(Q5_K), Q(Q4_K), Q(Q4_K), Q(Q5_K), Q(Q4_K), Q(Q4_K), Q(Q4_K), Q(Q3_K)}},
        {CLINFER_FTYPE_Q5_K_S,
         9,
         {Q(Q5_K), Q(Q5_K), Q(Q5_K), Q(Q5_K), Q(Q5_K), Q(Q5_K), Q(Q5_K), Q(Q5_K)}},
        {CLINFER_FTYPE_Q5_K_M,
         9,
         {Q(Q6_K), Q(Q6_K), Q(Q5_K), Q(Q6_K), Q(Q6_K), Q(Q5_K), Q(Q5_K), Q(Q5_K)}},
#undef Q
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const clinfer_dtype *want = cases[i].want;
        const char *ft = clinfer_file_type_name(cases[i].ft);
        model m;
        if (!choose(&m, llama_32(cases[i].n_head, 3), cases[i].ft)) continue;
        for (uint32_t il = 0; il < 32; il++)
            for (size_t j = 0; j < N_LLAMA_MATS; j++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%u.%s", il, llama_mats[j]);
                int place = il < 2 ? 0 : more_bits_32(il) ? 1 : 2;
                clinfer_dtype t = !strcmp(llama_mats[j], "attn_v.weight")        ? want[V01 + place]
                                  : !strcmp(llama_mats[j], "ffn_down.weight")    ? want[D01 + place]
                                  : !strcmp(llama_mats[j], "attn_output.weight") ? want[OUT]
                                                                                 : want[OTHER];
                quant_choice c = choice_of(&m, name);
                EXPECT(c.type == t, "%s %s: %s, want %s", ft, name, dtype_name(c.type),
                       dtype_name(t));
            }
        EXPECT_TYPE(&m, "token_embd.weight", want[OTHER]);
        EXPECT_TYPE(&m, "output.weight", CLINFER_DT_Q6_K);
        done(&m);
    }
}

/* The LM head per file type; tied, token_embd is the head. */
static void test_lm_head(void) {
    static const struct {
        clinfer_file_type ft;
        clinfer_dtype body, head;
    } cases[] = {
        {CLINFER_FTYPE_Q4_0, CLINFER_DT_Q4_0, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q4_1, CLINFER_DT_Q4_1, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q5_0, CLINFER_DT_Q5_0, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q5_1, CLINFER_DT_Q5_1, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q8_0, CLINFER_DT_Q8_0, CLINFER_DT_Q8_0},
        {CLINFER_FTYPE_Q6_K, CLINFER_DT_Q6_K, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q2_K, CLINFER_DT_Q2_K, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q3_K_M, CLINFER_DT_Q3_K, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_Q5_K_M, CLINFER_DT_Q5_K, CLINFER_DT_Q6_K},
        {CLINFER_FTYPE_F16, CLINFER_DT_F16, CLINFER_DT_F16},
        {CLINFER_FTYPE_F32, CLINFER_DT_F32, CLINFER_DT_F32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int tied = 0; tied < 2; tied++) {
            gguf_writer *w = new_model("llama", 1);
            matrix(w, "token_embd.weight", 256, 4);
            layer_matrix(w, 0, "attn_q.weight", 256);
            if (!tied) matrix(w, "output.weight", 256, 4);
            model m;
            if (!choose(&m, w, cases[i].ft)) continue;
            EXPECT_TYPE(&m, "blk.0.attn_q.weight", cases[i].body);
            EXPECT_TYPE(&m, "token_embd.weight", tied ? cases[i].head : cases[i].body);
            if (!tied) EXPECT_TYPE(&m, "output.weight", cases[i].head);
            done(&m);
        }
}

/* Rows that do not fit the mix's block: Q4_K falls back to Q5_0, Q6_K to Q8_0, Q2_K and Q3_K to
 * Q4_0 and Q5_K to Q5_1, as in llama.cpp, rows that fit no 32-block to F16; the flag says so. A
 * tied head of 320 (Q6_K in this mix) is Q8_0. */
static void test_fallback(void) {
    gguf_writer *w = new_model("llama", 1);
    matrix(w, "token_embd.weight", 320, 4);
    layer_matrix(w, 0, "attn_q.weight", 320);
    layer_matrix(w, 0, "ffn_down.weight", 512);
    layer_matrix(w, 0, "attn_k.weight", 100);
    model m;
    if (choose(&m, w, CLINFER_FTYPE_Q4_K_M)) {
        EXPECT_TYPE(&m, "token_embd.weight", CLINFER_DT_Q8_0);
        EXPECT_TYPE(&m, "blk.0.attn_q.weight", CLINFER_DT_Q5_0);
        EXPECT_TYPE(&m, "blk.0.ffn_down.weight", CLINFER_DT_Q6_K); /* one layer: more bits */
        EXPECT_TYPE(&m, "blk.0.attn_k.weight", CLINFER_DT_F16);
        EXPECT(choice_of(&m, "blk.0.attn_q.weight").fallback &&
                   choice_of(&m, "blk.0.attn_k.weight").fallback &&
                   !choice_of(&m, "blk.0.ffn_down.weight").fallback,
               "fallback flags");
        done(&m);
    }
    static const struct {
        clinfer_file_type ft;
        clinfer_dtype q, down; /* attn_q and ffn_down of 320 */
    } k_cases[] = {{CLINFER_FTYPE_Q2_K, CLINFER_DT_Q4_0, CLINFER_DT_Q4_0},
                   {CLINFER_FTYPE_Q3_K_M, CLINFER_DT_Q4_0, CLINFER_DT_Q5_0},
                   {CLINFER_FTYPE_Q5_K_M, CLINFER_DT_Q5_1, CLINFER_DT_Q8_0}};
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        w = new_model("llama", 1);
        layer_matrix(w, 0, "attn_q.weight", 320);
        layer_matrix(w, 0, "ffn_down.weight", 320);
        if (!choose(&m, w, k_cases[i].ft)) continue;
        EXPECT_TYPE(&m, "blk.0.attn_q.weight", k_cases[i].q);
        EXPECT_TYPE(&m, "blk.0.ffn_down.weight", k_cases[i].down);
        done(&m);
    }
    w = new_model("llama", 1);
    layer_matrix(w, 0, "attn_k.weight", 100);
    layer_matrix(w, 0, "attn_q.weight", 320);
    if (choose(&m, w, CLINFER_FTYPE_Q4_0)) {
        EXPECT_TYPE(&m, "blk.0.attn_k.weight", CLINFER_DT_F16);
        EXPECT_TYPE(&m, "blk.0.attn_q.weight", CLINFER_DT_Q4_0);
        done(&m);
    }
}

/* Tensors llama.cpp never quantizes keep their type, whatever it is; fused QKV counts as attn_v
 * (GPT-2: the last of two layers gets Q6_K). */
static void test_kept_and_fused(void) {
    gguf_writer *w = new_model("gpt2", 2);
    matrix(w, "token_embd.weight", 256, 4);
    matrix(w, "position_embd.weight", 256, 4);
    layer_matrix(w, 0, "attn_qkv.weight", 256);
    layer_matrix(w, 1, "attn_qkv.weight", 256);
    layer_matrix(w, 0, "ffn_gate_inp.weight", 256);
    layer_matrix(w, 0, "attn_norm.weight", 256); /* a 2-D norm */
    layer_matrix(w, 0, "attn_q.bias", 256);      /* not a weight */
    gw_tensor(w, "blk.0.attn_k.weight", CLINFER_DT_F16, 2, (const int64_t[]){256, 1}, NULL);
    gw_tensor(w, "blk.0.attn_q.weight", CLINFER_DT_Q8_0, 2, (const int64_t[]){256, 2}, NULL);
    model m;
    if (!choose(&m, w, CLINFER_FTYPE_Q4_K_M)) return;
    EXPECT_TYPE(&m, "position_embd.weight", CLINFER_DT_F32);
    EXPECT_TYPE(&m, "blk.0.attn_qkv.weight", CLINFER_DT_Q4_K);
    EXPECT_TYPE(&m, "blk.1.attn_qkv.weight", CLINFER_DT_Q6_K);
    EXPECT_TYPE(&m, "blk.0.ffn_gate_inp.weight", CLINFER_DT_F32);
    EXPECT_TYPE(&m, "blk.0.attn_norm.weight", CLINFER_DT_F32);
    EXPECT_TYPE(&m, "blk.0.attn_q.bias", CLINFER_DT_F32);
    EXPECT_TYPE(&m, "blk.0.attn_k.weight", CLINFER_DT_F16);  /* [256, 1] is one-dimensional */
    EXPECT_TYPE(&m, "blk.0.attn_q.weight", CLINFER_DT_Q4_K); /* requantized (if allowed) */
    EXPECT_TYPE(&m, "token_embd.weight", CLINFER_DT_Q6_K);   /* tied */
    done(&m);
}

/* A llama of 80 layers with grouped KV heads is a 70B to llama.cpp: every attn_v gets at least
 * Q5_K. Eight experts: attn_v and attn_k Q8_0, attn_output Q5_K. */
static void test_70b_and_experts(void) {
    gguf_writer *w = new_model("llama", 80);
    gw_kv_u32(w, "llama.attention.head_count", 64);
    gw_kv_u32(w, "llama.attention.head_count_kv", 8);
    for (uint32_t il = 0; il < 80; il++)
        layer_matrix(w, il, "attn_v.weight", 256);
    layer_matrix(w, 0, "attn_q.weight", 256);
    model m;
    if (choose(&m, w, CLINFER_FTYPE_Q4_K_M)) {
        EXPECT_TYPE(&m, "blk.40.attn_v.weight", CLINFER_DT_Q5_K); /* not a "more bits" layer */
        EXPECT_TYPE(&m, "blk.0.attn_q.weight", CLINFER_DT_Q4_K);
        done(&m);
    }
    w = new_model("llama", 2);
    gw_kv_u32(w, "llama.expert_count", 8);
    layer_matrix(w, 0, "attn_v.weight", 256);
    layer_matrix(w, 0, "attn_k.weight", 256);
    layer_matrix(w, 0, "attn_output.weight", 256);
    gw_tensor(w, "blk.0.ffn_down_exps.weight", CLINFER_DT_F32, 3, (const int64_t[]){256, 2, 8},
              NULL);
    gw_tensor(w, "blk.1.ffn_down_exps.weight", CLINFER_DT_F32, 3, (const int64_t[]){256, 2, 8},
              NULL);
    if (choose(&m, w, CLINFER_FTYPE_Q4_K_M)) {
        EXPECT_TYPE(&m, "blk.0.attn_v.weight", CLINFER_DT_Q8_0);
        EXPECT_TYPE(&m, "blk.0.attn_k.weight", CLINFER_DT_Q8_0);
        EXPECT_TYPE(&m, "blk.0.attn_output.weight", CLINFER_DT_Q5_K);
        EXPECT_TYPE(&m, "blk.0.ffn_down_exps.weight", CLINFER_DT_Q4_K);
        EXPECT_TYPE(&m, "blk.1.ffn_down_exps.weight", CLINFER_DT_Q6_K);
        done(&m);
    }
}

/* File type names, llama-quantize's alias, and what is not a model or not a file type. */
static void test_names_and_errors(void) {
    clinfer_file_type ft = CLINFER_FTYPE_F32;
    EXPECT_OK(clinfer_file_type_from_name("q4_k_m", &ft));
    EXPECT(ft == CLINFER_FTYPE_Q4_K_M && ft == 15, "q4_k_m is %d", (int)ft);
    EXPECT_OK(clinfer_file_type_from_name("Q4_K", &ft));
    EXPECT(ft == CLINFER_FTYPE_Q4_K_M, "Q4_K is %d", (int)ft);
    EXPECT_OK(clinfer_file_type_from_name("q3_k", &ft));
    EXPECT(ft == CLINFER_FTYPE_Q3_K_M && ft == 12, "Q3_K is %d", (int)ft);
    EXPECT_OK(clinfer_file_type_from_name("Q5_K", &ft));
    EXPECT(ft == CLINFER_FTYPE_Q5_K_M && ft == 17, "Q5_K is %d", (int)ft);
    EXPECT_OK(clinfer_file_type_from_name("Q2_K", &ft));
    EXPECT(ft == CLINFER_FTYPE_Q2_K && ft == 10, "Q2_K is %d", (int)ft);
    EXPECT(clinfer_file_type_from_name("Q3_K_L", &ft) == CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "Q4_K_M"),
           "Q3_K_L: %s", clinfer_last_error());
    EXPECT(!strcmp(clinfer_file_type_name(CLINFER_FTYPE_Q6_K), "Q6_K") &&
               clinfer_file_type_name((clinfer_file_type)5) == NULL,
           "names");

    model m;
    gguf_writer *w = new_model("llama", 1);
    layer_matrix(w, 0, "attn_q.weight", 256);
    size_t len;
    uint8_t *buf = NULL;
    gguf_file *f = NULL;
    EXPECT(gw_to_memory(w, &buf, &len) == 0, "serialising");
    EXPECT_OK(gguf_open_memory(buf, len, &f));
    EXPECT(f &&
               quant_mix_choose(f, (clinfer_file_type)5, m.choices) == CLINFER_ERR_INVALID_ARGUMENT,
           "file type 5 (Q4_2, retired) accepted");
    gguf_close(f);
    free(buf);
    gw_free(w);

    w = gw_new();
    matrix(w, "attn_q.weight", 256, 2);
    f = NULL;
    EXPECT(gw_to_memory(w, &buf, &len) == 0, "serialising");
    EXPECT_OK(gguf_open_memory(buf, len, &f));
    EXPECT(f && quant_mix_choose(f, CLINFER_FTYPE_Q8_0, m.choices) == CLINFER_ERR_FORMAT &&
               strstr(clinfer_last_error(), "general.architecture"),
           "a file without an architecture: %s", clinfer_last_error());
    gguf_close(f);
    free(buf);
    gw_free(w);
}

int main(void) {
    test_llama_32_layers();
    test_k_mixes();
    test_lm_head();
    test_fallback();
    test_kept_and_fused();
    test_70b_and_experts();
    test_names_and_errors();
    return finish("test_quant_mix");
}
