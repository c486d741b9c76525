/* clinfer serve: the listening socket, and each request's head checked before libmicrohttpd
 * reads it. One thread accepts connections and waits for their first heads by poll (SO_RCVLOWAT
 * one byte past what has come, so that a head not yet whole does not wake it again); a head is
 * peeked (MSG_PEEK), never read, and checked (serve_head.h): one that passes leaves its bytes
 * where they were and the connection goes to libmicrohttpd (MHD_add_connection); one refused gets
 * one response of ours, with Connection: close, and the connection is closed after the client's
 * remaining bytes are drained for a while (closing a socket with unread bytes would reset it and
 * could lose the response). After each response on a connection that stays open, the next head
 * is awaited and checked the same way on the connection's own thread (serve_next_head). The
 * header deadline and the connection limits of serve_conns.c reach the connections waiting
 * here as those in libmicrohttpd's hands: by shutting their sockets down. */
#define _GNU_SOURCE /* POLLRDHUP, accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli_common.h"
#include "serve_http.h"

#define DRAIN_MS 1000       /* how long a refused connection's bytes are read and dropped */
#define ACCEPT_PAUSE_MS 100 /* out of descriptors: accepting waits this long */

typedef struct {
    int fd;
    serve_conn *k;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    double drain_until; /* > 0: refused, draining until then */
} pending;

typedef struct serve_acceptor {
    int listener, wake[2];
    pthread_t thread;
    atomic_bool stop;
    pending *p; /* cap of them, n in use */
    size_t n, cap;
    char head[SERVE_HEAD_MAX];
} serve_acceptor;

static void set_lowat(int fd, int bytes) {
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
}

/* Answers a refused head with its status and error body, counted as a request and a response. */
static void refuse(serve_server *s, int fd, const char *buf, const serve_head *h) {
    serve_endpoint ep = serve_endpoint_of(buf + h->path_at, h->path_len);
    serve_error e;
    serve_error_set(&e, (int)h->status, "invalid_request_error", "%s", h->message);
    char *body = SERVE_EP_IS_OLLAMA(ep) ? serve_json_error_ollama(&e) : serve_json_error(&e);
    char out[1024];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\nConnection: close\r\n\r\n%s",
                     h->status, MHD_get_reason_phrase_for(h->status), body ? strlen(body) : 0,
                     body ? body : "");
    free(body);
    if (n > 0)
        send(fd, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1,
             MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    pthread_mutex_lock(&s->lock);
    s->requests[ep]++;
    s->responses_by_class[h->status / 100]++;
    pthread_mutex_unlock(&s->lock);
}

/* Reads and drops what is there; whether the client has finished (or the socket failed). */
static bool drained(int fd) {
    char sink[4096];
    for (;;) {
        ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got > 0) continue;
        return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
}

/* Peeks at fd's head: MORE (with SO_RCVLOWAT set past what came), OK or REFUSE; -1: the client
 * left, or ended its side before its head was whole. */
static int peek_head(serve_server *s, int fd, char *buf, bool ended, serve_head *h) {
    ssize_t got = recv(fd, buf, SERVE_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return ended ? -1 : SERVE_HEAD_MORE;
    if (got <= 0) return -1;
    serve_head_verdict v = serve_head_check(buf, (size_t)got, s->max_body, h);
    if (v == SERVE_HEAD_MORE) {
        if (ended) return -1;
        set_lowat(fd, (int)got + 1);
    } else {
        set_lowat(fd, 1);
    }
    return v;
}

/* ---- the accepting thread ------------------------------------------------------------------ */

static void close_pending(serve_server *s, serve_acceptor *a, size_t i) {
    serve_conn_drop(s, a->p[i].k);
    close(a->p[i].fd);
    a->p[i] = a->p[--a->n];
}

static void take_new(serve_server *s, serve_acceptor *a, double *paused_until) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(a->listener, (struct sockaddr *)&addr, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                *paused_until = cli_now_ms() + ACCEPT_PAUSE_MS;
            return;
        }
        serve_conn *k = a->n < a->cap ? serve_conn_add(s, fd, (struct sockaddr *)&addr, len) : NULL;
        if (!k) {
            close(fd);
            continue;
        }
        a->p[a->n++] = (pending){.fd = fd, .k = k, .addr = addr, .addr_len = len};
    }
}

typedef enum { KEEP, CLOSE, HANDED } fate;

/* Pending connection i has something: bytes, its end, or a shutdown by serve_conns.c. */
static fate serve_pending(serve_server *s, serve_acceptor *a, size_t i, short revents) {
    pending *q = &a->p[i];
    if (q->drain_until > 0) return drained(q->fd) ? CLOSE : KEEP;
    serve_head h;
    int v = peek_head(s, q->fd, a->head, revents & (POLLRDHUP | POLLHUP | POLLERR), &h);
    if (v == SERVE_HEAD_MORE) return KEEP;
    if (v == SERVE_HEAD_REFUSE) {
        refuse(s, q->fd, a->head, &h);
        q->drain_until = cli_now_ms() + DRAIN_MS;
        return drained(q->fd) ? CLOSE : KEEP;
    }
    if (v < 0) return CLOSE;
    serve_conn_head_read(s, q->k, &h);
    serve_conn_handing(s, q->k);
    int flags = fcntl(q->fd, F_GETFL); /* as accepted by libmicrohttpd itself */
    if (flags >= 0) fcntl(q->fd, F_SETFL, flags & ~O_NONBLOCK);
    if (MHD_add_connection(s->daemon, q->fd, (struct sockaddr *)&q->addr, q->addr_len) != MHD_YES)
        serve_conn_handoff_failed(s, q->k); /* libmicrohttpd closed the socket */
    return HANDED;
}

static void *accept_loop(void *arg) {
    serve_server *s = arg;
    serve_acceptor *a = s->acceptor;
    struct pollfd *fds = calloc(a->cap + 2, sizeof *fds);
    double paused_until = 0;
    while (fds && !atomic_load(&a->stop)) {
        double now = cli_now_ms();
        for (size_t i = a->n; i-- > 0;)
            if (a->p[i].drain_until > 0 && now > a->p[i].drain_until) close_pending(s, a, i);
        size_t n = a->n;
        fds[0] = (struct pollfd){.fd = a->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = now < paused_until ? -1 : a->listener, .events = POLLIN};
        for (size_t i = 0; i < n; i++)
            fds[i + 2] = (struct pollfd){.fd = a->p[i].fd, .events = POLLIN | POLLRDHUP};
        if (poll(fds, n + 2, ACCEPT_PAUSE_MS) <= 0) continue;
        /* from the last, as one that leaves the list is replaced by the last, already seen */
        for (size_t i = n; i-- > 0;) {
            if (!fds[i + 2].revents) continue;
            fate f = serve_pending(s, a, i, fds[i + 2].revents);
            if (f == CLOSE)
                close_pending(s, a, i);
            else if (f == HANDED)
                a->p[i] = a->p[--a->n];
        }
        if (fds[1].revents) take_new(s, a, &paused_until);
    }
    free(fds);
    return NULL;
}

static int listen_on(const struct addrinfo *ai) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), on = 1;
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
        close(fd);
        return -1;
    }
    return fd;
}

int serve_accept_start(serve_server *s, const struct addrinfo *ai, char *err, size_t size) {
    serve_acceptor *a = calloc(1, sizeof *a);
    if (a) {
        a->cap = s->max_conns + CONN_HEADROOM;
        a->p = calloc(a->cap, sizeof *a->p);
        a->wake[0] = a->wake[1] = -1;
        a->listener = listen_on(ai);
    }
    if (!a || !a->p || a->listener < 0 || pipe2(a->wake, O_CLOEXEC)) {
        snprintf(err, size, "cannot listen on %s:%u (in use, or not an address of this machine)",
                 s->host, (unsigned)s->port);
        goto fail;
    }
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    if (!getsockname(a->listener, (struct sockaddr *)&bound, &len))
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    s->acceptor = a;
    if (pthread_create(&a->thread, NULL, accept_loop, s) == 0) return 0;
    s->acceptor = NULL;
    snprintf(err, size, "cannot start the thread that accepts connections");
fail:
    if (a) {
        if (a->listener >= 0) close(a->listener);
        if (a->wake[0] >= 0) close(a->wake[0]);
        if (a->wake[1] >= 0) close(a->wake[1]);
        free(a->p);
        free(a);
    }
    return -1;
}

void serve_accept_stop(serve_server *s) {
    serve_acceptor *a = s->acceptor;
    if (!a) return;
    atomic_store(&a->stop, true);
    ssize_t w = write(a->wake[1], "", 1);
    (void)w;
    pthread_join(a->thread, NULL);
    while (a->n)
        close_pending(s, a, a->n - 1);
    close(a->listener);
    close(a->wake[0]);
    close(a->wake[1]);
    free(a->p);
    free(a);
    s->acceptor = NULL;
}

/* ---- the next head on a connection that stays open ---------------------------------------- */

void serve_next_head(serve_server *s, struct MHD_Connection *c) {
    serve_conn *k = serve_conn_of(c);
    int fd = serve_connection_fd(c);
    if (!k || fd < 0) return;
    if (serve_conn_read_past(s, k)) { /* not expected: libmicrohttpd holds bytes unchecked */
        shutdown(fd, SHUT_RDWR);
        return;
    }
    char *buf = malloc(SERVE_HEAD_MAX);
    serve_head h;
    int v = SERVE_HEAD_MORE;
    while (buf && v == SERVE_HEAD_MORE && !atomic_load(&s->stopping)) {
        struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
        if (poll(&p, 1, SERVE_WAIT_MS) <= 0) continue;
        v = peek_head(s, fd, buf, p.revents & (POLLRDHUP | POLLHUP | POLLERR), &h);
    }
    if (v == SERVE_HEAD_OK) {
        serve_conn_head_read(s, k, &h);
        set_lowat(fd, 1);
    } else {
        if (v == SERVE_HEAD_REFUSE) {
            refuse(s, fd, buf, &h);
            double until = cli_now_ms() + DRAIN_MS;
            struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
            while (cli_now_ms() < until && poll(&p, 1, SERVE_WAIT_MS) >= 0 && !drained(fd)) {
            }
        }
        /* refused, gone, stopping or out of memory: libmicrohttpd reads the end and closes */
        shutdown(fd, SHUT_RDWR);
    }
    free(buf);
}
