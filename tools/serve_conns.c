/* clinfer serve: the connections. libmicrohttpd gives each connection a thread and, at its
 * connection limit, stops accepting, so that idle clients could hold every place and leave
 * /health unanswered. Here each connection's phase is tracked: one that does not send its
 * request's headers within s->header_ms (from its start or its previous response) or its body
 * within s->body_ms is shut down by a watchdog thread, and a newcomer past s->max_conns takes
 * the place of the connection that has waited longest for its headers. Only when every
 * connection is busy with a request does the newcomer get 503. Shutting a socket down (never
 * closing it) wakes its thread, which then closes the connection as if the client had left;
 * the socket stays valid while listed here, as libmicrohttpd closes it only after the
 * CLOSED notification. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "cli_common.h"
#include "serve.h"

#define WATCH_MS 100 /* how often the deadlines are checked */

typedef struct serve_conn {
    int fd;
    serve_conn_phase phase;
    double since_ms;
    bool over_limit, shut;
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
        if (k != besides && !k->shut && k->phase == SERVE_CONN_WAITING &&
            (!best || k->since_ms < best->since_ms))
            best = k;
    return best;
}

static void started(serve_server *s, struct MHD_Connection *c, void **socket_context) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    serve_conn *k = i ? calloc(1, sizeof *k) : NULL;
    *socket_context = k;
    if (!k) return; /* untracked: it still has libmicrohttpd's own idle timeout */
    *k = (serve_conn){.fd = i->connect_fd, .phase = SERVE_CONN_WAITING, .since_ms = cli_now_ms()};
    pthread_mutex_lock(&s->lock);
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
}

static void closed(serve_server *s, serve_conn *k) {
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

void serve_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        started(cls, c, socket_context);
    else if (*socket_context)
        closed(cls, *socket_context);
}

static serve_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void serve_conn_set_phase(serve_server *s, struct MHD_Connection *c, serve_conn_phase phase) {
    serve_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->lock);
    k->phase = phase;
    k->since_ms = cli_now_ms();
    pthread_mutex_unlock(&s->lock);
}

bool serve_conn_over_limit(serve_server *s, struct MHD_Connection *c) {
    serve_conn *k = conn_of(c);
    pthread_mutex_lock(&s->lock);
    bool over = k && k->over_limit;
    pthread_mutex_unlock(&s->lock);
    return over;
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
            if (limit >= 0 && now - k->since_ms > limit) shut_locked(s, k);
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
