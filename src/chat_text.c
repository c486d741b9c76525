/* Text helpers of the chat format writers: a growing string, trimming, search, today's date. */
#include "chat_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sb_append(strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->failed = true;
                return;
            }
            cap *= 2;
        }
        char *s2 = realloc(b->s, cap);
        if (!s2) {
            b->failed = true;
            return;
        }
        b->s = s2;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_puts(strbuf *b, const char *s) {
    sb_append(b, s, strlen(s));
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void sb_trimmed(strbuf *b, const char *s) {
    size_t n = strlen(s);
    while (n > 0 && is_space(*s)) {
        s++;
        n--;
    }
    while (n > 0 && is_space(s[n - 1]))
        n--;
    sb_append(b, s, n);
}

const char *chat_find(const char *hay, size_t hay_len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; hay && n <= hay_len && i <= hay_len - n; i++)
        if (!memcmp(hay + i, needle, n)) return hay + i;
    return NULL;
}

void chat_today(const char *fmt, char *buf, size_t size) {
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || !strftime(buf, size, fmt, &tm)) snprintf(buf, size, "1970-01-01");
}
