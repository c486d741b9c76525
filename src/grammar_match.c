/* The matcher: a state is the set of parse stacks the output so far allows. A stack is a chain of
 * nodes (a position in the elements, the node to return to), each hash-consed, so equal stacks
 * are one node id and a set of stacks is a sorted array of top ids, itself interned: a state is
 * one number, and steps from it (set, code point -> set) are cached. The tops always point at a
 * character class; ACCEPT stands for the empty stack, where the root has matched whole. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"

#define NONE UINT32_MAX
#define ACCEPT (UINT32_MAX - 1)
#define EMPTY_KEY UINT64_MAX
#define MAX_VISITS (1u << 16) /* node visits in one step: bounds ambiguous grammars */
#define MAX_NODES (1u << 25)

typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    size_t n, cap; /* cap a power of 2 */
} u64map;

typedef struct {
    uint32_t pos, parent;
} gnode;

typedef struct {
    uint32_t pos, parent;
} work_item;

struct gmatch {
    const grammar *g;
    gnode *nodes;
    uint32_t *stamp; /* per node: the step that last visited it */
    size_t n_nodes, nodes_cap;
    u64map node_ids; /* pos << 32 | parent -> node */
    uint32_t *set_data;
    size_t set_data_n, set_data_cap;
    uint32_t *set_off, *set_len;
    uint64_t *set_hash;
    size_t n_sets, sets_cap;
    uint32_t *set_index; /* open addressing: set + 1, 0 empty */
    size_t set_index_cap;
    u64map steps; /* set << 21 | code point -> set */
    uint32_t *tops;
    size_t n_tops, tops_cap;
    work_item *work;
    size_t work_cap;
    uint32_t cur_stamp;
    clinfer_status st;
};

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool fail(gmatch *m, clinfer_status st, const char *what) {
    if (m->st == CLINFER_OK) m->st = err_fail(st, "grammar: %s", what);
    return false;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void map_clear(u64map *mp) {
    if (mp->keys) memset(mp->keys, 0xFF, mp->cap * sizeof *mp->keys);
    mp->n = 0;
}

static size_t map_slot(const u64map *mp, uint64_t key) {
    size_t i = mix(key) & (mp->cap - 1);
    while (mp->keys[i] != EMPTY_KEY && mp->keys[i] != key)
        i = (i + 1) & (mp->cap - 1);
    return i;
}

static bool map_get(const u64map *mp, uint64_t key, uint32_t *val) {
    if (!mp->cap) return false;
    size_t i = map_slot(mp, key);
    if (mp->keys[i] == EMPTY_KEY) return false;
    *val = mp->vals[i];
    return true;
}

static bool map_put(u64map *mp, uint64_t key, uint32_t val) {
    if (2 * (mp->n + 1) > mp->cap) {
        u64map big = {.cap = mp->cap ? mp->cap * 2 : 1024};
        big.keys = malloc(big.cap * sizeof *big.keys);
        big.vals = malloc(big.cap * sizeof *big.vals);
        if (!big.keys || !big.vals) {
            free(big.keys);
            free(big.vals);
            return false;
        }
        map_clear(&big);
        for (size_t i = 0; i < mp->cap; i++) {
            if (mp->keys[i] == EMPTY_KEY) continue;
            size_t j = map_slot(&big, mp->keys[i]);
            big.keys[j] = mp->keys[i];
            big.vals[j] = mp->vals[i];
        }
        big.n = mp->n;
        free(mp->keys);
        free(mp->vals);
        *mp = big;
    }
    size_t i = map_slot(mp, key);
    if (mp->keys[i] == EMPTY_KEY) mp->n++;
    mp->keys[i] = key;
    mp->vals[i] = val;
    return true;
}

static bool node_id(gmatch *m, uint32_t pos, uint32_t parent, uint32_t *id) {
    uint64_t key = (uint64_t)pos << 32 | parent;
    if (map_get(&m->node_ids, key, id)) return true;
    if (m->n_nodes >= MAX_NODES) return fail(m, CLINFER_ERR_UNSUPPORTED, "too many parse stacks");
    size_t cap = m->nodes_cap;
    if (!grow((void **)&m->nodes, &m->nodes_cap, m->n_nodes + 1, sizeof *m->nodes))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (m->nodes_cap != cap) {
        uint32_t *s = realloc(m->stamp, m->nodes_cap * sizeof *s);
        if (!s) return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        m->stamp = s;
    }
    *id = (uint32_t)m->n_nodes;
    m->nodes[m->n_nodes] = (gnode){pos, parent};
    m->stamp[m->n_nodes++] = 0;
    if (!map_put(&m->node_ids, key, *id))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    return true;
}

static bool add_top(gmatch *m, uint32_t top) {
    if (!grow((void **)&m->tops, &m->tops_cap, m->n_tops + 1, sizeof *m->tops))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    m->tops[m->n_tops++] = top;
    return true;
}

/* Expands the work list until every stack's top is a character class (or the stack is empty):
 * references push their rule's alternatives, ends return to the parent. Each (position, parent)
 * is visited once per step. */
static bool expand(gmatch *m, size_t n_work) {
    const grammar *g = m->g;
    uint32_t visits = 0;
    while (n_work) {
        work_item w = m->work[--n_work];
        uint32_t id;
        if (!node_id(m, w.pos, w.parent, &id)) return false;
        if (m->stamp[id] == m->cur_stamp) continue;
        m->stamp[id] = m->cur_stamp;
        if (++visits > MAX_VISITS)
            return fail(m, CLINFER_ERR_UNSUPPORTED, "too ambiguous: too many parse stacks at once");
        const gelem *e = &g->elems[w.pos];
        if (e->kind == GE_CLASS) {
            if (!add_top(m, id)) return false;
        } else if (e->kind == GE_END) {
            if (w.parent == NONE) {
                if (!add_top(m, ACCEPT)) return false;
                continue;
            }
            m->work[n_work++] = (work_item){m->nodes[w.parent].pos, m->nodes[w.parent].parent};
        } else {
            const grule *r = &g->rules[e->arg];
            /* A reference last in its alternative returns straight to the parent: right
             * recursion (x* as s ::= x s) then keeps stacks, and states, from growing. */
            uint32_t ret = w.parent;
            if (g->elems[w.pos + 1].kind != GE_END && !node_id(m, w.pos + 1, w.parent, &ret))
                return false;
            if (!grow((void **)&m->work, &m->work_cap, n_work + r->n_alts + 1, sizeof *m->work))
                return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
            for (uint32_t a = r->n_alts; a-- > 0;)
                m->work[n_work++] = (work_item){g->alts[r->first_alt + a], ret};
        }
        if (!grow((void **)&m->work, &m->work_cap, n_work + 1, sizeof *m->work))
            return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return true;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The set of m->tops (sorted, deduplicated here) as an id. */
static bool intern_tops(gmatch *m, uint32_t *set) {
    if (m->n_tops > 1) qsort(m->tops, m->n_tops, sizeof *m->tops, cmp_u32);
    size_t n = 0;
    for (size_t i = 0; i < m->n_tops; i++)
        if (!n || m->tops[i] != m->tops[n - 1]) m->tops[n++] = m->tops[i];
    m->n_tops = n;
    uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
    for (size_t i = 0; i < n; i++)
        h = mix(h ^ m->tops[i]) + i;
    if (m->set_index_cap < 2 * (m->n_sets + 1)) {
        size_t cap = m->set_index_cap ? m->set_index_cap * 2 : 1024;
        uint32_t *idx = calloc(cap, sizeof *idx);
        if (!idx) return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t s = 0; s < m->n_sets; s++) {
            size_t j = m->set_hash[s] & (cap - 1);
            while (idx[j])
                j = (j + 1) & (cap - 1);
            idx[j] = (uint32_t)s + 1;
        }
        free(m->set_index);
        m->set_index = idx;
        m->set_index_cap = cap;
    }
    size_t j = h & (m->set_index_cap - 1);
    for (; m->set_index[j]; j = (j + 1) & (m->set_index_cap - 1)) {
        uint32_t s = m->set_index[j] - 1;
        if (m->set_hash[s] == h && m->set_len[s] == n &&
            (!n || !memcmp(m->set_data + m->set_off[s], m->tops, n * sizeof *m->tops))) {
            *set = s;
            return true;
        }
    }
    size_t cap = m->sets_cap;
    if (!grow((void **)&m->set_data, &m->set_data_cap, m->set_data_n + n, sizeof *m->set_data) ||
        !grow((void **)&m->set_hash, &m->sets_cap, m->n_sets + 1, sizeof *m->set_hash))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    if (cap != m->sets_cap) {
        uint32_t *off = realloc(m->set_off, m->sets_cap * sizeof *off);
        if (off) m->set_off = off;
        uint32_t *len = off ? realloc(m->set_len, m->sets_cap * sizeof *len) : NULL;
        if (!len) return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        m->set_len = len;
    }
    if (n) memcpy(m->set_data + m->set_data_n, m->tops, n * sizeof *m->tops);
    m->set_off[m->n_sets] = (uint32_t)m->set_data_n;
    m->set_len[m->n_sets] = (uint32_t)n;
    m->set_hash[m->n_sets] = h;
    m->set_data_n += n;
    *set = (uint32_t)m->n_sets++;
    m->set_index[j] = *set + 1;
    return true;
}

static void begin_step(gmatch *m) {
    m->n_tops = 0;
    if (++m->cur_stamp == 0) { /* wrapped: old stamps could collide */
        memset(m->stamp, 0, m->n_nodes * sizeof *m->stamp);
        m->cur_stamp = 1;
    }
}

/* The set after code point cp from set; 0 when none may follow. */
static uint32_t advance(gmatch *m, uint32_t set, uint32_t cp) {
    uint64_t key = (uint64_t)set << 21 | cp;
    uint32_t next = 0;
    if (map_get(&m->steps, key, &next)) return next;
    begin_step(m);
    size_t n_work = 0;
    const grammar *g = m->g;
    for (uint32_t i = 0; i < m->set_len[set]; i++) {
        uint32_t t = m->set_data[m->set_off[set] + i];
        if (t == ACCEPT) continue;
        const gnode *nd = &m->nodes[t];
        if (!gclass_has(g, &g->classes[g->elems[nd->pos].arg], cp)) continue;
        if (!grow((void **)&m->work, &m->work_cap, n_work + 1, sizeof *m->work))
            return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory"), 0;
        m->work[n_work++] = (work_item){nd->pos + 1, nd->parent};
    }
    if (!expand(m, n_work) || !intern_tops(m, &next)) return 0;
    if (!map_put(&m->steps, key, next))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory"), 0;
    return next;
}

/* Whether some stack of set takes a code point of [lo, hi]. */
static bool takes_any(const gmatch *m, uint32_t set, uint32_t lo, uint32_t hi) {
    const grammar *g = m->g;
    for (uint32_t i = 0; i < m->set_len[set]; i++) {
        uint32_t t = m->set_data[m->set_off[set] + i];
        if (t != ACCEPT && gclass_meets(g, &g->classes[g->elems[m->nodes[t].pos].arg], lo, hi))
            return true;
    }
    return false;
}

/* Whether a partial character (need bytes to come) can still become one the set takes. */
static bool partial_ok(const gmatch *m, const gstate *s) {
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned bits = 6u * s->need;
    uint32_t lo = s->cp << bits, hi = lo | ((1u << bits) - 1);
    if (lo < min_cp[s->lead_len]) lo = min_cp[s->lead_len];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    return lo <= hi && !(lo >= 0xD800 && hi <= 0xDFFF) && takes_any(m, s->set, lo, hi);
}

bool gmatch_step(gmatch *m, gstate *s, uint8_t byte) {
    if (!s->set) return false;
    if (s->need) {
        if ((byte & 0xC0) != 0x80) return false;
        s->cp = s->cp << 6 | (byte & 0x3Fu);
        if (--s->need) return partial_ok(m, s);
        if (s->cp >= 0xD800 && s->cp <= 0xDFFF) return false;
        s->set = advance(m, s->set, s->cp);
    } else if (byte < 0x80) {
        s->set = advance(m, s->set, byte);
    } else {
        unsigned len = byte >= 0xC2 && byte < 0xE0   ? 2
                       : byte >= 0xE0 && byte < 0xF0 ? 3
                       : byte >= 0xF0 && byte < 0xF5 ? 4
                                                     : 0;
        if (!len) return false;
        *s = (gstate){s->set, byte & (0x7Fu >> len), (uint8_t)(len - 1), (uint8_t)len};
        return partial_ok(m, s);
    }
    s->cp = 0;
    return s->set != 0;
}

bool gmatch_can_end(const gmatch *m, gstate s) {
    return s.set && !s.need && m->set_len[s.set] &&
           m->set_data[m->set_off[s.set] + m->set_len[s.set] - 1] == ACCEPT;
}

clinfer_status gmatch_status(const gmatch *m) {
    return m->st;
}

size_t gmatch_size(const gmatch *m) {
    return m->n_nodes + m->set_data_n + m->steps.n;
}

static bool start_set(gmatch *m, uint32_t *set) {
    const grule *root = &m->g->rules[m->g->root];
    begin_step(m);
    if (!grow((void **)&m->work, &m->work_cap, root->n_alts + 1, sizeof *m->work))
        return fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    for (uint32_t a = 0; a < root->n_alts; a++)
        m->work[a] = (work_item){m->g->alts[root->first_alt + a], NONE};
    return expand(m, root->n_alts) && intern_tops(m, set);
}

gstate gmatch_start(gmatch *m) {
    gstate s = {0};
    if (!start_set(m, &s.set)) s.set = 0;
    return s;
}

/* Forgets every node, set and step but those of s, which is rebuilt in the fresh tables. */
void gmatch_compact(gmatch *m, gstate *s) {
    size_t n = m->set_len[s->set], total = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t t = m->set_data[m->set_off[s->set] + i]; t != ACCEPT && t != NONE;
             t = m->nodes[t].parent)
            total++;
    uint32_t *chains = malloc((total + n + 1) * sizeof *chains);
    if (!chains) {
        fail(m, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        s->set = 0;
        return;
    }
    size_t k = 0; /* per top: its depth, then its positions from the top down */
    for (size_t i = 0; i < n; i++) {
        uint32_t top = m->set_data[m->set_off[s->set] + i];
        size_t at = k++;
        chains[at] = 0;
        for (uint32_t t = top; t != ACCEPT && t != NONE; t = m->nodes[t].parent, chains[at]++)
            chains[k++] = m->nodes[t].pos;
    }
    m->n_nodes = m->set_data_n = m->n_sets = 0;
    map_clear(&m->node_ids);
    map_clear(&m->steps);
    if (m->set_index) memset(m->set_index, 0, m->set_index_cap * sizeof *m->set_index);
    uint32_t empty;
    m->n_tops = 0;
    bool ok = intern_tops(m, &empty);
    for (size_t i = 0, at = 0; ok && i < n; i++) {
        uint32_t depth = chains[at], t = NONE;
        for (uint32_t d = depth; ok && d-- > 0;)
            ok = node_id(m, chains[at + 1 + d], t, &t);
        at += 1 + depth;
        ok = ok && add_top(m, depth ? t : ACCEPT);
    }
    free(chains);
    if (!ok || !intern_tops(m, &s->set)) s->set = 0;
}

clinfer_status gmatch_create(const grammar *g, gmatch **out) {
    gmatch *m = calloc(1, sizeof *m);
    if (!m) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    m->g = g;
    uint32_t empty;
    if (!intern_tops(m, &empty)) { /* set 0: dead */
        clinfer_status st = m->st;
        gmatch_free(m);
        return st;
    }
    *out = m;
    return CLINFER_OK;
}

void gmatch_free(gmatch *m) {
    if (!m) return;
    free(m->nodes);
    free(m->stamp);
    free(m->node_ids.keys);
    free(m->node_ids.vals);
    free(m->set_data);
    free(m->set_off);
    free(m->set_len);
    free(m->set_hash);
    free(m->set_index);
    free(m->steps.keys);
    free(m->steps.vals);
    free(m->tops);
    free(m->work);
    free(m);
}

bool gmatch_full(gmatch *m, const char *text, size_t len) {
    gstate s = gmatch_start(m);
    for (size_t i = 0; i < len; i++)
        if (!gmatch_step(m, &s, (uint8_t)text[i])) return false;
    return gmatch_can_end(m, s);
}
