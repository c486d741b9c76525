/* clinfer serve: a request's head checked before libmicrohttpd reads it (serve_head.c). The
 * server peeks at each request's head on the socket (serve_accept.c) and refuses here what would
 * frame its body ambiguously, or what libmicrohttpd 0.9.75 would refuse itself with a response
 * whose status line and headers it writes twice. No libmicrohttpd here, so that the request fuzzer
 * can take it. */
#ifndef CLINFER_SERVE_HEAD_H
#define CLINFER_SERVE_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes of a request's head (request line and headers) read; past it, 431. */
#define SERVE_HEAD_MAX 16384

typedef enum {
    SERVE_HEAD_MORE,   /* no empty line yet: the head is not whole */
    SERVE_HEAD_OK,     /* whole, and its body framed one way */
    SERVE_HEAD_REFUSE, /* answer status with message, then close */
} serve_head_verdict;

typedef struct {
    size_t head_len;          /* OK: bytes through the empty line that ends the head */
    uint64_t content_length;  /* OK: the body's declared bytes (0 without Content-Length) */
    bool chunked;             /* OK: Transfer-Encoding: chunked */
    size_t path_at, path_len; /* the request target's path (no query), once the line is whole */
    unsigned status;          /* REFUSE: 400, 413, 431 or 501 */
    char message[192];
} serve_head;

/* Reads the n bytes that start a request (leading empty lines skipped, as HTTP allows). Lines
 * end with LF, optionally after CR. Refused: a head over SERVE_HEAD_MAX (431); a header line
 * without a name and colon, with whitespace before the colon, folded onto the previous line, or
 * holding control bytes; HTTP/1.1 without Host; a Content-Length that is not digits, two of
 * different values, or Content-Length with Transfer-Encoding (400); a Transfer-Encoding other
 * than one chunked (501); a declared body over max_body that the client waits to send
 * (Expect: 100-continue) or over 16 times max_body (413). */
serve_head_verdict serve_head_check(const char *buf, size_t n, size_t max_body, serve_head *out);

#endif
