/* clinfer run: one prompt in, generated text streamed out, timings on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_common.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer run [-m MODEL] -p PROMPT [OPTIONS]\n\n"
            "Generates text after PROMPT, streaming it to stdout; load time and prefill\n"
            "and decode speed go to stderr.\n\n"
            "  -p, --prompt TEXT    the prompt (required)\n"
            "  -n, --n-predict N    generate at most N tokens (default 128)\n"
            "      --chat           wrap the prompt in the model's chat template as a user\n"
            "                       turn, so an instruct model answers it\n"
            "      --chat-template NAME  chatml, llama3, llama2 or gemma instead of the\n"
            "                       model's template (implies --chat)\n"
            "      --system TEXT    a system message before the prompt (implies --chat)\n"
            "      --ctx N          context length; 0 is the model's (default 0)\n" CLI_MODEL_HELP
                CLI_SAMPLER_HELP);
}

typedef struct {
    cli_model_opts model;
    clinfer_sampler_params sampling;
    const char *prompt, *chat_template, *system;
    long n_predict, n_ctx;
    bool chat;
} run_opts;

/* 0 to go on, 1 on an error (printed), 2 after --help. */
static int parse(int argc, char **argv, run_opts *o) {
    static const struct option options[] = {
        CLI_MODEL_OPTIONS,
        CLI_SAMPLER_OPTIONS,
        {"prompt", required_argument, NULL, 'p'},
        {"n-predict", required_argument, NULL, 'n'},
        {"chat", no_argument, NULL, OPT_CHAT},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"ctx", required_argument, NULL, OPT_CTX},
        {NULL, 0, NULL, 0}};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" CLI_MODEL_SHORT "p:n:", options, NULL)) != -1) {
        int used = cli_model_option(opt, optarg, &o->model);
        if (!used) used = cli_sampler_option(opt, optarg, &o->sampling);
        if (used < 0) return 1;
        if (used) continue;
        switch (opt) {
        case 'h':
            usage(stdout);
            return 2;
        case 'p':
            o->prompt = optarg;
            break;
        case 'n':
            if (!cli_parse_long("-n", optarg, 0, INT32_MAX, &o->n_predict)) return 1;
            break;
        case OPT_CHAT:
            o->chat = true;
            break;
        case OPT_CHAT_TEMPLATE:
            o->chat_template = optarg;
            o->chat = true;
            break;
        case OPT_SYSTEM:
            o->system = optarg;
            o->chat = true;
            break;
        case OPT_CTX:
            if (!cli_parse_long("--ctx", optarg, 0, INT32_MAX, &o->n_ctx)) return 1;
            break;
        default:
            return cli_bad_option("run", opt, argv);
        }
    }
    if (optind < argc)
        return cli_error("run: unexpected argument '%s' (the prompt goes after -p)", argv[optind]);
    if (!o->prompt)
        return cli_error("run: no prompt; pass one with -p TEXT (see clinfer run --help)");
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.n_predict = 128};
    cli_model_opts_init(&o.model);
    clinfer_sampler_params_default(&o.sampling);
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;

    clinfer_model *model = NULL;
    clinfer_context *ctx = NULL;
    clinfer_sampler *sampler = NULL;
    char *text = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    double load_ms = 0;
    clinfer_status st;
    rc = 1;

    if ((st = clinfer_sampler_create(&o.sampling, &sampler)) != CLINFER_OK) {
        cli_error("run: %s", clinfer_last_error());
        goto cleanup;
    }
    if (cli_load_model(&o.model, &model, &load_ms)) goto cleanup;
    if (o.chat) {
        clinfer_chat_message messages[2] = {{"system", o.system}, {"user", o.prompt}};
        size_t first = o.system ? 0 : 1;
        st = clinfer_chat_apply_template(model, o.chat_template, messages + first, 2 - first, true,
                                         &text);
        if (st != CLINFER_OK) {
            cli_error("run: %s", clinfer_last_error());
            goto cleanup;
        }
    }
    if (cli_tokenize(model, text ? text : o.prompt, true, &tokens, &n_tokens)) goto cleanup;

    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = (uint32_t)o.n_ctx;
    if ((st = clinfer_context_create(model, &cp, &ctx)) != CLINFER_OK) {
        cli_error("run: cannot create a context: %s (%s)", clinfer_last_error(),
                  clinfer_status_str(st));
        goto cleanup;
    }
    clinfer_generate_stats stats = {0};
    st = clinfer_generate(ctx, tokens, n_tokens, (int32_t)o.n_predict, sampler, cli_stream_text,
                          NULL, &stats);
    if (st != CLINFER_OK) {
        fputc('\n', stdout);
        cli_error("run: generation failed: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        goto cleanup;
    }
    fputc('\n', stdout);
    fflush(stdout);
    cli_print_stats(load_ms, &stats);
    rc = 0;
cleanup:
    free(tokens);
    clinfer_free(text);
    clinfer_sampler_free(sampler);
    clinfer_context_free(ctx);
    clinfer_model_free(model);
    return rc;
}
