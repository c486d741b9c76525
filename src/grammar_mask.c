/* Token masks: the token strings in a trie (children as sibling lists), walked depth first from
 * the matcher's state; a byte the matcher refuses prunes the whole subtree, so the cost follows
 * the tokens the grammar allows, not the vocabulary's size. A few recent masks are kept by state:
 * inside a JSON string the state repeats from token to token. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"

#define N_CACHED 8
#define COMPACT_AT (1u << 22) /* matcher entries before it is rebuilt around the state */

typedef struct {
    uint32_t child, sibling; /* 0: none (node 0 is the root, nobody's child) */
    int32_t token;           /* the first token whose text ends here, -1 none */
    uint8_t byte;
} tnode;

struct gvocab {
    atomic_size_t refs;
    size_t n;
    uint8_t *kind;
    char **text;
    uint32_t *len;
    int32_t *same; /* the next token of identical text, -1 none */
    tnode *nodes;
    size_t n_nodes, nodes_cap;
};

typedef struct {
    uint32_t node;
    gstate before; /* the state before the node's byte */
} walk_item;

typedef struct {
    bool valid;
    gstate key;
    uint64_t *words;
} cached_mask;

struct gconstraint {
    grammar *g;
    gmatch *m;
    gvocab *v;
    gstate cur;
    bool done; /* an end-of-generation token was accepted */
    walk_item *walk;
    size_t n_words;
    cached_mask cache[N_CACHED];
    size_t next_slot;
};

static clinfer_status oom(void) {
    return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
}

static bool add_node(gvocab *v, uint8_t byte, uint32_t *out) {
    if (v->n_nodes == v->nodes_cap) {
        size_t cap = v->nodes_cap ? v->nodes_cap * 2 : 1024;
        tnode *n = realloc(v->nodes, cap * sizeof *n);
        if (!n) return false;
        v->nodes = n;
        v->nodes_cap = cap;
    }
    v->nodes[v->n_nodes] = (tnode){0, 0, -1, byte};
    *out = (uint32_t)v->n_nodes++;
    return true;
}

static bool insert(gvocab *v, int32_t id) {
    uint32_t at = 0;
    for (uint32_t i = 0; i < v->len[id]; i++) {
        uint8_t b = (uint8_t)v->text[id][i];
        uint32_t c = v->nodes[at].child, prev = 0;
        while (c && v->nodes[c].byte != b) {
            prev = c;
            c = v->nodes[c].sibling;
        }
        if (!c) {
            if (!add_node(v, b, &c)) return false;
            if (prev)
                v->nodes[prev].sibling = c;
            else
                v->nodes[at].child = c;
        }
        at = c;
    }
    v->same[id] = v->nodes[at].token;
    v->nodes[at].token = id;
    return true;
}

clinfer_status gvocab_create(size_t n, const char *const *text, const size_t *len,
                             const uint8_t *kind, gvocab **out) {
    if (n > INT32_MAX) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "grammar: %zu tokens", n);
    gvocab *v = calloc(1, sizeof *v);
    if (!v) return oom();
    atomic_init(&v->refs, 1);
    v->n = n;
    v->kind = malloc(n + 1);
    v->text = calloc(n + 1, sizeof *v->text);
    v->len = calloc(n + 1, sizeof *v->len);
    v->same = malloc((n + 1) * sizeof *v->same);
    uint32_t root;
    bool ok = v->kind && v->text && v->len && v->same && add_node(v, 0, &root);
    for (size_t i = 0; ok && i < n; i++) {
        v->kind[i] = kind[i] == GV_TEXT && !len[i] ? GV_NEVER : kind[i];
        v->same[i] = -1;
        if (v->kind[i] != GV_TEXT) continue;
        v->len[i] = (uint32_t)len[i];
        v->text[i] = malloc(len[i]);
        ok = v->text[i] && len[i] <= UINT32_MAX;
        if (ok) memcpy(v->text[i], text[i], len[i]);
        ok = ok && insert(v, (int32_t)i);
    }
    if (!ok) {
        gvocab_free(v);
        return oom();
    }
    *out = v;
    return CLINFER_OK;
}

gvocab *gvocab_ref(gvocab *v) {
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return v;
}

void gvocab_free(gvocab *v) {
    /* acq_rel: the last owner sees every other owner's reads finished before it frees */
    if (!v || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; v->text && i < v->n; i++)
        free(v->text[i]);
    free(v->text);
    free(v->kind);
    free(v->len);
    free(v->same);
    free(v->nodes);
    free(v);
}

size_t gconstraint_n_tokens(const gconstraint *c) {
    return c->v->n;
}

clinfer_status gconstraint_create(const char *gbnf, size_t len, gvocab *vocab, gconstraint **out) {
    clinfer_status st = CLINFER_OK;
    gconstraint *c = calloc(1, sizeof *c);
    if (!c) {
        gvocab_free(vocab);
        return oom();
    }
    c->v = vocab;
    c->n_words = (vocab->n + 63) / 64;
    CHECK(grammar_parse(gbnf, len, &c->g));
    CHECK(gmatch_create(c->g, &c->m));
    c->cur = gmatch_start(c->m);
    CHECK(gmatch_status(c->m));
    c->walk = malloc(vocab->n_nodes * sizeof *c->walk);
    if (!c->walk) {
        st = oom();
        goto cleanup;
    }
    for (size_t i = 0; i < N_CACHED; i++) {
        c->cache[i].words = malloc((c->n_words + 1) * sizeof *c->cache[i].words);
        if (!c->cache[i].words) {
            st = oom();
            goto cleanup;
        }
    }
    *out = c;
    c = NULL;
cleanup:
    gconstraint_free(c);
    return st;
}

void gconstraint_free(gconstraint *c) {
    if (!c) return;
    gmatch_free(c->m);
    grammar_free(c->g);
    gvocab_free(c->v);
    free(c->walk);
    for (size_t i = 0; i < N_CACHED; i++)
        free(c->cache[i].words);
    free(c);
}

static bool same_state(gstate a, gstate b) {
    return a.set == b.set && a.cp == b.cp && a.need == b.need && a.lead_len == b.lead_len;
}

static void mark(uint64_t *words, const gvocab *v, int32_t token) {
    for (int32_t t = token; t >= 0; t = v->same[t])
        words[t / 64] |= 1ull << (t % 64);
}

/* Every text token the matcher takes from s, depth first over the trie. */
static clinfer_status walk(gconstraint *c, gstate s, uint64_t *words) {
    const gvocab *v = c->v;
    size_t n = 0;
    for (uint32_t k = v->nodes[0].child; k; k = v->nodes[k].sibling)
        c->walk[n++] = (walk_item){k, s};
    while (n) {
        walk_item w = c->walk[--n];
        const tnode *node = &v->nodes[w.node];
        if (!gmatch_step(c->m, &w.before, node->byte)) {
            if (gmatch_status(c->m) != CLINFER_OK) return gmatch_status(c->m);
            continue;
        }
        mark(words, v, node->token);
        for (uint32_t k = node->child; k; k = v->nodes[k].sibling)
            c->walk[n++] = (walk_item){k, w.before};
    }
    return CLINFER_OK;
}

clinfer_status gconstraint_mask(gconstraint *c, const uint64_t **words) {
    /* once done, the state's cached mask (from before the end) no longer holds */
    for (size_t i = 0; !c->done && i < N_CACHED; i++) {
        if (c->cache[i].valid && same_state(c->cache[i].key, c->cur)) {
            *words = c->cache[i].words;
            return CLINFER_OK;
        }
    }
    cached_mask *slot = &c->cache[c->next_slot];
    c->next_slot = (c->next_slot + 1) % N_CACHED;
    slot->valid = false;
    memset(slot->words, 0, c->n_words * sizeof *slot->words);
    if (!c->done) {
        clinfer_status st = walk(c, c->cur, slot->words);
        if (st != CLINFER_OK) return st;
        if (gmatch_can_end(c->m, c->cur))
            for (size_t t = 0; t < c->v->n; t++)
                if (c->v->kind[t] == GV_EOG) mark(slot->words, c->v, (int32_t)t);
    }
    slot->valid = !c->done;
    slot->key = c->cur;
    *words = slot->words;
    return CLINFER_OK;
}

/* s stepped over a text token's bytes: false when the matcher refuses one. */
static bool step_token(gconstraint *c, gstate *s, int32_t token) {
    bool ok = c->v->kind[token] == GV_TEXT;
    for (uint32_t i = 0; ok && i < c->v->len[token]; i++)
        ok = gmatch_step(c->m, s, (uint8_t)c->v->text[token][i]);
    return ok;
}

clinfer_status gconstraint_allows(gconstraint *c, int32_t token, bool *ok) {
    *ok = false;
    if (token < 0 || (size_t)token >= c->v->n || c->done) return CLINFER_OK;
    if (c->v->kind[token] == GV_EOG) {
        *ok = gmatch_can_end(c->m, c->cur);
        return CLINFER_OK;
    }
    gstate s = c->cur;
    *ok = step_token(c, &s, token);
    return gmatch_status(c->m);
}

clinfer_status gconstraint_accept(gconstraint *c, int32_t token) {
    if (token < 0 || (size_t)token >= c->v->n || c->done)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "grammar: token %d %s", (int)token,
                        c->done ? "after the end of the output" : "is not in the vocabulary");
    if (c->v->kind[token] == GV_EOG) {
        if (!gmatch_can_end(c->m, c->cur))
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "grammar: token %d ends the output before the grammar is complete",
                            (int)token);
        c->done = true;
        return CLINFER_OK;
    }
    gstate s = c->cur;
    if (!step_token(c, &s, token)) {
        if (gmatch_status(c->m) != CLINFER_OK) return gmatch_status(c->m);
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "grammar: token %d cannot continue the output", (int)token);
    }
    c->cur = s;
    if (gmatch_size(c->m) > COMPACT_AT) {
        gmatch_compact(c->m, &c->cur);
        for (size_t i = 0; i < N_CACHED; i++)
            c->cache[i].valid = false;
        if (gmatch_status(c->m) != CLINFER_OK) return gmatch_status(c->m);
    }
    return CLINFER_OK;
}
