/* clinfer serve: the body of a completion request (OpenAI's JSON) parsed into a struct, checked
 * field by field. Knows nothing of the model, so the fuzz harness runs it alone. */
#ifndef CLINFER_SERVE_REQUEST_H
#define CLINFER_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"

#define SERVE_MAX_STOP 4         /* stop strings per request, as OpenAI allows */
#define SERVE_MAX_MESSAGES 4096  /* messages per chat request */
#define SERVE_MAX_STOP_BYTES 256 /* bytes of one stop string */
#define SERVE_MAX_CHOICES 128    /* n; the server allows at most its slots */

typedef enum { SERVE_CHAT, SERVE_COMPLETION } serve_kind;

#define SERVE_MAX_TOOLS 128 /* tools per request, as OpenAI allows */

/* tool_choice: none (the default without tools; tools are then not shown to the model), auto
 * (the default with tools), required (a call of any of them), or one function named. */
typedef enum {
    SERVE_TOOLS_NONE,
    SERVE_TOOLS_AUTO,
    SERVE_TOOLS_REQUIRED,
    SERVE_TOOLS_NAMED
} serve_tool_choice;

/* A function the model may call (serve_tools.c). */
typedef struct {
    char *name;        /* [A-Za-z0-9_-]{1,64} */
    char *description; /* "" when not given */
    char *parameters;  /* its JSON schema, compact; NULL: no parameters */
} serve_tool;

typedef struct {
    serve_kind kind;
    clinfer_chat_message *messages; /* chat: role and content malloc'ed */
    size_t n_messages;
    char *prompt; /* completions */
    clinfer_sampler_params sampling;
    bool seed_given;    /* else the caller draws one */
    int32_t max_tokens; /* -1: until end of generation or of the context */
    char *stop[SERVE_MAX_STOP];
    size_t n_stop;
    bool stream, include_usage; /* include_usage: stream_options.include_usage */
    /* -1: no log-probabilities; else each token's and this many top tokens' beside it (chat's
     * logprobs and top_logprobs, a completion's logprobs N) */
    int32_t logprobs;
    int32_t n; /* choices: 1 .. SERVE_MAX_CHOICES (and at most the server's slots) */
    serve_tool *tools;
    size_t n_tools;
    serve_tool_choice tool_choice;
    size_t tool_named; /* SERVE_TOOLS_NAMED: the tool of tools */
    /* per message (chat with tools, NULL otherwise): an assistant message's tool_calls as the
     * compact JSON [{"name": ..., "arguments": {...}}], NULL where it has none */
    char **calls;
    /* GBNF the output must match (NULL: free text), and the field it came from: 'grammar'
     * as given (parsed only against the model, when the job is made), or a JSON schema's
     * ('response_format', 'json_schema') translated here */
    char *grammar;
    const char *grammar_field;
} serve_request;

/* An error for the client: the HTTP status and an OpenAI-style type and message. */
typedef struct {
    int status;
    const char *type; /* "invalid_request_error", "authentication_error", "server_error", ... */
    char message[512];
} serve_error;

/* Returns -1, for `return serve_error_set(...)`. */
int serve_error_set(serve_error *e, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The body as a JSON value where it is strict JSON (nothing after the value, no duplicate keys,
 * numbers as JSON writes them, no control bytes or NUL escapes in strings), else NULL with a 400
 * in err saying what was wrong and where (serve_json_strict.c). Freed with cJSON_Delete. */
struct cJSON *serve_parse_strict(const char *body, size_t len, serve_error *err);
/* 0 when every member of object o is among known (names between spaces, " a b "); else -1
 * with a 400 naming the first other, after where (its path: "", "options.", ...). */
int serve_only_members(const struct cJSON *o, const char *known, const char *where,
                       serve_error *err);

/* Parses body (len bytes, need not be NUL-terminated) as a request of kind. Members the server
 * does not implement, known fields of the wrong type or range, and features not offered
 * (tools), are errors, and so is a JSON schema the translator does not handle (its
 * message names the keyword). 0 on success (free *req with
 * serve_request_free), -1 with *err set (status 400). */
int serve_request_parse(const char *body, size_t len, serve_kind kind, serve_request *req,
                        serve_error *err);
void serve_request_free(serve_request *req);

#define SERVE_MAX_INPUTS 2048 /* inputs per embeddings request, as OpenAI allows */

/* One input of an embeddings request: a text, or token ids as given (text NULL). */
typedef struct {
    char *text;
    int32_t *tokens;
    size_t n_tokens;
} serve_input;

typedef struct {
    serve_input *inputs;
    size_t n_inputs;    /* 1 .. SERVE_MAX_INPUTS */
    bool base64;        /* encoding_format "base64": little-endian f32 bytes, base64-encoded */
    int32_t dimensions; /* 0: not given */
} serve_embed_request;

/* Parses the body of an embeddings request: 'input' a string, an array of strings, an array of
 * token ids or an array of such arrays; ids are only checked to be non-negative 32-bit (the
 * vocabulary is the server's). As serve_request_parse otherwise. */
int serve_embed_request_parse(const char *body, size_t len, serve_embed_request *req,
                              serve_error *err);
void serve_embed_request_free(serve_embed_request *req);

/* llama-server's POST /tokenize: content, add_special (BOS/EOS as the model wants; default
 * false), parse_special (special tokens' text as those tokens; default true), with_pieces. */
typedef struct {
    char *content;
    bool add_special, parse_special, with_pieces;
} serve_tokenize_request;

/* POST /detokenize: token ids (checked only to be non-negative 32-bit). */
typedef struct {
    int32_t *tokens;
    size_t n_tokens;
} serve_detokenize_request;

/* Parse the bodies of /tokenize and /detokenize (serve_tokenize.c), as serve_request_parse. */
int serve_tokenize_request_parse(const char *body, size_t len, serve_tokenize_request *req,
                                 serve_error *err);
int serve_detokenize_request_parse(const char *body, size_t len, serve_detokenize_request *req,
                                   serve_error *err);

#endif
