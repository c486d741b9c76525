#include "tok_strmap.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

/* FNV-1a: short keys, no adversary that could pick collisions worth defending against. */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

clinfer_status tok_strmap_init(tok_strmap *m, size_t max_keys) {
    memset(m, 0, sizeof *m);
    if (max_keys > SIZE_MAX / 4 / sizeof(tok_strmap_slot))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: %zu keys is too many for a map",
                        max_keys);
    size_t cap = 16;
    while (cap < 2 * max_keys)
        cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: map of %zu slots", cap);
    m->mask = cap - 1;
    return CLINFER_OK;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static size_t find_slot(const tok_strmap *m, const char *key, size_t len) {
    size_t i = (size_t)hash_bytes(key, len) & m->mask;
    while (m->slots[i].key && !(m->slots[i].len == len && memcmp(m->slots[i].key, key, len) == 0))
        i = (i + 1) & m->mask;
    return i;
}

clinfer_status tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val) {
    if (len > UINT32_MAX || 2 * (m->count + 1) > m->mask + 1)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "tokenizer: map full (%zu keys) or key of %zu bytes", m->count, len);
    size_t i = find_slot(m, key, len);
    if (!m->slots[i].key) {
        m->slots[i].key = key;
        m->slots[i].len = (uint32_t)len;
        m->count++;
    }
    m->slots[i].val = val;
    return CLINFER_OK;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    size_t i = find_slot(m, key, len);
    return m->slots[i].key ? m->slots[i].val : -1;
}
