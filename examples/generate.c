/* The smallest complete use of the library: load a GGUF model on the default device, wrap a
 * question in the model's chat template, generate greedily and stream the answer.
 *
 *   cc generate.c $(pkg-config --cflags --libs clinfer) -o generate
 *   ./generate MODEL.gguf "What is the capital of France?" [N_TOKENS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clinfer.h>

static bool print_text(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]);
        return 2;
    }
    int n_predict = argc > 3 ? atoi(argv[3]) : 64;
    clinfer_model *model = NULL;
    clinfer_context *ctx = NULL;
    clinfer_sampler *sampler = NULL;
    char *prompt = NULL;
    int32_t *tokens = NULL;
    clinfer_status st;

    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    if ((st = clinfer_model_load(argv[1], &mp, &model)) != CLINFER_OK) goto fail;

    /* Chat models get their template; a model without one is given the raw text. */
    clinfer_chat_message question = {"user", argv[2]};
    st = clinfer_chat_apply_template(model, NULL, &question, 1, true, &prompt);
    bool chat = st == CLINFER_OK;
    if (!chat && st != CLINFER_ERR_UNSUPPORTED) goto fail;
    const char *text = chat ? prompt : argv[2];

    /* Ask for the token count first, then tokenize into an array of that size. */
    size_t len = strlen(text), n_tokens = 0;
    bool add_bos = clinfer_token_add_bos(model);
    st = clinfer_tokenize(model, text, len, add_bos, chat, NULL, 0, &n_tokens);
    if (st != CLINFER_OK && st != CLINFER_ERR_BUFFER_TOO_SMALL) goto fail;
    if (!(tokens = malloc((n_tokens ? n_tokens : 1) * sizeof *tokens))) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    st = clinfer_tokenize(model, text, len, add_bos, chat, tokens, n_tokens, &n_tokens);
    if (st != CLINFER_OK) goto fail;

    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    if ((st = clinfer_context_create(model, &cp, &ctx)) != CLINFER_OK) goto fail;
    clinfer_sampler_params sp;
    clinfer_sampler_params_default(&sp);
    sp.temperature = 0; /* greedy: the same answer every time */
    if ((st = clinfer_sampler_create(&sp, &sampler)) != CLINFER_OK) goto fail;

    clinfer_generate_stats stats;
    st = clinfer_generate(ctx, tokens, n_tokens, n_predict, sampler, print_text, NULL, &stats);
    if (st != CLINFER_OK) goto fail;
    fprintf(stderr, "\n%zu prompt tokens, %zu generated, %.1f tok/s decode\n", stats.n_prompt,
            stats.n_generated,
            stats.decode_ms > 0 ? 1000.0 * stats.n_generated / stats.decode_ms : 0.0);
    goto done;

fail:
    fprintf(stderr, "clinfer: %s: %s\n", clinfer_status_str(st), clinfer_last_error());
done:
    clinfer_sampler_free(sampler);
    clinfer_context_free(ctx);
    clinfer_free(prompt);
    free(tokens);
    clinfer_model_free(model);
    return st == CLINFER_OK ? 0 : 1;
}
