/* Text helpers shared by the chat format writers (chat.c, chat_formats.c, chat_reasoning.c). */
#ifndef CLINFER_CHAT_TEXT_H
#define CLINFER_CHAT_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing NUL-terminated string; on allocation failure `failed` is set and appends stop. */
typedef struct {
    char *s;
    size_t len, cap;
    bool failed;
} strbuf;

void sb_append(strbuf *b, const char *s, size_t n);
void sb_puts(strbuf *b, const char *s);
/* Appends s without leading and trailing whitespace (Jinja's trim, Python's strip()). */
void sb_trimmed(strbuf *b, const char *s);
/* The first occurrence of needle in hay's hay_len bytes (hay may be NULL), or NULL. */
const char *chat_find(const char *hay, size_t hay_len, const char *needle);
/* Today's date (UTC) as strftime's fmt writes it, into buf. */
void chat_today(const char *fmt, char *buf, size_t size);

#endif
