/* Renders one conversation for tests/test_chat_jinja.py as a model's chat template: writes a
 * vocabulary-only GGUF carrying the template as tokenizer.chat_template to the path argv[1],
 * loads it (vocab_only) and calls clinfer_chat_apply_template. Reads stdin: fields separated by
 * NUL bytes, the template's text, a template name ("" to detect it), "1" or "0" (the generation
 * prompt), then role and content of each message. Writes the rendering to stdout; on a failure,
 * the error to stderr and exit status 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clinfer.h"
#include "gguf_writer.h"

enum { MAX_FIELDS = 67 };

/* A SentencePiece vocabulary of four tokens and the template. */
static int write_model(const char *path, const char *tmpl) {
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "a"};
    static const float scores[] = {0, 0, 0, -1};
    static const int32_t types[] = {2, 3, 3, 1};
    gguf_writer *w = gw_new();
    if (!w) return -1;
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", tokens, 4);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, 4);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 4);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (*tmpl) gw_kv_str(w, "tokenizer.chat_template", tmpl);
    int rc = gw_write_file(w, path);
    gw_free(w);
    return rc;
}

int main(int argc, char **argv) {
    static char in[1 << 20];
    if (argc != 2) {
        fprintf(stderr, "usage: chat_render_stdin MODEL_PATH < fields\n");
        return 2;
    }
    size_t len = fread(in, 1, sizeof in - 1, stdin);
    if (len == sizeof in - 1) {
        fprintf(stderr, "chat_render_stdin: input over %zu bytes\n", sizeof in - 2);
        return 2;
    }
    in[len] = '\0';
    const char *field[MAX_FIELDS];
    size_t nf = 0;
    for (size_t i = 0, start = 0; i <= len && nf < MAX_FIELDS; i++)
        if (i == len || in[i] == '\0') {
            field[nf++] = in + start;
            start = i + 1;
        }
    if (nf < 3 || (nf - 3) % 2) {
        fprintf(stderr, "chat_render_stdin: %zu fields; want template, name, 0/1, pairs\n", nf);
        return 2;
    }
    clinfer_chat_message m[(MAX_FIELDS - 3) / 2];
    size_t n = (nf - 3) / 2;
    for (size_t i = 0; i < n; i++)
        m[i] = (clinfer_chat_message){field[3 + 2 * i], field[4 + 2 * i]};
    if (write_model(argv[1], field[0])) {
        fprintf(stderr, "chat_render_stdin: cannot write %s\n", argv[1]);
        return 2;
    }
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.vocab_only = true;
    clinfer_model *model = NULL;
    char *out = NULL;
    clinfer_status st = clinfer_model_load(argv[1], &mp, &model);
    if (st == CLINFER_OK)
        st = clinfer_chat_apply_template(model, *field[1] ? field[1] : NULL, m, n,
                                         !strcmp(field[2], "1"), &out);
    if (st != CLINFER_OK) fprintf(stderr, "%s\n", clinfer_last_error());
    if (out) fputs(out, stdout);
    clinfer_free(out);
    clinfer_model_free(model);
    return st == CLINFER_OK ? 0 : 2;
}
