/* clinfer serve: the HTTP side, on libmicrohttpd with a thread per connection. A connection's
 * thread reads the body, parses it, tokenizes the prompt and queues a job for the slots; it
 * then waits for the job's text (a whole JSON answer, or server-sent events as they come) and
 * watches its socket, so that a client that leaves cancels its generation at once. How a
 * request is framed is checked before its body is read (libmicrohttpd takes the first of
 * several Content-Length headers, and Transfer-Encoding over Content-Length, silently). */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define CHUNK_BYTES 4096 /* text taken from a job at once */

typedef struct {
    serve_server *s;
    serve_endpoint ep;
    char *body;
    size_t len;
    bool too_large, responded;
    bool over_limit; /* came when every connection was busy: 503, then closed */
    serve_job *job;
} request;

/* ---- responses ----------------------------------------------------------------------------- */

/* Queues body (malloc'ed, taken; NULL: building it ran out of memory, which is said instead). */
static enum MHD_Result send_owned(request *r, struct MHD_Connection *c, unsigned status, char *body,
                                  const char *type) {
    static char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                        "\"code\":500}}";
    bool owned = body != NULL;
    if (!owned) {
        body = oom;
        status = 500;
        type = "application/json";
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        strlen(body), body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (owned) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    if (status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    if (atomic_load(&r->s->stopping) || r->over_limit)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    r->responded = true;
    pthread_mutex_lock(&r->s->lock);
    r->s->responses_by_class[status / 100 < 6 ? status / 100 : 5]++;
    pthread_mutex_unlock(&r->s->lock);
    return ok;
}

static enum MHD_Result send_error(request *r, struct MHD_Connection *c, const serve_error *e) {
    return send_owned(r, c, (unsigned)e->status, serve_json_error(e), "application/json");
}

#define FAIL(status, type, ...)                                                                    \
    do {                                                                                           \
        serve_error e_;                                                                            \
        serve_error_set(&e_, status, type, __VA_ARGS__);                                           \
        return send_error(r, c, &e_);                                                              \
    } while (0)

static int connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return i ? i->connect_fd : -1;
}

/* ---- streaming: server-sent events --------------------------------------------------------- */

typedef enum { PHASE_ROLE, PHASE_TEXT, PHASE_FINISH, PHASE_USAGE, PHASE_DONE, PHASE_END } phase;

typedef struct {
    serve_server *s;
    serve_job *job;
    serve_kind kind;
    bool include_usage;
    char id[48];
    long created;
    int fd;
    phase phase;
    size_t seen;   /* of the job's text */
    char *pending; /* an event not yet handed to libmicrohttpd */
    size_t pending_len, pending_at;
} stream;

/* "data: JSON\n\n" as the pending event; takes json. false on out of memory. */
static bool set_event(stream *st, char *json) {
    free(st->pending);
    st->pending = NULL;
    st->pending_len = st->pending_at = 0;
    if (!json) return false;
    size_t n = strlen(json);
    st->pending = malloc(n + 9);
    if (st->pending) st->pending_len = (size_t)sprintf(st->pending, "data: %s\n\n", json);
    free(json);
    return st->pending != NULL;
}

/* Makes the next event pending, if there is one now. 0 to go on; or what stream_read returns
 * to end: the end of the stream, or an error (out of memory, the client left). */
static ssize_t next_event(stream *st) {
    serve_job *job = st->job;
    char text[CHUNK_BYTES];
    size_t n = 0;
    char *json = NULL;
    switch (st->phase) {
    case PHASE_ROLE:
        st->phase = PHASE_TEXT;
        if (st->kind != SERVE_CHAT) return 0;
        json = serve_json_chunk(st->s, st->kind, st->id, st->created, "assistant", "", 0,
                                SERVE_FINISH_NONE);
        break;
    case PHASE_TEXT: {
        bool finished = serve_job_wait(job, &st->seen, text, sizeof text, &n, SERVE_WAIT_MS);
        if (n) {
            json = serve_json_chunk(st->s, st->kind, st->id, st->created, NULL, text, n,
                                    SERVE_FINISH_NONE);
            break;
        }
        if (finished) {
            st->phase = PHASE_FINISH;
        } else if (serve_client_gone(st->fd)) {
            serve_job_cancel(job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return 0;
    }
    case PHASE_FINISH:
        st->phase = st->include_usage ? PHASE_USAGE : PHASE_DONE;
        if (job->status != CLINFER_OK) { /* the generation failed part way: say so, in band */
            serve_error e;
            serve_error_set(&e, 500, "server_error", "generation failed: %s", job->error);
            json = serve_json_error(&e);
        } else {
            json = serve_json_chunk(st->s, st->kind, st->id, st->created, NULL, "", 0, job->finish);
        }
        break;
    case PHASE_USAGE:
        st->phase = PHASE_DONE;
        json = serve_json_usage_chunk(st->s, st->kind, st->id, st->created, job->stats.n_prompt,
                                      job->stats.n_generated);
        break;
    case PHASE_DONE:
        st->phase = PHASE_END;
        json = malloc(sizeof "[DONE]");
        if (json) strcpy(json, "[DONE]");
        break;
    case PHASE_END:
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    return set_event(st, json) ? 0 : MHD_CONTENT_READER_END_WITH_ERROR;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    for (;;) {
        if (st->pending_at < st->pending_len) {
            size_t n = st->pending_len - st->pending_at;
            if (n > max) n = max;
            memcpy(buf, st->pending + st->pending_at, n);
            st->pending_at += n;
            return (ssize_t)n;
        }
        ssize_t end = next_event(st);
        if (end) return end;
    }
}

static void stream_free(void *cls) {
    stream *st = cls;
    serve_job_release(st->job);
    free(st->pending);
    free(st);
}

/* ---- generation requests ------------------------------------------------------------------- */

static enum MHD_Result answer_whole(request *r, struct MHD_Connection *c, serve_kind kind,
                                    const char *id, long created) {
    serve_job *job = r->job;
    int fd = connection_fd(c);
    char *text = NULL;
    size_t len = 0, seen = 0, n;
    char chunk[CHUNK_BYTES];
    for (bool finished = false; !finished;) {
        finished = serve_job_wait(job, &seen, chunk, sizeof chunk, &n, SERVE_WAIT_MS);
        if (n) {
            char *grown = realloc(text, len + n + 1);
            if (!grown) {
                free(text);
                FAIL(500, "server_error", "out of memory");
            }
            text = grown;
            memcpy(text + len, chunk, n);
            len += n;
        } else if (!finished && serve_client_gone(fd)) {
            free(text);
            serve_job_cancel(job);
            return MHD_NO; /* nobody to answer */
        }
    }
    if (job->status != CLINFER_OK) {
        free(text);
        FAIL(500, "server_error", "generation failed: %s", job->error);
    }
    char *body = serve_json_completion(r->s, kind, id, created, text ? text : "", len, job->finish,
                                       job->stats.n_prompt, job->stats.n_generated);
    free(text);
    return send_owned(r, c, 200, body, "application/json");
}

static enum MHD_Result answer_stream(request *r, struct MHD_Connection *c, serve_kind kind,
                                     const serve_request *req, const char *id, long created) {
    stream *st = calloc(1, sizeof *st);
    if (!st) FAIL(500, "server_error", "out of memory");
    *st = (stream){.s = r->s,
                   .job = r->job,
                   .kind = kind,
                   .include_usage = req->include_usage,
                   .created = created,
                   .fd = connection_fd(c)};
    snprintf(st->id, sizeof st->id, "%s", id);
    r->job = NULL; /* the stream holds the reference now */
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, CHUNK_BYTES,
                                                                  stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        FAIL(500, "server_error", "out of memory");
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    r->responded = true;
    pthread_mutex_lock(&r->s->lock);
    r->s->responses_by_class[2]++;
    pthread_mutex_unlock(&r->s->lock);
    return ok;
}

static enum MHD_Result answer_generate(request *r, struct MHD_Connection *c, serve_kind kind) {
    serve_server *s = r->s;
    serve_request req;
    serve_error e;
    if (serve_request_parse(r->body ? r->body : "", r->len, kind, &req, &e))
        return send_error(r, c, &e);
    int32_t *tokens = NULL;
    size_t n = 0;
    uint32_t n_ctx = serve_pool_n_ctx(s->pool);
    if (serve_prompt_tokens(s, &req, &tokens, &n, &e)) {
        /* error already set */
    } else if (n == 0) {
        serve_error_set(&e, 400, "invalid_request_error", "the prompt is empty");
    } else if (n + (req.max_tokens > 0 ? (size_t)req.max_tokens : 1) > n_ctx) {
        if (req.max_tokens > 0)
            serve_error_set(&e, 400, "invalid_request_error",
                            "the prompt (%zu tokens) plus max_tokens (%d) exceed the context of "
                            "%u tokens",
                            n, (int)req.max_tokens, n_ctx);
        else
            serve_error_set(&e, 400, "invalid_request_error",
                            "the prompt (%zu tokens) leaves no room to generate in the context "
                            "of %u tokens",
                            n, n_ctx);
    } else {
        pthread_mutex_lock(&s->lock);
        uint64_t serial = ++s->ids;
        pthread_mutex_unlock(&s->lock);
        /* a seed per request when none is given: the serial mixed with the start time */
        uint64_t seed = serial * 0x9E3779B97F4A7C15ull ^ (uint64_t)s->start_time;
        if (serve_job_create(s->pool, tokens, n, &req, seed, &r->job, &e)) {
            /* error already set */
        } else if (!serve_pool_submit(s->pool, r->job))
            serve_error_set(&e, 503, "unavailable_error",
                            "the server is busy: all %zu slots run and %zu requests wait; retry "
                            "later",
                            s->n_slots, s->queue_cap);
        else
            e.status = 0;
        if (e.status == 0) {
            free(tokens);
            char id[48];
            long created = (long)time(NULL);
            snprintf(id, sizeof id, "%s-%llx%04llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
                     (unsigned long long)created, (unsigned long long)serial);
            enum MHD_Result ok = req.stream ? answer_stream(r, c, kind, &req, id, created)
                                            : answer_whole(r, c, kind, id, created);
            serve_request_free(&req);
            return ok;
        }
    }
    free(tokens);
    serve_request_free(&req);
    return send_error(r, c, &e);
}

static enum MHD_Result answer_embeddings(request *r, struct MHD_Connection *c) {
    char *body = NULL;
    serve_error e;
    int rc = serve_embeddings(r->s, r->body ? r->body : "", r->len, connection_fd(c), &body, &e);
    if (rc > 0) return MHD_NO; /* the client left: nobody to answer */
    return rc ? send_error(r, c, &e) : send_owned(r, c, 200, body, "application/json");
}

/* ---- routing ------------------------------------------------------------------------------- */

static serve_endpoint endpoint_of(const char *url) {
    static const struct {
        const char *path;
        serve_endpoint ep;
    } routes[] = {{"/v1/chat/completions", SERVE_EP_chat},
                  {"/chat/completions", SERVE_EP_chat},
                  {"/v1/completions", SERVE_EP_completions},
                  {"/completions", SERVE_EP_completions},
                  {"/v1/embeddings", SERVE_EP_embeddings},
                  {"/embeddings", SERVE_EP_embeddings},
                  {"/v1/models", SERVE_EP_models},
                  {"/models", SERVE_EP_models},
                  {"/health", SERVE_EP_health},
                  {"/metrics", SERVE_EP_metrics}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) return routes[i].ep;
    return SERVE_EP_other;
}

/* Compares in time independent of where the strings differ. */
static bool same_secret(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
    return d == 0;
}

static bool authorized(const serve_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && same_secret(h + 7, s->api_key);
}

static enum MHD_Result dispatch(request *r, struct MHD_Connection *c, const char *url,
                                const char *method) {
    serve_server *s = r->s;
    bool post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    bool wants_post =
        r->ep == SERVE_EP_chat || r->ep == SERVE_EP_completions || r->ep == SERVE_EP_embeddings;
    if (r->ep == SERVE_EP_other) {
        FAIL(404, "not_found_error", "no endpoint %s", url);
    }
    if (wants_post ? !post : !get)
        FAIL(405, "invalid_request_error", "%s takes %s, not %s", url, wants_post ? "POST" : "GET",
             method);
    if (r->over_limit && r->ep != SERVE_EP_health && r->ep != SERVE_EP_metrics)
        FAIL(503, "unavailable_error",
             "the server holds its limit of %zu connections, all busy; retry later", s->max_conns);
    if (r->ep == SERVE_EP_health) {
        if (!atomic_load(&s->ready)) FAIL(503, "unavailable_error", "the model is loading");
        char *ok = malloc(16);
        if (ok) strcpy(ok, "{\"status\":\"ok\"}");
        return send_owned(r, c, 200, ok, "application/json");
    }
    if (!authorized(s, c))
        FAIL(401, "authentication_error",
             "a valid API key is needed: send the header 'Authorization: Bearer KEY'");
    if (atomic_load(&s->stopping)) FAIL(503, "unavailable_error", "the server is shutting down");
    if (!atomic_load(&s->ready)) FAIL(503, "unavailable_error", "the model is loading");
    if (r->too_large)
        FAIL(413, "invalid_request_error", "the body exceeds the limit of %zu bytes", s->max_body);
    switch (r->ep) {
    case SERVE_EP_models:
        return send_owned(r, c, 200, serve_json_models(s), "application/json");
    case SERVE_EP_metrics:
        return send_owned(r, c, 200, serve_metrics_text(s), "text/plain; version=0.0.4");
    case SERVE_EP_chat:
        return answer_generate(r, c, SERVE_CHAT);
    case SERVE_EP_embeddings:
        return answer_embeddings(r, c);
    default:
        return answer_generate(r, c, SERVE_COMPLETION);
    }
}

/* A body over this many times the limit is not even read: the connection closes after the 413.
 * Below it the body is read and dropped, so that the client sees the answer, unless the client
 * asked first (Expect: 100-continue): then it gets the 413 instead of "100 Continue". */
#define BODY_DRAIN_FACTOR 16

/* The headers that say where the body ends, as the client sent them. */
typedef struct {
    const char *length, *other_length; /* the first Content-Length, one of another value */
    const char *encoding;              /* the last Transfer-Encoding */
    unsigned n_encodings;
} framing;

static enum MHD_Result add_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (!f->length)
            f->length = value;
        else if (strcmp(f->length, value))
            f->other_length = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->encoding = value;
        f->n_encodings++;
    }
    return MHD_YES;
}

/* The first call of a request, its headers in: refuses a body framed two ways (the shapes of
 * request smuggling) and one that is declared too large. */
static enum MHD_Result first_call(request *r, struct MHD_Connection *c) {
    serve_server *s = r->s;
    framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_framing, &f);
    if (f.other_length)
        FAIL(400, "invalid_request_error", "the request has two Content-Length headers (%s and %s)",
             f.length, f.other_length);
    if (f.length && f.encoding)
        FAIL(400, "invalid_request_error",
             "the request has both Content-Length and Transfer-Encoding; send one");
    if (f.encoding && (f.n_encodings > 1 || strcasecmp(f.encoding, "chunked")))
        FAIL(501, "invalid_request_error",
             "Transfer-Encoding '%s' is not supported: send chunked or a Content-Length",
             f.n_encodings > 1 ? "(several)" : f.encoding);
    unsigned long long declared = f.length ? strtoull(f.length, NULL, 10) : 0;
    if (declared > s->max_body) {
        r->too_large = true;
        const char *expect =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if (declared / BODY_DRAIN_FACTOR > s->max_body ||
            (expect && !strcasecmp(expect, "100-continue")))
            FAIL(413, "invalid_request_error", "the body exceeds the limit of %zu bytes",
                 s->max_body);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    serve_server *s = cls;
    request *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->s = s;
        r->ep = endpoint_of(url);
        r->over_limit = serve_conn_over_limit(s, c);
        *con_cls = r;
        pthread_mutex_lock(&s->lock);
        s->in_flight++;
        s->requests[r->ep]++;
        pthread_mutex_unlock(&s->lock);
        serve_conn_set_phase(s, c, SERVE_CONN_READING);
        return first_call(r, c);
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_large || r->responded) return MHD_YES;
        if (r->len + n > s->max_body) {
            r->too_large = true;
            free(r->body);
            r->body = NULL;
            r->len = 0;
            return MHD_YES;
        }
        char *grown = realloc(r->body, r->len + n + 1);
        if (!grown) return MHD_NO;
        memcpy(grown + r->len, upload_data, n);
        r->body = grown;
        r->len += n;
        r->body[r->len] = '\0';
        return MHD_YES;
    }
    if (r->responded) return MHD_YES;
    serve_conn_set_phase(s, c, SERVE_CONN_ANSWERING);
    return dispatch(r, c, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
    (void)why;
    serve_server *s = cls;
    request *r = *con_cls;
    serve_conn_set_phase(s, c, SERVE_CONN_WAITING); /* for the next request, if any */
    if (!r) return;
    serve_job_release(r->job);
    free(r->body);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&s->lock);
    if (--s->in_flight == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

/* ---- the daemon ---------------------------------------------------------------------------- */

/* libmicrohttpd's own messages (a failed accept, a thread that could not start), marked as its. */
static void log_http(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    fputs("clinfer: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

int serve_http_start(serve_server *s, char *err, size_t size) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)s->port);
    int rc = getaddrinfo(s->host, port, &hints, &ai);
    if (rc) {
        snprintf(err, size, "cannot resolve --host '%s': %s", s->host, gai_strerror(rc));
        return -1;
    }
    serve_conns_fit(s);
    if (serve_conns_start(s)) {
        freeaddrinfo(ai);
        snprintf(err, size, "cannot start the connections' watchdog thread");
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, s->port, NULL, NULL, on_request, s, /* the logger first, as MHD asks */
        MHD_OPTION_EXTERNAL_LOGGER, log_http, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        serve_conn_notify, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->max_conns + CONN_HEADROOM),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->max_conns_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        serve_conns_stop(s);
        snprintf(err, size, "cannot listen on %s:%u (in use, or not an address of this machine)",
                 s->host, (unsigned)s->port);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (info) s->port = info->port;
    return 0;
}

/* Waits up to ms (< 0: no limit) for the requests in flight to end; whether they did. */
static bool wait_idle(serve_server *s, double ms) {
    struct timespec until; /* s->idle waits on CLOCK_REALTIME, its default */
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + (long long)(ms * 1e6);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    int err = 0;
    pthread_mutex_lock(&s->lock);
    while (s->in_flight > 0 && err != ETIMEDOUT)
        err = ms < 0 ? pthread_cond_wait(&s->idle, &s->lock)
                     : pthread_cond_timedwait(&s->idle, &s->lock, &until);
    bool done = s->in_flight == 0;
    pthread_mutex_unlock(&s->lock);
    return done;
}

void serve_http_stop(serve_server *s) {
    if (!s->daemon) return;
    /* no new connections: the listening socket is ours to close once quiesced */
    MHD_socket listener = MHD_quiesce_daemon(s->daemon);
    if (listener != MHD_INVALID_SOCKET) close(listener);
    if (!wait_idle(s, s->drain_ms)) {
        fprintf(stderr, "clinfer: --drain-timeout of %.0f s passed: ending the open streams\n",
                s->drain_ms / 1e3);
        serve_pool_stop_jobs(s->pool, "the server is stopping (--drain-timeout passed)");
        wait_idle(s, -1);
    }
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    serve_conns_stop(s);
}
