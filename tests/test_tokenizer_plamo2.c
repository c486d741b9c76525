/* The PLaMo 2 tokenizer (tokenizer.ggml.model "plamo2") on a vocabulary generated here: the
 * least-cost segmentation, ties going to the longer token, byte fallback for uncovered code
 * points, a leading byte order mark, invalid UTF-8, control tokens and raw-text pieces. The
 * expected ids are those llama.cpp's llama-tokenize gives for the same vocabulary (checked when
 * this test was written). */
#include "vocab_fixture.h"

/* 4 specials, 256 byte tokens <0x00>..<0xFF> (ids 4..259), then these. */
static const struct {
    const char *text;
    float score;
} pieces[] = {{"a", -1},
              {"b", -1},
              {"ab", -1.5f},
              {"abc", -2},
              {"c", -1.2f},
              {"bc", -1},
              {" ", -1},
              {"\xe6\x97\xa5\xe6\x9c\xac", -3},
              {"\xe6\x97\xa5", -2},
              {"\xe6\x9c\xac", -2},
              {"xyz", -5},
              {"yz", -1},
              {"x", -3},
              {"ab ", -2.2f},
              {"q", -1},
              {"r", -1},
              {"qr", -2}};
enum {
    UNK,
    BOS,
    EOS,
    PAD,
    BYTE0,
    A = 260,
    B,
    AB,
    ABC,
    C,
    BC,
    SPACE,
    NIHON,
    NI,
    HON,
    XYZ,
    YZ,
    X,
    AB_SPACE,
    Q,
    R,
    QR,
    N_TOKENS
};
#define BYTE(c) (BYTE0 + (unsigned char)(c))

static clinfer_vocab *load(int drop_byte) {
    static char bytes[256][8];
    static const char *const specials[] = {"<|plamo:unk|>", "<|plamo:bos|>", "<|plamo:eos|>",
                                           "<|plamo:pad|>"};
    const char *texts[N_TOKENS];
    int32_t types[N_TOKENS];
    float scores[N_TOKENS] = {0};
    for (int i = 0; i < BYTE0; i++) {
        texts[i] = specials[i];
        types[i] = i == UNK ? 2 : 3;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[BYTE0 + b] = bytes[b];
        types[BYTE0 + b] = b == drop_byte ? 1 : 6; /* a byte token of the wrong type: missing */
    }
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        texts[A + i] = pieces[i].text;
        types[A + i] = 1;
        scores[A + i] = pieces[i].score;
    }
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "plamo2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, N_TOKENS);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_TOKENS);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, N_TOKENS);
    return vocab_from_writer(w, drop_byte < 0 ? CLINFER_OK : CLINFER_ERR_FORMAT);
}

int main(void) {
    clinfer_vocab *v = load(-1);
    if (!v) return finish("test_tokenizer_plamo2");
    expect_ids(v, "abc", false, false, IDS(ABC));
    expect_ids(v, "ab c", false, false, IDS(AB_SPACE, C));
    expect_ids(v, "abcabc bc", false, false, IDS(ABC, ABC, SPACE, BC));
    expect_ids(v, "xyz", false, false, IDS(X, YZ)); /* -4 beats -5 */
    expect_ids(v, "qr", false, false, IDS(QR));     /* a tie: the longer token */
    expect_ids(v, "qqrr", false, false, IDS(Q, QR, R));
    expect_ids(v, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e!", false, false,
               IDS(NIHON, BYTE(0xe8), BYTE(0xaa), BYTE(0x9e), BYTE('!')));
    expect_ids(v,
               "\xef\xbb\xbf"
               "ab",
               false, false, IDS(AB)); /* the byte order mark goes */
    expect_ids(v,
               "a\xff"
               "b",
               false, false, IDS(A, BYTE(0xef), BYTE(0xbf), BYTE(0xbd), B));
    expect_ids(v, "<|plamo:bos|>ab", false, true, IDS(BOS, AB));
    expect_ids(v, "ab  c", false, false, IDS(AB_SPACE, SPACE, C));
    EXPECT(!vocab_add_bos(v) && vocab_bos(v) == BOS, "PLaMo 2 defaults");
    char piece[16];
    size_t len;
    EXPECT_OK(vocab_piece(v, AB_SPACE, piece, sizeof piece, &len));
    EXPECT(len == 3 && memcmp(piece, "ab ", 3) == 0, "piece of 'ab '");
    EXPECT_OK(vocab_piece(v, BYTE(0xe8), piece, sizeof piece, &len));
    EXPECT(len == 1 && (unsigned char)piece[0] == 0xe8, "piece of <0xE8>");
    vocab_free(v);
    vocab_free(load(0x41)); /* every byte needs its token */
    return finish("test_tokenizer_plamo2");
}
