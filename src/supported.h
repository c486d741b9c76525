/* What this build supports, for clinfer_supported and for the messages that refuse a file: each
 * list is read from the table that defines it (arch.c, quant.c, tokenizer.c, chat.c, options.c),
 * so an entry added there appears here. */
#ifndef CLINFER_SUPPORTED_H
#define CLINFER_SUPPORTED_H

#include <stddef.h>

#include "clinfer.h"

/* The names of kind, ", "-separated (truncated to size). */
void clinfer_supported_list(clinfer_support_kind kind, char *buf, size_t size);
/* The name of kind nearest to name[0..len) (case-insensitive edit distance), NULL where none is
 * near (more than a third of the longer name differs). */
const char *clinfer_supported_closest(clinfer_support_kind kind, const char *name, size_t len);

#endif
