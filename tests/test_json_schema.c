/* JSON schema to GBNF: a corpus of schemas with texts their grammar must and must not take,
 * schemas refused with the keyword or cause named, and a tiny model's constrained generation
 * whose every output parses with cJSON and fits the schema. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "grammar.h"
#include "temp_tree.h"
#include "tiny_model.h"

typedef struct {
    const char *schema;
    const char *yes[8], *no[8];
} schema_case;

static const schema_case cases[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
     "\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\": \"Bo\", \"age\": 3}", "{\"name\":\"B\\\"o\\u00e9\",\"age\":-30}\n"},
     {"{\"age\":3,\"name\":\"Bo\"}", "{\"name\":\"Bo\"}", "{\"name\":\"Bo\",\"age\":3.5}",
      "{\"name\":\"Bo\",\"age\":03}", "{\"name\":\"Bo\",\"age\":3,\"x\":1}"}},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{"
     "\"type\":\"integer\"}},\"required\":[\"b\"]}",
     {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":1,\"c\":2}", "{\"a\":1, \"b\":2, \"c\":3}"},
     {"{}", "{\"a\":1}", "{\"a\":1,\"c\":1}", "{,\"b\":1}", "{\"b\":1,}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}}}",
     {"{}", "{\"a\":null}"},
     {"{\"a\":1}", "{,}"}},
    {"{\"enum\":[\"red\",\"green\",3,null,{\"k\":[1]}]}",
     {"\"red\"", "3", "null", "{\"k\":[1]}"},
     {"\"blue\"", "\"Red\"", "4"}},
    {"{\"const\":\"x\\ny\"}", {"\"x\\ny\""}, {"\"x\"", "\"x\ny\""}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}",
     {"[true]", "[ true, false ]"},
     {"[]", "[true,true,true]", "[1]"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"number\"}}",
     {"[]", "[1.5e10, -0.25, 0]"},
     {"[01]", "[1.]", "[.5]", "[1,]"}},
    {"{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"null\"}]}",
     {"\"abc\"", "\"\"", "null"},
     {"\"abcd\"", "1"}},
    {"{\"type\":[\"integer\",\"boolean\"]}", {"7", "false"}, {"\"7\"", "null"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
     "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":["
     "\"v\",\"next\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"},
     {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
     {"{}", "{\"x\":1,\"y z\":2}"},
     {"{\"x\":\"1\"}"}},
    {"{\"type\":\"object\",\"additionalProperties\":false}", {"{}", "{ }"}, {"{\"a\":1}"}},
    {"{}", {"1", "\"s\"", "{\"a\":[null]}"}, {"", "nul"}},
    {"{\"title\":\"T\",\"description\":\"d\",\"type\":\"string\",\"minLength\":2}",
     {"\"ab\"", "\"\\n\\t\""},
     {"\"a\"", "\"\""}},
};

typedef struct {
    const char *schema, *error;
    clinfer_status status;
} error_case;

static const error_case errors[] = {
    {"{\"type\":\"string\",\"pattern\":\"a+\"}", "keyword 'pattern' is not supported",
     CLINFER_ERR_UNSUPPORTED},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", "keyword 'format'", CLINFER_ERR_UNSUPPORTED},
    {"{\"oneOf\":[{\"type\":\"null\"}]}", "keyword 'oneOf'", CLINFER_ERR_UNSUPPORTED},
    {"{\"type\":\"integer\",\"minimum\":1}", "keyword 'minimum'", CLINFER_ERR_UNSUPPORTED},
    {"{\"$ref\":\"#/$defs/missing\"}", "$ref '#/$defs/missing' names no definition",
     CLINFER_ERR_INVALID_ARGUMENT},
    {"{\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
     "required property 'b' is not in properties", CLINFER_ERR_INVALID_ARGUMENT},
    {"not json", "not valid JSON", CLINFER_ERR_INVALID_ARGUMENT},
    {"{\"type\":\"frob\"}", "type 'frob' is not supported", CLINFER_ERR_UNSUPPORTED},
    {"{\"type\":\"array\",\"maxItems\":5000}", "maxItems above 1000", CLINFER_ERR_UNSUPPORTED},
    {"{\"type\":\"array\",\"minItems\":-1}", "minItems must be a non-negative integer",
     CLINFER_ERR_INVALID_ARGUMENT},
    {"{\"enum\":[]}", "enum must be a non-empty array", CLINFER_ERR_INVALID_ARGUMENT},
    {"false", "a schema must be an object or true", CLINFER_ERR_INVALID_ARGUMENT},
};

static void test_cases(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *gbnf = NULL;
        grammar *g = NULL;
        gmatch *m = NULL;
        EXPECT_OK(clinfer_json_schema_to_grammar(cases[i].schema, &gbnf));
        if (gbnf) EXPECT_OK(grammar_parse(gbnf, strlen(gbnf), &g));
        if (g) EXPECT_OK(gmatch_create(g, &m));
        for (size_t k = 0; m && k < 8 && cases[i].yes[k]; k++)
            EXPECT(gmatch_full(m, cases[i].yes[k], strlen(cases[i].yes[k])),
                   "schema %zu refuses %s", i, cases[i].yes[k]);
        for (size_t k = 0; m && k < 8 && cases[i].no[k]; k++)
            EXPECT(!gmatch_full(m, cases[i].no[k], strlen(cases[i].no[k])), "schema %zu takes %s",
                   i, cases[i].no[k]);
        gmatch_free(m);
        grammar_free(g);
        clinfer_free(gbnf);
    }
}

static void test_errors(void) {
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
        char *gbnf = NULL;
        clinfer_status st = clinfer_json_schema_to_grammar(errors[i].schema, &gbnf);
        EXPECT(st == errors[i].status && !gbnf, "schema %s gave %s", errors[i].schema,
               clinfer_status_str(st));
        EXPECT(strstr(clinfer_last_error(), errors[i].error), "schema %s: '%s' lacks '%s'",
               errors[i].schema, clinfer_last_error(), errors[i].error);
    }
    /* A schema that is itself and nothing more passes here and fails as a grammar. */
    char *gbnf = NULL;
    grammar *g = NULL;
    EXPECT_OK(clinfer_json_schema_to_grammar("{\"$ref\":\"#\"}", &gbnf));
    EXPECT(gbnf && grammar_parse(gbnf, strlen(gbnf), &g) == CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "left-recursive"),
           "a self-reference: %s", clinfer_last_error());
    clinfer_free(gbnf);
}

static const char gen_schema[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
    "\"n\":{\"type\":\"integer\"},\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\","
    "\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\",\"n\",\"ok\","
    "\"tags\"],\"additionalProperties\":false}";

typedef struct {
    char text[4096];
    size_t n;
} collected;

static bool collect(const char *text, size_t len, void *user) {
    collected *c = user;
    if (c->n + len >= sizeof c->text) return false;
    memcpy(c->text + c->n, text, len);
    c->n += len;
    c->text[c->n] = 0;
    return true;
}

static void check_instance(const char *text) {
    printf("generated: %s\n", text);
    cJSON *doc = cJSON_Parse(text);
    EXPECT(doc, "not JSON: %s", text);
    if (!doc) return;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "name");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "n");
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(doc, "ok");
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(doc, "tags");
    EXPECT(cJSON_IsString(name) && cJSON_IsNumber(n) && cJSON_IsBool(ok) && cJSON_IsArray(tags),
           "fields of %s", text);
    EXPECT(cJSON_GetArraySize(doc) == 4 && cJSON_GetArraySize(tags) <= 3, "sizes of %s", text);
    for (const cJSON *t = tags ? tags->child : NULL; t; t = t->next)
        EXPECT(cJSON_IsString(t) && (!strcmp(t->valuestring, "a") || !strcmp(t->valuestring, "b")),
               "tag in %s", text);
    cJSON_Delete(doc);
}

/* A random tiny model, greedy and sampled: whatever its logits, the output is an instance. */
static void test_generation(void) {
    char dir[] = "/tmp/clinfer_schema_XXXXXX", path[128];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_F32);
    spec.n_ctx = 1024;
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
    clinfer_model *model = NULL;
    clinfer_context *ctx = NULL;
    char *gbnf = NULL;
    EXPECT_OK(tiny_model_load(path, CLINFER_BACKEND_REFERENCE, CLINFER_DEFAULT, &model));
    EXPECT_OK(clinfer_json_schema_to_grammar(gen_schema, &gbnf));
    for (int run = 0; model && gbnf && run < 4; run++) {
        clinfer_sampler_params sp;
        clinfer_sampler_params_default(&sp);
        sp.temperature = run == 0 ? 0.0f : 1.0f;
        sp.top_k = 0;
        sp.min_p = 0.0f;
        sp.seed = (uint64_t)run;
        clinfer_sampler *s = NULL;
        clinfer_context_params cp;
        clinfer_context_params_default(&cp);
        EXPECT_OK(clinfer_sampler_create(&sp, &s));
        EXPECT_OK(clinfer_sampler_set_grammar(s, model, gbnf));
        EXPECT_OK(clinfer_context_create(model, &cp, &ctx));
        int32_t prompt[2] = {1, 300};
        collected out = {.n = 0};
        if (ctx) EXPECT_OK(clinfer_generate(ctx, prompt, 2, -1, s, collect, &out, NULL));
        check_instance(out.text);
        clinfer_context_free(ctx);
        clinfer_sampler_free(s);
    }
    EXPECT(clinfer_sampler_set_grammar(NULL, model, gbnf) == CLINFER_ERR_INVALID_ARGUMENT,
           "NULL sampler");
    clinfer_free(gbnf);
    clinfer_model_free(model);
    remove_tree(dir);
}

int main(void) {
    test_cases();
    test_errors();
    test_generation();
    return finish("test_json_schema");
}
