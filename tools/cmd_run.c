/* clinfer run: one prompt in, generated text streamed out, timings on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_common.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: clinfer run [-m MODEL] -p PROMPT [OPTIONS]\n\n"
        "Generates text after PROMPT, streaming it to stdout; load time and prefill\n"
        "and decode speed go to stderr.\n\n"
        "  -p, --prompt TEXT    the prompt (required)\n"
        "  -f, --file FILE      the prompt from a file instead of -p\n"
        "  -n, --n-predict N    generate at most N tokens; -1: until the end of the text or\n"
        "                       of the context (default 128)\n"
        "      --chat           wrap the prompt in the model's chat template as a user\n"
        "                       turn, so an instruct model answers it\n"
        "      --chat-template NAME  a chat template by name instead of the\n"
        "                       model's (implies --chat; `clinfer --version` lists them)\n"
        "      --system TEXT    a system message before the prompt (implies --chat)\n" CLI_CTX_HELP
            CLI_ACT_HELP CLI_PROFILE_HELP CLI_MODEL_HELP CLI_SAMPLER_HELP);
}

typedef struct {
    cli_gen_opts gen;
    const char *prompt, *file;
    bool chat;
} run_opts;

static int run_option(int opt, const char *arg, void *user) {
    run_opts *o = user;
    int used = cli_gen_option(opt, arg, &o->gen);
    if (used) return used;
    switch (opt) {
    case 'p':
        o->prompt = arg;
        return 1;
    case 'f':
        o->file = arg;
        return 1;
    case OPT_CHAT:
        o->chat = true;
        return 1;
    case OPT_PROFILE:
        o->gen.model.params.options.profile = CLINFER_ON;
        return 1;
    default:
        return 0;
    }
}

/* 0 to go on, 1 on an error (printed), 2 after --help. */
static int parse(int argc, char **argv, run_opts *o) {
    static const struct option options[] = {CLI_GEN_OPTIONS,
                                            {"prompt", required_argument, NULL, 'p'},
                                            {"file", required_argument, NULL, 'f'},
                                            {"chat", no_argument, NULL, OPT_CHAT},
                                            {"profile", no_argument, NULL, OPT_PROFILE},
                                            {NULL, 0, NULL, 0}};
    int rc = cli_parse_options("run", argc, argv, ":" CLI_GEN_SHORT "p:f:", options, run_option, o,
                               usage);
    if (rc) return rc;
    if (optind < argc)
        return cli_error("run: unexpected argument '%s' (the prompt goes after -p)", argv[optind]);
    if (o->prompt && o->file) return cli_error("run: -p and -f both give a prompt; pick one");
    if (!o->prompt && !o->file)
        return cli_error(
            "run: no prompt; pass one with -p TEXT or -f FILE (see clinfer run --help)");
    /* --chat-template and --system imply --chat */
    o->chat = o->chat || o->gen.chat_template || o->gen.system;
    return 0;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {0};
    cli_gen_opts_init(&o.gen, 128);
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;

    cli_generator g = {0};
    char *text = NULL, *file_text = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0, len;
    clinfer_status st;
    rc = 1;

    if (o.file && !(o.prompt = file_text = cli_read_file("run", o.file, &len))) goto cleanup;
    if (cli_generator_open("run", &o.gen, &g)) goto cleanup;
    if (o.chat) {
        clinfer_chat_message messages[2] = {{"system", o.gen.system}, {"user", o.prompt}};
        size_t first = o.gen.system ? 0 : 1;
        st = clinfer_chat_apply_template(g.model, o.gen.chat_template, messages + first, 2 - first,
                                         true, &text);
        if (st != CLINFER_OK) {
            cli_error("run: %s", clinfer_last_error());
            goto cleanup;
        }
    }
    if (cli_tokenize(g.model, text ? text : o.prompt, true, true, &tokens, &n_tokens)) goto cleanup;
    if (n_tokens == 0) {
        cli_error("run: the prompt is empty: nothing to continue from");
        goto cleanup;
    }

    clinfer_generate_stats stats = {0};
    cli_note_seed(&g);
    st = clinfer_generate(g.ctx, tokens, n_tokens, (int32_t)o.gen.n_predict, g.sampler,
                          cli_stream_text, NULL, &stats);
    if (st != CLINFER_OK) {
        fputc('\n', stdout);
        cli_error("run: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        goto cleanup;
    }
    fputc('\n', stdout);
    fflush(stdout);
    cli_print_stats(g.load_ms, &stats);
    rc = 0;
cleanup:
    free(tokens);
    free(file_text);
    clinfer_free(text);
    cli_generator_free(&g);
    return rc;
}
