/* libFuzzer harness for clinfer serve's request parser (tools/serve_request.c): any bytes as
 * the body of a chat, a completions and an embeddings request. A parse either fails with a 400 (or
 * a 500 when out of memory) and a message, or gives a request whose fields hold what the server
 * relies on: messages with role and content, a prompt, at most SERVE_MAX_STOP non-empty stop
 * strings, max_tokens >= -1, logprobs in [-1, 20], n in [1, 128] and sampling parameters the
 * sampler accepts; embeddings: 1 to SERVE_MAX_INPUTS inputs, each a non-empty text or non-empty
 * non-negative token ids. With tools, the grammar of a required call builds or fails with a 400;
 * and the input, read as a model's answer in each tool-call format, gives calls of the
 * request's tools only, with JSON arguments. /tokenize and /detokenize bodies too, and ollama's
 * /api/chat, /api/generate, /api/embed and /api/embeddings (tools/serve_ollama_request.c): a
 * request that parses holds what an OpenAI one does, or nothing with load_only. And the input
 * as the start of a request on the socket (tools/serve_head.c): a head that passes ends with an
 * empty line within what was read, its path inside it; one refused has a status and a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_head.h"
#include "serve_ollama.h"
#include "serve_request.h"
#include "serve_slots.h"
#include "serve_tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

/* The input read as a model's answer in fmt: calls of the request's tools only, their arguments
 * JSON text, the content a prefix of the answer. */
static void check_answer(const serve_request *req, serve_tool_format fmt, const uint8_t *data,
                         size_t size) {
    serve_tool_call *calls = NULL;
    size_t n = 0, content = 0;
    int rc = serve_tool_calls_parse(fmt, req, (const char *)data, size, &calls, &n, &content);
    check(rc >= -1 && rc <= 1 && content <= size && (rc == 1) == (n > 0));
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t t = 0; t < req->n_tools; t++)
            known = known || !strcmp(req->tools[t].name, calls[i].name);
        check(known && calls[i].arguments);
    }
    serve_tool_calls_free(calls, n);
}

/* The grammar of a required call builds, or fails with a 400 (or 500) and a message. */
static void check_grammar(const serve_request *req, serve_tool_format fmt) {
    if (req->tool_choice != SERVE_TOOLS_REQUIRED && req->tool_choice != SERVE_TOOLS_NAMED) return;
    char *gbnf = NULL;
    serve_error err = {0};
    if (serve_tools_grammar(req, fmt, &gbnf, &err) == 0)
        check(gbnf && strstr(gbnf, "root ::= "));
    else
        check(!gbnf && (err.status == 400 || err.status == 500) && err.message[0]);
    free(gbnf);
}

/* What the server relies on in a chat or completions request that parsed. */
static void check_request(const serve_request *req, serve_kind kind) {
    if (kind == SERVE_CHAT) {
        check(req->n_messages > 0 && req->n_messages <= SERVE_MAX_MESSAGES);
        for (size_t i = 0; i < req->n_messages; i++)
            check(req->messages[i].role[0] && req->messages[i].content);
    } else {
        check(req->prompt != NULL);
    }
    check(req->n_stop <= SERVE_MAX_STOP && req->max_tokens >= -1);
    check(req->logprobs >= -1 && req->logprobs <= SERVE_MAX_TOP_LOGPROBS);
    check(req->n >= 1 && req->n <= SERVE_MAX_CHOICES);
    for (size_t i = 0; i < req->n_stop; i++)
        check(req->stop[i][0] && strlen(req->stop[i]) <= SERVE_MAX_STOP_BYTES);
    clinfer_sampler *s = NULL;
    check(clinfer_sampler_create(&req->sampling, &s) == CLINFER_OK);
    clinfer_sampler_free(s);
}

/* ollama's bodies: a chat or a completion as above (no tools, one choice), or load_only with
 * nothing held; embed bodies as an OpenAI embeddings body that parses or says why not. */
static void check_ollama(const uint8_t *data, size_t size) {
    for (int generate = 0; generate <= 1; generate++) {
        serve_request req;
        serve_ollama_extra x;
        serve_error err = {0};
        if (serve_ollama_request_parse((const char *)data, size, generate, &req, &x, &err)) {
            check((err.status == 400 || err.status == 500) && err.message[0] && err.type);
            check(!req.messages && !req.prompt && !req.grammar);
            continue;
        }
        check(x.generate == generate);
        if (x.load_only) {
            check(!req.messages && !req.prompt && !req.grammar);
            continue;
        }
        check_request(&req, req.kind);
        check(req.n == 1 && !req.n_tools && req.logprobs == -1 &&
              (generate || req.kind == SERVE_CHAT));
        serve_request_free(&req);
    }
    for (int legacy = 0; legacy <= 1; legacy++) {
        char *body = NULL;
        serve_error err = {0};
        if (serve_ollama_embed_body((const char *)data, size, legacy, &body, &err)) {
            check(!body && err.status >= 400 && err.message[0]);
            continue;
        }
        serve_embed_request e;
        if (serve_embed_request_parse(body, strlen(body), &e, &err) == 0)
            serve_embed_request_free(&e);
        else
            check(err.status >= 400 && err.message[0]);
        free(body);
    }
}

/* The input as a request's head, under a --max-body of 4 MiB. */
static void check_head(const uint8_t *data, size_t size) {
    serve_head h;
    serve_head_verdict v = serve_head_check((const char *)data, size, (size_t)4 << 20, &h);
    if (v == SERVE_HEAD_OK) {
        check(h.head_len >= 2 && h.head_len <= size && h.head_len <= SERVE_HEAD_MAX &&
              data[h.head_len - 1] == '\n' &&
              (data[h.head_len - 2] == '\n' ||
               (h.head_len >= 3 && data[h.head_len - 2] == '\r' && data[h.head_len - 3] == '\n')));
        check(h.path_at + h.path_len <= h.head_len && !(h.chunked && h.content_length));
        check(h.content_length < ((uint64_t)16 << 22) + 16);
    } else if (v == SERVE_HEAD_REFUSE) {
        check((h.status == 400 || h.status == 413 || h.status == 431 || h.status == 501) &&
              h.message[0]);
    } else {
        check(v == SERVE_HEAD_MORE && size < SERVE_HEAD_MAX);
    }
}

/* A request with tools, to read every input as an answer against. */
static const serve_request *answer_request(void) {
    static serve_request req;
    static bool made;
    static const char body[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": ["
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
        "{\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
        "{\"type\": \"function\", \"function\": {\"name\": \"noop\"}}]}";
    serve_error err;
    if (!made) check(serve_request_parse(body, sizeof body - 1, SERVE_CHAT, &req, &err) == 0);
    made = true;
    return &req;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_head(data, size);
    for (int fmt = SERVE_TOOL_FORMAT_HERMES; fmt <= SERVE_TOOL_FORMAT_GENERIC; fmt++)
        check_answer(answer_request(), (serve_tool_format)fmt, data, size);
    for (int kind = SERVE_CHAT; kind <= SERVE_COMPLETION; kind++) {
        serve_request req;
        serve_error err = {0};
        if (serve_request_parse((const char *)data, size, (serve_kind)kind, &req, &err)) {
            check((err.status == 400 || err.status == 500) && err.message[0] && err.type);
            continue;
        }
        check_request(&req, (serve_kind)kind);
        check(req.n_tools <= SERVE_MAX_TOOLS && (req.n_tools || !req.tool_choice) &&
              (req.tool_choice != SERVE_TOOLS_NAMED || req.tool_named < req.n_tools));
        for (int fmt = SERVE_TOOL_FORMAT_HERMES; fmt <= SERVE_TOOL_FORMAT_GENERIC; fmt++) {
            check_grammar(&req, (serve_tool_format)fmt);
            check_answer(&req, (serve_tool_format)fmt, data, size);
        }
        serve_request_free(&req);
    }
    check_ollama(data, size);
    serve_error err = {0};
    serve_tokenize_request t;
    if (serve_tokenize_request_parse((const char *)data, size, &t, &err) == 0)
        check(t.content != NULL);
    else
        check(!t.content && err.status >= 400 && err.message[0]);
    free(t.content);
    serve_detokenize_request d;
    if (serve_detokenize_request_parse((const char *)data, size, &d, &err) == 0)
        for (size_t i = 0; i < d.n_tokens; i++)
            check(d.tokens[i] >= 0);
    else
        check(!d.tokens && err.status >= 400 && err.message[0]);
    free(d.tokens);
    serve_embed_request e;
    if (serve_embed_request_parse((const char *)data, size, &e, &err)) {
        check((err.status == 400 || err.status == 500) && err.message[0] && err.type);
        return 0;
    }
    check(e.n_inputs > 0 && e.n_inputs <= SERVE_MAX_INPUTS && e.dimensions >= 0);
    for (size_t i = 0; i < e.n_inputs; i++) {
        const serve_input *in = &e.inputs[i];
        check(in->text ? in->text[0] != 0 && !in->tokens : in->n_tokens > 0);
        for (size_t t = 0; t < in->n_tokens; t++)
            check(in->tokens[t] >= 0);
    }
    serve_embed_request_free(&e);
    return 0;
}
