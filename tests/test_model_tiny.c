/* End-to-end tests of the model executor on tiny random models of every architecture and weight
 * type: OpenCL logits match the reference backend at every step (and with f32 activations the
 * greedy choices are identical), batching does not change results, context overflow and broken
 * files are rejected cleanly. (Contexts used from several threads: test_contexts.c.)
 * Exits 77 when there is no OpenCL device (after the reference-only checks have passed). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "weight_types.h"
#include "random.h"
#include "tiny_model.h"
#include "tokenizer.h"

#define N_PROMPT 32
#define N_GEN 32

static bool have_opencl;

static void model_path(char *path, size_t size, const char *tag) {
    snprintf(path, size, "tiny_model_%s_%d.gguf", tag, (int)getpid());
}

/* The OpenCL kernel path load forces (CLINFER_KERNEL_PATH_DEFAULT: the device's). */
static clinfer_kernel_path forced_path = CLINFER_KERNEL_PATH_DEFAULT;

static clinfer_status load(const char *path, clinfer_backend_kind kind, clinfer_model **m) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    p.options.kernel_path = forced_path;
    return clinfer_model_load(path, &p, m);
}

static void make_prompt(int32_t *ids, size_t n) {
    uint32_t n_vocab = tiny_model_n_vocab();
    rng_seed(7);
    for (size_t i = 0; i < n; i++)
        ids[i] = 3 + (int32_t)(rng_next() % (n_vocab - 3));
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* Evaluates the prompt in one call, then N_GEN tokens one by one: its greedy choices, or those
 * of `follow` where given (so that two backends see the same tokens whatever their rounding),
 * recording each step's greedy choice in generated. logits_out gets every step's logits:
 * [(1 + N_GEN) * n_vocab], the prompt's first. */
static clinfer_status prompt_and_greedy(clinfer_model *m, const clinfer_context_params *cp,
                                        const int32_t *prompt, const int32_t *follow,
                                        float *logits_out, int32_t *generated) {
    clinfer_context *ctx = NULL;
    const float *logits;
    size_t n_vocab;
    clinfer_status st = clinfer_context_create(m, cp, &ctx);
    if (st == CLINFER_OK) st = clinfer_eval(ctx, prompt, N_PROMPT);
    for (int i = 0; st == CLINFER_OK && i <= N_GEN; i++) {
        st = clinfer_get_logits(ctx, &logits, &n_vocab);
        if (st != CLINFER_OK) break;
        memcpy(logits_out + (size_t)i * n_vocab, logits, n_vocab * sizeof *logits);
        if (i == N_GEN) break;
        generated[i] = argmax(logits, n_vocab);
        st = clinfer_eval(ctx, follow ? &follow[i] : &generated[i], 1);
    }
    clinfer_context_free(ctx);
    return st;
}

/* The worst NMSE of a's logits against b's over the 1 + N_GEN steps; *step gets its step. */
static double worst_nmse(const float *a, const float *b, size_t n_vocab, int *step) {
    double worst = 0;
    for (int i = 0; i <= N_GEN; i++) {
        double e = nmse(a + (size_t)i * n_vocab, b + (size_t)i * n_vocab, n_vocab);
        if (e > worst || e != e) worst = e, *step = i;
    }
    return worst;
}

/* OpenCL against the reference backend for one architecture and weight type, every run on the
 * tokens the reference chooses greedily with f32 activations.
 * - f32 activations: every step's logits within NMSE 1e-4, and OpenCL's own greedy choices are
 *   the reference's.
 * - 8-bit activations: a float difference of an ulp can move a value across a rounding step, and
 *   each flip grows layer by layer, so once one happens the two backends carry different draws of
 *   the rounding noise (see test_smollm2.c). The reference's own f32 run measures that noise's
 *   size, Q (per 32 values it is about 4e-5 on these models; per 256, for the K-quants, twice
 *   that). OpenCL's noise must be of the same size (at most 1.5 Q: the worst of 33 steps of one
 *   draw against another measured up to 1.25 Q), and the backends may differ by no more than two
 *   independent draws would: the sum of both noises. 1e-8 covers sum orders where nothing is
 *   rounded (F32, F16 weights: about 1e-11). */
static void test_backends_agree(const char *arch, clinfer_dtype type) {
    char path[128], tag[64];
    snprintf(tag, sizeof tag, "%s_%s%s", arch, dtype_name(type),
             forced_path == CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE ? "_gpu-local-reduce" : "");
    model_path(path, sizeof path, tag);
    tiny_model_spec spec;
    tiny_model_default(&spec, arch, type);
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);

    uint32_t n_vocab = tiny_model_n_vocab();
    size_t n_logits = (size_t)(1 + N_GEN) * n_vocab;
    int32_t prompt[N_PROMPT], gen_ref[N_GEN], gen_cl[N_GEN], gen_other[N_GEN];
    /* Reference and OpenCL, each with f32 then 8-bit activations. */
    float *ref_f32 = calloc(n_logits, sizeof(float)), *ref_q8 = calloc(n_logits, sizeof(float));
    float *cl_f32 = calloc(n_logits, sizeof(float)), *cl_q8 = calloc(n_logits, sizeof(float));
    make_prompt(prompt, N_PROMPT);
    clinfer_model *ref = NULL, *cl = NULL;
    clinfer_context_params f32, q8;
    clinfer_context_params_default(&f32);
    f32.activations = CLINFER_ACT_F32;
    q8 = f32;
    q8.activations = CLINFER_ACT_Q8;

    EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &ref));
    if (ref) {
        EXPECT_OK(prompt_and_greedy(ref, &f32, prompt, NULL, ref_f32, gen_ref));
        EXPECT_OK(prompt_and_greedy(ref, &q8, prompt, gen_ref, ref_q8, gen_other));
    }
    if (have_opencl && ref) EXPECT_OK(load(path, CLINFER_BACKEND_OPENCL, &cl));
    if (cl) {
        EXPECT_OK(prompt_and_greedy(cl, &f32, prompt, gen_ref, cl_f32, gen_cl));
        EXPECT_OK(prompt_and_greedy(cl, &q8, prompt, gen_ref, cl_q8, gen_other));
        int step = 0, first_diff = -1;
        double e = worst_nmse(cl_f32, ref_f32, n_vocab, &step);
        EXPECT(e < 1e-4, "%s, f32 activations: OpenCL vs reference logits NMSE %.3g at step %d",
               tag, e, step);
        for (int i = 0; i < N_GEN && first_diff < 0; i++)
            if (gen_cl[i] != gen_ref[i]) first_diff = i;
        EXPECT(first_diff < 0, "%s: greedy tokens differ from token %d (%d vs %d)", tag, first_diff,
               first_diff >= 0 ? gen_cl[first_diff] : 0, first_diff >= 0 ? gen_ref[first_diff] : 0);

        double q_ref = worst_nmse(ref_q8, ref_f32, n_vocab, &step);
        double q_cl = worst_nmse(cl_q8, ref_f32, n_vocab, &step);
        double across = worst_nmse(cl_q8, ref_q8, n_vocab, &step);
        /* A mixture of experts' routing is a step function of its input: 8-bit rounding on one
         * side only may move a token to another expert there, so its 8-bit runs are compared op
         * by op instead (tests/test_verify.c), where each op starts from the same state. */
        bool moe = spec.n_expert > 0;
        EXPECT(moe || q_cl <= 1.5 * q_ref + 1e-8,
               "%s: 8-bit activations move OpenCL's logits by NMSE %.3g, the reference's by %.3g",
               tag, q_cl, q_ref);
        EXPECT(moe || across <= q_ref + q_cl + 1e-8,
               "%s, 8-bit activations: OpenCL vs reference logits NMSE %.3g at step %d, more than "
               "their rounding noises together (%.3g + %.3g)",
               tag, across, step, q_ref, q_cl);
        printf("%s: f32 activations NMSE at most %.3g, %d greedy tokens identical; 8-bit: "
               "rounding %.3g (reference) %.3g (OpenCL), across %.3g\n",
               tag, e, first_diff < 0 ? N_GEN : first_diff, q_ref, q_cl, across);
    }
    clinfer_model_free(cl);
    clinfer_model_free(ref);
    free(ref_f32);
    free(ref_q8);
    free(cl_f32);
    free(cl_q8);
    remove(path);
}

/* The logits after N_PROMPT tokens evaluated with the given batch size and call pattern. */
static clinfer_status logits_after(clinfer_model *m, uint32_t n_batch, bool one_by_one, bool kv_f32,
                                   const int32_t *prompt, float *out) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_batch = n_batch;
    cp.kv_f32 = kv_f32;
    clinfer_context *ctx = NULL;
    const float *logits;
    size_t n_vocab;
    clinfer_status st = clinfer_context_create(m, &cp, &ctx);
    for (size_t i = 0; st == CLINFER_OK && i < N_PROMPT; i += one_by_one ? 1 : N_PROMPT)
        st = clinfer_eval(ctx, prompt + i, one_by_one ? 1 : N_PROMPT);
    if (st == CLINFER_OK) st = clinfer_get_logits(ctx, &logits, &n_vocab);
    if (st == CLINFER_OK) memcpy(out, logits, n_vocab * sizeof *out);
    clinfer_context_free(ctx);
    return st;
}

/* One batch, chunks of 5 and token by token give the same logits on the given backend; an f32
 * KV cache stays close to the f16 one. */
static void test_batching(const char *arch, clinfer_backend_kind kind) {
    char path[128], tag[64];
    snprintf(tag, sizeof tag, "batch_%s_%d", arch, (int)kind);
    model_path(path, sizeof path, tag);
    tiny_model_spec spec;
    tiny_model_default(&spec, arch, CLINFER_DT_Q8_0);
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    uint32_t n_vocab = tiny_model_n_vocab();
    float *whole = calloc(n_vocab, sizeof(float)), *other = calloc(n_vocab, sizeof(float));
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    clinfer_model *m = NULL;
    EXPECT_OK(load(path, kind, &m));
    if (m) {
        EXPECT_OK(logits_after(m, 0, false, false, prompt, whole));
        EXPECT_OK(logits_after(m, 5, false, false, prompt, other));
        double e = nmse(other, whole, n_vocab);
        EXPECT(e < 1e-8, "%s: chunks of 5 vs one batch NMSE %.3g", tag, e);
        EXPECT_OK(logits_after(m, 0, true, false, prompt, other));
        e = nmse(other, whole, n_vocab);
        EXPECT(e < 1e-8, "%s: token by token vs one batch NMSE %.3g", tag, e);
        EXPECT_OK(logits_after(m, 0, false, true, prompt, other));
        e = nmse(other, whole, n_vocab);
        EXPECT(e < 1e-4, "%s: f32 vs f16 KV cache NMSE %.3g", tag, e);
    }
    clinfer_model_free(m);
    free(whole);
    free(other);
    remove(path);
}

static void test_context_full(clinfer_model *m) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 16;
    clinfer_context *ctx = NULL;
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    if (!ctx) return;
    EXPECT(clinfer_context_n_ctx(ctx) == 16, "n_ctx %u", clinfer_context_n_ctx(ctx));
    EXPECT(clinfer_eval(ctx, prompt, 17) == CLINFER_ERR_CONTEXT_FULL, "17 tokens in 16");
    EXPECT(clinfer_context_n_past(ctx) == 0, "n_past %u after a rejected eval",
           clinfer_context_n_past(ctx));
    EXPECT_OK(clinfer_eval(ctx, prompt, 10));
    EXPECT(clinfer_eval(ctx, prompt, 7) == CLINFER_ERR_CONTEXT_FULL, "10 + 7 tokens in 16");
    EXPECT_OK(clinfer_eval(ctx, prompt, 6));
    EXPECT(clinfer_context_n_past(ctx) == 16, "n_past %u", clinfer_context_n_past(ctx));
    EXPECT(clinfer_eval(ctx, prompt, 1) == CLINFER_ERR_CONTEXT_FULL, "a token in a full context");
    EXPECT(clinfer_generate(ctx, prompt, 1, 1, NULL, NULL, NULL, NULL) == CLINFER_ERR_CONTEXT_FULL,
           "generate in a full context");
    int32_t bad = (int32_t)tiny_model_n_vocab();
    clinfer_context_reset(ctx);
    EXPECT(clinfer_context_n_past(ctx) == 0, "n_past %u after reset", clinfer_context_n_past(ctx));
    EXPECT(clinfer_generate(ctx, prompt, 0, 1, NULL, NULL, NULL, NULL) ==
                   CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "nothing to continue"),
           "generate with no prompt on an empty context: %s", clinfer_last_error());
    EXPECT(clinfer_eval(ctx, &bad, 1) == CLINFER_ERR_INVALID_ARGUMENT, "token id %d", bad);
    clinfer_context_free(ctx);
}

typedef struct {
    char text[4096];
    size_t len;
    bool split_char; /* a callback received part of a UTF-8 character */
} collected;

static bool collect(const char *text, size_t len, void *user) {
    collected *c = user;
    /* A valid lead byte last means the rest of its character was held back too late. */
    unsigned char last = len ? (unsigned char)text[len - 1] : 0;
    if (last >= 0xC2 && last <= 0xF4) c->split_char = true;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    return true;
}

/* clinfer_generate streams exactly the pieces of the greedy tokens an eval loop picks. */
static void test_generate(clinfer_model *m) {
    int32_t prompt[8];
    make_prompt(prompt, 8);
    clinfer_context *a = NULL, *b = NULL;
    EXPECT_OK(clinfer_context_create(m, NULL, &a));
    EXPECT_OK(clinfer_context_create(m, NULL, &b));
    if (!a || !b) goto done;
    collected got = {0};
    clinfer_generate_stats stats;
    EXPECT_OK(clinfer_generate(a, prompt, 8, N_GEN, NULL, collect, &got, &stats));
    EXPECT(!got.split_char, "a callback received an incomplete character");
    EXPECT(stats.n_prompt == 8, "n_prompt %zu", stats.n_prompt);
    EXPECT(clinfer_context_n_past(a) == 8 + stats.n_generated, "n_past %u, generated %zu",
           clinfer_context_n_past(a), stats.n_generated);

    char expect[4096];
    size_t len = 0, n = 0;
    const float *logits;
    size_t n_vocab;
    EXPECT_OK(clinfer_eval(b, prompt, 8));
    for (; n < N_GEN && clinfer_get_logits(b, &logits, &n_vocab) == CLINFER_OK; n++) {
        int32_t t = argmax(logits, n_vocab);
        if (clinfer_token_is_eog(m, t)) break;
        size_t piece = 0;
        EXPECT_OK(clinfer_token_to_piece(m, t, expect + len, sizeof expect - len, &piece));
        len += piece;
        EXPECT_OK(clinfer_eval(b, &t, 1));
    }
    EXPECT(n == stats.n_generated, "generate made %zu tokens, the eval loop %zu", stats.n_generated,
           n);
    /* An unfinished character at the very end is streamed as U+FFFD instead. */
    size_t whole = clinfer_utf8_complete(expect, len);
    EXPECT(got.len >= whole && !memcmp(got.text, expect, whole) && (whole < len || got.len == len),
           "streamed %zu bytes differ from the %zu bytes of the pieces", got.len, len);
done:
    clinfer_context_free(a);
    clinfer_context_free(b);
}

/* The tiny vocabulary tokenizes its words whole and the pieces give the text back. */
static void test_tokens(clinfer_model *m) {
    int32_t ids[16];
    size_t n = 0;
    char text[64];
    size_t len = 0;
    EXPECT_OK(clinfer_tokenize(m, "hello world", 11, true, false, ids, 16, &n));
    EXPECT(n == 3 && ids[0] == clinfer_token_bos(m), "%zu ids, first %d", n, n ? ids[0] : -1);
    for (size_t i = 1; i < n && i < 16; i++) {
        size_t piece = 0;
        EXPECT_OK(clinfer_token_to_piece(m, ids[i], text + len, sizeof text - len, &piece));
        len += piece;
    }
    EXPECT(len == 12 && !memcmp(text, " hello world", 12), "pieces give '%.*s'", (int)len, text);
    EXPECT(clinfer_token_is_eog(m, clinfer_token_eos(m)), "EOS %d ends generation",
           clinfer_token_eos(m));
    /* A SentencePiece vocabulary without add_bos_token starts prompts with BOS. */
    EXPECT(clinfer_token_add_bos(m) && !clinfer_token_add_bos(NULL), "add_bos %d",
           clinfer_token_add_bos(m));
}

/* A broken file is rejected with a status and a message naming what is wrong. */
static void expect_rejected(const tiny_model_spec *spec, clinfer_status want, const char *needle) {
    char path[128];
    model_path(path, sizeof path, "broken");
    EXPECT(tiny_model_write(spec, path) == 0, "writing %s", path);
    clinfer_model *m = NULL;
    clinfer_status st = load(path, CLINFER_BACKEND_REFERENCE, &m);
    EXPECT(st == want && !m, "loading %s gave %s, expected %s", needle, clinfer_status_str(st),
           clinfer_status_str(want));
    EXPECT(strstr(clinfer_last_error(), needle), "message '%s' does not name '%s'",
           clinfer_last_error(), needle);
    clinfer_model_free(m);
    remove(path);
}

static void test_rejections(void) {
    tiny_model_spec s;
    tiny_model_default(&s, "llama", CLINFER_DT_F16);
    s.omit_tensor = "blk.1.ffn_up.weight";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "blk.1.ffn_up.weight");
    tiny_model_default(&s, "llama", CLINFER_DT_Q4_0);
    s.misshape_tensor = "blk.0.attn_k.weight";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "blk.0.attn_k.weight");
    tiny_model_default(&s, "gpt2", CLINFER_DT_F32);
    s.misshape_tensor = "output_norm.bias";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "output_norm.bias");
    tiny_model_default(&s, "qwen2", CLINFER_DT_F32);
    s.omit_tensor = "blk.0.attn_v.bias";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "blk.0.attn_v.bias");
    tiny_model_default(&s, "llama", CLINFER_DT_F32);
    s.n_head = 3;
    s.n_head_kv = 3;
    expect_rejected(&s, CLINFER_ERR_FORMAT, "head_count");
    tiny_model_default(&s, "mamba", CLINFER_DT_F32);
    expect_rejected(&s, CLINFER_ERR_UNSUPPORTED, "mamba");
    tiny_model_default(&s, "llama", CLINFER_DT_F32);
    s.rope_scaling = "dynamic";
    expect_rejected(&s, CLINFER_ERR_UNSUPPORTED, "rope.scaling.type 'dynamic' is not supported");
    tiny_model_default(&s, "llama3", CLINFER_DT_F32);
    s.misshape_tensor = "rope_freqs.weight";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "'rope_freqs.weight' has shape [9, 1, 1, 1]");
    tiny_model_default(&s, "gemma3", CLINFER_DT_F32);
    s.omit_tensor = "blk.2.post_ffw_norm.weight";
    expect_rejected(&s, CLINFER_ERR_FORMAT, "blk.2.post_ffw_norm.weight");
}

/* Llama 3's rotation: its rope_freqs tensor and its rope.scaling keys alone give the same
 * logits (the loader computes the tensor's factors from the keys), which differ from the plain
 * rotation's; a file with both loads where they agree. */
static void test_llama3_rope(void) {
    static const int kinds[] = {0, TINY_ROPE_FREQS, TINY_ROPE_LLAMA3_KEYS,
                                TINY_ROPE_FREQS | TINY_ROPE_LLAMA3_KEYS};
    static const char *const infos[] = {"none", "per-pair factors (rope_freqs)", "llama3 x8",
                                        "llama3 x8 (rope_freqs)"};
    char path[128];
    uint32_t n_vocab = tiny_model_n_vocab();
    float *logits[4];
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    for (int i = 0; i < 4; i++) {
        logits[i] = calloc(n_vocab, sizeof(float));
        tiny_model_spec s;
        tiny_model_default(&s, "llama3", CLINFER_DT_F32);
        s.llama3_rope = kinds[i];
        model_path(path, sizeof path, "llama3_rope");
        EXPECT(tiny_model_write(&s, path) == 0, "writing %s", path);
        clinfer_model *m = NULL;
        EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
        clinfer_model_info mi;
        if (m && clinfer_model_get_info(m, &mi) == CLINFER_OK)
            EXPECT(!strcmp(mi.rope_scaling, infos[i]), "llama3 rope kind %d: scaling '%s'",
                   kinds[i], mi.rope_scaling);
        if (m) EXPECT_OK(logits_after(m, 0, false, false, prompt, logits[i]));
        clinfer_model_free(m);
        remove(path);
    }
    double e = nmse(logits[1], logits[0], n_vocab);
    EXPECT(e > 1e-6, "rope_freqs did not change the logits (NMSE %.3g)", e);
    for (int i = 2; i < 4; i++) {
        e = nmse(logits[i], logits[1], n_vocab);
        EXPECT(e < 1e-10, "llama3 rope kind %d: logits differ from rope_freqs' by NMSE %.3g",
               kinds[i], e);
    }
    for (int i = 0; i < 4; i++)
        free(logits[i]);
}

/* The logits after N_PROMPT tokens on the reference backend, in a context of n_ctx positions;
 * the model info's rope_scaling must be info. */
static void reference_logits(const tiny_model_spec *s, uint32_t n_ctx, const char *info,
                             float *out) {
    char path[128];
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    model_path(path, sizeof path, "rope_variant");
    EXPECT(tiny_model_write(s, path) == 0, "writing %s", path);
    clinfer_model *m = NULL;
    EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
    clinfer_model_info mi;
    if (m && clinfer_model_get_info(m, &mi) == CLINFER_OK)
        EXPECT(!strcmp(mi.rope_scaling, info), "rope scaling '%s', expected '%s'", mi.rope_scaling,
               info);
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = n_ctx;
    clinfer_context *ctx = NULL;
    const float *logits;
    size_t n_vocab;
    if (m) EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    if (ctx) EXPECT_OK(clinfer_eval(ctx, prompt, N_PROMPT));
    if (ctx && clinfer_get_logits(ctx, &logits, &n_vocab) == CLINFER_OK)
        memcpy(out, logits, n_vocab * sizeof *out);
    clinfer_context_free(ctx);
    clinfer_model_free(m);
    remove(path);
}

/* YaRN changes the logits; longrope's short table (all 1 here, no magnitude) serves contexts of
 * up to original_context_length positions, the same logits as no longrope, and its long table
 * longer ones. */
static void test_yarn_longrope(void) {
    uint32_t n_vocab = tiny_model_n_vocab();
    float *a = calloc(n_vocab, sizeof(float)), *b = calloc(n_vocab, sizeof(float));
    tiny_model_spec s;
    tiny_model_default(&s, "qwen2", CLINFER_DT_F32);
    reference_logits(&s, 0, "none", a);
    tiny_model_default(&s, "yarn", CLINFER_DT_F32);
    reference_logits(&s, 0, "yarn x2 of 32, magnitude 1.06931", b);
    double e = nmse(b, a, n_vocab);
    EXPECT(e > 1e-6, "yarn did not change the logits (NMSE %.3g)", e);
    tiny_model_default(&s, "phi3", CLINFER_DT_F32);
    reference_logits(&s, 64, "none", a);
    tiny_model_default(&s, "phi3-longrope", CLINFER_DT_F32);
    s.longrope_attn = 0.0f;
    reference_logits(&s, 64, "longrope of 64", b);
    EXPECT(!memcmp(a, b, n_vocab * sizeof *a),
           "longrope's short table of ones, n_ctx 64: logits not those without longrope");
    reference_logits(&s, 65, "longrope of 64", b);
    e = nmse(b, a, n_vocab);
    EXPECT(e > 1e-6, "longrope, n_ctx 65: the long table did not change the logits (NMSE %.3g)", e);
    /* with the type named, a factor scales every angle too, as in llama.cpp */
    s.rope_scaling = "longrope";
    reference_logits(&s, 65, "longrope x2 of 64", a);
    e = nmse(a, b, n_vocab);
    EXPECT(e > 1e-6, "longrope's rope.scaling.factor 2 did not change the logits (NMSE %.3g)", e);
    free(a);
    free(b);
}

/* Linear rope scaling loads and changes what positions mean, hence the logits. */
static void test_rope_scaling(void) {
    char path[128];
    uint32_t n_vocab = tiny_model_n_vocab();
    float *plain = calloc(n_vocab, sizeof(float)), *scaled = calloc(n_vocab, sizeof(float));
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    for (int i = 0; i < 2; i++) {
        tiny_model_spec s;
        tiny_model_default(&s, "llama", CLINFER_DT_F32);
        s.rope_scaling = i ? "linear" : NULL;
        model_path(path, sizeof path, "rope");
        EXPECT(tiny_model_write(&s, path) == 0, "writing %s", path);
        clinfer_model *m = NULL;
        EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
        if (m) EXPECT_OK(logits_after(m, 0, false, false, prompt, i ? scaled : plain));
        clinfer_model_free(m);
        remove(path);
    }
    double e = nmse(scaled, plain, n_vocab);
    EXPECT(e > 1e-6, "linear rope scaling did not change the logits (NMSE %.3g)", e);
    free(plain);
    free(scaled);
}

/* A sliding window (gemma3's local layers, mistral's every layer) changes the logits once the
 * prompt is longer than it, and one of the prompt's length or more changes nothing: token i sees
 * positions i - window + 1 .. i. (No window at all is another model for gemma3: its local
 * layers then rotate with the global rope base, as in llama.cpp.) */
static void test_sliding_window(const char *arch) {
    char path[128];
    uint32_t n_vocab = tiny_model_n_vocab();
    const uint32_t windows[] = {N_PROMPT + 50, 4, N_PROMPT, N_PROMPT - 1, 0, 4};
    float *logits[6];
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    for (int i = 0; i < 6; i++) {
        logits[i] = calloc(n_vocab, sizeof(float));
        tiny_model_spec s;
        tiny_model_default(&s, arch, CLINFER_DT_F32);
        s.sliding_window = windows[i];
        if (i == 5) s.swa_pattern = 1; /* every layer global (gemma3) */
        model_path(path, sizeof path, "window");
        EXPECT(tiny_model_write(&s, path) == 0, "writing %s", path);
        clinfer_model *m = NULL;
        EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
        if (m) EXPECT_OK(logits_after(m, 0, false, false, prompt, logits[i]));
        clinfer_model_free(m);
        remove(path);
    }
    double e = nmse(logits[1], logits[0], n_vocab);
    EXPECT(e > 1e-6, "%s: a window of 4 did not change the logits (NMSE %.3g)", arch, e);
    EXPECT(!memcmp(logits[2], logits[0], n_vocab * sizeof(float)),
           "%s: a window of the prompt's length changed the logits", arch);
    e = nmse(logits[3], logits[0], n_vocab);
    EXPECT(e > 0, "%s: a window one short of the prompt did not change the logits", arch);
    if (strcmp(arch, "mistral"))
        EXPECT(!memcmp(logits[5], logits[4], n_vocab * sizeof(float)),
               "%s: sliding_window_pattern 1 is not the model without a window", arch);
    for (int i = 0; i < 6; i++)
        free(logits[i]);
}

/* The logits of arch's tiny model on the reference backend after the prompt, with its spec's
 * soft-caps and scales changed by set (index i). */
static void logits_of(const char *arch, void (*set)(tiny_model_spec *, int), int i, float *out) {
    char path[128];
    int32_t prompt[N_PROMPT];
    make_prompt(prompt, N_PROMPT);
    tiny_model_spec s;
    tiny_model_default(&s, arch, CLINFER_DT_F32);
    set(&s, i);
    model_path(path, sizeof path, "logits");
    EXPECT(tiny_model_write(&s, path) == 0, "writing %s", path);
    clinfer_model *m = NULL;
    EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
    if (m) EXPECT_OK(logits_after(m, 0, false, false, prompt, out));
    clinfer_model_free(m);
    remove(path);
}

static void final_cap(tiny_model_spec *s, int i) {
    s->final_softcap = i ? 5.0f : 1e30f; /* 1e30: never reached */
}

static void attn_cap(tiny_model_spec *s, int i) {
    s->attn_softcap = i ? 0.5f : 1e30f;
}

static void logit_scale(tiny_model_spec *s, int i) {
    s->granite_scales[0] = i ? 2.0f : 1.0f;
}

/* gemma2's final soft-cap and granite's logit scale are what the files say: the capped logits
 * are 5 tanh(x / 5) of those a cap too large to reach gives, and logit scale 2 halves those of
 * scale 1; and gemma2's attention soft-cap changes the logits. */
static void test_logit_transforms(void) {
    uint32_t n_vocab = tiny_model_n_vocab();
    float *a = calloc(n_vocab, sizeof(float)), *b = calloc(n_vocab, sizeof(float));
    float *want = calloc(n_vocab, sizeof(float));
    logits_of("gemma2", final_cap, 0, a);
    logits_of("gemma2", final_cap, 1, b);
    float top = 0.0f;
    for (uint32_t i = 0; i < n_vocab; i++) {
        want[i] = 5.0f * tanhf(a[i] / 5.0f);
        top = fmaxf(top, fabsf(a[i]));
    }
    EXPECT(top > 5.0f, "gemma2: the uncapped logits stay below the cap (at most %g)", top);
    double e = nmse(b, want, n_vocab);
    EXPECT(e < 1e-10, "gemma2: capped logits NMSE %.3g from 5 tanh(x / 5)", e);
    logits_of("gemma2", attn_cap, 0, a);
    logits_of("gemma2", attn_cap, 1, b);
    e = nmse(b, a, n_vocab);
    EXPECT(e > 1e-6, "gemma2: an attention soft-cap of 0.5 did not change the logits (NMSE %.3g)",
           e);
    logits_of("granite", logit_scale, 0, a);
    logits_of("granite", logit_scale, 1, b);
    for (uint32_t i = 0; i < n_vocab; i++)
        want[i] = a[i] * 0.5f;
    e = nmse(b, want, n_vocab);
    EXPECT(e < 1e-12, "granite: logit_scale 2 is NMSE %.3g from half the logits of scale 1", e);
    free(a);
    free(b);
    free(want);
}

int main(void) {
    size_t n_devices = 0;
    have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    if (!have_opencl)
        printf("no OpenCL device: reference-only checks (%s)\n", clinfer_last_error());

    test_rejections();
    test_rope_scaling();
    test_llama3_rope();
    test_yarn_longrope();
    test_sliding_window("gemma3");
    test_sliding_window("mistral");
    test_sliding_window("gemma2");
    test_sliding_window("olmo2");
    test_logit_transforms();
    char path[128];
    model_path(path, sizeof path, "llama_api");
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_F32);
    spec.tied = false;
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    clinfer_model *m = NULL;
    EXPECT_OK(load(path, CLINFER_BACKEND_REFERENCE, &m));
    if (m) {
        test_tokens(m);
        test_context_full(m);
        test_generate(m);
    }
    clinfer_model_free(m);
    remove(path);

    static const char *const archs[] = {
        "llama",  "qwen2",   "qwen3",   "phi3",  "gemma3",   "mistral", "gpt2",    "llama3",
        "gemma2", "smollm3", "granite", "olmo2", "qwen3moe", "olmoe",   "mixtral", "gpt-oss"};
    clinfer_dtype types[CLINFER_DT_ID_LIMIT];
    size_t n_types = weight_types(types);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        test_batching(archs[a], CLINFER_BACKEND_REFERENCE);
        if (have_opencl) test_batching(archs[a], CLINFER_BACKEND_OPENCL);
        for (size_t t = 0; t < n_types; t++)
            test_backends_agree(archs[a], types[t]);
    }
    /* The rope variants on both kernel paths: Llama 3's on the GPU path's kernels too (its own
     * rope and attention launches), YaRN and longrope (their tables and magnitudes) on both */
    static const clinfer_dtype few[] = {CLINFER_DT_F32, CLINFER_DT_Q8_0, CLINFER_DT_Q4_K};
    static const char *const variants[] = {"gemma2", "smollm3", "granite",       "olmo2",
                                           "llama3", "yarn",    "phi3-longrope", "qwen3moe",
                                           "olmoe",  "mixtral", "gpt-oss"};
    for (int gpu = 0; gpu < 2; gpu++) {
        forced_path = gpu ? CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE : CLINFER_KERNEL_PATH_DEFAULT;
        /* the default path runs the architectures in the loop above */
        for (size_t v = gpu ? 0 : 5; have_opencl && v < sizeof variants / sizeof *variants; v++)
            for (size_t t = 0; t < sizeof few / sizeof *few; t++)
                test_backends_agree(variants[v], few[t]);
    }
    forced_path = CLINFER_KERNEL_PATH_DEFAULT;
    int rc = finish("test_model_tiny");
    return rc == 0 && !have_opencl ? 77 : rc;
}
