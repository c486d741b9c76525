/* The error line of the programs: the CLI's and bench/bench_ops's (cli.h). */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

const char *cli_program = "clinfer";

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}
