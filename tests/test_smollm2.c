/* The real default model, SmolLM2-135M-Instruct (tools/fetch_model.sh), on the OpenCL and
 * reference backends:
 *   - f32 activations: a fixed chat prompt's greedy continuation of 32 tokens is the same on
 *     both and reads as English words;
 *   - the default activations (f32 for this 135M model, docs/PERFORMANCE.md) answer the
 *     README's demo question, greedily on OpenCL, with Paris;
 *   - 8-bit activations (llama.cpp's; the default from 1B parameters): each backend's continuation
 * reads as English, the top token after each of a few texts is the same, and the mean NMSE of their
 * logits across backends is at most twice the mean NMSE that rounding to 8 bits causes on the
 * reference (against f32 activations). Identical text is not expected: rounding turns float
 *     differences of an ulp upstream into whole rounding steps, which grow layer by layer (as
 *     between llama.cpp's backends), so the two backends end up with two different draws of the
 *     rounding noise, which differ by up to twice its size, and one text's NMSE swings by 10x
 *     with its length (measured 4e-4 to 9e-3 across backends, 1.5e-4 to 4.5e-2 for the rounding
 *     itself at 4 to 30 tokens): hence the mean over texts. A wrong kernel misses by orders of
 *     magnitude instead.
 * The model comes from CLINFER_MODEL, else the places fetch_model.sh stores it; exit 77 when it
 * is absent or there is no OpenCL device. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"

#define MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
#define N_PREDICT 32
#define N_VOCAB 49152

/* Texts whose logits are compared, each after its last token alone (a decode step) following
 * the rest in one batch (prefill); the first is the chat prompt. */
static const char *const texts[] = {
    NULL,
    "The quick brown fox jumps over the lazy dog.",
    "Water boils at one hundred degrees Celsius at sea level, and at a lower temperature on a "
    "mountain, because the air pressure there is lower.",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
};
#define N_TEXTS (sizeof texts / sizeof texts[0])

static bool find_model(char *path, size_t size) {
    const char *env = getenv("CLINFER_MODEL");
    const char *dirs[] = {getenv("CLINFER_TEST_MODELS"), getenv("XDG_CACHE_HOME"), getenv("HOME")};
    const char *suffix[] = {"", "/clinfer/models", "/.cache/clinfer/models"};
    struct stat sb;
    if (env && *env) {
        snprintf(path, size, "%s", env);
        return stat(path, &sb) == 0;
    }
    for (size_t i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, size, "%s%s/%s", dirs[i], suffix[i], MODEL_FILE);
        if (stat(path, &sb) == 0) return true;
    }
    return false;
}

/* The logits after each text (texts[0]: the chat prompt's tokens) into logits[i]. */
static void text_logits(clinfer_model *m, const clinfer_context_params *cp, const int32_t *prompt,
                        size_t n_prompt, float (*logits)[N_VOCAB]) {
    for (size_t i = 0; i < N_TEXTS; i++) {
        int32_t tokens[256];
        size_t n = n_prompt;
        if (texts[i])
            EXPECT_OK(clinfer_tokenize(m, texts[i], strlen(texts[i]), clinfer_token_add_bos(m),
                                       false, tokens, 256, &n));
        else
            memcpy(tokens, prompt, n * sizeof *tokens);
        clinfer_context *ctx = NULL;
        EXPECT_OK(clinfer_context_create(m, cp, &ctx));
        if (!ctx || n < 2) continue;
        const float *l = NULL;
        size_t n_vocab = 0;
        EXPECT_OK(clinfer_eval(ctx, tokens, n - 1));
        EXPECT_OK(clinfer_eval(ctx, tokens + n - 1, 1));
        EXPECT_OK(clinfer_get_logits(ctx, &l, &n_vocab));
        EXPECT(n_vocab == N_VOCAB, "n_vocab %zu, expected %d", n_vocab, N_VOCAB);
        if (l && n_vocab == N_VOCAB) memcpy(logits[i], l, N_VOCAB * sizeof *l);
        clinfer_context_free(ctx);
    }
}

/* Loads the model on one backend and generates greedily from the chat prompt; logits (optional)
 * receives those after each text. */
static void generate(const char *path, clinfer_backend_kind kind, bool f32_act, text_sink *out,
                     clinfer_generate_stats *stats, float (*logits)[N_VOCAB]) {
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.backend = kind;
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL;
    char *prompt = NULL;
    int32_t tokens[256];
    size_t n = 0;
    clinfer_chat_message msg = {"user", "Why is the sky blue?"};
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 512;
    cp.activations = f32_act ? CLINFER_ACT_F32 : CLINFER_ACT_Q8;

    EXPECT_OK(clinfer_model_load(path, &mp, &m));
    if (!m) return;
    EXPECT_OK(clinfer_chat_apply_template(m, NULL, &msg, 1, true, &prompt));
    if (prompt)
        EXPECT_OK(clinfer_tokenize(m, prompt, strlen(prompt), clinfer_token_add_bos(m), true,
                                   tokens, 256, &n));
    if (n && logits) text_logits(m, &cp, tokens, n, logits);
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    if (ctx && n)
        EXPECT_OK(clinfer_generate(ctx, tokens, n, N_PREDICT, NULL, text_collect, out, stats));
    clinfer_context_free(ctx);
    clinfer_free(prompt);
    clinfer_model_free(m);
}

/* A context past the device's memory is refused up front, saying what would fit. */
static void too_long_context(const char *path) {
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 16000000; /* a 344 GiB KV cache */
    EXPECT_OK(clinfer_model_load(path, NULL, &m));
    if (!m) return;
    EXPECT(clinfer_context_create(m, &cp, &ctx) == CLINFER_ERR_OUT_OF_MEMORY && !ctx &&
               strstr(clinfer_last_error(), "at most would fit"),
           "n_ctx 16M: %s", clinfer_last_error());
    clinfer_model_free(m);
}

/* The README's first demo, greedy, with the context's default activations. */
static void demo_answer(const char *path) {
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL;
    char *prompt = NULL;
    int32_t tokens[256];
    size_t n = 0;
    text_sink answer = {0};
    clinfer_chat_message msg = {"user", "What is the capital of France?"};
    EXPECT_OK(clinfer_model_load(path, NULL, &m));
    if (!m) return;
    EXPECT_OK(clinfer_chat_apply_template(m, NULL, &msg, 1, true, &prompt));
    if (prompt)
        EXPECT_OK(clinfer_tokenize(m, prompt, strlen(prompt), clinfer_token_add_bos(m), true,
                                   tokens, 256, &n));
    EXPECT_OK(clinfer_context_create(m, NULL, &ctx));
    if (ctx && n)
        EXPECT_OK(clinfer_generate(ctx, tokens, n, 16, NULL, text_collect, &answer, NULL));
    printf("demo (default activations %s): %.*s\n",
           clinfer_activations_name(clinfer_context_activations(ctx)), (int)answer.len,
           answer.text);
    EXPECT(strstr(answer.text, "Paris") != NULL, /* zeroed, so terminated */
           "the demo question is not answered with Paris: %.*s", (int)answer.len, answer.text);
    clinfer_context_free(ctx);
    clinfer_free(prompt);
    clinfer_model_free(m);
}

/* Most whitespace-separated words are letters with at most some punctuation around them. */
static bool english_words(const char *text, size_t len, int *n_words) {
    int words = 0, wordlike = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && isspace((unsigned char)text[i]))
            i++;
        size_t start = i, letters = 0, other = 0;
        for (; i < len && !isspace((unsigned char)text[i]); i++) {
            if (isalpha((unsigned char)text[i]))
                letters++;
            else if (!ispunct((unsigned char)text[i]))
                other++;
        }
        if (i == start) break;
        words++;
        wordlike += letters > 0 && other == 0;
    }
    *n_words = words;
    return words >= 5 && wordlike * 10 >= words * 8;
}

int main(void) {
    char path[1024];
    size_t n_devices = 0;
    if (!find_model(path, sizeof path)) {
        printf("skipped: %s not found (run tools/fetch_model.sh or set CLINFER_MODEL)\n",
               MODEL_FILE);
        return 77;
    }
    if (clinfer_device_count(&n_devices) != CLINFER_OK || n_devices == 0) {
        printf("skipped: no OpenCL device (%s)\n", clinfer_last_error());
        return 77;
    }
    static float logits[3][N_TEXTS][N_VOCAB]; /* reference f32, reference q8, OpenCL q8 */
    for (int f32_act = 1; f32_act >= 0; f32_act--) {
        const char *mode = f32_act ? "f32 activations" : "8-bit activations";
        text_sink ref = {0}, cl = {0};
        clinfer_generate_stats ref_stats = {0}, cl_stats = {0};
        generate(path, CLINFER_BACKEND_REFERENCE, f32_act, &ref, &ref_stats,
                 logits[f32_act ? 0 : 1]);
        generate(path, CLINFER_BACKEND_OPENCL, f32_act, &cl, &cl_stats, f32_act ? NULL : logits[2]);
        printf("%s\nreference (%zu tokens, %.1f tok/s decode): %.*s\n", mode, ref_stats.n_generated,
               ref_stats.decode_ms > 0 ? ref_stats.n_generated * 1e3 / ref_stats.decode_ms : 0.0,
               (int)ref.len, ref.text);
        printf("opencl    (%zu tokens, %.1f tok/s decode): %.*s\n", cl_stats.n_generated,
               cl_stats.decode_ms > 0 ? cl_stats.n_generated * 1e3 / cl_stats.decode_ms : 0.0,
               (int)cl.len, cl.text);
        EXPECT(ref_stats.n_generated > 0, "%s: the reference backend generated nothing", mode);
        if (f32_act)
            EXPECT(cl_stats.n_generated == ref_stats.n_generated && cl.len == ref.len &&
                       !memcmp(cl.text, ref.text, ref.len),
                   "%s: OpenCL and reference continuations differ", mode);
        int n_words = 0;
        EXPECT(english_words(ref.text, ref.len, &n_words),
               "%s: reference: %d words, not mostly English words", mode, n_words);
        EXPECT(english_words(cl.text, cl.len, &n_words),
               "%s: OpenCL: %d words, not mostly English words", mode, n_words);
    }
    double across = 0, rounding = 0;
    for (size_t t = 0; t < N_TEXTS; t++) {
        double a = nmse(logits[2][t], logits[1][t], N_VOCAB),
               r = nmse(logits[1][t], logits[0][t], N_VOCAB);
        int top[3];
        for (int i = 0; i < 3; i++) {
            top[i] = 0;
            for (int v = 1; v < N_VOCAB; v++)
                if (logits[i][t][v] > logits[i][t][top[i]]) top[i] = v;
        }
        printf("logits after text %zu: NMSE OpenCL q8 vs reference q8 %.3g, reference q8 vs f32 "
               "%.3g; top token %d / %d / %d (ref f32, ref q8, OpenCL q8)\n",
               t, a, r, top[0], top[1], top[2]);
        EXPECT(top[2] == top[1],
               "8-bit activations, text %zu: top token %d on OpenCL, %d on the reference", t,
               top[2], top[1]);
        across += a / N_TEXTS;
        rounding += r / N_TEXTS;
    }
    printf("mean over %zu texts: across backends %.3g, rounding %.3g\n", N_TEXTS, across, rounding);
    demo_answer(path);
    too_long_context(path);
    EXPECT(across <= 2 * rounding,
           "8-bit activations: the backends differ by a mean NMSE of %.3g, more than twice what "
           "8-bit rounding does to the reference (%.3g)",
           across, rounding);
    return finish("test_smollm2");
}
