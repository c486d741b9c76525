/* clinfer serve's tool calls without a model (tools/serve_tools.c, tools/serve_tool_calls.c), in
 * each family's format, Mistral's included (no tiny model has its vocabulary): the grammar of a
 * required call takes a call of the allowed functions whose arguments meet their schema and
 * nothing else, and the calls read back out of an answer are the ones written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grammar.h"
#include "serve_tools.h"

static const char body[] =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": ["
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {"
    "\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"$ref\": \"#/$defs/unit\"}}, \"required\": [\"city\", \"unit\"], "
    "\"additionalProperties\": false, \"$defs\": {\"unit\": {\"enum\": [\"c\", \"f\"]}}}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"now\"}}], \"tool_choice\": %s}";

static bool holds(bool cond, const char *what) {
    EXPECT(cond, "%s", what);
    return cond;
}

static const char *const formats[] = {"hermes", "llama3", "mistral", "generic"};

/* A call of name with args in format f. */
static void call_text(char *out, size_t size, serve_tool_format f, const char *name,
                      const char *args) {
    static const char *const shapes[] = {
        "<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>",
        "{\"name\": \"%s\", \"parameters\": %s}",
        "[{\"name\": \"%s\", \"arguments\": %s}]",
        "{\"tool_calls\": [{\"name\": \"%s\", \"arguments\": %s}]}",
    };
    snprintf(out, size, shapes[f], name, args);
}

static bool parse_request(const char *choice, serve_request *req) {
    char text[2048];
    serve_error err;
    snprintf(text, sizeof text, body, choice);
    bool ok = serve_request_parse(text, strlen(text), SERVE_CHAT, req, &err) == 0;
    if (!ok) printf("request: %s\n", err.message);
    return ok;
}

static bool matches(const char *gbnf, const char *text) {
    grammar *g = NULL;
    gmatch *m = NULL;
    bool ok = grammar_parse(gbnf, strlen(gbnf), &g) == CLINFER_OK &&
              gmatch_create(g, &m) == CLINFER_OK && gmatch_full(m, text, strlen(text));
    gmatch_free(m);
    grammar_free(g);
    return ok;
}

static void test_grammars(const char *choice, bool now_allowed) {
    serve_request req;
    if (!holds(parse_request(choice, &req), "the request parses")) return;
    for (int f = 0; f <= SERVE_TOOL_FORMAT_GENERIC; f++) {
        char *gbnf = NULL, text[512];
        serve_error err;
        if (!holds(serve_tools_grammar(&req, (serve_tool_format)f, &gbnf, &err) == 0, "a grammar"))
            continue;
        call_text(text, sizeof text, f, "get_weather", "{\"city\": \"Paris\", \"unit\": \"c\"}");
        EXPECT(matches(gbnf, text), "%s %s: a good call: %s", choice, formats[f], text);
        call_text(text, sizeof text, f, "now", "{}");
        EXPECT(matches(gbnf, text) == now_allowed, "%s %s: %s", choice, formats[f], text);
        static const char *const bad_args[] = {
            "{\"city\": \"Paris\", \"unit\": \"k\"}",               /* not in the enum */
            "{\"city\": \"Paris\"}",                                /* unit is required */
            "{\"city\": 5, \"unit\": \"c\"}",                       /* not a string */
            "{\"city\": \"Paris\", \"unit\": \"c\", \"extra\": 1}", /* additionalProperties */
        };
        for (size_t b = 0; b < sizeof bad_args / sizeof bad_args[0]; b++) {
            call_text(text, sizeof text, f, "get_weather", bad_args[b]);
            EXPECT(!matches(gbnf, text), "%s %s: a bad call matched: %s", choice, formats[f], text);
        }
        call_text(text, sizeof text, f, "get_wether", "{\"city\": \"P\", \"unit\": \"c\"}");
        EXPECT(!matches(gbnf, text), "%s %s: an unknown function", choice, formats[f]);
        EXPECT(!matches(gbnf, "I will not call anything."), "%s %s: free text", choice, formats[f]);
        free(gbnf);
    }
    serve_request_free(&req);
}

/* text holds one call of name with args (JSON text as written) and content. */
static void expect_call(serve_tool_format f, const serve_request *req, const char *text,
                        const char *name, const char *args, size_t content) {
    serve_tool_call *calls;
    size_t n, content_len;
    int rc = serve_tool_calls_parse(f, req, text, strlen(text), &calls, &n, &content_len);
    EXPECT(rc == 1 && n == 1 && !strcmp(calls[0].name, name) && !strcmp(calls[0].arguments, args) &&
               content_len == content,
           "%s: %s: rc %d, %zu calls, %s %s, content %zu", formats[f], text, rc, n,
           n ? calls[0].name : "-", n ? calls[0].arguments : "-", content_len);
    serve_tool_calls_free(calls, n);
}

static void expect_none(serve_tool_format f, const serve_request *req, const char *text) {
    serve_tool_call *calls;
    size_t n, content_len;
    int rc = serve_tool_calls_parse(f, req, text, strlen(text), &calls, &n, &content_len);
    EXPECT(rc == 0 && n == 0 && !calls && content_len == strlen(text), "%s: %s read as a call",
           formats[f], text);
}

static void test_reading(void) {
    serve_request req;
    if (!holds(parse_request("\"auto\"", &req), "the request parses")) return;
    const char *args = "{\"city\": \"Paris\", \"unit\": \"c\"}";
    for (int f = 0; f <= SERVE_TOOL_FORMAT_GENERIC; f++) {
        char text[512];
        call_text(text, sizeof text, f, "get_weather", args);
        expect_call(f, &req, text, "get_weather", args, 0);
        call_text(text, sizeof text, f, "unknown", "{}");
        expect_none(f, &req, text);
        expect_none(f, &req, "The weather is fine.");
        expect_none(f, &req, "{\"name\": \"get_weather\", \"arguments\": {\"city\": ");
        expect_none(f, &req, "");
    }
    /* each format's own ways: content before a Hermes call, arguments as a string, markers */
    expect_call(SERVE_TOOL_FORMAT_HERMES, &req,
                "Let me look.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
                "now", "{}", 12);
    expect_call(SERVE_TOOL_FORMAT_HERMES, &req,
                "<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}", "now", "{}", 0);
    expect_none(SERVE_TOOL_FORMAT_HERMES, &req,
                "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call> and more");
    expect_call(SERVE_TOOL_FORMAT_LLAMA3, &req,
                "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}", "now", "{}", 0);
    expect_call(SERVE_TOOL_FORMAT_MISTRAL, &req,
                "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}]", "now", "{}", 0);
    expect_call(SERVE_TOOL_FORMAT_GENERIC, &req, "  {\"name\": \"now\", \"arguments\": {}}\n",
                "now", "{}", 0);
    serve_tool_call *calls;
    size_t n, content;
    const char *two = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                      "\"Rome\"}}\n</tool_call>";
    int rc = serve_tool_calls_parse(SERVE_TOOL_FORMAT_HERMES, &req, two, strlen(two), &calls, &n,
                                    &content);
    EXPECT(rc == 1 && n == 2 && !strcmp(calls[1].name, "get_weather") &&
               !strcmp(calls[1].arguments, "{\"city\": \"Rome\"}"),
           "two Hermes calls: rc %d, %zu calls", rc, n);
    serve_tool_calls_free(calls, n);
    serve_request_free(&req);
}

/* Every prefix of a call as a stream has it: the scan finds the call once its object begins,
 * its name once whole, and its arguments' text so far, growing one byte at a time into what
 * the whole answer's parse gives. */
static void test_scan(void) {
    const char *args = "{\"city\": \"Pa\\\"ris}\", \"n\": [1, {\"a\": 2}], \"unit\": \"c\"}";
    serve_request req;
    if (!holds(parse_request("\"auto\"", &req), "the request parses")) return;
    for (int f = 0; f <= SERVE_TOOL_FORMAT_GENERIC; f++) {
        char text[512];
        call_text(text, sizeof text, f, "get_weather", args);
        size_t len = strlen(text), seen = 0, bad = 0;
        for (size_t n = 0; n <= len; n++) {
            serve_tool_span sp[2];
            size_t k = serve_tool_calls_scan((serve_tool_format)f, text, n, sp, 2);
            if (k > 1 || (k && sp[0].args &&
                          (sp[0].args_len < seen || sp[0].args_len > strlen(args) ||
                           memcmp(text + sp[0].args_at, args, sp[0].args_len))))
                bad++;
            if (k && sp[0].args) seen = sp[0].args_len;
            if (k && sp[0].args && !sp[0].named) bad++; /* the name comes first in these */
        }
        serve_tool_span sp[2];
        size_t k = serve_tool_calls_scan((serve_tool_format)f, text, len, sp, 2);
        EXPECT(!bad && k == 1 && sp[0].args_whole && sp[0].args_len == strlen(args) &&
                   sp[0].name_len == strlen("get_weather") &&
                   !memcmp(text + sp[0].name_at, "get_weather", sp[0].name_len),
               "%s: the scan of each prefix of %s (%zu bad)", formats[f], text, bad);
        expect_call(f, &req, text, "get_weather", args, 0);
    }
    serve_tool_span sp[4];
    EXPECT(serve_tool_calls_scan(SERVE_TOOL_FORMAT_HERMES, "I think", 7, sp, 4) == 0 &&
               serve_tool_calls_scan(SERVE_TOOL_FORMAT_GENERIC, "{\"answer\": 4}", 13, sp, 4) ==
                   1 &&
               !sp[0].named && !sp[0].args,
           "text and JSON that is no call");
    serve_request_free(&req);
}

int main(void) {
    test_scan();
    test_grammars("\"required\"", true);
    test_grammars("{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}", false);
    test_reading();
    return finish("test_serve_tools");
}
