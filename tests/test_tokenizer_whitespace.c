/* The "whitespace" tokenizer model (BPE over UTF-8 runs between whitespace, which is dropped;
 * optionally lower-cased) on a vocabulary generated here. The expected ids are those llama.cpp's
 * llama-tokenize gives for the same vocabulary (checked when this test was written). */
#include "vocab_fixture.h"

/* 3 specials, 256 byte tokens <0x00>..<0xFF> (ids 3..258), then these. */
static const char *const words[] = {"a",
                                    "b",
                                    "c",
                                    "ab",
                                    "abc",
                                    "\xe4\xb8\xad",
                                    "\xe6\x96\x87",
                                    "\xe4\xb8\xad\xe6\x96\x87",
                                    "\xc3\xa9",
                                    "hello",
                                    "h",
                                    "e",
                                    "l",
                                    "o",
                                    "he",
                                    "ll",
                                    "hel",
                                    "hell"};
static const char *const merges[] = {
    "a b", "ab c", "\xe4\xb8\xad \xe6\x96\x87", "h e", "l l", "he l", "hel l", "hell o"};
enum {
    UNK,
    CLS,
    SEP,
    BYTE0,
    A = 259,
    B,
    C,
    AB,
    ABC,
    ZHONG,
    WEN,
    ZHONGWEN,
    E_ACUTE,
    HELLO,
    H,
    E,
    L,
    O,
    HE,
    LL,
    HEL,
    HELL,
    N_TOKENS
};
#define BYTE(c) (BYTE0 + (unsigned char)(c))

static clinfer_vocab *load(bool lowercase) {
    static char bytes[256][8];
    static const char *const specials[] = {"[UNK]", "[CLS]", "[SEP]"};
    const char *texts[N_TOKENS];
    int32_t types[N_TOKENS];
    for (int i = 0; i < BYTE0; i++) {
        texts[i] = specials[i];
        types[i] = i == UNK ? 2 : 3;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[BYTE0 + b] = bytes[b];
        types[BYTE0 + b] = 6;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        texts[A + i] = words[i];
        types[A + i] = 1;
    }
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "whitespace");
    gw_kv_str(w, "tokenizer.ggml.pre", "whitespace");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, N_TOKENS);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOKENS);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof merges[0]);
    gw_kv_bool(w, "tokenizer.ggml.normalizer.lowercase", lowercase);
    return vocab_from_writer(w, CLINFER_OK);
}

int main(void) {
    for (int lower = 0; lower < 2; lower++) {
        clinfer_vocab *v = load(lower);
        if (!v) continue;
        expect_ids(v, "abc ab", false, false, IDS(ABC, AB));
        expect_ids(v, "  hello   \xe4\xb8\xad\xe6\x96\x87 x", false, false,
                   IDS(HE, LL, O, ZHONGWEN, BYTE('x')));             /* "l l" before "he l" */
        expect_ids(v, "tab\there\xe3\x80\x80\xc3\xa9", false, false, /* U+3000 separates */
                   IDS(BYTE('t'), AB, HE, BYTE('r'), E, E_ACUTE));
        expect_ids(v,
                   "a\xff"
                   "b c",
                   false, false, /* U+FFFD for the bad byte */
                   IDS(A, BYTE(0xef), BYTE(0xbf), BYTE(0xbd), B, C));
        expect_ids(v, "[CLS]abc", false, true, IDS(CLS, ABC));
        if (lower)
            expect_ids(v, "HeLLo ABC", false, false, IDS(HE, LL, O, ABC));
        else
            expect_ids(v, "HeLLo ABC", false, false,
                       IDS(BYTE('H'), E, BYTE('L'), BYTE('L'), O, BYTE('A'), BYTE('B'), BYTE('C')));
        char piece[16];
        size_t len;
        EXPECT_OK(vocab_piece(v, ZHONGWEN, piece, sizeof piece, &len));
        EXPECT(len == 6 && memcmp(piece, "\xe4\xb8\xad\xe6\x96\x87", 6) == 0, "raw piece");
        vocab_free(v);
    }
    return finish("test_tokenizer_whitespace");
}
