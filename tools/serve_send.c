/* clinfer serve: how a response is queued on a connection (libmicrohttpd), below both the
 * routing (serve_http.c) and the endpoints that answer on a connection's thread, so that calls
 * go one way: from serve_http.c to the endpoints, and from both to here. */
#include <stdlib.h>
#include <string.h>

#include "serve_http.h"

/* Queues body (malloc'ed, taken; NULL: building it ran out of memory, which is said instead). */
enum MHD_Result serve_send_owned(request *r, struct MHD_Connection *c, unsigned status, char *body,
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
    return serve_queue_response(r, c, status, resp);
}

enum MHD_Result serve_queue_response(request *r, struct MHD_Connection *c, unsigned status,
                                     struct MHD_Response *resp) {
    if (status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    if (r->ep == SERVE_EP_root) MHD_add_response_header(resp, "Vary", "Accept"); /* page or text */
    if (atomic_load(&r->s->stopping) || r->over_limit || r->close)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    r->responded = true;
    pthread_mutex_lock(&r->s->lock);
    r->s->responses_by_class[status / 100 < 6 ? status / 100 : 5]++;
    pthread_mutex_unlock(&r->s->lock);
    return ok;
}

enum MHD_Result serve_send_error(request *r, struct MHD_Connection *c, const serve_error *e) {
    char *body = r->ollama ? serve_json_error_ollama(e) : serve_json_error(e);
    return serve_send_owned(r, c, (unsigned)e->status, body, "application/json");
}

int serve_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return i ? i->connect_fd : -1;
}
