/* Lists of names read through an accessor (the index-th name, NULL past the last): the names
 * joined for a message, and the one nearest to a name that was not found. The tables of what a
 * build supports (architectures, weight types, tokenizers, chat templates) are read this way. */
#ifndef CLINFER_NAMES_H
#define CLINFER_NAMES_H

#include <stddef.h>

/* The index-th name of a table, NULL past the last. */
typedef const char *names_at_fn(size_t index);

/* The names of name_at, ", "-separated (truncated to size). */
void names_list(names_at_fn *name_at, char *buf, size_t size);
/* The name of name_at nearest to name[0..len) (case-insensitive edit distance), NULL where none
 * is near (more than a third of the longer name differs). */
const char *names_closest(names_at_fn *name_at, const char *name, size_t len);

#endif
