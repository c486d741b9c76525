/* The pre-tokenizer families by tokenizer.ggml.pre name (tok_pretok_table.c). */
#ifndef CLINFER_TOK_PRETOK_TABLE_H
#define CLINFER_TOK_PRETOK_TABLE_H

#include <stddef.h>

#include "tok_internal.h"

typedef struct {
    const char *name;           /* tokenizer.ggml.pre */
    const char *const *regexes; /* applied in order, NULL-terminated */
    tok_pretok_traits traits;
} tok_pretok_family;

extern const tok_pretok_family tok_pretok_families[];
extern const size_t tok_pretok_n_families;

#endif
