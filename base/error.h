/* Internal error helpers: set the thread's last-error message and return a status. */
#ifndef CLINFER_ERROR_H
#define CLINFER_ERROR_H

#include "clinfer.h"

/* Records a printf-style message as this thread's last error and returns status. */
clinfer_status err_fail(clinfer_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the current last-error message with more context ("loading x: <old message>"). */
void err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void err_clear(void);

/* One error path per function: CHECK(call) jumps to `cleanup` with `st` set. */
#define CHECK(expr)                                                                                \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != CLINFER_OK) goto cleanup;                                                        \
    } while (0)

#endif
