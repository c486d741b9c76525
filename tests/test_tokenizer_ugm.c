/* The unigram tokenizer (tokenizer.ggml.model "t5") on a vocabulary generated here: the best
 * segmentation by score, unknown characters (merged into one [unk]), space prefix and merging,
 * a precompiled character map written by hand, user-defined tokens, EOS, and malformed maps.
 * The expected ids are those llama.cpp's llama-tokenize gives for the same vocabulary (checked
 * when this test was written); ggml-vocab-nomic-bert-moe.gguf covers a real map
 * (test_tokenizer_vocab). */
#include <stdlib.h>
#include <string.h>

#include "vocab_fixture.h"

enum { PAD, EOS, UNK, SPACE, A, B, AB, SPACE_A, SPACE_AB, USER_X, N_TOKENS };

typedef enum {
    MAP_GOOD,
    MAP_NONE,
    MAP_SHORT,
    MAP_TRIE_TOO_BIG,
    MAP_UNTERMINATED,
    MAP_OUTSIDE
} map_kind;

/* A character map with two entries: "A" -> "a", "B" -> "b b". The root's BASE is 1, so the
 * child for byte c is node 1 ^ c; each leaf's BASE (1) leads to the node holding its
 * replacement's offset (bit 31 set). */
static size_t charsmap(map_kind kind, uint8_t *out) {
    uint32_t nodes[256] = {0};
    size_t n_nodes = kind == MAP_OUTSIDE ? 64 : 256; /* 64: bytes from '@' on lead outside */
    nodes[0] = 1u << 10;
    nodes[1 ^ 'A'] = 1u << 10 | 1u << 8 | 'A';
    nodes[(1 ^ 'A') ^ 1] = 1u << 31 | 0;
    nodes[1 ^ 'B'] = 1u << 10 | 1u << 8 | 'B';
    nodes[(1 ^ 'B') ^ 1] = 1u << 31 | 2;
    const char repl[] = "a\0b b"; /* with its final NUL */
    size_t repl_len = kind == MAP_UNTERMINATED ? sizeof repl - 1 : sizeof repl;
    uint32_t trie_bytes = (uint32_t)(4 * n_nodes);
    if (kind == MAP_TRIE_TOO_BIG) trie_bytes += (uint32_t)repl_len;
    for (int b = 0; b < 4; b++)
        out[b] = (uint8_t)(trie_bytes >> (8 * b));
    for (size_t i = 0; i < n_nodes; i++)
        for (int b = 0; b < 4; b++)
            out[4 + 4 * i + b] = (uint8_t)(nodes[i] >> (8 * b));
    memcpy(out + 4 + 4 * n_nodes, repl, repl_len);
    return kind == MAP_SHORT ? 3 : 4 + 4 * n_nodes + repl_len;
}

static clinfer_vocab *load(map_kind kind, bool merge_spaces, clinfer_status want) {
    static const char *const texts[N_TOKENS] = {"<pad>",
                                                "</s>",
                                                "<unk>",
                                                "\xe2\x96\x81",
                                                "a",
                                                "b",
                                                "ab",
                                                "\xe2\x96\x81"
                                                "a",
                                                "\xe2\x96\x81"
                                                "ab",
                                                "<x>"};
    static const float scores[N_TOKENS] = {0, 0, 0, -3, -2, -2, -3, -2.5f, -4, 0};
    static const int32_t types[N_TOKENS] = {3, 3, 2, 1, 1, 1, 1, 1, 1, 4};
    uint8_t map[4 + 4 * 256 + 16];
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "t5");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, N_TOKENS);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, N_TOKENS);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOKENS);
    gw_kv_bool(w, "tokenizer.ggml.add_space_prefix", true);
    gw_kv_bool(w, "tokenizer.ggml.remove_extra_whitespaces", merge_spaces);
    if (kind != MAP_NONE)
        gw_kv_arr(w, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8, map,
                  charsmap(kind, map));
    return vocab_from_writer(w, want);
}

int main(void) {
    clinfer_vocab *v = load(MAP_GOOD, false, CLINFER_OK);
    if (v) {
        expect_ids(v, "ab ab", false, false, IDS(SPACE_AB, SPACE_AB));
        expect_ids(v, "ba", false, false, IDS(SPACE, B, A)); /* no "ba": single letters */
        expect_ids(v, "zz!", false, false, IDS(SPACE, UNK)); /* one [unk] for the run */
        expect_ids(v, "aÄb", false, false, IDS(SPACE_A, UNK, B));
        expect_ids(v, "AB", false, false, IDS(SPACE_AB, SPACE, B)); /* mapped to "ab b" */
        expect_ids(v, "BBA", false, false, IDS(SPACE, B, SPACE, B, B, SPACE, B, A));
        expect_ids(v, "  ab   ab  ", false, false,
                   IDS(SPACE, SPACE, SPACE_AB, SPACE, SPACE, SPACE_AB, SPACE, SPACE));
        expect_ids(v, "a<x>b", false, false,
                   IDS(SPACE_A, USER_X, SPACE, B));           /* each run prefixed */
        expect_ids(v, "ab", true, false, IDS(SPACE_AB, EOS)); /* T5: no BOS, EOS at the end */
        EXPECT(!vocab_add_bos(v) && vocab_eos(v) == EOS, "T5 defaults");
        char piece[16];
        size_t len;
        EXPECT_OK(vocab_piece(v, SPACE_AB, piece, sizeof piece, &len));
        EXPECT(len == 3 && memcmp(piece, " ab", 3) == 0, "piece of '\xe2\x96\x81"
                                                         "ab'");
        size_t n;
        int32_t ids[4];
        EXPECT_OK(vocab_tokenize(v, "", 0, false, false, ids, 4, &n));
        EXPECT(n == 0, "empty text: %zu ids", n);
    }
    vocab_free(v);

    v = load(MAP_GOOD, true, CLINFER_OK);
    if (v) {
        expect_ids(v, "  ab   ab  ", false, false, IDS(SPACE_AB, SPACE_AB));
        expect_ids(v, "AB", false, false, IDS(SPACE_AB, SPACE, B));
    }
    vocab_free(v);

    v = load(MAP_NONE, false, CLINFER_OK);
    if (v) expect_ids(v, "AB", false, false, IDS(SPACE, UNK)); /* not mapped: unknown */
    vocab_free(v);

    vocab_free(load(MAP_SHORT, false, CLINFER_ERR_FORMAT));
    vocab_free(load(MAP_TRIE_TOO_BIG, false, CLINFER_ERR_FORMAT));
    v = load(MAP_UNTERMINATED, false, CLINFER_OK); /* found when a replacement is used */
    if (v) {
        size_t n;
        int32_t ids[8];
        EXPECT(vocab_tokenize(v, "B", 1, false, false, ids, 8, &n) == CLINFER_ERR_FORMAT,
               "unterminated replacement");
        expect_ids(v, "A", false, false, IDS(SPACE_A));
    }
    vocab_free(v);
    v = load(MAP_OUTSIDE, false, CLINFER_OK);
    if (v) {
        size_t n;
        int32_t ids[8];
        EXPECT(vocab_tokenize(v, "a", 1, false, false, ids, 8, &n) == CLINFER_ERR_FORMAT,
               "a map leading outside its nodes");
    }
    vocab_free(v);
    return finish("test_tokenizer_ugm");
}
