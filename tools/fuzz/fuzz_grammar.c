/* The GBNF parser and matcher, and the JSON schema translator: any bytes as a grammar (then, when
 * it parses, the same bytes as output to match, byte by byte) and as a schema (then its grammar
 * parsed and matched). Bad input must give an error status, never a crash or a hang. */
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

static void match_bytes(const char *gbnf, size_t len, const uint8_t *text, size_t n) {
    grammar *g = NULL;
    gmatch *m = NULL;
    if (grammar_parse(gbnf, len, &g) == CLINFER_OK && gmatch_create(g, &m) == CLINFER_OK) {
        gstate s = gmatch_start(m);
        for (size_t i = 0; i < n && gmatch_step(m, &s, text[i]); i++)
            if (i == n / 2) gmatch_compact(m, &s);
        (void)gmatch_can_end(m, s);
    }
    gmatch_free(m);
    grammar_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    match_bytes((const char *)data, size, data, size);
    char *schema = malloc(size + 1), *gbnf = NULL;
    if (!schema) return 0;
    memcpy(schema, data, size);
    schema[size] = 0;
    if (json_schema_to_gbnf(schema, &gbnf) == CLINFER_OK)
        match_bytes(gbnf, strlen(gbnf), data, size);
    free(gbnf);
    free(schema);
    return 0;
}
