/* GBNF text to rules. Each rule's body is built as its alternatives' elements, each alternative
 * closed by GE_END; groups and repetitions become rules of their own (x* is s ::= x s | "",
 * x{2,4} is x x o2 with o2 ::= x o1 | "", o1 ::= x | ""), so the matcher sees only sequences of
 * character sets and references. As in llama.cpp, a newline ends a rule's body outside
 * parentheses (here a line may also go on with "|"); "#" starts a comment. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"

#define MAX_ELEMS (1u << 21) /* every element of every rule: bounds memory for any input */
#define MAX_REPEAT 10000u    /* the largest m or n of x{m,n} */
#define MAX_DEPTH 200        /* nested parentheses */
#define UNBOUNDED UINT32_MAX

typedef struct {
    gelem *e;
    size_t n, cap;
} body;

typedef struct {
    const char *s;
    size_t len, pos;
    grammar *g;
    body *bodies; /* one per rule */
    size_t rules_cap, classes_cap, ranges_cap;
    uint32_t *index; /* open addressing over the named rules: rule + 1, 0 empty */
    size_t index_cap;
    size_t total_elems;
    int depth;
    clinfer_status st;
} parser;

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static void where(const parser *p, size_t pos, uint32_t *line, uint32_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)p->s[i] & 0xC0) != 0x80) {
            ++*col;
        }
    }
}

/* The first error wins; later ones (while unwinding) are dropped. */
__attribute__((format(printf, 3, 4))) static bool fail_at(parser *p, size_t pos, const char *fmt,
                                                          ...) {
    if (p->st != CLINFER_OK) return false;
    va_list ap;
    va_start(ap, fmt);
    p->st = err_failv(CLINFER_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    uint32_t line, col;
    where(p, pos, &line, &col);
    err_prefix("grammar: line %u, column %u", line, col);
    return false;
}

static bool oom(parser *p) {
    if (p->st == CLINFER_OK) p->st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    return false;
}

/* What the text holds at pos, for messages. */
static const char *shown(const parser *p, char buf[8]) {
    if (p->pos >= p->len) return "the end";
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '\n') return "a newline";
    if (c < 0x20 || c >= 0x7F) {
        snprintf(buf, 8, "0x%02X", c);
        return buf;
    }
    snprintf(buf, 8, "'%c'", c);
    return buf;
}

static bool push(parser *p, uint32_t rule, uint8_t kind, uint32_t arg) {
    body *b = &p->bodies[rule];
    if (++p->total_elems > MAX_ELEMS)
        return fail_at(p, p->pos, "the grammar grows past %u elements", MAX_ELEMS);
    if (!grow((void **)&b->e, &b->cap, b->n + 1, sizeof *b->e)) return oom(p);
    b->e[b->n++] = (gelem){kind, arg};
    return true;
}

static bool new_rule(parser *p, const char *name, size_t name_len, uint32_t *out) {
    grammar *g = p->g;
    size_t cap = p->rules_cap;
    if (!grow((void **)&g->rules, &p->rules_cap, g->n_rules + 1, sizeof *g->rules)) return oom(p);
    if (p->rules_cap != cap) {
        body *b = realloc(p->bodies, p->rules_cap * sizeof *b);
        if (!b) return oom(p);
        p->bodies = b;
    }
    char *copy = malloc(name_len + 1);
    if (!copy) return oom(p);
    memcpy(copy, name, name_len);
    copy[name_len] = 0;
    uint32_t line, col;
    where(p, p->pos, &line, &col);
    g->rules[g->n_rules] = (grule){.name = copy, .line = line, .col = col};
    p->bodies[g->n_rules] = (body){0};
    *out = (uint32_t)g->n_rules++;
    return true;
}

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The rule of that name, made (undefined) at its first mention. */
static bool named_rule(parser *p, const char *name, size_t n, uint32_t *out) {
    if (p->index_cap < 2 * (p->g->n_rules + 1)) {
        size_t cap = p->index_cap ? p->index_cap * 2 : 64;
        uint32_t *idx = calloc(cap, sizeof *idx);
        if (!idx) return oom(p);
        for (size_t i = 0; i < p->index_cap; i++) {
            if (!p->index[i]) continue;
            const char *nm = p->g->rules[p->index[i] - 1].name;
            size_t j = hash_name(nm, strlen(nm)) & (cap - 1);
            while (idx[j])
                j = (j + 1) & (cap - 1);
            idx[j] = p->index[i];
        }
        free(p->index);
        p->index = idx;
        p->index_cap = cap;
    }
    size_t j = hash_name(name, n) & (p->index_cap - 1);
    for (; p->index[j]; j = (j + 1) & (p->index_cap - 1)) {
        const char *nm = p->g->rules[p->index[j] - 1].name;
        if (strlen(nm) == n && !memcmp(nm, name, n)) {
            *out = p->index[j] - 1;
            return true;
        }
    }
    if (!new_rule(p, name, n, out)) return false;
    p->index[j] = *out + 1;
    return true;
}

/* A rule of the parser's making, named after the one it serves. */
static bool generated_rule(parser *p, uint32_t parent, uint32_t *out) {
    char name[96];
    int n = snprintf(name, sizeof name, "%.60s-%zu", p->g->rules[parent].name, p->g->n_rules);
    if (!new_rule(p, name, (size_t)n, out)) return false;
    p->g->rules[*out].defined = true;
    return true;
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static void skip_space(parser *p, bool newlines) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n')
                p->pos++;
        } else {
            return;
        }
    }
}

static size_t word_len(const parser *p) {
    size_t n = 0;
    while (p->pos + n < p->len && is_word(p->s[p->pos + n]))
        n++;
    return n;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the grammar text, strictly decoded. */
static bool decode_utf8(parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->s + p->pos;
    size_t left = p->len - p->pos;
    unsigned n = s[0] < 0x80                   ? 1
                 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2
                 : s[0] >= 0xE0 && s[0] < 0xF0 ? 3
                 : s[0] >= 0xF0 && s[0] < 0xF5 ? 4
                                               : 0;
    if (!n || n > left) return fail_at(p, p->pos, "invalid UTF-8");
    uint32_t v = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (unsigned i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail_at(p, p->pos, "invalid UTF-8");
        v = v << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail_at(p, p->pos, "invalid UTF-8");
    *cp = v;
    p->pos += n;
    return true;
}

/* A character of a literal or class: an escape or a UTF-8 character. */
static bool parse_char(parser *p, uint32_t *cp) {
    if (p->s[p->pos] != '\\') return decode_utf8(p, cp);
    size_t at = p->pos++;
    if (p->pos >= p->len) return fail_at(p, at, "an escape at the end of the grammar");
    char c = p->s[p->pos++];
    static const char plain[] = "\\\"'[]-^/";
    int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++, p->pos++) {
            int h = p->pos < p->len ? hex_value(p->s[p->pos]) : -1;
            if (h < 0) return fail_at(p, at, "\\%c needs %d hex digits", c, digits);
            v = v << 4 | (uint32_t)h;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return fail_at(p, at, "\\%c escape U+%X is not a Unicode scalar value", c, v);
        *cp = v;
    } else if (c == 'n' || c == 'r' || c == 't') {
        *cp = c == 'n' ? '\n' : c == 'r' ? '\r' : '\t';
    } else if (c && strchr(plain, c)) {
        *cp = (unsigned char)c;
    } else {
        return fail_at(p, at, "unknown escape '\\%c'", c >= 0x20 && c < 0x7F ? c : '?');
    }
    return true;
}

static bool add_class(parser *p, uint32_t rule, bool negated) {
    grammar *g = p->g;
    if (!grow((void **)&g->classes, &p->classes_cap, g->n_classes + 1, sizeof *g->classes))
        return oom(p);
    g->classes[g->n_classes] = (gclass){negated, (uint32_t)g->n_ranges, 0};
    return push(p, rule, GE_CLASS, (uint32_t)g->n_classes++);
}

/* Adds [lo, hi] to the class made last. */
static bool add_range(parser *p, uint32_t lo, uint32_t hi) {
    grammar *g = p->g;
    if (!grow((void **)&g->ranges, &p->ranges_cap, g->n_ranges + 1, sizeof *g->ranges))
        return oom(p);
    g->ranges[g->n_ranges++] = (grange){lo, hi};
    g->classes[g->n_classes - 1].n++;
    return true;
}

static bool parse_literal(parser *p, uint32_t rule) {
    size_t at = p->pos++;
    while (p->pos < p->len && p->s[p->pos] != '"') {
        uint32_t cp;
        if (p->s[p->pos] == '\n') break;
        if (!parse_char(p, &cp) || !add_class(p, rule, false) || !add_range(p, cp, cp))
            return false;
    }
    if (p->pos >= p->len || p->s[p->pos] != '"')
        return fail_at(p, at, "a string literal without its closing '\"'");
    p->pos++;
    return true;
}

static bool parse_class(parser *p, uint32_t rule) {
    size_t at = p->pos++;
    bool negated = p->pos < p->len && p->s[p->pos] == '^';
    if (negated) p->pos++;
    if (!add_class(p, rule, negated)) return false;
    while (p->pos < p->len && p->s[p->pos] != ']') {
        uint32_t lo, hi;
        if (p->s[p->pos] == '\n') break;
        if (!parse_char(p, &lo)) return false;
        hi = lo;
        if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            size_t dash = p->pos++;
            if (!parse_char(p, &hi)) return false;
            if (hi < lo) return fail_at(p, dash, "range U+%X-U+%X runs backwards", lo, hi);
        }
        if (!add_range(p, lo, hi)) return false;
    }
    if (p->pos >= p->len || p->s[p->pos] != ']')
        return fail_at(p, at, "a character class without its closing ']'");
    if (!negated && p->g->classes[p->g->n_classes - 1].n == 0)
        return fail_at(p, at, "an empty character class matches nothing");
    p->pos++;
    return true;
}

static bool parse_count(parser *p, uint32_t *v) {
    size_t at = p->pos;
    uint64_t n = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        n = n * 10 + (uint64_t)(p->s[p->pos++] - '0');
        if (n > MAX_REPEAT) return fail_at(p, at, "a repetition count above %u", MAX_REPEAT);
    }
    *v = (uint32_t)n;
    return p->pos > at;
}

/* {m}, {m,}, {m,n}, {,n} after the item; pos at '{'. */
static bool parse_braces(parser *p, uint32_t *min, uint32_t *max) {
    size_t at = p->pos++;
    skip_space(p, false);
    bool have_min = parse_count(p, min);
    if (p->st != CLINFER_OK) return false;
    if (!have_min) *min = 0;
    skip_space(p, false);
    if (p->pos < p->len && p->s[p->pos] == ',') {
        p->pos++;
        skip_space(p, false);
        if (!parse_count(p, max)) {
            if (p->st != CLINFER_OK) return false;
            *max = UNBOUNDED;
        }
        skip_space(p, false);
    } else if (have_min) {
        *max = *min;
    } else {
        return fail_at(p, at, "expected a count in '{...}'");
    }
    if (p->pos >= p->len || p->s[p->pos] != '}')
        return fail_at(p, at, "expected '}' to close the repetition");
    p->pos++;
    if (*max < *min)
        return fail_at(p, at, "repetition {%u,%u}: the maximum is below the minimum", *min, *max);
    return true;
}

/* Replaces the item body[rule][start ..) by its repetition min..max times. */
static bool repeat(parser *p, uint32_t rule, size_t start, uint32_t min, uint32_t max) {
    body *b = &p->bodies[rule];
    if (b->n == start)
        return fail_at(p, p->pos - 1, "a repetition operator with nothing before it");
    gelem item = b->e[start];
    if (b->n - start > 1) { /* a literal of several characters: its own rule */
        uint32_t w;
        if (!generated_rule(p, rule, &w)) return false;
        b = &p->bodies[rule];
        for (size_t i = start; i < b->n; i++)
            if (!push(p, w, b->e[i].kind, b->e[i].arg)) return false;
        if (!push(p, w, GE_END, 0)) return false;
        item = (gelem){GE_REF, w};
    }
    p->total_elems -= p->bodies[rule].n - start;
    p->bodies[rule].n = start;
    for (uint32_t i = 0; i < min; i++)
        if (!push(p, rule, item.kind, item.arg)) return false;
    if (max == min) return true;
    uint32_t tail, prev = 0;
    for (uint32_t k = 0; k < (max == UNBOUNDED ? 1 : max - min); k++, prev = tail) {
        /* tail ::= item next | "" with next the rule itself (unbounded) or the shorter tail */
        if (!generated_rule(p, rule, &tail) || !push(p, tail, item.kind, item.arg)) return false;
        if (max == UNBOUNDED && !push(p, tail, GE_REF, tail)) return false;
        if (k > 0 && !push(p, tail, GE_REF, prev)) return false;
        if (!push(p, tail, GE_END, 0) || !push(p, tail, GE_END, 0)) return false;
    }
    return push(p, rule, GE_REF, tail);
}

static bool parse_alternates(parser *p, uint32_t rule, bool nested);

static bool parse_group(parser *p, uint32_t rule) {
    size_t at = p->pos++;
    if (++p->depth > MAX_DEPTH)
        return fail_at(p, at, "parentheses nested more than %d deep", MAX_DEPTH);
    uint32_t sub;
    if (!generated_rule(p, rule, &sub)) return false;
    skip_space(p, true);
    if (!parse_alternates(p, sub, true)) return false;
    if (p->pos >= p->len || p->s[p->pos] != ')') {
        char buf[8];
        uint32_t line, col;
        where(p, at, &line, &col);
        return fail_at(p, p->pos, "expected ')' to close the '(' of line %u, column %u, found %s",
                       line, col, shown(p, buf));
    }
    p->pos++;
    p->depth--;
    return push(p, rule, GE_REF, sub);
}

static bool parse_sequence(parser *p, uint32_t rule, bool nested) {
    size_t item = p->bodies[rule].n;
    bool have_item = false;
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        size_t start = p->bodies[rule].n;
        if (c == '"') {
            if (!parse_literal(p, rule)) return false;
        } else if (c == '[') {
            if (!parse_class(p, rule)) return false;
        } else if (c == '.') {
            p->pos++;
            if (!add_class(p, rule, true)) return false;
        } else if (c == '(') {
            if (!parse_group(p, rule)) return false;
        } else if (is_word(c)) {
            uint32_t ref;
            size_t n = word_len(p);
            if (!named_rule(p, p->s + p->pos, n, &ref) || !push(p, rule, GE_REF, ref)) return false;
            p->pos += n;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (!have_item) return fail_at(p, p->pos, "'%c' with nothing before it to repeat", c);
            uint32_t min = c == '+', max = c == '?' ? 1 : UNBOUNDED;
            if (c == '{') {
                if (!parse_braces(p, &min, &max)) return false;
            } else {
                p->pos++;
            }
            if (!repeat(p, rule, item, min, max)) return false;
            start = item;
        } else if (c == '<') {
            return fail_at(p, p->pos, "token references ('<...>') are not supported");
        } else {
            return true;
        }
        item = start;
        have_item = true;
        skip_space(p, nested);
    }
    return true;
}

static bool parse_alternates(parser *p, uint32_t rule, bool nested) {
    for (;;) {
        if (!parse_sequence(p, rule, nested) || !push(p, rule, GE_END, 0)) return false;
        size_t save = p->pos;
        skip_space(p, true);
        if (p->pos >= p->len || p->s[p->pos] != '|') {
            p->pos = save;
            return true;
        }
        p->pos++;
        skip_space(p, true);
    }
}

static bool parse_rule(parser *p) {
    size_t at = p->pos, n = word_len(p);
    char buf[8];
    if (!n) return fail_at(p, at, "expected a rule name, found %s", shown(p, buf));
    uint32_t rule;
    if (!named_rule(p, p->s + at, n, &rule)) return false;
    grule *r = &p->g->rules[rule];
    if (r->defined)
        return fail_at(p, at, "rule '%s' is defined twice (first at line %u)", r->name, r->line);
    where(p, at, &r->line, &r->col);
    r->defined = true;
    p->pos += n;
    skip_space(p, false);
    if (p->len - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3))
        return fail_at(p, p->pos, "expected '::=' after rule name '%s', found %s", r->name,
                       shown(p, buf));
    p->pos += 3;
    skip_space(p, true);
    if (!parse_alternates(p, rule, false)) return false;
    skip_space(p, false);
    if (p->pos < p->len && p->s[p->pos] != '\n' && p->s[p->pos] != '\r')
        return fail_at(p, p->pos, "unexpected %s in rule '%s'", shown(p, buf),
                       p->g->rules[rule].name);
    return true;
}

/* Lays the bodies end to end and records where each alternative starts. */
static bool link(parser *p) {
    grammar *g = p->g;
    size_t n_alts = 0;
    for (size_t r = 0; r < g->n_rules; r++)
        for (size_t i = 0; i < p->bodies[r].n; i++)
            n_alts += p->bodies[r].e[i].kind == GE_END;
    g->elems = malloc((p->total_elems + 1) * sizeof *g->elems);
    g->alts = malloc((n_alts + 1) * sizeof *g->alts);
    if (!g->elems || !g->alts) return oom(p);
    for (size_t r = 0; r < g->n_rules; r++) {
        body *b = &p->bodies[r];
        g->rules[r].first_alt = (uint32_t)g->n_alts;
        for (size_t i = 0; i < b->n; i++) {
            if (i == 0 || b->e[i - 1].kind == GE_END) g->alts[g->n_alts++] = (uint32_t)g->n_elems;
            g->elems[g->n_elems++] = b->e[i];
        }
        g->rules[r].n_alts = (uint32_t)g->n_alts - g->rules[r].first_alt;
    }
    return true;
}

clinfer_status grammar_parse(const char *text, size_t len, grammar **out) {
    if (!text || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "grammar: NULL argument");
    *out = NULL;
    parser p = {.s = text, .len = len};
    p.g = calloc(1, sizeof *p.g);
    if (!p.g) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    const char *nul = memchr(text, 0, len);
    if (nul) fail_at(&p, (size_t)(nul - text), "a NUL byte in the grammar");
    skip_space(&p, true);
    while (p.st == CLINFER_OK && p.pos < p.len) {
        if (parse_rule(&p)) skip_space(&p, true);
    }
    if (p.st == CLINFER_OK && link(&p)) p.st = grammar_check(p.g);
    for (size_t r = 0; r < p.g->n_rules; r++)
        free(p.bodies[r].e);
    free(p.bodies);
    free(p.index);
    if (p.st != CLINFER_OK) {
        grammar_free(p.g);
        return p.st;
    }
    *out = p.g;
    return CLINFER_OK;
}

void grammar_free(grammar *g) {
    if (!g) return;
    for (size_t r = 0; r < g->n_rules; r++)
        free(g->rules[r].name);
    free(g->rules);
    free(g->elems);
    free(g->alts);
    free(g->classes);
    free(g->ranges);
    free(g);
}
