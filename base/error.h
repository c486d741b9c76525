/* Internal error helpers: set the thread's last-error message and return a status. */
#ifndef CLINFER_ERROR_H
#define CLINFER_ERROR_H

#include <stdarg.h>

#include "clinfer.h"

/* Records a printf-style message as this thread's last error and returns status. */
clinfer_status err_fail(clinfer_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the current last-error message with more context ("loading x: <old message>"). */
/* err_fail with its arguments as a va_list, for helpers that take a format of their own. */
clinfer_status err_failv(clinfer_status status, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

void err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void err_clear(void);

/* One error path per function: CHECK(call) jumps to `cleanup` with `st` set. */
#define CHECK(expr)                                                                                \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != CLINFER_OK) goto cleanup;                                                        \
    } while (0)

#endif
