/* clinfer serve: the error a request gets (serve_request.h), below everything that refuses one. */
#include <stdarg.h>
#include <stdio.h>

#include "serve_request.h"

int serve_error_set(serve_error *e, int status, const char *type, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}
