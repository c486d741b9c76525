/* clinfer serve: strict JSON for request bodies (serve_request.h's serve_parse_strict). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

#define BAD(...) serve_error_set(err, 400, "invalid_request_error", __VA_ARGS__)

/* cJSON accepts more than JSON, and where it reads a body otherwise than other parsers would,
 * a request changes without a word: text after the value, numbers with leading zeros, control
 * bytes as whitespace or inside strings, duplicate keys (cJSON takes the first, most parsers
 * the last) and NUL escapes (its strings end there). A pass over the text that cJSON accepted
 * refuses them; duplicate keys are looked for in the parsed tree. */

#define MAX_DEPTH (CJSON_NESTING_LIMIT + 2)

typedef struct {
    const char *begin, *at, *end;
    /* the key of the member each open object or array is, for messages ("" at the top) */
    const char *key[MAX_DEPTH];
    int key_len[MAX_DEPTH];
    size_t depth;
} lexer;

static bool json_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool digits(lexer *x) {
    const char *start = x->at;
    while (x->at < x->end && *x->at >= '0' && *x->at <= '9')
        x->at++;
    return x->at > start;
}

/* A number as RFC 8259 writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number_token(lexer *x, serve_error *err) {
    const char *start = x->at;
    if (*x->at == '-') x->at++;
    const char *first = x->at;
    bool ok = digits(x) && (*first != '0' || x->at - first == 1);
    if (ok && x->at < x->end && *x->at == '.') {
        x->at++;
        ok = digits(x);
    }
    if (ok && x->at < x->end && (*x->at == 'e' || *x->at == 'E')) {
        x->at++;
        if (x->at < x->end && (*x->at == '+' || *x->at == '-')) x->at++;
        ok = digits(x);
    }
    if (ok) return 0;
    return BAD("the body is not valid JSON: the number at byte %zu is not written as JSON "
               "writes numbers (no leading zeros, digits on both sides of '.')",
               (size_t)(start - x->begin));
}

/* A string (x->at on its opening quote): no raw control bytes, no \u0000. */
static int string_token(lexer *x, bool is_key, serve_error *err) {
    const char *start = ++x->at;
    for (; x->at < x->end && *x->at != '"'; x->at++) {
        if ((unsigned char)*x->at < 0x20)
            return BAD("the body is not valid JSON: a control byte (0x%02x) inside a string at "
                       "byte %zu; escape it",
                       (unsigned)*x->at, (size_t)(x->at - x->begin));
        if (*x->at != '\\') continue;
        x->at++;
        if (x->end - x->at >= 5 && !memcmp(x->at, "u0000", 5)) {
            if (is_key) return BAD("a key of the body holds NUL (\\u0000)");
            return BAD("'%.*s' holds NUL (\\u0000), which is not supported in text",
                       x->key_len[x->depth], x->key[x->depth]);
        }
    }
    if (is_key) {
        x->key[x->depth] = start;
        x->key_len[x->depth] = (int)(x->at - start);
    }
    x->at++;
    return 0;
}

/* Whether the string starting at p is a key: a ':' follows it. */
static bool is_key(const lexer *x, const char *p) {
    for (p++; p < x->end && *p != '"'; p++)
        if (*p == '\\') p++;
    for (p++; p < x->end && json_space(*p);)
        p++;
    return p < x->end && *p == ':';
}

/* The pass over text cJSON parsed, from its start to end (where cJSON's value ended). */
static int lex(const char *body, const char *end, serve_error *err) {
    lexer x = {.begin = body, .at = body, .end = end, .key = {""}};
    while (x.at < x.end) {
        char c = *x.at;
        int rc = 0;
        if (c == '"') {
            rc = string_token(&x, is_key(&x, x.at), err);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            rc = number_token(&x, err);
        } else if (c == '{' || c == '[') {
            if (x.depth + 1 >= MAX_DEPTH) return BAD("the body nests too deeply");
            x.depth++;
            x.key[x.depth] = x.key[x.depth - 1]; /* an array's items are named by its key */
            x.key_len[x.depth] = x.key_len[x.depth - 1];
            x.at++;
        } else if (c == '}' || c == ']') {
            if (x.depth) x.depth--;
            x.at++;
        } else if ((unsigned char)c < 0x20 && !json_space(c)) {
            return BAD("the body is not valid JSON: a control byte (0x%02x) at byte %zu",
                       (unsigned)c, (size_t)(x.at - body));
        } else {
            x.at++;
        }
        if (rc) return rc;
    }
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* Duplicate keys in any object of the tree: sorted names, neighbours compared. */
static int duplicates(const cJSON *node, serve_error *err) {
    if (cJSON_IsObject(node) && node->child && node->child->next) {
        size_t n = 0;
        for (const cJSON *k = node->child; k; k = k->next)
            n++;
        const cJSON **names = malloc(n * sizeof *names);
        if (!names) return serve_error_set(err, 500, "server_error", "out of memory");
        n = 0;
        for (const cJSON *k = node->child; k; k = k->next)
            names[n++] = k;
        qsort(names, n, sizeof *names, by_name);
        int rc = 0;
        for (size_t i = 1; i < n && !rc; i++)
            if (!strcmp(names[i - 1]->string, names[i]->string))
                rc = BAD("the body has the key '%s' twice in one object", names[i]->string);
        free(names);
        if (rc) return rc;
    }
    for (const cJSON *k = node->child; k; k = k->next)
        if (duplicates(k, err)) return -1;
    return 0;
}

/* body as strict JSON: the tree (cJSON_Delete it), or NULL with *err set. */
cJSON *serve_parse_strict(const char *body, size_t len, serve_error *err) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        BAD("the body is not valid JSON");
        return NULL;
    }
    const char *tail = end;
    while (tail < body + len && json_space(*tail))
        tail++;
    int rc = tail < body + len ? BAD("the body is not valid JSON: text follows the value at "
                                     "byte %zu",
                                     (size_t)(tail - body))
                               : 0;
    if (!rc) rc = lex(body, end, err);
    if (!rc) rc = duplicates(root, err);
    if (rc) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

int serve_only_members(const cJSON *o, const char *known, const char *where, serve_error *err) {
    for (const cJSON *v = o->child; v; v = v->next) {
        char key[40];
        if (snprintf(key, sizeof key, " %s ", v->string) >= (int)sizeof key ||
            strchr(v->string, ' ') || !strstr(known, key))
            return serve_error_set(err, 400, "invalid_request_error",
                                   "'%s%s' is not supported by this server", where, v->string);
    }
    return 0;
}
