/* clinfer serve: an OpenAI-compatible HTTP server. tools/cmd_serve.c reads the options, loads
 * the model and waits for SIGINT/SIGTERM; tools/serve_http.c answers requests (libmicrohttpd,
 * a thread per connection); tools/serve_slots.c queues jobs and tools/serve_sched.c runs them
 * on the slots in batches;
 * tools/serve_json.c writes the response bodies; tools/serve_request.c parses request bodies;
 * tools/serve_embed.c answers /v1/embeddings; tools/serve_conns.c bounds the connections and
 * closes those that send their request too slowly. */
#ifndef CLINFER_SERVE_H
#define CLINFER_SERVE_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "serve_request.h"
#include "serve_slots.h"

/* Endpoints, for the request counters of /metrics. */
#define SERVE_ENDPOINTS(X)                                                                         \
    X(chat, "/v1/chat/completions")                                                                \
    X(completions, "/v1/completions")                                                              \
    X(embeddings, "/v1/embeddings")                                                                \
    X(models, "/v1/models")                                                                        \
    X(health, "/health")                                                                           \
    X(metrics, "/metrics")                                                                         \
    X(other, "other")

#define SERVE_ENDPOINT_ENUM(name, path) SERVE_EP_##name,
typedef enum { SERVE_ENDPOINTS(SERVE_ENDPOINT_ENUM) SERVE_EP_COUNT } serve_endpoint;

typedef struct serve_server {
    /* options */
    const char *host;
    uint16_t port;             /* 0: any free port */
    const char *api_key;       /* NULL: no key asked */
    size_t max_body;           /* bytes of a request body */
    const char *model_id;      /* the name /v1/models lists and responses carry */
    const char *chat_template; /* NULL: the model's */
    size_t n_slots, queue_cap;
    size_t max_conns;          /* connections held at once; past them, idle ones close */
    size_t max_conns_per_ip;   /* 0: no limit per client address */
    double header_ms, body_ms; /* deadlines for a request's headers and for its body */
    double drain_ms;           /* after a signal: how long the requests in flight may take */
    bool special_in_content;   /* chat content may hold special tokens' text */
    clinfer_context_params cp; /* n_ctx per slot, n_batch per step, activations */

    /* set once by cmd_serve before `ready` */
    clinfer_model *model;
    serve_pool *pool;
    atomic_bool ready;    /* the model is loaded and the scheduler runs */
    atomic_bool stopping; /* a signal came: answer nothing new */
    double start_ms;      /* cli_now_ms() at start */
    long start_time;      /* and time(NULL) */

    /* requests between their first byte and their last response byte */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    size_t in_flight;
    uint64_t requests[SERVE_EP_COUNT];
    uint64_t responses_by_class[6]; /* [status / 100] */
    uint64_t ids;                   /* for response ids */

    /* the open connections (serve_conns.c), under `lock` */
    struct serve_conn *conns;
    size_t n_conns;
    uint64_t conns_closed_slow; /* closed by a deadline, or to make room */
    atomic_bool conns_stop;
    pthread_t watchdog;
    bool watchdog_started;

    struct MHD_Daemon *daemon;
} serve_server;

/* Starts listening on s->host:s->port (s->port receives the port bound). 0 on success; else -1
 * with the reason in err. */
int serve_http_start(serve_server *s, char *err, size_t size);
/* Stops accepting connections, waits for the requests in flight to be answered (for up to
 * s->drain_ms; then the pool's jobs are ended, each stream with an error event), then closes. */
void serve_http_stop(serve_server *s);

/* ---- connections (serve_conns.c) ------------------------------------------------------- */

typedef enum {
    SERVE_CONN_WAITING,   /* for a request's headers: the header deadline runs */
    SERVE_CONN_READING,   /* the body: the body deadline runs */
    SERVE_CONN_ANSWERING, /* no deadline of ours: a generation takes what it takes */
} serve_conn_phase;

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the server): tracks each
 * connection. One past s->max_conns closes the connection that has waited longest for its
 * request's headers; when every connection is busy, the newcomer is marked to get 503. */
void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* Moves the connection to phase, starting its deadline now. */
void serve_conn_set_phase(serve_server *s, struct MHD_Connection *c, serve_conn_phase phase);
/* Whether the connection came when all s->max_conns were busy (it gets 503). */
bool serve_conn_over_limit(serve_server *s, struct MHD_Connection *c);
/* The thread that enforces the deadlines: 0, or -1 when it cannot start. */
int serve_conns_start(serve_server *s);
void serve_conns_stop(serve_server *s);
/* Connections past s->max_conns that libmicrohttpd still accepts, so that they can be told 503
 * (or take an idle connection's place) rather than wait unaccepted. */
#define CONN_HEADROOM 32
/* Raises the soft limit of open descriptors for the connections, as far as the hard limit
 * allows; lowers s->max_conns to what fits (saying so). */
void serve_conns_fit(serve_server *s);

#define SERVE_WAIT_MS 50 /* how often a waiting connection looks at its socket */

/* Whether the client closed its end of the connection fd (or the socket failed). */
bool serve_client_gone(int fd);

/* Tokenizes text as prompts are (special tokens parsed, BOS as the model wants) into *tokens
 * (malloc'ed; freed first). 0, or -1 with *err set. */
int serve_tokenize(clinfer_model *model, const char *text, int32_t **tokens, size_t *n,
                   serve_error *err);
/* A request's prompt as tokens (serve_prompt.c): a completion's prompt as serve_tokenize does,
 * a chat through the chat template with the messages' content as plain text (special tokens'
 * text not parsed, unless s->special_in_content). 0, or -1 with *err set. */
int serve_prompt_tokens(serve_server *s, const serve_request *req, int32_t **tokens, size_t *n,
                        serve_error *err);

/* POST /v1/embeddings (serve_embed.c): 0 with the response body in *out (malloc'ed), -1 with
 * *err set, 1 when the client left while waiting (nothing to answer). fd: the connection's. */
int serve_embeddings(serve_server *s, const char *body, size_t len, int fd, char **out,
                     serve_error *err);

/* ---- response bodies (serve_json.c); each malloc'ed, NULL on out of memory ---------------- */

char *serve_json_error(const serve_error *e);
char *serve_json_models(const serve_server *s);
/* A whole response: the text and why it finished, with the token counts. */
char *serve_json_completion(const serve_server *s, serve_kind kind, const char *id, long created,
                            const char *text, size_t len, serve_finish finish, size_t n_prompt,
                            size_t n_generated);
/* One streamed chunk: text (len may be 0), for chat the role on the first chunk (NULL after),
 * finish on the last (SERVE_FINISH_NONE before). usage: a final chunk with counts, no choice. */
char *serve_json_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                       const char *role, const char *text, size_t len, serve_finish finish);
char *serve_json_usage_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                             size_t n_prompt, size_t n_generated);
/* OpenAI's embeddings list: n vectors of d floats (base64: their little-endian bytes in
 * base64), with the prompt tokens as usage. */
char *serve_json_embeddings(const serve_server *s, const float *v, size_t n, size_t d, bool base64,
                            size_t n_prompt);
/* The Prometheus text of /metrics. */
char *serve_metrics_text(serve_server *s);

#endif
