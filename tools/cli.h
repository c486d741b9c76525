/* The clinfer CLI: one file per subcommand (tools/cmd_<name>.c), dispatched by tools/clinfer.c. */
#ifndef CLINFER_CLI_H
#define CLINFER_CLI_H

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} cli_command;

/* tools/cli_error.c, shared with bench/bench_ops: prints "<cli_program>: <message>" to stderr;
 * returns 1 for `return cli_error(...)`. cli_program is "clinfer" unless a program sets it. */
extern const char *cli_program;
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
