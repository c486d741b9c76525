/* See line_input.h. */
#include "line_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <editline/readline.h>

char *line_read(const char *prompt, bool interactive, bool *interrupted) {
    *interrupted = false;
    if (interactive) {
        errno = 0;
        char *line = readline(prompt);
        *interrupted = !line && errno == EINTR;
        return line;
    }
    char *line = NULL;
    size_t cap = 0;
    errno = 0;
    ssize_t len = getline(&line, &cap, stdin);
    if (len < 0) {
        *interrupted = errno == EINTR;
        free(line);
        return NULL;
    }
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    return line;
}

void line_remember(const char *line) {
    add_history(line);
}
