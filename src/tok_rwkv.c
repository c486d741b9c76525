/* RWKV's "world" tokenizer (tokenizer.ggml.model "rwkv"): token texts are byte strings written
 * with escapes (\t \n \r, \xHH, and a backslash before any other character for itself); the
 * text is cut greedily into the longest tokens that match its bytes, a byte no token starts
 * with becoming the unknown token. */
#include "error.h"
#include "tok_internal.h"

static int hex_value(char c) { /* lower-case hex, as RWKV's vocabulary writes it */
    return c >= 'a' ? c - 'a' + 10 : c - '0';
}

size_t tok_rwkv_unescape(char *s, size_t len) {
    size_t out = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\') {
            s[out++] = s[i];
            continue;
        }
        if (++i == len) break; /* a lone backslash at the end stands for nothing */
        switch (s[i]) {
        case 't':
            s[out++] = '\t';
            break;
        case 'n':
            s[out++] = '\n';
            break;
        case 'r':
            s[out++] = '\r';
            break;
        case 'x':
            if (i + 2 >= len) return out; /* an unfinished \x stands for nothing */
            s[out++] = (char)(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
            i += 2;
            break;
        default:
            s[out++] = s[i];
        }
    }
    return out;
}

static bool any_token(const tok_entry *t) {
    (void)t;
    return true;
}

clinfer_status tok_rwkv_init(clinfer_vocab *v) {
    return tok_prefix_init(&v->rwkv_index, v, any_token);
}

clinfer_status tok_rwkv_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    for (size_t at = 0; at < len;) {
        tok_prefix_walk walk = {0};
        int32_t id, longest = -1;
        size_t longest_len = 1;
        while (tok_prefix_next(&v->rwkv_index, v, text + at, len - at, &walk, &id)) {
            longest = id;
            longest_len = walk.depth;
        }
        if (longest < 0) longest = v->unk;
        if (longest >= 0) CHECK(tok_ids_push(out, longest));
        at += longest_len;
    }
cleanup:
    return st;
}
