/* Helpers for tests of vocabularies generated in code (test_tokenizer_ugm.c, _rwkv.c,
 * _plamo2.c): loading one from a writer, and comparing ids. Header-only: each test is one file. */
#ifndef CLINFER_TEST_VOCAB_FIXTURE_H
#define CLINFER_TEST_VOCAB_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_writer.h"
#include "tokenizer.h"

/* Serialises w (freed here) and loads its vocabulary, expecting status want; NULL unless it
 * loaded. */
static inline clinfer_vocab *vocab_from_writer(gguf_writer *w, clinfer_status want) {
    uint8_t *buf = NULL;
    size_t len = 0;
    gguf_file *f = NULL;
    clinfer_vocab *v = NULL;
    clinfer_status st = gw_to_memory(w, &buf, &len) ? CLINFER_ERR_OUT_OF_MEMORY : CLINFER_OK;
    if (st == CLINFER_OK) st = gguf_open_memory(buf, len, &f);
    if (st == CLINFER_OK) st = vocab_load(f, &v);
    EXPECT(st == want, "load gave %s, expected %s: %s", clinfer_status_str(st),
           clinfer_status_str(want), clinfer_last_error());
    gguf_close(f);
    free(buf);
    gw_free(w);
    return v;
}

/* want: the ids, -1 terminated (IDS(...) writes one). */
#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})
static inline void expect_ids(const clinfer_vocab *v, const char *text, bool add_bos, bool special,
                              const int32_t *want) {
    int32_t ids[64];
    size_t n = 0, n_want = 0;
    while (want[n_want] >= 0)
        n_want++;
    EXPECT_OK(vocab_tokenize(v, text, strlen(text), add_bos, special, ids, 64, &n));
    bool same = n == n_want && memcmp(ids, want, n * sizeof *ids) == 0;
    EXPECT(same, "'%s': %zu ids (first %d), expected %zu (first %d)", text, n, n ? ids[0] : -1,
           n_want, want[0]);
}

#endif
