#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

clinfer_status err_failv(clinfer_status status, const char *fmt, va_list ap) {
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    return status;
}

clinfer_status err_fail(clinfer_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_failv(status, fmt, ap);
    va_end(ap);
    return status;
}

void err_prefix(const char *fmt, ...) {
    char old[sizeof last_error];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* Append ": <old message>" by hand, truncating at the buffer's end. */
    size_t at = n < 0 ? 0 : (size_t)n;
    const char *parts[2] = {": ", old};
    for (int p = 0; p < 2; p++)
        for (const char *c = parts[p]; *c && at + 1 < sizeof last_error; c++)
            last_error[at++] = *c;
    if (at < sizeof last_error) last_error[at] = '\0';
}

void err_clear(void) {
    last_error[0] = '\0';
}

const char *clinfer_last_error(void) {
    return last_error;
}
