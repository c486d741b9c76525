#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "clinfer.h"

/* Each subcommand lives in its own tools/cmd_<name>.c. */
#define COMMANDS(X)                                                                                \
    X(devices, "list OpenCL devices and the kernel path chosen for each")                          \
    X(run, "generate text after a prompt and report the speed")                                    \
    X(chat, "chat with a model, turn by turn, on stdin")                                           \
    X(info, "show a model's architecture, tensors and memory plan")                                \
    X(tokenize, "print the token ids (and pieces) of a text; vocab-only files work")               \
    X(bench, "prefill and decode tokens/s, time to first token and peak memory of a model")        \
    X(perplexity, "perplexity of a model on a text, and KL divergence against a saved run")        \
    X(verify, "check a device against the reference backend, op by op, on a model's tokens")       \
    X(quantize, "write a model with quantized weights: Q8_0, Q4_K_M, ... as llama-quantize does")  \
    X(pull, "download a model into the models cache (`clinfer pull` lists them)")                  \
    X(models, "list the models in the cache: name, size, path")                                    \
    X(serve, "serve a model over HTTP with OpenAI's API: chat, completions, streaming")

#define DECLARE(name, summary) int cmd_##name(int argc, char **argv);
COMMANDS(DECLARE)
#define ENTRY(name, summary) {#name, summary, cmd_##name},
static const cli_command commands[] = {COMMANDS(ENTRY)};

/* Names in COMMANDS are C identifiers; on the command line their '_' is written '-'. */
static int is_command(const char *arg, const char *name) {
    for (; *arg && *name; arg++, name++)
        if (*arg != (*name == '_' ? '-' : *name)) return 0;
    return *arg == *name;
}

static void usage(FILE *out) {
    fprintf(out, "usage: clinfer COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", commands[i].name);
        for (char *c = name; *c; c++)
            *c = *c == '_' ? '-' : *c;
        fprintf(out, "  %-10s %s\n", name, commands[i].summary);
    }
    fprintf(out, "\n`clinfer COMMAND --help` for a command's options; `clinfer --version` for what "
                 "it supports.\n");
}

/* The version and what the library supports, from its tables. */
static void version(void) {
    static const struct {
        clinfer_support_kind kind;
        const char *what;
    } kinds[] = {{CLINFER_SUPPORT_ARCHITECTURE, "architectures:"},
                 {CLINFER_SUPPORT_WEIGHT_TYPE, "weight types:"},
                 {CLINFER_SUPPORT_TOKENIZER, "tokenizers:"},
                 {CLINFER_SUPPORT_CHAT_TEMPLATE, "chat templates:"},
                 {CLINFER_SUPPORT_KERNEL_PATH, "kernel paths:"}};
    printf("clinfer %s\n", CLINFER_VERSION_STRING);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        printf("%-15s", kinds[k].what);
        const char *name;
        for (size_t i = 0; (name = clinfer_supported(kinds[k].kind, i)); i++)
            printf("%s%s", i ? ", " : " ", name);
        printf("\n");
    }
}

/* llama.cpp's spellings that getopt_long cannot take: -dev is --device, -ngl and --gpu-layers
 * --n-gpu-layers, -ts --tensor-split, -ctk and -ctv --cache-type-k and -v. Rewrites argv in place;
 * returns argc. */
static int llama_cpp_flags(int argc, char **argv) {
    static const char *const spellings[][2] = {
        {"-dev", "--device"},      {"-ngl", "--n-gpu-layers"}, {"--gpu-layers", "--n-gpu-layers"},
        {"-ts", "--tensor-split"}, {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}};
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof spellings / sizeof spellings[0]; k++)
            if (!strcmp(argv[i], spellings[k][0])) argv[i] = (char *)spellings[k][1];
    return argc;
}

int main(int argc, char **argv) {
    clinfer_log_set(cli_log, NULL);
    argc = llama_cpp_flags(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        version();
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (is_command(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s' (see clinfer --help)", argv[1]);
    return 1;
}
