/* clinfer serve: a request's head checked before libmicrohttpd reads it (serve_head.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "serve_head.h"

/* A body over this many times the limit is not even read: the connection closes after the 413.
 * Below it the body is read and dropped, so that the client sees the answer, unless the client
 * asked first (Expect: 100-continue): then it gets the 413 instead of "100 Continue". */
#define BODY_DRAIN_FACTOR 16

static serve_head_verdict refuse(serve_head *h, unsigned status, const char *fmt, ...) {
    h->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->message, sizeof h->message, fmt, ap);
    va_end(ap);
    return SERVE_HEAD_REFUSE;
}

/* The headers that say where the body ends, as the client sent them. */
typedef struct {
    const char *length; /* the first Content-Length's value, length_len bytes */
    size_t length_len;
    bool lengths_differ;
    const char *encoding; /* the last Transfer-Encoding's */
    size_t encoding_len;
    unsigned n_encodings;
    bool host, expect_continue;
} framing;

static bool is_token_char(unsigned char ch) {
    return ch > 0x20 && ch < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", ch);
}

static bool value_is(const char *v, size_t n, const char *word) {
    return n == strlen(word) && !strncasecmp(v, word, n);
}

/* One header line (without its line end), name: value. */
static serve_head_verdict header(serve_head *h, framing *f, const char *line, size_t n) {
    const char *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : 0;
    if (line[0] == ' ' || line[0] == '\t')
        return refuse(h, 400, "a header line is folded onto the one before (obsolete folding)");
    if (!colon || !name_len) return refuse(h, 400, "a header line has no 'name:'");
    for (size_t i = 0; i < name_len; i++)
        if (!is_token_char((unsigned char)line[i]))
            return refuse(h, 400, "a header's name holds a space or a character names cannot");
    const char *v = colon + 1, *end = line + n;
    for (const char *p = v; p < end; p++)
        if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
            return refuse(h, 400, "header '%.*s' holds a control character", (int)name_len, line);
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t vn = (size_t)(end - v);
    if (value_is(line, name_len, "Content-Length")) {
        if (!f->length) {
            f->length = v;
            f->length_len = vn;
        } else if (vn != f->length_len || memcmp(v, f->length, vn)) {
            return refuse(h, 400, "the request has two Content-Length headers (%.*s and %.*s)",
                          (int)(f->length_len < 40 ? f->length_len : 40), f->length,
                          (int)(vn < 40 ? vn : 40), v);
        }
    } else if (value_is(line, name_len, "Transfer-Encoding")) {
        f->encoding = v;
        f->encoding_len = vn;
        f->n_encodings++;
    } else if (value_is(line, name_len, "Host")) {
        f->host = true;
    } else if (value_is(line, name_len, "Expect")) {
        f->expect_continue = f->expect_continue || value_is(v, vn, "100-continue");
    }
    return SERVE_HEAD_OK;
}

/* The request line: the target's path, and whether the version is HTTP/1.1 (which needs Host). */
static serve_head_verdict request_line(serve_head *h, const char *line, size_t n, bool *v11) {
    const char *sp = memchr(line, ' ', n);
    if (!sp || sp == line) return refuse(h, 400, "the request line is not 'METHOD PATH VERSION'");
    const char *target = sp + 1, *end = line + n;
    const char *sp2 = memchr(target, ' ', (size_t)(end - target));
    if (!sp2 || sp2 == target)
        return refuse(h, 400, "the request line is not 'METHOD PATH VERSION'");
    const char *q = memchr(target, '?', (size_t)(sp2 - target));
    h->path_at = (size_t)(target - line);
    h->path_len = (size_t)((q ? q : sp2) - target);
    *v11 = value_is(sp2 + 1, (size_t)(end - sp2 - 1), "HTTP/1.1");
    return SERVE_HEAD_OK;
}

static serve_head_verdict body_framing(serve_head *h, const framing *f, size_t max_body) {
    if (f->length && f->encoding)
        return refuse(h, 400,
                      "the request has both Content-Length and Transfer-Encoding; send one");
    if (f->encoding) {
        if (f->n_encodings > 1 || !value_is(f->encoding, f->encoding_len, "chunked"))
            return refuse(h, 501,
                          "Transfer-Encoding '%.*s' is not supported: send chunked or a "
                          "Content-Length",
                          f->n_encodings > 1 ? 10
                                             : (int)(f->encoding_len < 60 ? f->encoding_len : 60),
                          f->n_encodings > 1 ? "(several)" : f->encoding);
        h->chunked = true;
        return SERVE_HEAD_OK;
    }
    if (!f->length) return SERVE_HEAD_OK;
    uint64_t declared = 0;
    bool digits = f->length_len > 0;
    for (size_t i = 0; i < f->length_len && digits; i++)
        digits = f->length[i] >= '0' && f->length[i] <= '9';
    if (!digits)
        return refuse(h, 400, "Content-Length '%.*s' is not a number of bytes",
                      (int)(f->length_len < 40 ? f->length_len : 40), f->length);
    /* past 18 digits a declared size cannot be within any --max-body */
    bool huge = f->length_len > 18;
    for (size_t i = 0; i < f->length_len && !huge; i++)
        declared = declared * 10 + (uint64_t)(f->length[i] - '0');
    if (huge || declared / BODY_DRAIN_FACTOR > max_body ||
        (declared > max_body && f->expect_continue))
        return refuse(h, 413, "the body exceeds the limit of %zu bytes", max_body);
    h->content_length = declared;
    return SERVE_HEAD_OK;
}

serve_head_verdict serve_head_check(const char *buf, size_t n, size_t max_body, serve_head *h) {
    memset(h, 0, sizeof *h);
    size_t at = 0;
    while (at < n && (buf[at] == '\r' || buf[at] == '\n')) /* empty lines before the request */
        at++;
    size_t line_start = at, first = at;
    framing f = {0};
    bool v11 = false;
    for (;;) {
        const char *lf = at < n ? memchr(buf + at, '\n', n - at) : NULL;
        if (!lf)
            return n >= SERVE_HEAD_MAX
                       ? refuse(h, 431, "the request's headers exceed %d bytes", SERVE_HEAD_MAX)
                       : SERVE_HEAD_MORE;
        size_t end = (size_t)(lf - buf), next = end + 1;
        if (next > SERVE_HEAD_MAX)
            return refuse(h, 431, "the request's headers exceed %d bytes", SERVE_HEAD_MAX);
        if (end > line_start && buf[end - 1] == '\r') end--;
        const char *line = buf + line_start;
        size_t len = end - line_start;
        if (memchr(line, '\r', len) || memchr(line, '\0', len))
            return refuse(h, 400, "the request's head holds a CR or NUL inside a line");
        serve_head_verdict v;
        if (line_start == first) {
            if (!len) return refuse(h, 400, "the request line is not 'METHOD PATH VERSION'");
            v = request_line(h, line, len, &v11);
            h->path_at += line_start;
        } else if (!len) {
            if (v11 && !f.host) return refuse(h, 400, "an HTTP/1.1 request needs a Host header");
            v = body_framing(h, &f, max_body);
            if (v == SERVE_HEAD_OK) h->head_len = next;
            return v;
        } else {
            v = header(h, &f, line, len);
        }
        if (v != SERVE_HEAD_OK) return v;
        at = line_start = next;
    }
}
