#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "clinfer.h"

/* Each subcommand lives in its own tools/cmd_<name>.c. */
#define COMMANDS(X)                                                                                \
    X(devices, "list OpenCL devices and the kernel path chosen for each")

#define DECLARE(name, summary) int cmd_##name(int argc, char **argv);
COMMANDS(DECLARE)
#define ENTRY(name, summary) {#name, summary, cmd_##name},
static const cli_command commands[] = {COMMANDS(ENTRY)};

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("clinfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static void usage(FILE *out) {
    fprintf(out, "usage: clinfer COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`clinfer COMMAND --help` for a command's options; `clinfer --version`.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("clinfer %s\n", CLINFER_VERSION_STRING);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s' (see clinfer --help)", argv[1]);
    return 1;
}
