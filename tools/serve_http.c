/* clinfer serve: the HTTP side, on libmicrohttpd with a thread per connection. The server
 * accepts the connections itself (serve_accept.c), so that each request's head is checked
 * before libmicrohttpd reads it (libmicrohttpd takes the first of several Content-Length
 * headers, and Transfer-Encoding over Content-Length, silently, and writes its own refusals'
 * heads twice). A connection's thread reads the body and routes it: the completion endpoints to
 * serve_generate.c, which queues the jobs and answers on this thread as their text comes. */
#define _GNU_SOURCE /* strcasestr */
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

#include "serve_http.h"

static enum MHD_Result answer_embeddings(request *r, struct MHD_Connection *c) {
    char *body = NULL;
    serve_error e;
    int rc =
        serve_embeddings(r->s, r->body ? r->body : "", r->len, serve_connection_fd(c), &body, &e);
    if (rc > 0) return MHD_NO; /* the client left: nobody to answer */
    return rc ? serve_send_error(r, c, &e) : serve_send_owned(r, c, 200, body, "application/json");
}

/* ---- routing ------------------------------------------------------------------------------- */

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
    bool wants_post = r->ep == SERVE_EP_chat || r->ep == SERVE_EP_completions ||
                      r->ep == SERVE_EP_embeddings || r->ep == SERVE_EP_tokenize ||
                      r->ep == SERVE_EP_detokenize ||
                      (r->ep >= SERVE_EP_ollama_chat && r->ep <= SERVE_EP_ollama_show);
    if (r->ep == SERVE_EP_other) {
        FAIL(404, "not_found_error", "no endpoint %s", url);
    }
    if (r->ep == SERVE_EP_root && !strcmp(method, "HEAD")) get = true; /* as ollama's clients ask */
    if (wants_post ? !post : !get)
        FAIL(405, "invalid_request_error", "%s takes %s, not %s", url, wants_post ? "POST" : "GET",
             method);
    if (r->over_limit && r->ep != SERVE_EP_health && r->ep != SERVE_EP_metrics)
        FAIL(503, "unavailable_error",
             "the server holds its limit of %zu connections, all busy; retry later", s->max_conns);
    /* The chat page goes without the key: it holds no data, and asks for the key itself. */
    if (r->ep == SERVE_EP_root && !strcmp(method, "GET") && serve_wants_page(c))
        return serve_answer_page(r, c);
    if (r->ep == SERVE_EP_health) {
        if (!atomic_load(&s->ready)) FAIL(503, "unavailable_error", "the model is loading");
        char *ok = malloc(16);
        if (ok) strcpy(ok, "{\"status\":\"ok\"}");
        return serve_send_owned(r, c, 200, ok, "application/json");
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
        return serve_send_owned(r, c, 200, serve_json_models(s), "application/json");
    case SERVE_EP_metrics:
        return serve_send_owned(r, c, 200, serve_metrics_text(s), "text/plain; version=0.0.4");
    case SERVE_EP_chat:
        return serve_answer_generate(r, c, SERVE_CHAT);
    case SERVE_EP_embeddings:
        return answer_embeddings(r, c);
    case SERVE_EP_tokenize:
    case SERVE_EP_detokenize:
        return serve_answer_tokenize(r, c, r->ep == SERVE_EP_detokenize);
    case SERVE_EP_props:
        return serve_answer_props(r, c);
    case SERVE_EP_ollama_chat:
    case SERVE_EP_ollama_generate:
        return serve_answer_generate(r, c, SERVE_CHAT);
    case SERVE_EP_ollama_embed:
    case SERVE_EP_ollama_embeddings:
    case SERVE_EP_ollama_show:
    case SERVE_EP_ollama_tags:
    case SERVE_EP_ollama_version:
    case SERVE_EP_root:
        return serve_answer_ollama(r, c);
    default:
        return serve_answer_generate(r, c, SERVE_COMPLETION);
    }
}

/* Whether the client keeps the connection open after the response, as libmicrohttpd reads its
 * version and Connection header. */
static bool client_keeps_alive(struct MHD_Connection *c, const char *version) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);
    if (!strcmp(version, MHD_HTTP_VERSION_1_1)) return !h || !strcasestr(h, "close");
    return h && strcasestr(h, "keep-alive") && !strcasestr(h, "close");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
    serve_server *s = cls;
    request *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->s = s;
        r->ep = serve_endpoint_of(url, strlen(url));
        r->ollama = SERVE_EP_IS_OLLAMA(r->ep);
        r->over_limit = serve_conn_over_limit(s, c);
        *con_cls = r;
        pthread_mutex_lock(&s->lock);
        s->in_flight++;
        s->requests[r->ep]++;
        pthread_mutex_unlock(&s->lock);
        serve_conn_set_phase(s, c, SERVE_CONN_READING);
        return MHD_YES;
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
    /* libmicrohttpd may hold bytes past this request that nobody checked: close after it */
    r->close = serve_conn_read_past(s, serve_conn_of(c));
    r->keep_alive = !r->close && !r->over_limit && client_keeps_alive(c, version);
    serve_conn_set_phase(s, c, SERVE_CONN_ANSWERING);
    return dispatch(r, c, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
    serve_server *s = cls;
    request *r = *con_cls;
    serve_conn_set_phase(s, c, SERVE_CONN_WAITING); /* for the next request, if any */
    if (!r) return;
    bool next = r->keep_alive && why == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    serve_generation_free(r->gen);
    free(r->body);
    free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&s->lock);
    if (--s->in_flight == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    if (next && !atomic_load(&s->stopping)) serve_next_head(s, c);
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
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* The memory a connection's head and headers take is above SERVE_HEAD_MAX, so that a head
     * checked never meets libmicrohttpd's own limit. */
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, /* the logger first, as MHD asks */
        MHD_OPTION_EXTERNAL_LOGGER, log_http, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, serve_conn_notify, s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(s->max_conns + CONN_HEADROOM), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)4 * SERVE_HEAD_MAX, MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_END);
    if (!s->daemon) {
        freeaddrinfo(ai);
        serve_conns_stop(s);
        snprintf(err, size, "cannot start libmicrohttpd");
        return -1;
    }
    rc = serve_accept_start(s, ai, err, size);
    freeaddrinfo(ai);
    if (rc) {
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
        serve_conns_stop(s);
    }
    return rc;
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
    serve_accept_stop(s); /* no new connections */
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
