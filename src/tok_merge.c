/* Pair merging for byte-level BPE (priority: merge rank) and SentencePiece (priority: score of
 * the merged token). A heap of candidate pairs keeps it O(n log n) for long words; pairs whose
 * symbols changed since they were queued are recognised by their size and skipped. */
#include <stdlib.h>

#include "error.h"
#include "tok_internal.h"

typedef struct {
    int32_t prev, next; /* neighbours in the symbol chain, -1 at the ends */
    uint32_t off, len;  /* len 0: merged into its left neighbour */
} symbol;

typedef struct {
    double priority;
    int32_t left, right;
    uint32_t size;
} pair;

typedef struct {
    pair *items;
    size_t n, cap;
} pair_heap;

static bool goes_first(const pair *a, const pair *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

static clinfer_status heap_push(pair_heap *h, pair p) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        pair *items = realloc(h->items, cap * sizeof *items);
        if (!items)
            return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu merge candidates", cap);
        h->items = items;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && goes_first(&p, &h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = p;
    return CLINFER_OK;
}

static pair heap_pop(pair_heap *h) {
    pair top = h->items[0], last = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && goes_first(&h->items[c + 1], &h->items[c])) c++;
        if (!goes_first(&h->items[c], &last)) break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (h->n) h->items[i] = last;
    return top;
}

typedef struct {
    const clinfer_vocab *v;
    const char *text;
    symbol *syms;
    char *scratch;
    tok_pair_priority pair_priority;
    pair_heap heap;
} merge_state;

static clinfer_status consider(merge_state *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return CLINFER_OK;
    const symbol *l = &s->syms[left], *r = &s->syms[right];
    double priority;
    if (!s->pair_priority(s->v, s->text + l->off, l->len, r->len, s->scratch, &priority))
        return CLINFER_OK;
    return heap_push(&s->heap, (pair){priority, left, right, l->len + r->len});
}

clinfer_status tok_merge(const clinfer_vocab *v, const char *text, size_t len,
                         tok_pair_priority pair_priority, tok_span **spans, size_t *n_spans) {
    clinfer_status st = CLINFER_OK;
    merge_state s = {.v = v, .text = text, .pair_priority = pair_priority};
    tok_span *result = NULL;
    size_t n = 0;
    *spans = NULL;
    *n_spans = 0;
    if (len == 0) return CLINFER_OK;
    if (len > INT32_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: word of %zu bytes", len);
    s.syms = malloc(len * sizeof *s.syms);
    s.scratch = malloc(len + 2);
    if (!s.syms || !s.scratch) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: merging a word of %zu bytes", len);
        goto cleanup;
    }
    for (size_t off = 0; off < len; n++) {
        size_t cl = tok_char_len(text + off, len - off);
        s.syms[n] = (symbol){(int32_t)n - 1, off + cl < len ? (int32_t)n + 1 : -1, (uint32_t)off,
                             (uint32_t)cl};
        off += cl;
    }
    for (size_t i = 1; i < n; i++)
        CHECK(consider(&s, (int32_t)i - 1, (int32_t)i));
    while (s.heap.n) {
        pair p = heap_pop(&s.heap);
        symbol *l = &s.syms[p.left], *r = &s.syms[p.right];
        if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.size)
            continue; /* queued before one of its symbols changed */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) s.syms[r->next].prev = p.left;
        CHECK(consider(&s, l->prev, p.left));
        CHECK(consider(&s, p.left, l->next));
    }
    result = malloc(n * sizeof *result);
    if (!result) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu symbols", n);
        goto cleanup;
    }
    size_t count = 0;
    for (int32_t i = 0; i != -1; i = s.syms[i].next)
        result[count++] = (tok_span){s.syms[i].off, s.syms[i].len};
    *spans = result;
    *n_spans = count;
    result = NULL;
cleanup:
    free(result);
    free(s.heap.items);
    free(s.scratch);
    free(s.syms);
    return st;
}
