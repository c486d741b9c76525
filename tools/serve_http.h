/* clinfer serve: what the HTTP side (serve_http.c) shares with the endpoints that answer on a
 * connection's thread: the request being answered, and the calls that queue a response. */
#ifndef CLINFER_SERVE_HTTP_H
#define CLINFER_SERVE_HTTP_H

#include "serve.h"

typedef struct serve_generation serve_generation;

typedef struct {
    serve_server *s;
    serve_endpoint ep;
    char *body;
    size_t len;
    bool too_large, responded;
    bool over_limit;       /* came when every connection was busy: 503, then closed */
    serve_generation *gen; /* a completion's jobs, until a stream takes them */
    bool ollama;           /* an endpoint of ollama's API: errors as {"error": message} */
    bool close;            /* the connection closes after the response (Connection: close) */
    bool keep_alive;       /* it stays open: its next head is awaited and checked */
} request;

/* The responses (serve_send.c). Queues body (malloc'ed, taken; NULL: building it ran out of
 * memory, which is said instead). */
enum MHD_Result serve_send_owned(request *r, struct MHD_Connection *c, unsigned status, char *body,
                                 const char *type);
/* Queues resp (taken) with the headers every response gets, and counts it. */
enum MHD_Result serve_queue_response(request *r, struct MHD_Connection *c, unsigned status,
                                     struct MHD_Response *resp);
enum MHD_Result serve_send_error(request *r, struct MHD_Connection *c, const serve_error *e);
int serve_connection_fd(struct MHD_Connection *c);

#define FAIL(status, type, ...)                                                                    \
    do {                                                                                           \
        serve_error e_;                                                                            \
        serve_error_set(&e_, status, type, __VA_ARGS__);                                           \
        return serve_send_error(r, c, &e_);                                                        \
    } while (0)

/* POST /v1/chat/completions and /v1/completions (serve_generate.c): parses, queues the jobs
 * (one per choice) and answers as a whole or streamed. */
enum MHD_Result serve_answer_generate(request *r, struct MHD_Connection *c, serve_kind kind);
/* Cancels and drops what a request's generation still holds (NULL: nothing). */
void serve_generation_free(serve_generation *g);

/* POST /tokenize, /detokenize and GET /props, as llama-server (serve_props.c). */
enum MHD_Result serve_answer_tokenize(request *r, struct MHD_Connection *c, bool detokenize);
enum MHD_Result serve_answer_props(request *r, struct MHD_Connection *c);

/* ollama's API (serve_ollama.c): GET /, /api/tags, /api/version; POST /api/show, /api/embed,
 * /api/embeddings. */
enum MHD_Result serve_answer_ollama(request *r, struct MHD_Connection *c);

/* The chat page (serve_page.c, the page tools/serve_page.html): whether a GET / asks for HTML
 * (a browser's Accept), and the answer with it. */
bool serve_wants_page(struct MHD_Connection *c);
enum MHD_Result serve_answer_page(request *r, struct MHD_Connection *c);

/* One line of an /api/chat or /api/generate answer (or the whole answer, done). */
typedef struct {
    bool generate;    /* /api/generate's "response", else /api/chat's "message" */
    const char *text; /* len bytes: the answer's, or a stream's piece */
    size_t len;
    bool done;
    const char *done_reason;             /* with done: "stop", "length", "load" */
    const clinfer_generate_stats *stats; /* with done: the counts and durations; NULL: none */
    const struct cJSON *tool_calls;      /* /api/chat: OpenAI's message.tool_calls; NULL: none */
    double start_ms;                     /* cli_now_ms() when the request came */
} serve_ollama_out;
char *serve_ollama_json(const serve_server *s, const serve_ollama_out *o);

#endif
