/* The library's diagnostics, handed to the callback set with clinfer_log_set (none: dropped).
 * The library itself never prints. */
#ifndef CLINFER_LOG_H
#define CLINFER_LOG_H

#include <stdio.h>

#include "clinfer.h"

/* Formats a message (no trailing newline) and hands it to the callback, if one is set. */
void log_msg(clinfer_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether a callback is set: lets a caller skip gathering what it would log. */
bool log_enabled(void);

/* A stream whose text log_stream_end logs as one message (for printers that write to a
 * FILE: the profile table, a plan); NULL when no callback is set or out of memory. */
typedef struct clinfer_log_stream clinfer_log_stream;
clinfer_log_stream *log_stream_begin(FILE **out);
void log_stream_end(clinfer_log_stream *s, clinfer_log_level level);

#endif
