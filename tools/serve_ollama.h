/* clinfer serve: ollama's API (/api/chat, /api/generate, /api/tags, /api/show, /api/embed,
 * /api/embeddings, /api/version) beside OpenAI's. serve_ollama_request.c reads ollama's bodies
 * into the server's own requests (knowing nothing of the model, so the fuzz harness runs it
 * alone); serve_ollama.c writes ollama's answers and answers the endpoints that do not
 * generate; serve_generate.c runs /api/chat and /api/generate as it runs the OpenAI ones. */
#ifndef CLINFER_SERVE_OLLAMA_H
#define CLINFER_SERVE_OLLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_request.h"

struct cJSON;

/* What an ollama body asks beside its serve_request. */
typedef struct {
    bool generate;    /* /api/generate: answers carry "response", not "message" */
    bool load_only;   /* no prompt (or no messages): ollama's "load the model", answered at once */
    uint32_t num_ctx; /* options.num_ctx; 0: not given */
} serve_ollama_extra;

/* Parses the body of /api/chat (generate false) or /api/generate (true) into *req, as
 * serve_request_parse does an OpenAI body: strict JSON, every member read or refused (400
 * naming it). stream defaults to true; format "json" or a JSON schema constrains the output;
 * options' sampling fields, num_predict, stop and num_ctx are read, others refused; /api/generate
 * puts system and prompt through the chat template unless raw. 0 (free *req with
 * serve_request_free; with x->load_only, *req holds nothing to run), or -1 with *err set. */
int serve_ollama_request_parse(const char *body, size_t len, bool generate, serve_request *req,
                               serve_ollama_extra *x, serve_error *err);

/* The body of /api/embed (legacy false: input, a string or strings) or /api/embeddings (true:
 * prompt, one string) as the OpenAI body serve_embeddings reads, into *out (malloc'ed). 0, or
 * -1 with *err set. */
int serve_ollama_embed_body(const char *body, size_t len, bool legacy, char **out,
                            serve_error *err);

#endif
