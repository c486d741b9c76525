/* Constrained sampling: GBNF grammars (llama.cpp's format) compiled to a matcher over UTF-8 code
 * points, and the masks of the vocabulary's tokens that can continue a valid output.
 *   grammar_parse.c  the GBNF text to rules of element sequences (repetitions become rules);
 *   grammar_check.c  undefined rules, the root, left recursion;
 *   grammar_match.c  parse stacks, interned so that a state is one id, stepped byte by byte;
 *   grammar_mask.c   a trie over the token strings walked against the matcher;
 *   grammar_vocab.c  that trie from a loaded model's vocabulary;
 *   json_schema.c    JSON schema to GBNF.
 * Bad input gives a status and a message (err_fail), never a crash. */
#ifndef CLINFER_GRAMMAR_H
#define CLINFER_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"

/* ---- the compiled grammar ---- */

enum { GE_END, GE_REF, GE_CLASS }; /* end of an alternative, a rule reference, a character set */

typedef struct {
    uint8_t kind;
    uint32_t arg; /* GE_REF: the rule; GE_CLASS: the class */
} gelem;

typedef struct {
    uint32_t lo, hi; /* code points, inclusive */
} grange;

typedef struct {
    bool negated;
    uint32_t first, n; /* ranges[first .. first + n) */
} gclass;

typedef struct {
    char *name;
    uint32_t first_alt, n_alts; /* alts[first_alt ..): the start element of each alternative */
    uint32_t line, col;         /* where it is defined (or, generated, the operator) */
    bool defined;
} grule;

typedef struct {
    gelem *elems;
    uint32_t *alts;
    grule *rules;
    gclass *classes;
    grange *ranges;
    size_t n_elems, n_alts, n_rules, n_classes, n_ranges;
    uint32_t root;
} grammar;

/* Parses and checks GBNF text (len bytes; NUL bytes are refused): CLINFER_ERR_INVALID_ARGUMENT
 * with "line L, column C: ..." for a syntax error, an undefined or left-recursive rule. */
clinfer_status grammar_parse(const char *text, size_t len, grammar **out);
void grammar_free(grammar *g);
/* Called by grammar_parse: every used rule defined, a root, no left recursion. */
clinfer_status grammar_check(const grammar *g);
bool gclass_has(const grammar *g, const gclass *c, uint32_t cp);
/* Whether the class holds any code point of [lo, hi]. */
bool gclass_meets(const grammar *g, const gclass *c, uint32_t lo, uint32_t hi);

/* ---- the matcher ---- */

typedef struct gmatch gmatch;

/* A position in the output: a set of parse stacks (an id in the matcher) and the bytes of a
 * UTF-8 character begun but not finished. set 0 is the dead state. */
typedef struct {
    uint32_t set;
    uint32_t cp;      /* the partial character's bits so far */
    uint8_t need;     /* continuation bytes still to come */
    uint8_t lead_len; /* the partial character's length in bytes */
} gstate;

/* Borrows g, which must outlive the matcher. */
clinfer_status gmatch_create(const grammar *g, gmatch **out);
void gmatch_free(gmatch *m);
gstate gmatch_start(gmatch *m);
/* One byte of output: false when it cannot continue (dead) or the state grew past the
 * matcher's bounds (gmatch_status then says so). */
bool gmatch_step(gmatch *m, gstate *s, uint8_t byte);
/* Whether the output may end here. */
bool gmatch_can_end(const gmatch *m, gstate s);
clinfer_status gmatch_status(const gmatch *m);
/* Sets made since creation: when many, gmatch_compact rebuilds the tables around s, which stays
 * valid (its id may change); cached results keyed by set ids must then be dropped. */
size_t gmatch_size(const gmatch *m);
void gmatch_compact(gmatch *m, gstate *s);
/* For tests: whether the whole of text is a complete match. */
bool gmatch_full(gmatch *m, const char *text, size_t len);

/* ---- token masks ---- */

enum { GV_TEXT, GV_EOG, GV_NEVER }; /* how a token takes part */

typedef struct gvocab gvocab;

/* n tokens: text[i] (len[i] bytes) and kind[i]; copies what it needs. A vocabulary is
 * reference counted and read-only once made, so samplers on several threads share one. */
clinfer_status gvocab_create(size_t n, const char *const *text, const size_t *len,
                             const uint8_t *kind, gvocab **out);
/* A new vocabulary built from the model's tokens (about 150 ms for 49k tokens). */
clinfer_status gvocab_from_model(const clinfer_model *model, gvocab **out);
/* The model's own, built by the first call (thread-safe) and kept until the model is freed:
 * *out is a new reference. */
clinfer_status gvocab_of_model(const clinfer_model *model, gvocab **out);
gvocab *gvocab_ref(gvocab *v);
/* Drops a reference; the last frees it. */
void gvocab_free(gvocab *v);

/* A grammar, its matcher and a vocabulary: what a sampler holds. */
typedef struct gconstraint gconstraint;

/* Takes the caller's reference to the vocabulary (dropped with the constraint). */
clinfer_status gconstraint_create(const char *gbnf, size_t len, gvocab *vocab, gconstraint **out);
void gconstraint_free(gconstraint *c);
/* The tokens that may come next, as bits (bit i of words[i / 64]); valid until the next call. */
clinfer_status gconstraint_mask(gconstraint *c, const uint64_t **words);
size_t gconstraint_n_tokens(const gconstraint *c);
/* Whether the mask would allow the token, without building the mask: a token the model prefers
 * is usually allowed, and checking its bytes is far cheaper than walking the trie. */
clinfer_status gconstraint_allows(gconstraint *c, int32_t token, bool *ok);
/* Advances past a token the mask allowed; an end-of-generation token ends the output. */
clinfer_status gconstraint_accept(gconstraint *c, int32_t token);

/* ---- JSON schema ---- */

/* GBNF for the instances of a JSON schema (NULL: any JSON object); *out is malloc'd. */
clinfer_status json_schema_to_gbnf(const char *schema, char **out);

#endif
