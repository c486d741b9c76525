/* Tokens sorted by text, for finding every token that is a prefix of a text (the unigram's
 * candidates, RWKV's longest match): each byte of the text narrows the range of tokens sharing
 * the prefix read so far by binary search, so a walk costs O(depth log n) and no trie. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tok_internal.h"

static const clinfer_vocab *sort_vocab; /* qsort has no context argument */

/* By text, bytewise (a prefix first), then id. */
static int text_order(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    const tok_entry *x = &sort_vocab->tokens[a], *y = &sort_vocab->tokens[b];
    int c = memcmp(x->text, y->text, x->len < y->len ? x->len : y->len);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return a < b ? -1 : 1;
}

clinfer_status tok_prefix_init(tok_prefix_index *ix, const clinfer_vocab *v,
                               bool (*keep)(const tok_entry *t)) {
    ix->ids = malloc((v->n_tokens ? v->n_tokens : 1) * sizeof *ix->ids);
    ix->n = 0;
    if (!ix->ids) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu tokens", v->n_tokens);
    for (size_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].len && keep(&v->tokens[i])) ix->ids[ix->n++] = (int32_t)i;
    sort_vocab = v;
    qsort(ix->ids, ix->n, sizeof *ix->ids, text_order);
    return CLINFER_OK;
}

/* Narrows [*lo, *hi) (tokens sharing their first depth bytes) to those whose next byte is c. */
static void narrow(const clinfer_vocab *v, const int32_t *ids, size_t depth, unsigned char c,
                   size_t *lo, size_t *hi) {
    size_t a = *lo, b = *hi;
    while (a < b) { /* first with a byte >= c at depth (shorter tokens sort first) */
        size_t m = a + (b - a) / 2;
        const tok_entry *t = &v->tokens[ids[m]];
        if (t->len <= depth || (unsigned char)t->text[depth] < c)
            a = m + 1;
        else
            b = m;
    }
    size_t first = a;
    b = *hi;
    while (a < b) { /* first with a byte > c */
        size_t m = a + (b - a) / 2;
        if ((unsigned char)v->tokens[ids[m]].text[depth] <= c)
            a = m + 1;
        else
            b = m;
    }
    *lo = first;
    *hi = a;
}

bool tok_prefix_next(const tok_prefix_index *ix, const clinfer_vocab *v, const char *s, size_t len,
                     tok_prefix_walk *w, int32_t *id) {
    if (!w->started) {
        *w = (tok_prefix_walk){0, ix->n, 0, true};
    }
    while (w->depth < len && w->lo < w->hi) {
        narrow(v, ix->ids, w->depth, (unsigned char)s[w->depth], &w->lo, &w->hi);
        w->depth++;
        size_t k = w->lo; /* the tokens of exactly depth bytes: the last id wins */
        while (k < w->hi && v->tokens[ix->ids[k]].len == w->depth)
            k++;
        if (k > w->lo) {
            *id = ix->ids[k - 1];
            return true;
        }
    }
    return false;
}
