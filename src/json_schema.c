/* JSON schema to GBNF, for the schemas OpenAI's strict structured outputs accept. Each schema
 * node becomes a rule (sN); a fixed prelude holds JSON's own rules (value, string, number...).
 * Whitespace after each token is bounded and numbers' digits too, so a small model cannot run
 * on forever inside one value. Properties come in the schema's order; a required one must be
 * there, an optional one may be left out; keys outside properties are never generated (fewer
 * texts than the schema allows, each of them valid). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "grammar.h"

#define MAX_DEPTH 64
#define MAX_OUT (1u << 22)
#define MAX_COUNT 1000 /* minItems, maxItems, minLength, maxLength */

static const char prelude[] =
    "ws ::= [ \\t\\n]{0,20}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\" ws\n"
    "member ::= string \":\" ws value\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "string ::= \"\\\"\" char* \"\\\"\" ws\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "int-part ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "integer ::= int-part ws\n"
    "number ::= int-part ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? ws\n"
    "boolean ::= ( \"true\" | \"false\" ) ws\n"
    "null ::= \"null\" ws\n";

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

typedef struct {
    char *ref;
    char name[16];
} ref_rule;

typedef struct {
    sbuf out;
    const cJSON *root;
    ref_rule *refs;
    size_t n_refs, refs_cap;
    unsigned next_rule;
    int depth;
    clinfer_status st;
} gen;

static bool failf(gen *g, clinfer_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool failf(gen *g, clinfer_status st, const char *fmt, ...) {
    if (g->st != CLINFER_OK) return false;
    va_list ap;
    va_start(ap, fmt);
    g->st = err_failv(st, fmt, ap);
    va_end(ap);
    err_prefix("JSON schema");
    return false;
}

static bool put(gen *g, sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > MAX_OUT)
        return failf(g, CLINFER_ERR_UNSUPPORTED, "the grammar grows past %u bytes", MAX_OUT);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) return failf(g, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        b->s = q;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return true;
}

static bool puts_(gen *g, sbuf *b, const char *s) {
    return put(g, b, s, strlen(s));
}

/* bytes as a GBNF string literal. */
static bool put_literal(gen *g, sbuf *b, const char *s, size_t n) {
    bool ok = put(g, b, "\"", 1);
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            ok = put(g, b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\x%02X", c);
            ok = put(g, b, esc, 4);
        } else {
            ok = put(g, b, (const char *)&c, 1);
        }
    }
    return ok && put(g, b, "\"", 1);
}

/* A JSON value's compact text as a literal, then ws. */
static bool put_json_literal(gen *g, sbuf *b, const cJSON *v) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) return failf(g, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    bool ok = put_literal(g, b, text, strlen(text)) && puts_(g, b, " ws");
    cJSON_free(text);
    return ok;
}

static void new_name(gen *g, char name[16]) {
    snprintf(name, 16, "s%u", g->next_rule++);
}

static bool emit_into(gen *g, const cJSON *schema, const char *name);

/* A rule for schema; its name in name. */
static bool emit(gen *g, const cJSON *schema, char name[16]) {
    new_name(g, name);
    return emit_into(g, schema, name);
}

static bool is_annotation(const char *k) {
    static const char *const names[] = {"title",   "description", "default", "examples",
                                        "$schema", "$id",         "$comment"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(k, names[i])) return true;
    return false;
}

static bool check_keywords(gen *g, const cJSON *schema) {
    static const char *const known[] = {
        "type",        "properties", "required", "additionalProperties",
        "items",       "minItems",   "maxItems", "enum",
        "const",       "anyOf",      "$ref",     "$defs",
        "definitions", "minLength",  "maxLength"};
    for (const cJSON *k = schema->child; k; k = k->next) {
        bool ok = is_annotation(k->string);
        for (size_t i = 0; !ok && i < sizeof known / sizeof *known; i++)
            ok = !strcmp(k->string, known[i]);
        if (!ok)
            return failf(g, CLINFER_ERR_UNSUPPORTED, "keyword '%.100s' is not supported",
                         k->string);
    }
    return true;
}

/* "#", "#/$defs/NAME" or "#/definitions/NAME" (with JSON pointer's ~0 and ~1). */
static const cJSON *resolve(gen *g, const char *ref) {
    if (!strcmp(ref, "#")) return g->root;
    const char *prefixes[] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(ref, prefixes[i], n)) continue;
        char key[256];
        size_t k = 0;
        for (const char *p = ref + n; *p && k + 1 < sizeof key; p++) {
            if (*p == '/') return NULL;
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                key[k++] = p[1] == '0' ? '~' : '/';
                p++;
            } else {
                key[k++] = *p;
            }
        }
        key[k] = 0;
        return cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(g->root,
                                             prefixes[i][2] == '$' ? "$defs" : "definitions"),
            key);
    }
    return NULL;
}

/* The rule for a $ref, made once (before its body, so a schema may refer to itself). */
static bool emit_ref(gen *g, const char *ref, char name[16]) {
    for (size_t i = 0; i < g->n_refs; i++) {
        if (!strcmp(g->refs[i].ref, ref)) {
            memcpy(name, g->refs[i].name, 16);
            return true;
        }
    }
    const cJSON *target = resolve(g, ref);
    if (!target)
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "$ref '%.100s' names no definition", ref);
    if (g->n_refs == g->refs_cap) {
        size_t cap = g->refs_cap ? g->refs_cap * 2 : 8;
        ref_rule *r = realloc(g->refs, cap * sizeof *r);
        if (!r) return failf(g, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
        g->refs = r;
        g->refs_cap = cap;
    }
    ref_rule *r = &g->refs[g->n_refs];
    r->ref = strdup(ref);
    if (!r->ref) return failf(g, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    g->n_refs++;
    new_name(g, r->name);
    memcpy(name, r->name, 16);
    char own[16];
    memcpy(own, name, 16);
    return emit_into(g, target, own);
}

/* A non-negative count keyword, def when absent. */
static bool count(gen *g, const cJSON *schema, const char *key, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(schema, key);
    *out = def;
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(int)v->valuedouble)
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "%s must be a non-negative integer", key);
    if (v->valuedouble > MAX_COUNT)
        return failf(g, CLINFER_ERR_UNSUPPORTED, "%s above %d is not supported", key, MAX_COUNT);
    *out = (int)v->valuedouble;
    return true;
}

/* first, then ("," ws item) between min - 1 and max - 1 more times, in brackets. */
static bool put_list(gen *g, sbuf *b, const char *open, const char *close, const char *item,
                     int min, int max) {
    char buf[160];
    bool ok = puts_(g, b, open);
    if (max == 0) return ok && puts_(g, b, close);
    int lo = min > 0 ? min - 1 : 0;
    if (max < 0)
        snprintf(buf, sizeof buf, "%s ( \",\" ws %s ){%d,}", item, item, lo);
    else
        snprintf(buf, sizeof buf, "%s ( \",\" ws %s ){%d,%d}", item, item, lo, max - 1);
    ok = ok && puts_(g, b, min > 0 ? "" : "( ") && puts_(g, b, buf);
    return ok && puts_(g, b, min > 0 ? "" : " )?") && puts_(g, b, close);
}

static bool emit_array(gen *g, const cJSON *schema, sbuf *b) {
    int min, max;
    char item[16] = "value";
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (!count(g, schema, "minItems", 0, &min) || !count(g, schema, "maxItems", -1, &max))
        return false;
    if (max >= 0 && max < min) return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "maxItems < minItems");
    if (items && !emit(g, items, item)) return false;
    return put_list(g, b, "\"[\" ws ", " \"]\" ws", item, min, max);
}

static bool emit_string(gen *g, const cJSON *schema, sbuf *b) {
    int min, max;
    if (!count(g, schema, "minLength", 0, &min) || !count(g, schema, "maxLength", -1, &max))
        return false;
    if (max >= 0 && max < min)
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "maxLength < minLength");
    if (min == 0 && max < 0) return puts_(g, b, "string");
    char buf[64];
    if (max < 0)
        snprintf(buf, sizeof buf, "\"\\\"\" char{%d,} \"\\\"\" ws", min);
    else
        snprintf(buf, sizeof buf, "\"\\\"\" char{%d,%d} \"\\\"\" ws", min, max);
    return puts_(g, b, buf);
}

/* A property's key (JSON-escaped), ":" and value. */
static bool put_member(gen *g, sbuf *b, const char *key, const char *value) {
    sbuf json = {0};
    bool ok = put(g, &json, "\"", 1);
    for (const char *p = key; ok && *p; p++) {
        char esc[8];
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (c < 0x20)
            snprintf(esc, sizeof esc, "\\u%04x", c);
        else
            esc[0] = (char)c, esc[1] = 0;
        ok = puts_(g, &json, esc);
    }
    ok = ok && put(g, &json, "\"", 1) && put_literal(g, b, json.s, json.n) &&
         puts_(g, b, " ws \":\" ws ") && puts_(g, b, value);
    free(json.s);
    return ok;
}

/* A rule "name ::= text". */
static bool put_rule(gen *g, const char *name, const char *text) {
    return puts_(g, &g->out, name) && puts_(g, &g->out, " ::= ") && puts_(g, &g->out, text) &&
           puts_(g, &g->out, "\n");
}

/* A map: any keys, each value as additionalProperties says. */
static bool emit_map(gen *g, const cJSON *values, sbuf *b) {
    char value[16], member[16];
    sbuf text = {0};
    if (!emit(g, values, value)) return false;
    new_name(g, member);
    bool ok = puts_(g, &text, "string \":\" ws ") && puts_(g, &text, value) &&
              put_rule(g, member, text.s) &&
              put_list(g, b, "\"{\" ws ", " \"}\" ws", member, 0, -1);
    free(text.s);
    return ok;
}

/* Properties in order: f_i ::= m_i then each later one (a required one with its comma, an
 * optional one maybe), or, when m_i is optional, f_{i+1}. */
static bool emit_properties(gen *g, const cJSON *props, const cJSON *req, sbuf *b) {
    size_t n = (size_t)cJSON_GetArraySize(props);
    char(*member)[16] = calloc(n, sizeof *member);
    bool *required = calloc(n, sizeof *required), ok = member && required;
    char next[16] = "";
    if (!ok) failf(g, CLINFER_ERR_OUT_OF_MEMORY, "out of memory");
    size_t i = 0;
    for (const cJSON *p = props->child; ok && p; p = p->next, i++) {
        char value[16];
        sbuf text = {0};
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            required[i] = required[i] || !strcmp(r->valuestring, p->string);
        new_name(g, member[i]);
        ok = emit(g, p, value) && put_member(g, &text, p->string, value) &&
             put_rule(g, member[i], text.s);
        free(text.s);
    }
    for (i = n; ok && i-- > 0;) {
        char name[16];
        sbuf text = {0};
        new_name(g, name);
        ok = puts_(g, &text, member[i]);
        for (size_t j = i + 1; ok && j < n; j++)
            ok = puts_(g, &text, required[j] ? " \",\" ws " : " ( \",\" ws ") &&
                 puts_(g, &text, member[j]) && puts_(g, &text, required[j] ? "" : " )?");
        if (ok && !required[i])
            ok = puts_(g, &text, " | ") && puts_(g, &text, *next ? next : "\"\"");
        ok = ok && put_rule(g, name, text.s);
        memcpy(next, name, 16);
        free(text.s);
    }
    ok = ok && puts_(g, b, "\"{\" ws ") && puts_(g, b, next) && puts_(g, b, " \"}\" ws");
    free(member);
    free(required);
    return ok;
}

static bool emit_object(gen *g, const cJSON *schema, sbuf *b) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (props && !cJSON_IsObject(props))
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "properties must be an object");
    if (req && !cJSON_IsArray(req))
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "required must be an array");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r))
            return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "required lists property names");
        if (!cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return failf(g, CLINFER_ERR_INVALID_ARGUMENT,
                         "required property '%.100s' is not in properties", r->valuestring);
    }
    if (extra && !cJSON_IsBool(extra) && !cJSON_IsObject(extra))
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT,
                     "additionalProperties must be a boolean or a schema");
    if (props && props->child) return emit_properties(g, props, req, b);
    if (cJSON_IsFalse(extra)) return puts_(g, b, "\"{\" ws \"}\" ws");
    if (cJSON_IsObject(extra)) return emit_map(g, extra, b);
    return puts_(g, b, "object");
}

static bool emit_type(gen *g, const cJSON *schema, const char *type, sbuf *b) {
    if (!strcmp(type, "object")) return emit_object(g, schema, b);
    if (!strcmp(type, "array")) return emit_array(g, schema, b);
    if (!strcmp(type, "string")) return emit_string(g, schema, b);
    if (!strcmp(type, "number") || !strcmp(type, "integer") || !strcmp(type, "boolean") ||
        !strcmp(type, "null"))
        return puts_(g, b, type);
    return failf(g, CLINFER_ERR_UNSUPPORTED, "type '%.60s' is not supported", type);
}

/* The alternatives of an anyOf, an enum or a list of types. */
static bool emit_body(gen *g, const cJSON *schema, sbuf *b) {
    const cJSON *v;
    if (cJSON_IsTrue(schema) || (cJSON_IsObject(schema) && !schema->child))
        return puts_(g, b, "value");
    if (!cJSON_IsObject(schema))
        return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "a schema must be an object or true");
    if (!check_keywords(g, schema)) return false;
    if ((v = cJSON_GetObjectItemCaseSensitive(schema, "$ref"))) {
        char name[16];
        if (!cJSON_IsString(v))
            return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "$ref must be a string");
        return emit_ref(g, v->valuestring, name) && puts_(g, b, name);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(schema, "const"))) return put_json_literal(g, b, v);
    if ((v = cJSON_GetObjectItemCaseSensitive(schema, "enum"))) {
        if (!cJSON_IsArray(v) || !v->child)
            return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "enum must be a non-empty array");
        for (const cJSON *e = v->child; e; e = e->next)
            if ((e != v->child && !puts_(g, b, " | ")) || !put_json_literal(g, b, e)) return false;
        return true;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(schema, "anyOf"))) {
        if (!cJSON_IsArray(v) || !v->child)
            return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "anyOf must be a non-empty array");
        for (const cJSON *e = v->child; e; e = e->next) {
            char name[16];
            if ((e != v->child && !puts_(g, b, " | ")) || !emit(g, e, name) || !puts_(g, b, name))
                return false;
        }
        return true;
    }
    v = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (cJSON_IsString(v)) return emit_type(g, schema, v->valuestring, b);
    if (cJSON_IsArray(v) && v->child) {
        for (const cJSON *t = v->child; t; t = t->next) {
            if (!cJSON_IsString(t))
                return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "type lists hold strings");
            if ((t != v->child && !puts_(g, b, " | ")) || !emit_type(g, schema, t->valuestring, b))
                return false;
        }
        return true;
    }
    if (v) return failf(g, CLINFER_ERR_INVALID_ARGUMENT, "type must be a string or a list");
    if (cJSON_GetObjectItemCaseSensitive(schema, "properties")) return emit_object(g, schema, b);
    if (cJSON_GetObjectItemCaseSensitive(schema, "items")) return emit_array(g, schema, b);
    return puts_(g, b, "value");
}

static bool emit_into(gen *g, const cJSON *schema, const char *name) {
    if (++g->depth > MAX_DEPTH)
        return failf(g, CLINFER_ERR_UNSUPPORTED, "schemas nested more than %d deep", MAX_DEPTH);
    sbuf body = {0};
    bool ok = emit_body(g, schema, &body) && put_rule(g, name, body.s);
    free(body.s);
    g->depth--;
    return ok;
}

clinfer_status json_schema_to_gbnf(const char *schema, char **out) {
    gen g = {0};
    cJSON *doc = NULL;
    if (!out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "JSON schema: NULL argument");
    *out = NULL;
    if (schema) {
        const char *end = NULL;
        doc = cJSON_ParseWithOpts(schema, &end, true);
        if (!doc) {
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "JSON schema: not valid JSON at offset %zu",
                            end ? (size_t)(end - schema) : 0);
        }
    }
    g.root = doc;
    if (puts_(&g, &g.out, prelude)) {
        if (doc)
            emit_into(&g, doc, "root");
        else
            puts_(&g, &g.out, "root ::= object\n");
    }
    for (size_t i = 0; i < g.n_refs; i++)
        free(g.refs[i].ref);
    free(g.refs);
    cJSON_Delete(doc);
    if (g.st != CLINFER_OK) {
        free(g.out.s);
        return g.st;
    }
    *out = g.out.s;
    return CLINFER_OK;
}

clinfer_status clinfer_json_schema_to_grammar(const char *schema_json, char **gbnf_out) {
    return json_schema_to_gbnf(schema_json, gbnf_out);
}
