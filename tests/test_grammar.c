/* The GBNF parser and matcher: a corpus of grammars with texts that must and must not match
 * whole, and of broken grammars with the error each must give (place and cause). */
#include <string.h>

#include "check.h"
#include "grammar.h"

typedef struct {
    const char *gbnf;
    const char *yes[8], *no[8];
} match_case;

static const match_case matches[] = {
    {"root ::= \"a\" | \"b\"", {"a", "b"}, {"", "ab", "c"}},
    {"root ::= [a-z]+ \"!\"", {"abc!", "z!"}, {"!", "ab", "aB!"}},
    {"root ::= \"x\"{2,3}", {"xx", "xxx"}, {"x", "xxxx", ""}},
    {"root ::= \"a\"{2,} \"b\"{,1}", {"aa", "aaab", "aaaaaaaab"}, {"a", "ab", "aabb"}},
    {"root ::= \"ab\"{2}", {"abab"}, {"ab", "aba", "ababab"}},
    {"root ::= (\"ab\" | \"c\")* \".\"", {".", "ab.", "cabc."}, {"a.", "abab", "cc"}},
    {"root ::= \"\xc3\xa9\" [\xce\xb1-\xcf\x89]+",
     {"\xc3\xa9\xce\xb2", "\xc3\xa9\xce\xb1\xcf\x89"},
     {"\xc3\xa9", "e\xce\xb2", "\xc3\xa9\xc3\xa9"}},
    {"root ::= . .", {"ab", "a\xe2\x82\xac", "\xf0\x9f\x98\x80\n"}, {"a", "abc", "\xe2\x82"}},
    /* found by fuzz_grammar: a grammar without a single character range */
    {"   root ::= (.)+   # a comment", {"a", "\xd1\x8f\xd1\x8f"}, {""}},
    {"root ::= [^\"\\\\]* \"\\\"\"", {"\"", "abc\"", "\xe2\x82\xac\""}, {"a\\\"", "\"\"", "abc"}},
    {"# greeting\nroot ::= greeting \" \" name   # trailing\ngreeting ::= \"hi\"\n  | \"hello\"\n"
     "name ::= [A-Z] [a-z]*\n",
     {"hi Bo", "hello Ann", "hi X"},
     {"hey Bo", "hi bo", "hello"}},
    {"root ::= \"\\x41\\u00e9\\n\\t\\\"\\\\\\U0001F600\"",
     {"A\xc3\xa9\n\t\"\\\xf0\x9f\x98\x80"},
     {"A"}},
    {"root ::= (\n  \"a\"\n  | \"b\" )\n", {"a", "b"}, {"", "ab"}},
    {"root ::= \"a\" | ", {"", "a"}, {"aa", "b"}},
    {"root ::= \"(\" root \")\" | ", {"", "()", "(())"}, {"(()", ")(", "()()"}},
    {"root ::= item (\",\" item)*\nitem ::= [0-9]+ | \"[\" root? \"]\"",
     {"1", "1,22", "[1,[2]],3", "[]"},
     {"", "1,", "[1", ",1"}},
    {"root ::= [a-c\\-]{1,2} [^a-z0-9]", {"a-A", "-%", "cbZ"}, {"ab", "dA", "abcA"}},
    {"root ::= x x x\nx ::= \"a\"? \"a\"?", {"", "a", "aaaaaa"}, {"aaaaaaa", "b"}},
};

typedef struct {
    const char *gbnf, *error;
} error_case;

static const error_case errors[] = {
    {"root ::= \"a", "line 1, column 10: a string literal without its closing"},
    {"root = \"a\"", "line 1, column 6: expected '::=' after rule name 'root', found '='"},
    {"root ::= foo", "line 1, column 10: rule 'foo' is used but never defined"},
    {"root ::= x\nx ::= \"b", "line 2, column 7: a string literal"},
    {"a ::= \"x\"", "no rule named 'root'"},
    {"", "no rule named 'root'"},
    {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
    {"root ::= a\na ::= b \"x\"\nb ::= \"y\"? a", "left-recursive"},
    {"root ::= (\"a\"?)*", "left-recursive"},
    {"root ::= \"a\"{3,2}", "maximum is below the minimum"},
    {"root ::= \"a\"{99999}", "a repetition count above 10000"},
    {"root ::= \"a\"{", "expected a count"},
    {"root ::= \"a\"{2", "expected '}'"},
    {"root ::= [z-a]", "runs backwards"},
    {"root ::= []", "an empty character class"},
    {"root ::= [abc", "without its closing ']'"},
    {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
    {"root ::= \"\\x4\"", "\\x needs 2 hex digits"},
    {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
    {"root ::= ((\"a\")", "expected ')' to close the '(' of line 1, column 10, found the end"},
    {"root ::= \"a\" )", "line 1, column 14: unexpected ')' in rule 'root'"},
    {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
    {"root ::= <[123]>", "token references"},
    {"root ::= *", "'*' with nothing before it"},
    {"root ::= \"\xff\"", "invalid UTF-8"},
    {"root ::= \"\xc0\xaf\"", "invalid UTF-8"},
    {"::= \"a\"", "line 1, column 1: expected a rule name, found ':'"},
    {"root ::= @", "line 1, column 10: unexpected '@'"},
};

static void test_matches(void) {
    for (size_t i = 0; i < sizeof matches / sizeof *matches; i++) {
        const match_case *c = &matches[i];
        grammar *g = NULL;
        gmatch *m = NULL;
        EXPECT_OK(grammar_parse(c->gbnf, strlen(c->gbnf), &g));
        if (!g) continue;
        EXPECT_OK(gmatch_create(g, &m));
        for (size_t k = 0; m && k < 8 && c->yes[k]; k++)
            EXPECT(gmatch_full(m, c->yes[k], strlen(c->yes[k])), "grammar %zu refuses \"%s\"", i,
                   c->yes[k]);
        for (size_t k = 0; m && k < 8 && c->no[k]; k++)
            EXPECT(!gmatch_full(m, c->no[k], strlen(c->no[k])), "grammar %zu takes \"%s\"", i,
                   c->no[k]);
        EXPECT(m && gmatch_status(m) == CLINFER_OK, "grammar %zu: %s", i, clinfer_last_error());
        gmatch_free(m);
        grammar_free(g);
    }
}

static void expect_error(const char *gbnf, size_t len, const char *want) {
    grammar *g = NULL;
    clinfer_status st = grammar_parse(gbnf, len, &g);
    EXPECT(st == CLINFER_ERR_INVALID_ARGUMENT && !g, "grammar '%s' gave %s", gbnf,
           clinfer_status_str(st));
    EXPECT(strstr(clinfer_last_error(), want), "grammar '%s': message '%s' lacks '%s'", gbnf,
           clinfer_last_error(), want);
    grammar_free(g);
}

static void test_errors(void) {
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        expect_error(errors[i].gbnf, strlen(errors[i].gbnf), errors[i].error);
    expect_error("root ::= \"a\0\"", 13, "a NUL byte");
    /* Deep nesting is refused, not recursed into. */
    static char deep[2048];
    strcpy(deep, "root ::= ");
    for (int i = 0; i < 300; i++)
        strcat(deep, "(");
    expect_error(deep, strlen(deep), "nested more than 200 deep");
}

/* Partial UTF-8 is tracked across steps: the bytes of one character may come one by one, and a
 * character the grammar cannot take dies at its first byte that rules it out. */
static void test_partial_utf8(void) {
    const char *gbnf = "root ::= [\xe2\x82\xac-\xe2\x82\xaf] \"!\"";
    grammar *g = NULL;
    gmatch *m = NULL;
    EXPECT_OK(grammar_parse(gbnf, strlen(gbnf), &g));
    if (g) EXPECT_OK(gmatch_create(g, &m));
    if (!m) return;
    gstate s = gmatch_start(m);
    EXPECT(gmatch_step(m, &s, 0xE2) && gmatch_step(m, &s, 0x82), "the lead bytes of U+20AC");
    EXPECT(!gmatch_can_end(m, s), "ends inside a character");
    gstate t = s;
    EXPECT(gmatch_step(m, &s, 0xAC) && gmatch_step(m, &s, '!') && gmatch_can_end(m, s),
           "U+20AC then !");
    EXPECT(!gmatch_step(m, &t, 0xBF), "U+20BF is outside the class");
    s = gmatch_start(m);
    EXPECT(!gmatch_step(m, &s, 0xC3), "a 2-byte lead cannot start U+20xx");
    s = gmatch_start(m);
    EXPECT(gmatch_step(m, &s, 0xE2) && !gmatch_step(m, &s, 0x81), "U+204x is outside");
    gmatch_free(m);
    grammar_free(g);
}

/* The matcher keeps working after its tables are rebuilt around the current state. */
static void test_compact(void) {
    const char *gbnf = "root ::= (\"[\" root \"]\")? [a-z]*";
    grammar *g = NULL;
    gmatch *m = NULL;
    EXPECT_OK(grammar_parse(gbnf, strlen(gbnf), &g));
    if (g) EXPECT_OK(gmatch_create(g, &m));
    if (!m) return;
    gstate s = gmatch_start(m);
    const char *text = "[[[ab]c]";
    for (const char *p = text; *p; p++)
        EXPECT(gmatch_step(m, &s, (uint8_t)*p), "step '%c'", *p);
    gmatch_compact(m, &s);
    EXPECT(gmatch_status(m) == CLINFER_OK && s.set, "compact: %s", clinfer_last_error());
    EXPECT(!gmatch_can_end(m, s), "one bracket still open");
    EXPECT(gmatch_step(m, &s, 'x') && gmatch_step(m, &s, ']') && gmatch_can_end(m, s),
           "closes after compaction");
    EXPECT(!gmatch_step(m, &s, ']'), "no bracket left to close");
    gmatch_free(m);
    grammar_free(g);
}

int main(void) {
    test_matches();
    test_errors();
    test_partial_utf8();
    test_compact();
    return finish("test_grammar");
}
