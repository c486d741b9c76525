/* The clinfer CLI: one file per subcommand (tools/cmd_<name>.c), dispatched by tools/clinfer.c. */
#ifndef CLINFER_CLI_H
#define CLINFER_CLI_H

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} cli_command;

/* Prints "clinfer: <message>" to stderr; returns 1 for `return cli_error(...)`. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
