/* Gemma 3 270M (Q4_K_M, the file CLINFER_GEMMA3_MODEL names; exit 77 without it or without an
 * OpenCL device): greedy, 32 tokens after each prompt of tests/gemma3_greedy.txt, the same text
 * as llama.cpp's llama-simple recorded there (see its header: llama.cpp on the F32 dequantization
 * of the same weights). clinfer runs with f32 activations (--act f32), the exact products
 * llama.cpp computes on F32 weights: llama.cpp's own 8-bit rounding of matmul inputs on the
 * Q4_K_M file (blocks of 256 for its K-quant weights, where clinfer's --act q8 rounds blocks of
 * 32) is not what clinfer does, and greedy texts part after a few tokens on some prompts
 * that way. The last prompt (580 tokens) runs past the local layers' 512-token sliding window.
 * Every prompt on OpenCL (graph launches where the device takes them), the first also on the
 * reference backend; and a chat without tokenizer.chat_template is rendered as Gemma's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N_PREDICT 32
#define MAX_CASES 16

typedef struct {
    char *prompt, *expect;
} greedy_case;

/* Undoes the fixture's escapes (\n, \t, \\) in place. */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* The fixture's prompt/expect pairs; returns how many. */
static size_t read_fixture(const char *path, greedy_case *cases) {
    FILE *f = fopen(path, "r");
    EXPECT(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0 && n < MAX_CASES) {
        if (line[len - 1] == '\n') line[--len] = '\0';
        bool prompt = !strncmp(line, "prompt ", 7), expect = !strncmp(line, "expect ", 7);
        if (!prompt && !expect) continue;
        char *value = strdup(line + 7);
        unescape(value);
        if (prompt) {
            cases[n].prompt = value;
        } else {
            EXPECT(cases[n].prompt != NULL, "%s: an expect line before its prompt", path);
            cases[n++].expect = value;
        }
    }
    free(line);
    fclose(f);
    return n;
}

/* The greedy continuation of prompt on model m, as clinfer run gives it (parse special tokens,
 * add BOS as the file says). */
static void continuation(clinfer_model *m, const char *prompt, text_sink *out) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 1024;
    cp.activations = CLINFER_ACT_F32;
    clinfer_context *ctx = NULL;
    size_t cap = strlen(prompt) + 8, n = 0;
    int32_t *tokens = malloc(cap * sizeof *tokens);
    EXPECT_OK(clinfer_tokenize(m, prompt, strlen(prompt), clinfer_token_add_bos(m), true, tokens,
                               cap, &n));
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    if (ctx && n)
        EXPECT_OK(clinfer_generate(ctx, tokens, n, N_PREDICT, NULL, text_collect, out, NULL));
    clinfer_context_free(ctx);
    free(tokens);
}

static void check_backend(const char *path, clinfer_backend_kind kind, const greedy_case *cases,
                          size_t n) {
    const char *name = kind == CLINFER_BACKEND_OPENCL ? "opencl" : "reference";
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.backend = kind;
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(path, &mp, &m));
    if (!m) return;
    for (size_t i = 0; i < n; i++) {
        text_sink out = {0};
        continuation(m, cases[i].prompt, &out);
        bool same =
            out.len == strlen(cases[i].expect) && !memcmp(out.text, cases[i].expect, out.len);
        printf("%s, prompt %zu: %s\n", name, i, same ? "the same text as llama.cpp" : "differs");
        EXPECT(same, "%s, prompt %zu (%.40s...):\n  llama.cpp: %s\n  clinfer:   %.*s", name, i,
               cases[i].prompt, cases[i].expect, (int)out.len, out.text);
    }
    if (kind == CLINFER_BACKEND_OPENCL) { /* no chat template in the file: Gemma's turns */
        clinfer_chat_message msg = {"user", "Hi"};
        char *chat = NULL;
        EXPECT_OK(clinfer_chat_apply_template(m, NULL, &msg, 1, true, &chat));
        EXPECT(chat &&
                   !strcmp(chat, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"),
               "chat rendered as '%s'", chat ? chat : "(null)");
        clinfer_free(chat);
    }
    clinfer_model_free(m);
}

int main(int argc, char **argv) {
    const char *path = getenv("CLINFER_GEMMA3_MODEL");
    size_t n_devices = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: test_gemma3 FIXTURE\n");
        return 2;
    }
    if (!path || !*path) {
        printf("skipped: set CLINFER_GEMMA3_MODEL to gemma-3-270m-q4_k_m.gguf\n");
        return 77;
    }
    if (clinfer_device_count(&n_devices) != CLINFER_OK || n_devices == 0) {
        printf("skipped: no OpenCL device (%s)\n", clinfer_last_error());
        return 77;
    }
    greedy_case cases[MAX_CASES] = {0};
    size_t n = read_fixture(argv[1], cases);
    EXPECT(n >= 3, "%s holds %zu prompts with expected texts", argv[1], n);
    check_backend(path, CLINFER_BACKEND_OPENCL, cases, n);
    check_backend(path, CLINFER_BACKEND_REFERENCE, cases, n > 0 ? 1 : 0);
    for (size_t i = 0; i < MAX_CASES; i++) {
        free(cases[i].prompt);
        free(cases[i].expect);
    }
    return finish("test_gemma3");
}
