/* clinfer serve: tools (function calling) as OpenAI's chat API has them. serve_tools.c reads a
 * request's 'tools', 'tool_choice' and the tool calls in its history, and builds the grammar
 * that makes the answer one call of the allowed functions; serve_tool_calls.c finds the calls
 * in what the model wrote; serve_tool_prompt.c shows the tools to the model the way its chat
 * template family expects. The first two know nothing of the model (the fuzz harness runs them). */
#ifndef CLINFER_SERVE_TOOLS_H
#define CLINFER_SERVE_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "serve_request.h"

struct cJSON;

/* How a model family writes a call (and reads the tools):
 *   HERMES  (ChatML: Qwen, Hermes, SmolLM)  <tool_call>\n{"name": ..., "arguments":
 * {...}}\n</tool_call> LLAMA3                                   {"name": ..., "parameters": {...}}
 *   MISTRAL (a vocabulary with [TOOL_CALLS]) [TOOL_CALLS] [{"name": ..., "arguments": {...}}]
 *   GENERIC (any other)                      {"tool_calls": [{"name": ..., "arguments": {...}}]} */
typedef enum {
    SERVE_TOOL_FORMAT_HERMES,
    SERVE_TOOL_FORMAT_LLAMA3,
    SERVE_TOOL_FORMAT_MISTRAL,
    SERVE_TOOL_FORMAT_GENERIC
} serve_tool_format;

/* 'tools' and 'tool_choice' of a request body into req: 0, or -1 with *err set (400 naming the
 * field; a parameters schema the grammar translator lacks a keyword of, with required or a
 * named function, names it). */
int serve_tools_parse(const struct cJSON *root, serve_request *req, serve_error *err);
/* Message i (of n) of a chat: its 'tool_calls' (an assistant's) into req->calls[i], and its
 * 'tool_call_id' and 'name' checked. 0, or -1 with *err set. */
int serve_tools_parse_message(const struct cJSON *m, size_t i, size_t n, serve_request *req,
                              serve_error *err);
/* Frees what serve_tools_parse and serve_tools_parse_message put in req. */
void serve_tools_free(serve_request *req);

/* The GBNF of one call, in format fmt, of the function tool_choice names or of any of the tools
 * (required), its arguments as the function's parameters schema. *gbnf malloc'ed. 0, or -1
 * with *err set. */
int serve_tools_grammar(const serve_request *req, serve_tool_format fmt, char **gbnf,
                        serve_error *err);

/* A call the model wrote. */
typedef struct {
    char *name;
    char *arguments;       /* JSON text: as the model wrote it, when it wrote an object */
    bool object_arguments; /* (not a string holding JSON) */
} serve_tool_call;

#define SERVE_MAX_TOOL_CALLS 16 /* calls read from one answer */
#define SERVE_MAX_TOOL_NAME 64  /* bytes of a function's name */

/* Finds the calls of req's tools that text (len bytes, any) holds in format fmt. 1 with *calls
 * (malloc'ed, *n of them) and *content_len, the bytes of text before them that are the answer's
 * content; 0 when it holds none (text is all content); -1 on out of memory. */
int serve_tool_calls_parse(serve_tool_format fmt, const serve_request *req, const char *text,
                           size_t len, serve_tool_call **calls, size_t *n, size_t *content_len);
void serve_tool_calls_free(serve_tool_call *calls, size_t n);
/* OpenAI's message.tool_calls for calls, their ids id_prefix + their index. NULL on out of
 * memory. */
struct cJSON *serve_tool_calls_json(const serve_tool_call *calls, size_t n, const char *id_prefix);
/* A stream's delta.tool_calls of the call at index: its first (name given: the id, type and
 * name, with the arguments so far), or more of its arguments (name NULL). NULL on out of memory. */
struct cJSON *serve_tool_call_delta(size_t index, const char *id_prefix, const char *name,
                                    const char *args, size_t args_len);

/* Where a call is in an answer, whole or still being written. */
typedef struct {
    bool named; /* its "name" string is whole: name_len bytes at name_at */
    size_t name_at, name_len;
    bool args; /* its arguments object has begun: args_len bytes at args_at so far */
    size_t args_at, args_len;
    bool args_whole; /* ... and ended */
} serve_tool_span;
/* The calls that text (len bytes of an answer in format fmt, maybe still being written) has
 * begun, in order, into out (at most max): the call objects of the format's shape, found by
 * their structure alone (whether they are calls of the request's tools is not asked). */
size_t serve_tool_calls_scan(serve_tool_format fmt, const char *text, size_t len,
                             serve_tool_span *out, size_t max);

#endif
