/* Unigram tokenizer (SentencePiece's unigram model, tokenizer.ggml.model "t5": T5, XLM-R based
 * embedders). The text is first normalised: the longest input prefix that the precompiled
 * character map knows is replaced by its normal form (NFKC and friends, compiled into a trie by
 * SentencePiece), spaces become U+2581, optionally merged and preceded by one. Then the
 * segmentation with the highest sum of token scores (log probabilities) wins, found by dynamic
 * programming over character boundaries; a character no token covers costs the lowest score minus
 * 10 and becomes the unknown token, runs of them one unknown token. Ties keep the earlier
 * candidate, candidates being tried by start, then length. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tok_internal.h"

#define UNKNOWN_PENALTY 10.0

/* ---- the precompiled character map --------------------------------------------------------
 * Layout: a little-endian uint32 byte size of the trie, the trie (uint32 nodes, a double array
 * whose child of node s for byte c sits at BASE(s) ^ c), then NUL-terminated replacements. A
 * node packs LCHECK (the byte that leads to it, bits 0-7; bit 31 set on value nodes, so that
 * they never match a byte), LEAF (bit 8: a replacement ends here, its index in the node at
 * BASE), BASE (bits 10-30, shifted left by 8 when bit 9 is set); a value node holds the
 * replacement's offset in its low 31 bits. */

static uint32_t charsmap_node(const clinfer_vocab *v, uint32_t i) {
    const unsigned char *p = v->ugm.trie + 4 * (size_t)i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t node_base(uint32_t node) {
    return (node >> 10) << ((node & (1u << 9)) >> 6);
}

/* The replacement for the longest prefix of s the map knows: *consumed input bytes become
 * *repl_len bytes at *repl; *consumed is 0 when no prefix is known. */
static clinfer_status charsmap_match(const clinfer_vocab *v, const char *s, size_t len,
                                     size_t *consumed, const char **repl, size_t *repl_len) {
    *consumed = 0;
    if (!v->ugm.n_nodes) return CLINFER_OK;
    uint32_t index = node_base(charsmap_node(v, 0)), value = 0;
    for (size_t i = 0; i < len && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        index ^= c;
        if (index >= v->ugm.n_nodes) goto outside;
        uint32_t node = charsmap_node(v, index);
        if ((node & ((1u << 31) | 0xFF)) != c) break;
        index ^= node_base(node);
        if (node & (1u << 8)) {
            if (index >= v->ugm.n_nodes) goto outside;
            value = charsmap_node(v, index) & ((1u << 31) - 1);
            *consumed = i + 1;
        }
    }
    if (!*consumed) return CLINFER_OK;
    const char *end = value < v->ugm.repl_size
                          ? memchr(v->ugm.repl + value, '\0', v->ugm.repl_size - value)
                          : NULL;
    if (!end)
        return err_fail(CLINFER_ERR_FORMAT,
                        "tokenizer: precompiled_charsmap replacement at %u is outside its %zu "
                        "bytes or unterminated",
                        value, v->ugm.repl_size);
    *repl = v->ugm.repl + value;
    *repl_len = (size_t)(end - *repl);
    return CLINFER_OK;
outside: /* as llama.cpp, which throws here */
    return err_fail(CLINFER_ERR_FORMAT, "tokenizer: precompiled_charsmap leads to node %u of %u",
                    index, v->ugm.n_nodes);
}

/* ---- loading ------------------------------------------------------------------------------ */

static bool matchable(const tok_entry *t) {
    return t->len && (t->type == TOK_TYPE_NORMAL || t->type == TOK_TYPE_USER_DEFINED ||
                      t->type == TOK_TYPE_UNUSED || t->type == TOK_TYPE_UNDEFINED);
}

clinfer_status tok_ugm_init(clinfer_vocab *v, const gguf_file *f) {
    clinfer_status st = CLINFER_OK;
    const char *key = "tokenizer.ggml.precompiled_charsmap";
    const gguf_kv *map = gguf_find_kv(f, key);
    if (map) {
        if (map->type != GGUF_TYPE_ARRAY ||
            (map->arr_type != GGUF_TYPE_UINT8 && map->arr_type != GGUF_TYPE_INT8))
            return err_fail(CLINFER_ERR_FORMAT, "tokenizer: %s is not an array of bytes", key);
        const unsigned char *p = map->data;
        uint64_t trie_size = map->arr_n < 4 ? 0
                                            : (uint64_t)p[0] | (uint64_t)p[1] << 8 |
                                                  (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
        if (map->arr_n < 4 || trie_size + 4 >= map->arr_n || trie_size % 4)
            return err_fail(CLINFER_ERR_FORMAT,
                            "tokenizer: %s of %llu bytes holds a trie of %llu bytes", key,
                            (unsigned long long)map->arr_n, (unsigned long long)trie_size);
        v->ugm.charsmap = malloc((size_t)map->arr_n);
        if (!v->ugm.charsmap) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %s", key);
        memcpy(v->ugm.charsmap, p, (size_t)map->arr_n);
        v->ugm.trie = v->ugm.charsmap + 4;
        v->ugm.n_nodes = (uint32_t)(trie_size / 4);
        v->ugm.repl = (const char *)v->ugm.trie + trie_size;
        v->ugm.repl_size = (size_t)(map->arr_n - 4 - trie_size);
    }
    double min_score = DBL_MAX;
    for (size_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].type == TOK_TYPE_NORMAL && v->tokens[i].score < min_score)
            min_score = v->tokens[i].score;
    CHECK(tok_prefix_init(&v->ugm.matchable, v, matchable));
    v->ugm.unknown_score = (min_score == DBL_MAX ? 0 : min_score) - UNKNOWN_PENALTY;
cleanup:
    return st;
}

/* ---- normalising -------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} text_buf;

static clinfer_status append(text_buf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = 2 * (b->len + n) + 64;
        char *buf = realloc(b->buf, cap);
        if (!buf) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu bytes", cap);
        b->buf = buf;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    return CLINFER_OK;
}

/* Maps the text, writes spaces as U+2581: with remove_extra_whitespaces each run of spaces
 * becomes one before the next word (also before the first: that is llama.cpp's reading), else
 * every space stays and add_space_prefix puts one before the first word. (User-defined tokens,
 * which SentencePiece leaves unmapped, never get here: they are split out beforehand.) */
static clinfer_status normalize(const clinfer_vocab *v, const char *text, size_t len,
                                text_buf *out) {
    clinfer_status st = CLINFER_OK;
    bool merge = v->ugm.remove_extra_whitespaces, prefixed = false, in_word = false;
    for (size_t off = 0; off < len;) {
        const char *piece = text + off;
        size_t consumed, n = 0;
        CHECK(charsmap_match(v, text + off, len - off, &consumed, &piece, &n));
        if (!consumed) {
            consumed = n = tok_char_len(text + off, len - off);
            if (n == 1 && (unsigned char)text[off] >= 0x80) { /* invalid UTF-8 */
                piece = "\xEF\xBF\xBD";
                n = 3;
            }
        }
        off += consumed;
        for (size_t i = 0; i < n; i++) {
            if (piece[i] == ' ') {
                in_word = false;
                if (!merge) CHECK(append(out, TOK_SPACE_MARK, 3));
                continue;
            }
            if (!in_word && ((v->add_space_prefix && !prefixed) || merge)) {
                CHECK(append(out, TOK_SPACE_MARK, 3));
                prefixed = true;
            }
            in_word = true;
            CHECK(append(out, piece + i, 1));
        }
    }
cleanup:
    return st;
}

/* ---- segmenting --------------------------------------------------------------------------- */

typedef struct {
    double score; /* of the best segmentation of the text up to here */
    int32_t id;   /* its last token */
    uint32_t start;
} best;

static void offer(best *at, double score, int32_t id, size_t start) {
    if (score > at->score) *at = (best){score, id, (uint32_t)start};
}

clinfer_status tok_ugm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out) {
    clinfer_status st = CLINFER_OK;
    text_buf norm = {0};
    best *dp = NULL;
    CHECK(normalize(v, text, len, &norm));
    size_t n = norm.len;
    if (n == 0) goto cleanup;
    CHECK(tok_alloc_positions(n, sizeof *dp, (void **)&dp));
    for (size_t i = 0; i <= n; i++)
        dp[i] = (best){-DBL_MAX, v->unk, 0};
    dp[0].score = 0;
    for (size_t start = 0; start < n;) {
        size_t char_len = tok_char_len(norm.buf + start, n - start);
        bool whole_char = false;
        tok_prefix_walk walk = {0};
        int32_t id;
        while (tok_prefix_next(&v->ugm.matchable, v, norm.buf + start, n - start, &walk, &id)) {
            double score = v->tokens[id].type == TOK_TYPE_USER_DEFINED ? 0.0 : v->tokens[id].score;
            offer(&dp[start + walk.depth], dp[start].score + score, id, start);
            whole_char = whole_char || walk.depth == char_len;
        }
        if (!whole_char)
            offer(&dp[start + char_len], dp[start].score + v->ugm.unknown_score, v->unk, start);
        start += char_len;
    }
    /* Back from the end, then reversed in place. */
    size_t first = out->n;
    bool prev_unknown = false;
    for (size_t at = n; at > 0; at = dp[at].start) {
        bool unknown = dp[at].id == v->unk;
        if (!(prev_unknown && unknown) && dp[at].id >= 0) CHECK(tok_ids_push(out, dp[at].id));
        prev_unknown = unknown;
    }
    for (size_t i = first, j = out->n; i + 1 < j; i++, j--) {
        int32_t t = out->ids[i];
        out->ids[i] = out->ids[j - 1];
        out->ids[j - 1] = t;
    }
cleanup:
    free(dp);
    free(norm.buf);
    return st;
}
