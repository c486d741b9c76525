/* The RWKV tokenizer (tokenizer.ggml.model "rwkv") on a vocabulary generated here: escaped
 * token texts, greedy longest matches, control tokens, invalid UTF-8 and pieces. The expected
 * ids are those llama.cpp's llama-tokenize gives for the same vocabulary (checked when this test
 * was written). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab_fixture.h"

/* <end>, the 256 bytes (ids 1..256), then these. */
static const char *const extra[] = {
    "ab",         "abc", "hello", " world", "\\n\\n", "\\\\n", "\xe6\x97\xa5\xe6\x9c\xac",
    "\\xe6\\x97", "he",  "\\x4"};
enum {
    END,
    BYTE0,
    AB = 257,
    ABC,
    HELLO,
    WORLD,
    NL2,
    BACKSLASH_N,
    NIHON,
    NI_PART,
    HE,
    N_TOKENS = 267
};

/* A byte as RWKV's vocabulary writes it. */
static void escape(int b, char *out) {
    if (b == '\\')
        strcpy(out, "\\\\");
    else if (b == '\n')
        strcpy(out, "\\n");
    else if (b == '\t')
        strcpy(out, "\\t");
    else if (b == '\r')
        strcpy(out, "\\r");
    else if (b >= 0x20 && b < 0x7F)
        snprintf(out, 8, "%c", b);
    else
        snprintf(out, 8, "\\x%02x", b);
}

static clinfer_vocab *load(void) {
    static char bytes[256][8];
    const char *texts[N_TOKENS];
    int32_t types[N_TOKENS];
    texts[END] = "<end>";
    types[END] = 3;
    for (int b = 0; b < 256; b++) {
        escape(b, bytes[b]);
        texts[BYTE0 + b] = bytes[b];
        types[BYTE0 + b] = 1;
    }
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        texts[AB + i] = extra[i];
        types[AB + i] = 1;
    }
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "rwkv");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, N_TOKENS);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOKENS);
    return vocab_from_writer(w, CLINFER_OK);
}

#define BYTE(c) (BYTE0 + (unsigned char)(c))

int main(void) {
    clinfer_vocab *v = load();
    if (!v) return finish("test_tokenizer_rwkv");
    expect_ids(v, "hello world", false, false, IDS(HELLO, WORLD));
    expect_ids(v, "abcab\\n\\nhe", false, false, IDS(ABC, AB, BACKSLASH_N, BACKSLASH_N, HE));
    expect_ids(v, "abc\n\n\nx", false, false, IDS(ABC, NL2, BYTE('\n'), BYTE('x')));
    /* the longest match, then single bytes of the rest of the character */
    expect_ids(v, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe6\x97!", false, false,
               IDS(NIHON, BYTE(0xe8), BYTE(0xaa), BYTE(0x9e), BYTE(' '), NI_PART, BYTE('!')));
    expect_ids(v, "bad\xff\xfe", false, false,
               IDS(BYTE('b'), BYTE('a'), BYTE('d'), BYTE(0xff), BYTE(0xfe)));
    expect_ids(v, "<end>he", false, true, IDS(END, HE));
    EXPECT(!vocab_add_bos(v) && vocab_bos(v) < 0, "RWKV: no BOS");
    /* "\x4" (an unfinished escape) stands for nothing: an empty token, never produced */
    expect_ids(v, "\x04", false, false, IDS(BYTE(4)));

    char piece[16];
    size_t len;
    EXPECT_OK(vocab_piece(v, NL2, piece, sizeof piece, &len));
    EXPECT(len == 2 && memcmp(piece, "\n\n", 2) == 0, "piece of '\\n\\n'");
    EXPECT_OK(vocab_piece(v, BYTE(0xe6), piece, sizeof piece, &len));
    EXPECT(len == 1 && (unsigned char)piece[0] == 0xe6, "piece of '\\xe6'");
    EXPECT(vocab_find(v, "\\", 1) == BYTE('\\'), "find the backslash by its byte");
    vocab_free(v);
    return finish("test_tokenizer_rwkv");
}
