/* clinfer serve: an OpenAI-compatible HTTP server. tools/cmd_serve.c reads the options, loads
 * the model and waits for SIGINT/SIGTERM; tools/serve_http.c answers requests (libmicrohttpd,
 * a thread per connection), and tools/serve_send.c queues their responses; tools/serve_generate.c
 * answers the completion endpoints; tools/serve_slots.c queues jobs and tools/serve_sched.c runs
 * them on the slots in batches; tools/serve_logprobs.c computes and writes log-probabilities;
 * tools/serve_json.c writes the response bodies; tools/serve_request.c parses request bodies;
 * tools/serve_embed.c answers /v1/embeddings; tools/serve_props.c /tokenize, /detokenize and
 * /props (their bodies: serve_tokenize.c); tools/serve_tools.h's files read and write tool
 * calls; tools/serve_accept.c accepts the connections and checks each request's head
 * (tools/serve_head.c) before libmicrohttpd reads it; tools/serve_conns.c bounds the connections
 * and closes those that send their request too slowly. */
#ifndef CLINFER_SERVE_H
#define CLINFER_SERVE_H

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "serve_head.h"
#include "serve_request.h"
#include "serve_slots.h"
#include "serve_tools.h"

/* Endpoints, for routing and the request counters of /metrics. */
#define SERVE_ENDPOINTS(X)                                                                         \
    X(chat, "/v1/chat/completions")                                                                \
    X(completions, "/v1/completions")                                                              \
    X(embeddings, "/v1/embeddings")                                                                \
    X(models, "/v1/models")                                                                        \
    X(tokenize, "/tokenize")                                                                       \
    X(detokenize, "/detokenize")                                                                   \
    X(props, "/props")                                                                             \
    X(health, "/health")                                                                           \
    X(metrics, "/metrics")                                                                         \
    X(ollama_chat, "/api/chat")                                                                    \
    X(ollama_generate, "/api/generate")                                                            \
    X(ollama_embed, "/api/embed")                                                                  \
    X(ollama_embeddings, "/api/embeddings")                                                        \
    X(ollama_show, "/api/show")                                                                    \
    X(ollama_tags, "/api/tags")                                                                    \
    X(ollama_version, "/api/version")                                                              \
    X(root, "/")                                                                                   \
    X(other, "other")

#define SERVE_ENDPOINT_ENUM(name, path) SERVE_EP_##name,
typedef enum { SERVE_ENDPOINTS(SERVE_ENDPOINT_ENUM) SERVE_EP_COUNT } serve_endpoint;
/* The endpoint at path (len bytes; no query) (serve_routes.c). */
serve_endpoint serve_endpoint_of(const char *path, size_t len);
/* Whether ep is one of ollama's, which answer errors in ollama's shape. */
#define SERVE_EP_IS_OLLAMA(ep) ((ep) >= SERVE_EP_ollama_chat && (ep) <= SERVE_EP_root)

typedef struct serve_server {
    /* options */
    const char *host;
    uint16_t port;             /* 0: any free port */
    const char *api_key;       /* NULL: no key asked */
    size_t max_body;           /* bytes of a request body */
    const char *model_id;      /* the name /v1/models lists and responses carry */
    const char *model_path;    /* the file, as /props says */
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
    struct serve_acceptor
        *acceptor; /* the listening socket and the heads awaited (serve_accept.c) */

    struct MHD_Daemon *daemon;
} serve_server;

/* Starts listening on s->host:s->port (s->port receives the port bound). 0 on success; else -1
 * with the reason in err. */
int serve_http_start(serve_server *s, char *err, size_t size);
/* Stops accepting connections, waits for the requests in flight to be answered (for up to
 * s->drain_ms; then the pool's jobs are ended, each stream with an error event), then closes. */
void serve_http_stop(serve_server *s);

/* ---- connections (serve_accept.c, serve_conns.c) ------------------------------------------ */

/* Listens on ai (the port bound goes to s->port) and starts the thread that accepts connections,
 * checks each one's first request head (serve_head.h) and hands it to s->daemon; 0, or -1 with
 * the reason in err. */
int serve_accept_start(serve_server *s, const struct addrinfo *ai, char *err, size_t size);
/* Stops accepting; closes the connections not yet handed over. */
void serve_accept_stop(serve_server *s);
/* After a response on a connection that stays open (on its thread): waits for the next
 * request's head and checks it as the first, before libmicrohttpd reads it; a head refused is
 * answered and the connection shut. */
void serve_next_head(serve_server *s, struct MHD_Connection *c);

typedef enum {
    SERVE_CONN_WAITING,   /* for a request's headers: the header deadline runs */
    SERVE_CONN_READING,   /* the body: the body deadline runs */
    SERVE_CONN_ANSWERING, /* no deadline of ours: a generation takes what it takes */
} serve_conn_phase;

typedef struct serve_conn serve_conn;
/* Tracks a connection accepted on fd, from the client at addr. One past s->max_conns closes
 * the connection that has waited longest for its request's headers; when every connection is
 * busy, the newcomer is marked to get 503. NULL (counted as closed by the server): close it at
 * once, past CONN_HEADROOM more or past s->max_conns_per_ip from its address. */
serve_conn *serve_conn_add(serve_server *s, int fd, const struct sockaddr *addr, socklen_t len);
/* Forgets k, whose socket the caller closes next. */
void serve_conn_drop(serve_server *s, serve_conn *k);
/* k is being given to libmicrohttpd, whose STARTED notification takes it over. */
void serve_conn_handing(serve_server *s, serve_conn *k);
/* MHD_add_connection failed (and closed the socket): forgets k unless it was started. */
void serve_conn_handoff_failed(serve_server *s, serve_conn *k);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the server). */
void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* The tracked connection of c, or NULL. */
serve_conn *serve_conn_of(struct MHD_Connection *c);
/* Counts the bytes of a head that passed serve_head_check, and of its body. */
void serve_conn_head_read(serve_server *s, serve_conn *k, const serve_head *h);
/* Whether more has been read from k's socket than the heads and bodies counted (a request sent
 * before the previous one's answer, or a chunked body whose bytes are not counted), or cannot
 * be told: then libmicrohttpd holds bytes not checked, and the connection closes after the
 * response. */
bool serve_conn_read_past(serve_server *s, serve_conn *k);
/* Moves the connection to phase, starting its deadline now. */
void serve_conn_set_phase(serve_server *s, struct MHD_Connection *c, serve_conn_phase phase);
/* Whether the connection came when all s->max_conns were busy (it gets 503). */
bool serve_conn_over_limit(serve_server *s, struct MHD_Connection *c);
/* The thread that enforces the deadlines: 0, or -1 when it cannot start. */
int serve_conns_start(serve_server *s);
void serve_conns_stop(serve_server *s);
/* Connections past s->max_conns that are still accepted, so that they can be told 503 (or take
 * an idle connection's place) rather than wait unaccepted. */
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

/* ---- tools in the prompt (serve_tool_prompt.c) ---- */

/* How the model's chat template family writes tool calls. */
serve_tool_format serve_tools_format_of(serve_server *s);
/* req's messages as the chat template gets them: the tools shown (unless tool_choice is none),
 * the history's calls and tool results written in fmt. *out (*n_out of them) with its contents
 * malloc'ed, the roles req's or static; freed with serve_tools_messages_free. 0, or -1 with *err
 * set. */
int serve_tools_messages(const serve_request *req, serve_tool_format fmt,
                         clinfer_chat_message **out, size_t *n_out, serve_error *err);
void serve_tools_messages_free(clinfer_chat_message *m, size_t n);

/* POST /v1/embeddings (serve_embed.c): 0 with the response body in *out (malloc'ed), -1 with
 * *err set, 1 when the client left while waiting (nothing to answer). fd: the connection's. */
int serve_embeddings(serve_server *s, const char *body, size_t len, int fd, char **out,
                     serve_error *err);

/* ---- response bodies (serve_json.c); each malloc'ed, NULL on out of memory ---------------- */

char *serve_json_error(const serve_error *e);
/* ollama's: {"error": message}. */
char *serve_json_error_ollama(const serve_error *e);
char *serve_json_models(const serve_server *s);
/* A choice of a response or of a chunk. */
typedef struct {
    size_t index;
    const char *role; /* chat: "assistant" in a whole answer and a choice's first chunk */
    const char *text; /* len bytes (any: see serve_json_text) */
    size_t len;
    serve_finish finish;      /* SERVE_FINISH_NONE: null, before a choice's last chunk */
    struct cJSON *logprobs;   /* taken; NULL: null */
    struct cJSON *tool_calls; /* taken; chat only; NULL: none */
} serve_choice_out;

/* Generated text as a JSON string: bytes that are not valid UTF-8 and NULs become U+FFFD. */
struct cJSON *serve_json_text(const char *text, size_t len);
/* A whole response: its n choices, with the token counts. */
char *serve_json_completion(const serve_server *s, serve_kind kind, const char *id, long created,
                            const serve_choice_out *c, size_t n, size_t n_prompt,
                            size_t n_generated);
/* One streamed chunk of one choice. usage: a final chunk with counts, no choice. */
char *serve_json_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                       const serve_choice_out *c);
char *serve_json_usage_chunk(const serve_server *s, serve_kind kind, const char *id, long created,
                             size_t n_prompt, size_t n_generated);
/* OpenAI's embeddings list: n vectors of d floats (base64: their little-endian bytes in
 * base64), with the prompt tokens as usage. */
char *serve_json_embeddings(const serve_server *s, const float *v, size_t n, size_t d, bool base64,
                            size_t n_prompt);
/* A choice's log-probabilities (serve_logprobs.c) in OpenAI's shape for kind; *offset: the bytes
 * of the choice's text before lp[0], advanced past lp[n - 1]. */
struct cJSON *serve_json_logprobs(const clinfer_model *m, serve_kind kind, const serve_logprob *lp,
                                  size_t n, size_t *offset);
/* The Prometheus text of /metrics. */
char *serve_metrics_text(serve_server *s);

#endif
