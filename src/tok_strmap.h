/* An open-addressing hash map from byte strings to int32 values, sized once for a known number
 * of keys (vocabularies and merge lists never grow after loading). Keys are not copied: they
 * must outlive the map. */
#ifndef CLINFER_TOK_STRMAP_H
#define CLINFER_TOK_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"

typedef struct {
    const char *key;
    uint32_t len;
    int32_t val;
} tok_strmap_slot;

typedef struct {
    tok_strmap_slot *slots; /* key == NULL marks an empty slot */
    size_t mask;            /* capacity - 1, capacity a power of two */
    size_t count;
} tok_strmap;

/* Room for up to max_keys keys at a load factor of at most one half. */
clinfer_status tok_strmap_init(tok_strmap *m, size_t max_keys);
void tok_strmap_free(tok_strmap *m);
/* Inserts or overwrites (a later duplicate wins, as in the converters' dictionaries). */
clinfer_status tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val);
/* The value stored for key, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);

#endif
