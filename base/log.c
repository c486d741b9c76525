/* The process's log callback (clinfer_log_set). A mutex orders setting against calls, so a
 * callback is never called after clinfer_log_set replaced it. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static clinfer_log_callback callback;
static void *callback_user;

void clinfer_log_set(clinfer_log_callback cb, void *user) {
    pthread_mutex_lock(&lock);
    callback = cb;
    callback_user = user;
    pthread_mutex_unlock(&lock);
}

bool log_enabled(void) {
    pthread_mutex_lock(&lock);
    bool set = callback != NULL;
    pthread_mutex_unlock(&lock);
    return set;
}

void log_msg(clinfer_log_level level, const char *fmt, ...) {
    if (!log_enabled()) return;
    char message[4096]; /* a build log longer than this is cut */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    if (callback) callback(level, message, callback_user);
    pthread_mutex_unlock(&lock);
}

struct clinfer_log_stream {
    FILE *f;
    char *text;
    size_t len;
};

clinfer_log_stream *log_stream_begin(FILE **out) {
    clinfer_log_stream *s = log_enabled() ? calloc(1, sizeof *s) : NULL;
    if (s && !(s->f = open_memstream(&s->text, &s->len))) {
        free(s);
        s = NULL;
    }
    *out = s ? s->f : NULL;
    return s;
}

void log_stream_end(clinfer_log_stream *s, clinfer_log_level level) {
    if (!s) return;
    if (fclose(s->f) == 0) {
        while (s->len > 0 && s->text[s->len - 1] == '\n') /* messages end without one */
            s->text[--s->len] = '\0';
        pthread_mutex_lock(&lock);
        if (callback && s->len) callback(level, s->text, callback_user);
        pthread_mutex_unlock(&lock);
    }
    free(s->text);
    free(s);
}
