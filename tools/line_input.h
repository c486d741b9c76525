/* Lines typed at `clinfer chat`: with editing and history (BSD editline) on a terminal, plain
 * reads from a pipe or file. */
#ifndef CLINFER_LINE_INPUT_H
#define CLINFER_LINE_INPUT_H

#include <stdbool.h>

/* The next line without its newline, malloc'ed; NULL at end of input or when Ctrl-C
 * interrupted the read (*interrupted set). prompt is shown on a terminal only. */
char *line_read(const char *prompt, bool interactive, bool *interrupted);
/* Remembers a line for the up arrow. */
void line_remember(const char *line);

#endif
