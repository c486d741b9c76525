/* What a parsed grammar must satisfy before it is matched: every referenced rule defined, a rule
 * named root, and no left recursion (a rule reaching itself before consuming a character: the
 * matcher expands references eagerly, so such a rule would expand forever). Nullable rules count,
 * so x* with an x that can match nothing is left-recursive too. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"

/* Which rules can match the empty string: iterated to a fixpoint. */
static void find_nullable(const grammar *g, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            const grule *rule = &g->rules[r];
            for (uint32_t a = 0; a < rule->n_alts && !nullable[r]; a++) {
                const gelem *e = &g->elems[g->alts[rule->first_alt + a]];
                while (e->kind == GE_REF && nullable[e->arg])
                    e++;
                if (e->kind == GE_END) nullable[r] = changed = true;
            }
        }
    }
}

typedef struct {
    uint32_t rule, alt, off; /* looking at element off of alternative alt */
} frame;

/* Depth-first over "r may start with s" edges; a rule met again while on the path is a cycle.
 * color: 0 unseen, 1 on the path, 2 done. */
static clinfer_status find_left_recursion(const grammar *g, const bool *nullable, uint8_t *color,
                                          frame *path) {
    for (uint32_t start = 0; start < g->n_rules; start++) {
        if (color[start]) continue;
        size_t depth = 0;
        path[depth++] = (frame){start, 0, 0};
        color[start] = 1;
        while (depth) {
            frame *f = &path[depth - 1];
            const grule *rule = &g->rules[f->rule];
            if (f->alt == rule->n_alts) {
                color[f->rule] = 2;
                depth--;
                continue;
            }
            const gelem *e = &g->elems[g->alts[rule->first_alt + f->alt] + f->off];
            if (e->kind != GE_REF || !nullable[e->arg]) { /* what follows is not leftmost */
                f->alt++;
                f->off = 0;
            } else {
                f->off++;
            }
            if (e->kind != GE_REF) continue;
            if (color[e->arg] == 1) {
                const grule *r = &g->rules[e->arg];
                return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "grammar: line %u, column %u: rule '%s' is left-recursive: it can "
                                "reach itself before matching a character (a repetition of "
                                "something that can match nothing counts)",
                                r->line, r->col, r->name);
            }
            if (color[e->arg] == 0) {
                color[e->arg] = 1;
                path[depth++] = (frame){e->arg, 0, 0};
            }
        }
    }
    return CLINFER_OK;
}

clinfer_status grammar_check(const grammar *g) {
    clinfer_status st = CLINFER_OK;
    bool *nullable = NULL;
    uint8_t *color = NULL;
    frame *path = NULL;
    for (size_t r = 0; r < g->n_rules; r++)
        if (!g->rules[r].defined)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "grammar: line %u, column %u: rule '%s' is used but never defined",
                            g->rules[r].line, g->rules[r].col, g->rules[r].name);
    bool have_root = false;
    for (size_t r = 0; r < g->n_rules && !have_root; r++) {
        if (!strcmp(g->rules[r].name, "root")) {
            have_root = true;
            ((grammar *)g)->root = (uint32_t)r;
        }
    }
    if (!have_root)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "grammar: no rule named 'root' (where the output starts)");
    nullable = calloc(g->n_rules, sizeof *nullable);
    color = calloc(g->n_rules, sizeof *color);
    path = malloc(g->n_rules * sizeof *path);
    if (!nullable || !color || !path) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
        goto cleanup;
    }
    find_nullable(g, nullable);
    st = find_left_recursion(g, nullable, color, path);
cleanup:
    free(nullable);
    free(color);
    free(path);
    return st;
}

bool gclass_has(const grammar *g, const gclass *c, uint32_t cp) {
    return gclass_meets(g, c, cp, cp);
}

bool gclass_meets(const grammar *g, const gclass *c, uint32_t lo, uint32_t hi) {
    const grange *r = c->n ? g->ranges + c->first : NULL; /* a grammar with no ranges has none */
    if (!c->negated) {
        for (uint32_t i = 0; i < c->n; i++)
            if (r[i].lo <= hi && lo <= r[i].hi) return true;
        return false;
    }
    /* Negated: some point of [lo, hi] outside every range. Walk lo upwards past covering ranges
     * (at most n passes, as each pass moves past one). */
    for (uint32_t pass = 0; pass <= c->n; pass++) {
        bool moved = false;
        for (uint32_t i = 0; i < c->n; i++) {
            if (r[i].lo <= lo && lo <= r[i].hi) {
                if (r[i].hi >= hi) return false;
                lo = r[i].hi + 1;
                moved = true;
            }
        }
        if (!moved) return true;
    }
    return false;
}
