/* clinfer serve: the connections. Each is tracked from its accept (serve_accept.c) to its
 * close by libmicrohttpd, with its phase: one that does not send its request's headers within
 * s->header_ms (from its start or its previous response) or its body within s->body_ms is shut
 * down by a watchdog thread, and a newcomer past s->max_conns takes the place of the connection
 * that has waited longest for its headers, so that idle clients cannot hold every place and
 * leave /health unanswered. Only when every connection is busy with a request does the newcomer
 * get 503. Shutting a socket down (never closing it) wakes whoever waits on it, which then
 * closes the connection as if the client had left; the socket stays valid while listed here, as
 * libmicrohttpd closes it only after the CLOSED notification and serve_accept.c only after
 * serve_conn_drop. Each connection also counts the bytes its checked request heads and bodies
 * take, to tell whether libmicrohttpd has read further than what was checked. */
#define _GNU_SOURCE    /* POLLRDHUP */
#include <linux/tcp.h> /* tcpi_bytes_received, which glibc's struct tcp_info lacks */
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "cli_common.h"
#include "serve.h"

#define WATCH_MS 100 /* how often the deadlines are checked */

typedef struct serve_conn {
    int fd;
    struct sockaddr_storage addr; /* the client's, for the limit per address */
    serve_conn_phase phase;
    double since_ms;
    bool over_limit, shut;
    bool handing;      /* between MHD_add_connection and its STARTED notification */
    uint64_t expected; /* bytes of the request heads and bodies checked so far */
    bool unframed;     /* a checked request was chunked: its bytes on the wire are unknown */
    struct serve_conn *prev, *next;
} serve_conn;

/* Under the lock: wakes the connection's thread to close it. */
static void shut_locked(serve_server *s, serve_conn *k) {
    if (k->shut) return;
    k->shut = true;
    s->conns_closed_slow++;
    shutdown(k->fd, SHUT_RDWR);
}

/* Under the lock: the connection waiting longest for its request, or NULL. */
static serve_conn *oldest_waiting_locked(serve_server *s, const serve_conn *besides) {
    serve_conn *best = NULL;
    for (serve_conn *k = s->conns; k; k = k->next)
        if (k != besides && !k->shut && !k->handing && k->phase == SERVE_CONN_WAITING &&
            (!best || k->since_ms < best->since_ms))
            best = k;
    return best;
}

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return true;
}

serve_conn *serve_conn_add(serve_server *s, int fd, const struct sockaddr *addr, socklen_t len) {
    serve_conn *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    *k = (serve_conn){.fd = fd, .phase = SERVE_CONN_WAITING, .since_ms = cli_now_ms()};
    memcpy(&k->addr, addr, len < sizeof k->addr ? len : sizeof k->addr);
    pthread_mutex_lock(&s->lock);
    size_t same = 0;
    for (serve_conn *o = s->conns; o && s->max_conns_per_ip; o = o->next)
        same += same_address(&o->addr, &k->addr);
    if (s->n_conns >= s->max_conns + CONN_HEADROOM ||
        (s->max_conns_per_ip && same >= s->max_conns_per_ip)) {
        s->conns_closed_slow++;
        pthread_mutex_unlock(&s->lock);
        free(k);
        return NULL;
    }
    k->next = s->conns;
    if (s->conns) s->conns->prev = k;
    s->conns = k;
    if (++s->n_conns > s->max_conns) {
        serve_conn *idle = oldest_waiting_locked(s, k);
        if (idle)
            shut_locked(s, idle);
        else
            k->over_limit = true;
    }
    pthread_mutex_unlock(&s->lock);
    return k;
}

void serve_conn_drop(serve_server *s, serve_conn *k) {
    pthread_mutex_lock(&s->lock);
    if (k->prev)
        k->prev->next = k->next;
    else
        s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    s->n_conns--;
    pthread_mutex_unlock(&s->lock);
    free(k);
}

void serve_conn_handing(serve_server *s, serve_conn *k) {
    pthread_mutex_lock(&s->lock);
    k->handing = true;
    pthread_mutex_unlock(&s->lock);
}

void serve_conn_handoff_failed(serve_server *s, serve_conn *k) {
    pthread_mutex_lock(&s->lock);
    bool unstarted = false; /* k may be gone already: libmicrohttpd started and closed it */
    for (serve_conn *o = s->conns; o && !unstarted; o = o->next)
        unstarted = o == k && k->handing;
    pthread_mutex_unlock(&s->lock);
    if (unstarted) serve_conn_drop(s, k);
}

static void started(serve_server *s, struct MHD_Connection *c, void **socket_context) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = NULL; /* untracked: it still has libmicrohttpd's own idle timeout */
    if (!i) return;
    pthread_mutex_lock(&s->lock);
    for (serve_conn *k = s->conns; k; k = k->next)
        if (k->handing && k->fd == i->connect_fd) {
            k->handing = false;
            *socket_context = k;
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        started(cls, c, socket_context);
    else if (*socket_context)
        serve_conn_drop(cls, *socket_context);
}

serve_conn *serve_conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void serve_conn_set_phase(serve_server *s, struct MHD_Connection *c, serve_conn_phase phase) {
    serve_conn *k = serve_conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->lock);
    k->phase = phase;
    k->since_ms = cli_now_ms();
    pthread_mutex_unlock(&s->lock);
}

bool serve_conn_over_limit(serve_server *s, struct MHD_Connection *c) {
    serve_conn *k = serve_conn_of(c);
    pthread_mutex_lock(&s->lock);
    bool over = k && k->over_limit;
    pthread_mutex_unlock(&s->lock);
    return over;
}

void serve_conn_head_read(serve_server *s, serve_conn *k, const serve_head *h) {
    pthread_mutex_lock(&s->lock);
    k->expected += h->head_len + h->content_length;
    k->unframed = k->unframed || h->chunked;
    pthread_mutex_unlock(&s->lock);
}

/* The bytes the process has read from the socket: those received less those still queued (in
 * that order, so that bytes arriving between the two calls can only make it more). */
static bool bytes_read(int fd, uint64_t *out) {
    int queued = 0;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (ioctl(fd, FIONREAD, &queued) || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return false;
    *out = ti.tcpi_bytes_received - (uint64_t)queued;
    return true;
}

bool serve_conn_read_past(serve_server *s, serve_conn *k) {
    if (!k) return true;
    uint64_t got;
    pthread_mutex_lock(&s->lock);
    bool past = k->unframed || !bytes_read(k->fd, &got) || got != k->expected;
    pthread_mutex_unlock(&s->lock);
    return past;
}

static void *watchdog(void *arg) {
    serve_server *s = arg;
    struct timespec pause = {0, WATCH_MS * 1000000L};
    while (!atomic_load(&s->conns_stop)) {
        nanosleep(&pause, NULL);
        double now = cli_now_ms();
        pthread_mutex_lock(&s->lock);
        for (serve_conn *k = s->conns; k; k = k->next) {
            double limit = k->phase == SERVE_CONN_WAITING   ? s->header_ms
                           : k->phase == SERVE_CONN_READING ? s->body_ms
                                                            : -1;
            if (limit >= 0 && !k->handing && now - k->since_ms > limit) shut_locked(s, k);
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

int serve_conns_start(serve_server *s) {
    atomic_store(&s->conns_stop, false);
    s->watchdog_started = pthread_create(&s->watchdog, NULL, watchdog, s) == 0;
    return s->watchdog_started ? 0 : -1;
}

void serve_conns_stop(serve_server *s) {
    if (!s->watchdog_started) return;
    atomic_store(&s->conns_stop, true);
    pthread_join(s->watchdog, NULL);
    s->watchdog_started = false;
}

/* Whether the client closed its end (or the socket failed). */
bool serve_client_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

#define FDS_BESIDES 64 /* descriptors the process needs besides its connections */

void serve_conns_fit(serve_server *s) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim)) return;
    rlim_t want = (rlim_t)(s->max_conns + CONN_HEADROOM + FDS_BESIDES);
    if (lim.rlim_cur < want) {
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max > want ? want : lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        getrlimit(RLIMIT_NOFILE, &lim);
    }
    if (lim.rlim_cur < want) {
        size_t fit = lim.rlim_cur > CONN_HEADROOM + FDS_BESIDES + 1
                         ? (size_t)lim.rlim_cur - CONN_HEADROOM - FDS_BESIDES
                         : 1;
        fprintf(stderr, "clinfer: %llu open files allowed: at most %zu connections, not %zu\n",
                (unsigned long long)lim.rlim_cur, fit, s->max_conns);
        s->max_conns = fit;
    }
}
