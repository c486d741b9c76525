/* Token masks against brute force: over a hand-made vocabulary (partial UTF-8 characters,
 * duplicates, an empty token, an end-of-generation and a control token), random walks through
 * several grammars compare each step's trie-walked mask with every token tried alone on a
 * matcher that has seen the output so far. With $CLINFER_MODEL set, also times the mask over
 * that model's vocabulary, and checks that a greedy constrained sampler (which masks only when
 * the grammar refuses the best token) returns the best token of the mask, on the model's one
 * shared vocabulary, after the model is freed too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grammar.h"

static const char *const texts[] = {
    "{",     "}",        "\"",   "\"a",  "a",        "ab",   "abc",
    " ",     "  ",       "\n",   "1",    "12",       "-",    ".",
    "e",     "true",     "tr",   "ue",   "null",     ",",    ":",
    "\":",   "\xc3\xa9", "\xc3", "\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac",
    "<eot>", "<ctl>",    "a",    "",     "[",        "]",    "0",
    "\\",    "\\n",      "x",    "\"}",  ", \"",     "\xff", "\x01"};
#define N_TOK (sizeof texts / sizeof *texts)
#define EOT 28
#define CTL 29

static const char *const grammars[] = {
    NULL, /* filled with the JSON object grammar */
    "root ::= [a-c]+ (\" \" [a-c]+)* \"\\n\"",
    "root ::= \"\\\"\" [^\"]{0,6} \"\\\"\"",
    "root ::= ( \"\xe2\x82\xac\" | \"\xc3\xa9\" | \"e\" ){1,5} \".\"",
    "root ::= \"true\" | \"null\" | [0-9]+ (\".\" [0-9]+)?",
};

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Whether token t may follow the output out (n bytes): stepped from scratch. */
static bool brute_allows(gmatch *m, const char *out, size_t n, size_t t) {
    gstate s = gmatch_start(m);
    for (size_t i = 0; i < n; i++)
        if (!gmatch_step(m, &s, (uint8_t)out[i])) return false;
    if (t == EOT) return gmatch_can_end(m, s);
    if (t == CTL || !texts[t][0]) return false;
    for (const char *p = texts[t]; *p; p++)
        if (!gmatch_step(m, &s, (uint8_t)*p)) return false;
    return true;
}

static void walk_grammar(const char *gbnf, int walks) {
    size_t len[N_TOK];
    uint8_t kind[N_TOK];
    for (size_t i = 0; i < N_TOK; i++) {
        len[i] = strlen(texts[i]);
        kind[i] = i == EOT ? GV_EOG : i == CTL ? GV_NEVER : GV_TEXT;
    }
    grammar *g = NULL;
    gmatch *brute = NULL;
    EXPECT_OK(grammar_parse(gbnf, strlen(gbnf), &g));
    if (g) EXPECT_OK(gmatch_create(g, &brute));
    for (int w = 0; brute && w < walks; w++) {
        gvocab *v = NULL;
        gconstraint *c = NULL;
        EXPECT_OK(gvocab_create(N_TOK, texts, len, kind, &v));
        if (v) EXPECT_OK(gconstraint_create(gbnf, strlen(gbnf), v, &c));
        char out[512];
        size_t n = 0;
        for (int step = 0; c && step < 60; step++) {
            const uint64_t *mask;
            EXPECT_OK(gconstraint_mask(c, &mask));
            size_t allowed[N_TOK], n_allowed = 0;
            for (size_t t = 0; t < N_TOK; t++) {
                bool want = brute_allows(brute, out, n, t), got = mask[t / 64] >> (t % 64) & 1;
                EXPECT(want == got, "'%.40s' after '%.*s': token %zu brute %d mask %d", gbnf,
                       (int)n, out, t, want, got);
                if (got) allowed[n_allowed++] = t;
            }
            if (!n_allowed) break;
            size_t t = allowed[next_rand() % n_allowed];
            EXPECT_OK(gconstraint_accept(c, (int32_t)t));
            if (t == EOT) break;
            if (n + len[t] >= sizeof out) break;
            memcpy(out + n, texts[t], len[t]);
            n += len[t];
        }
        gconstraint_free(c);
    }
    gmatch_free(brute);
    grammar_free(g);
}

/* Accepting a token the mask refused is an error, as is anything after the end. */
static void test_refusals(void) {
    size_t len[N_TOK];
    uint8_t kind[N_TOK];
    for (size_t i = 0; i < N_TOK; i++) {
        len[i] = strlen(texts[i]);
        kind[i] = i == EOT ? GV_EOG : i == CTL ? GV_NEVER : GV_TEXT;
    }
    gvocab *v = NULL;
    gconstraint *c = NULL;
    const char *gbnf = "root ::= \"ab\"";
    EXPECT_OK(gvocab_create(N_TOK, texts, len, kind, &v));
    if (v) EXPECT_OK(gconstraint_create(gbnf, strlen(gbnf), v, &c));
    if (!c) return;
    EXPECT(gconstraint_accept(c, EOT) != CLINFER_OK, "EOG before the end");
    EXPECT(gconstraint_accept(c, CTL) != CLINFER_OK, "a control token");
    EXPECT(gconstraint_accept(c, 1) != CLINFER_OK, "'}' cannot start \"ab\"");
    EXPECT(gconstraint_accept(c, 9999) != CLINFER_OK, "an id out of range");
    EXPECT_OK(gconstraint_accept(c, 5)); /* "ab" */
    const uint64_t *mask;
    EXPECT_OK(gconstraint_mask(c, &mask));
    for (size_t t = 0; t < N_TOK; t++)
        EXPECT(((mask[t / 64] >> (t % 64)) & 1) == (t == EOT), "only EOG at the end, not %zu", t);
    EXPECT_OK(gconstraint_accept(c, EOT));
    EXPECT(gconstraint_accept(c, EOT) != CLINFER_OK, "a token after the end");
    gconstraint_free(c);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The mask's cost over a real vocabulary, at states of a JSON object: cold (walked) and
 * repeated (cached). Printed, not checked: the host's speed varies. */
static void time_model_vocab(void) {
    const char *path = getenv("CLINFER_MODEL");
    if (!path) return;
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.vocab_only = true;
    clinfer_model *model = NULL;
    gvocab *v = NULL;
    gconstraint *c = NULL;
    char *gbnf = NULL;
    EXPECT_OK(clinfer_model_load(path, &mp, &model));
    EXPECT_OK(json_schema_to_gbnf("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
                                  "\"string\"},\"n\":{\"type\":\"integer\"}},\"required\":["
                                  "\"name\",\"n\"],\"additionalProperties\":false}",
                                  &gbnf));
    double t0 = now_ms();
    if (model) EXPECT_OK(gvocab_from_model(model, &v));
    double t1 = now_ms();
    if (v && gbnf) EXPECT_OK(gconstraint_create(gbnf, strlen(gbnf), v, &c));
    const char *prefix = "{\"name\": \"ab";
    const uint64_t *mask;
    double worst = 0, total = 0;
    int n = 0;
    for (const char *p = prefix; c && *p; p++) {
        double a = now_ms();
        EXPECT_OK(gconstraint_mask(c, &mask));
        double b = now_ms();
        total += b - a;
        worst = b - a > worst ? b - a : worst;
        n++;
        int32_t tok;
        EXPECT_OK(clinfer_tokenize(model, p, 1, false, false, &tok, 1, &(size_t){0}));
        EXPECT_OK(gconstraint_accept(c, tok));
    }
    double a = now_ms();
    if (c) EXPECT_OK(gconstraint_mask(c, &mask));
    double cached = now_ms() - a;
    if (c)
        printf("mask over %zu tokens: trie %.1f ms to build; %.3f ms per step (worst %.3f) "
               "walked, %.4f ms cached\n",
               gconstraint_n_tokens(c), t1 - t0, total / n, worst, cached);
    gconstraint_free(c);
    free(gbnf);
    clinfer_model_free(model);
}

/* The highest logit among the tokens the mask allows, the lowest id among equals. */
static int32_t best_allowed(const float *logits, const uint64_t *mask, size_t n) {
    int32_t best = -1;
    for (size_t t = 0; t < n; t++)
        if ((mask[t / 64] >> (t % 64) & 1) && (best < 0 || logits[t] > logits[best]))
            best = (int32_t)t;
    return best;
}

static void greedy_against_mask(void) {
    const char *path = getenv("CLINFER_MODEL");
    if (!path) return;
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.vocab_only = true;
    clinfer_model *model = NULL;
    gvocab *v = NULL, *again = NULL;
    gconstraint *c = NULL;
    clinfer_sampler *s = NULL;
    clinfer_sampler_params sp;
    clinfer_sampler_params_default(&sp);
    sp.temperature = 0.0f;
    const char *gbnf = "root ::= \"{\\\"n\\\": \" [0-9]{1,4} \", \\\"s\\\": \\\"\" [a-z ]{0,40} "
                       "\"\\\"}\"";
    EXPECT_OK(clinfer_model_load(path, &mp, &model));
    if (model) EXPECT_OK(gvocab_of_model(model, &v));
    if (model) EXPECT_OK(gvocab_of_model(model, &again));
    EXPECT(v && v == again, "one vocabulary per model");
    gvocab_free(again);
    if (v) EXPECT_OK(gconstraint_create(gbnf, strlen(gbnf), v, &c));
    EXPECT_OK(clinfer_sampler_create(&sp, &s));
    if (s && model) EXPECT_OK(clinfer_sampler_set_grammar(s, model, gbnf));
    clinfer_model_free(model); /* the sampler and c keep the vocabulary */
    size_t n = c ? gconstraint_n_tokens(c) : 0;
    float *logits = malloc(n * sizeof *logits);
    int fast = 0, steps = 0;
    for (int step = 0; c && s && logits && step < 200; step++) {
        const uint64_t *mask;
        EXPECT_OK(gconstraint_mask(c, &mask));
        for (size_t t = 0; t < n; t++)
            logits[t] = (float)(next_rand() % 1000) / 100.0f;
        int32_t pref = best_allowed(logits, mask, n);
        /* Half the steps the model "prefers" an allowed token: the sampler's shortcut. */
        if (pref >= 0 && next_rand() % 2) {
            logits[pref] = 20.0f;
            fast++;
        }
        int32_t want = best_allowed(logits, mask, n), got = -1;
        if (want < 0) break;
        EXPECT_OK(clinfer_sampler_sample(s, logits, n, &got));
        EXPECT(got == want, "step %d: greedy chose %d, the mask's best is %d", step, got, want);
        if (got != want) break;
        EXPECT_OK(gconstraint_accept(c, want));
        steps++;
    }
    EXPECT(!c || (steps > 10 && fast > 0), "%d steps, %d with an allowed best", steps, fast);
    free(logits);
    clinfer_sampler_free(s);
    gconstraint_free(c);
}

int main(void) {
    char *json = NULL;
    EXPECT_OK(json_schema_to_gbnf(NULL, &json));
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++)
        walk_grammar(i ? grammars[i] : json ? json : "root ::= \"\"", 6);
    free(json);
    test_refusals();
    time_model_vocab();
    greedy_against_mask();
    return finish("test_grammar_mask");
}
