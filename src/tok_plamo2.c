/* PLaMo 2's tokenizer (tokenizer.ggml.model "plamo2"): a unigram segmentation over code points
 * with scores rounded to 1e-4, raw text (no space marks), and <0xXX> byte tokens for code points
 * no token covers, each such code point costing 1000 (far more than any token). The best
 * segmentation has the least total cost (minus the scores); a tie goes to the longer token at
 * the earlier position, as the text is scanned from its end. A byte order mark at the start is
 * dropped; an invalid byte counts as U+FFFD. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tok_internal.h"

#define UNKNOWN_COST 10000000    /* in the 1e-4 units of the scores */
#define LOWEST_SCORE (-20000000) /* a token scoring this low or lower is never used */

static bool scored_token(const tok_entry *t) {
    return t->type != TOK_TYPE_BYTE;
}

clinfer_status tok_plamo2_init(clinfer_vocab *v) {
    for (int b = 0; b < 256; b++)
        if (v->byte_token[b] < 0 || v->tokens[v->byte_token[b]].type != TOK_TYPE_BYTE)
            return err_fail(CLINFER_ERR_FORMAT,
                            "tokenizer: the plamo2 vocabulary has no byte token <0x%02X>", b);
    return tok_prefix_init(&v->plamo2_index, v, scored_token);
}

/* The text as valid UTF-8 (an invalid byte becomes U+FFFD) without a leading byte order mark,
 * and which of its bytes start a character. */
static clinfer_status clean_text(const char *text, size_t len, char **out, bool **starts,
                                 size_t *n) {
    if (len > (SIZE_MAX - 1) / 3)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", len);
    char *s = malloc(3 * len + 1);
    bool *st = malloc((3 * len + 1) * sizeof *st);
    if (!s || !st) {
        free(s);
        free(st);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes of text", len);
    }
    size_t k = 0, off = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) off = 3;
    while (off < len) {
        size_t cl = tok_char_len(text + off, len - off);
        bool bad = cl == 1 && (unsigned char)text[off] >= 0x80;
        const char *c = bad ? "\xEF\xBF\xBD" : text + off;
        size_t cn = bad ? 3 : cl;
        for (size_t i = 0; i < cn; i++)
            st[k + i] = i == 0;
        memcpy(s + k, c, cn);
        k += cn;
        off += cl;
    }
    st[k] = true;
    *out = s;
    *starts = st;
    *n = k;
    return CLINFER_OK;
}

typedef struct {
    int64_t cost; /* of the best segmentation of the text from here to its end */
    int32_t id;   /* its first token, -1 for a code point spelled in byte tokens */
    uint32_t len; /* bytes that token covers */
} step;

clinfer_status tok_plamo2_encode(const clinfer_vocab *v, const char *text, size_t len,
                                 tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    char *s = NULL;
    bool *starts = NULL;
    step *dp = NULL;
    size_t n = 0;
    CHECK(clean_text(text, len, &s, &starts, &n));
    if (n == 0) goto cleanup;
    CHECK(tok_alloc_positions(n, sizeof *dp, (void **)&dp));
    dp[n] = (step){0, -1, 0};
    for (size_t i = n; i-- > 0;) {
        if (!starts[i]) continue;
        dp[i] = (step){INT64_MAX, -1, 0};
        tok_prefix_walk walk = {0};
        int32_t id;
        /* shortest first: a longer token of equal cost replaces a shorter one */
        while (tok_prefix_next(&v->plamo2_index, v, s + i, n - i, &walk, &id)) {
            if (!starts[i + walk.depth]) continue;
            double scaled = round((double)v->tokens[id].score * 1e4);
            if (!(scaled > LOWEST_SCORE && scaled < INT32_MAX)) continue; /* NaN too */
            int64_t score = (int64_t)scaled;
            int64_t cost = dp[i + walk.depth].cost - score;
            if (cost <= dp[i].cost) dp[i] = (step){cost, id, (uint32_t)walk.depth};
        }
        size_t cl = tok_char_len(s + i, n - i);
        if (dp[i + cl].cost + UNKNOWN_COST < dp[i].cost)
            dp[i] = (step){dp[i + cl].cost + UNKNOWN_COST, -1, (uint32_t)cl};
    }
    for (size_t i = 0; i < n; i += dp[i].len) {
        if (dp[i].id >= 0) {
            CHECK(tok_ids_push(out, dp[i].id));
            continue;
        }
        for (size_t b = 0; b < dp[i].len; b++)
            CHECK(tok_ids_push(out, v->byte_token[(unsigned char)s[i + b]]));
    }
cleanup:
    free(dp);
    free(starts);
    free(s);
    return st;
}
