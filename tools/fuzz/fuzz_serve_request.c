/* libFuzzer harness for clinfer serve's request parser (tools/serve_request.c): any bytes as
 * the body of a chat, a completions and an embeddings request. A parse either fails with a 400 (or
 * a 500 when out of memory) and a message, or gives a request whose fields hold what the server
 * relies on: messages with role and content, a prompt, at most SERVE_MAX_STOP non-empty stop
 * strings, max_tokens >= -1 and sampling parameters the sampler accepts; embeddings: 1 to
 * SERVE_MAX_INPUTS inputs, each a non-empty text or non-empty non-negative token ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int kind = SERVE_CHAT; kind <= SERVE_COMPLETION; kind++) {
        serve_request req;
        serve_error err = {0};
        if (serve_request_parse((const char *)data, size, (serve_kind)kind, &req, &err)) {
            check((err.status == 400 || err.status == 500) && err.message[0] && err.type);
            continue;
        }
        if (kind == SERVE_CHAT) {
            check(req.n_messages > 0 && req.n_messages <= SERVE_MAX_MESSAGES);
            for (size_t i = 0; i < req.n_messages; i++)
                check(req.messages[i].role[0] && req.messages[i].content);
        } else {
            check(req.prompt != NULL);
        }
        check(req.n_stop <= SERVE_MAX_STOP && req.max_tokens >= -1);
        for (size_t i = 0; i < req.n_stop; i++)
            check(req.stop[i][0] && strlen(req.stop[i]) <= SERVE_MAX_STOP_BYTES);
        clinfer_sampler *s = NULL;
        check(clinfer_sampler_create(&req.sampling, &s) == CLINFER_OK);
        clinfer_sampler_free(s);
        serve_request_free(&req);
    }
    serve_embed_request e;
    serve_error err = {0};
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
