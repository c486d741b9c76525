/* clinfer serve: a request's prompt as tokens. A completion's prompt is the client's own text,
 * special tokens parsed (as llama-server does). A chat goes through the chat template, whose
 * markers are special tokens; the messages' content is plain text, so that "<|im_start|>"
 * typed by a user cannot open a turn of its own (unless --special-in-content). When no content
 * holds a special token's text the whole rendering is tokenized at once, as run --chat does;
 * otherwise the rendering is cut where the contents go (found by rendering placeholders) and
 * tokenized as one text whose template pieces read special tokens and contents do not
 * (clinfer_tokenize_pieces). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

typedef struct {
    int32_t *v;
    size_t n, cap;
} tokens_buf;

/* Room for `more` tokens after b's. 0, or -1 with *err set. */
static int reserve(tokens_buf *b, size_t more, serve_error *err) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = 2 * (b->n + more);
    int32_t *grown = realloc(b->v, cap * sizeof *grown);
    if (!grown) return serve_error_set(err, 500, "server_error", "out of memory");
    b->v = grown;
    b->cap = cap;
    return 0;
}

/* Appends the tokens of the n pieces, one text, to b. 0, or -1 with *err set. */
static int append_pieces(const clinfer_model *model, tokens_buf *b,
                         const clinfer_text_piece *pieces, size_t n, bool add_bos,
                         serve_error *err) {
    size_t need = 2; /* a token per byte, BOS and EOS, unless a piece is under a byte */
    for (size_t i = 0; i < n; i++)
        need += pieces[i].len;
    clinfer_status st = CLINFER_ERR_BUFFER_TOO_SMALL;
    for (int attempt = 0; attempt < 2 && st == CLINFER_ERR_BUFFER_TOO_SMALL; attempt++) {
        if (reserve(b, need, err)) return -1;
        st = clinfer_tokenize_pieces(model, pieces, n, add_bos, b->v + b->n, b->cap - b->n, &need);
    }
    if (st != CLINFER_OK)
        return serve_error_set(err, 500, "server_error", "tokenizing failed: %s",
                               clinfer_last_error());
    b->n += need;
    return 0;
}

/* Appends the tokens of text (len bytes) to b. 0, or -1 with *err set. */
static int append_tokens(const clinfer_model *model, tokens_buf *b, const char *text, size_t len,
                         bool add_bos, bool special, serve_error *err) {
    clinfer_text_piece whole = {text, len, special};
    return append_pieces(model, b, &whole, 1, add_bos, err);
}

int serve_tokenize(clinfer_model *model, const char *text, int32_t **tokens, size_t *n,
                   serve_error *err) {
    tokens_buf b = {0};
    free(*tokens);
    *tokens = NULL;
    int rc = append_tokens(model, &b, text, strlen(text), clinfer_token_add_bos(model), true, err);
    if (rc) free(b.v);
    *tokens = rc ? NULL : b.v;
    *n = rc ? 0 : b.n;
    return rc;
}

/* Whether text reads differently with special tokens parsed: it holds a special token's text. */
static int holds_special(const clinfer_model *model, const char *text, bool *out,
                         serve_error *err) {
    tokens_buf with = {0}, without = {0};
    size_t len = strlen(text);
    int rc = append_tokens(model, &with, text, len, false, true, err);
    if (!rc) rc = append_tokens(model, &without, text, len, false, false, err);
    *out = !rc && (with.n != without.n || memcmp(with.v, without.v, with.n * sizeof *with.v));
    free(with.v);
    free(without.v);
    return rc;
}

static int render(serve_server *s, const clinfer_chat_message *m, size_t n, char **out,
                  serve_error *err) {
    if (clinfer_chat_apply_template(s->model, s->chat_template, m, n, true, out) == CLINFER_OK)
        return 0;
    return serve_error_set(err, 400, "invalid_request_error", "%s", clinfer_last_error());
}

/* The content as the template writes it: as given, or trimmed (Jinja's trim). */
static void content_as_written(const char *c, bool trim, const char **at, size_t *len) {
    static const char space[] = " \t\n\r\v\f";
    *at = c;
    *len = strlen(c);
    if (!trim) return;
    while (*len && strchr(space, **at)) {
        (*at)++;
        (*len)--;
    }
    while (*len && strchr(space, (*at)[*len - 1]))
        (*len)--;
}

/* The placeholder of message i: bytes no template changes and no content holds in the place. */
#define PLACEHOLDER "\x1e%zu\x1f"

/* Cuts the placeholders' rendering into the n + 1 pieces around them (piece i: lens[i] bytes
 * from starts[i]). false when the placeholders are not all there, in order. */
static bool cut_pieces(const char *shape, size_t n, const char **starts, size_t *lens) {
    const char *at = shape;
    for (size_t i = 0; i < n; i++) {
        char mark[32];
        snprintf(mark, sizeof mark, PLACEHOLDER, i);
        const char *hit = strstr(at, mark);
        if (!hit) return false;
        starts[i] = at;
        lens[i] = (size_t)(hit - at);
        at = hit + strlen(mark);
    }
    starts[n] = at;
    lens[n] = strlen(at);
    return true;
}

/* Whether the pieces with the contents (trimmed or not) between them make up rendered. */
static bool pieces_match(const char *rendered, const clinfer_chat_message *m, size_t n,
                         const char **starts, const size_t *lens, bool trim) {
    const char *at = rendered;
    for (size_t i = 0; i <= n; i++) {
        if (strncmp(at, starts[i], lens[i])) return false;
        at += lens[i];
        if (i == n) break;
        const char *c;
        size_t len;
        content_as_written(m[i].content, trim, &c, &len);
        if (strncmp(at, c, len)) return false;
        at += len;
    }
    return *at == '\0';
}

/* The tokens of the template's pieces (special) and the contents (plain) in turn, as one prompt
 * (the spacing and BOS of a whole text). */
static int tokenize_pieces(serve_server *s, const clinfer_chat_message *m, size_t n,
                           const char **starts, const size_t *lens, bool trim, tokens_buf *b,
                           serve_error *err) {
    clinfer_text_piece *pieces = calloc(2 * n + 1, sizeof *pieces);
    if (!pieces) return serve_error_set(err, 500, "server_error", "out of memory");
    for (size_t i = 0; i <= n; i++) {
        pieces[2 * i] = (clinfer_text_piece){starts[i], lens[i], true};
        if (i < n)
            content_as_written(m[i].content, trim, &pieces[2 * i + 1].text, &pieces[2 * i + 1].len);
    }
    int rc = append_pieces(s->model, b, pieces, 2 * n + 1, clinfer_token_add_bos(s->model), err);
    free(pieces);
    return rc;
}

/* The chat's tokens with the contents kept plain; rendered: the chat as the template writes
 * it. 0, or -1 with *err set. */
static int chat_tokens_apart(serve_server *s, const serve_request *req, const char *rendered,
                             tokens_buf *b, serve_error *err) {
    size_t n = req->n_messages;
    clinfer_chat_message *shape = calloc(n, sizeof *shape);
    char(*marks)[32] = calloc(n, sizeof *marks);
    const char **starts = calloc(n + 1, sizeof *starts);
    size_t *lens = calloc(n + 1, sizeof *lens);
    char *layout = NULL;
    int rc = shape && marks && starts && lens
                 ? 0
                 : serve_error_set(err, 500, "server_error", "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        snprintf(marks[i], sizeof marks[i], PLACEHOLDER, i);
        shape[i] = (clinfer_chat_message){req->messages[i].role, marks[i]};
    }
    if (!rc) rc = render(s, shape, n, &layout, err);
    if (!rc) {
        bool cut = cut_pieces(layout, n, starts, lens);
        bool trim = cut && !pieces_match(rendered, req->messages, n, starts, lens, false);
        if (trim && !pieces_match(rendered, req->messages, n, starts, lens, true)) cut = false;
        rc = cut ? tokenize_pieces(s, req->messages, n, starts, lens, trim, b, err)
                 : serve_error_set(err, 400, "invalid_request_error",
                                   "a message holds a special token's text, which this chat "
                                   "template cannot keep apart from its own; send it without, "
                                   "or start the server with --special-in-content");
    }
    clinfer_free(layout);
    free(shape);
    free(marks);
    free(starts);
    free(lens);
    return rc;
}

int serve_prompt_tokens(serve_server *s, const serve_request *req, int32_t **tokens, size_t *n,
                        serve_error *err) {
    if (req->kind != SERVE_CHAT) return serve_tokenize(s->model, req->prompt, tokens, n, err);
    char *rendered = NULL;
    if (render(s, req->messages, req->n_messages, &rendered, err)) return -1;
    bool apart = false;
    int rc = 0;
    for (size_t i = 0; !s->special_in_content && !rc && !apart && i < req->n_messages; i++)
        rc = holds_special(s->model, req->messages[i].content, &apart, err);
    if (!rc && !apart) rc = serve_tokenize(s->model, rendered, tokens, n, err);
    if (!rc && apart) {
        tokens_buf b = {0};
        rc = chat_tokens_apart(s, req, rendered, &b, err);
        if (rc) {
            free(b.v);
            b = (tokens_buf){0};
        }
        free(*tokens);
        *tokens = b.v;
        *n = b.n;
    }
    clinfer_free(rendered);
    return rc;
}
