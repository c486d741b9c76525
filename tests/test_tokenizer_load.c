/* Vocabularies generated here (no files needed): the merge order of byte-level BPE (by rank)
 * and SentencePiece (by score), byte fallback, user-defined versus control tokens, text in pieces
 * of their own parse_special (vocab_tokenize_pieces: one text's tokens, special tokens only
 * inside the pieces that read them), and hostile metadata, which must be refused with the right
 * status and never crash. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_writer.h"
#include "gpt2_bytes.h"
#include "tokenizer.h"

typedef enum {
    BREAK_NONE,
    BREAK_SCORES,
    BREAK_TYPE,
    BREAK_BOS,
    BREAK_MERGE,
    BREAK_MODEL,
    BREAK_PRE,
    BREAK_NO_TOKENS,
    BREAK_TOKENS_TYPE,
    BREAK_SCORES_TYPE,
    BREAK_NO_MERGES,
    BREAK_EMPTY,
    BREAK_NO_VOCAB,     /* tokenizer.ggml.model "none" */
    KIMI_WITHOUT_MERGES /* not broken: Kimi K2 may come without merges */
} breakage;

static clinfer_status load(gguf_writer *w, clinfer_vocab **v) {
    uint8_t *buf = NULL;
    size_t len = 0;
    gguf_file *f = NULL;
    *v = NULL;
    clinfer_status st = gw_to_memory(w, &buf, &len) ? CLINFER_ERR_OUT_OF_MEMORY : CLINFER_OK;
    if (st == CLINFER_OK) st = gguf_open_memory(buf, len, &f);
    if (st == CLINFER_OK) st = vocab_load(f, v);
    gguf_close(f);
    free(buf);
    gw_free(w);
    return st;
}

/* 256 byte characters, then "ab" "bc" "abc", a user-defined and a control token. */
static gguf_writer *bpe_vocab(breakage brk) {
    static char chars[256][3];
    const char *texts[262];
    int32_t types[262];
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        texts[b] = chars[b];
        types[b] = 1;
    }
    const char *extra[] = {"ab", "bc", "abc", "<|u|>", "<|c|>", "\304\240ab" /* "Ġab" */};
    const int32_t extra_types[] = {1, 1, 1, 4, 3, 1};
    for (int i = 0; i < 6; i++) {
        texts[256 + i] = extra[i];
        types[256 + i] = extra_types[i];
    }
    if (brk == BREAK_TYPE) types[7] = 7;
    const char *merges[] = {"a b", "ab c", "b c", "\xc4\xa0 ab",
                            brk == BREAK_MERGE ? "abc" : "a c"};
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model",
              brk == BREAK_MODEL      ? "gpt3"
              : brk == BREAK_NO_VOCAB ? "none"
                                      : "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre",
              brk == BREAK_PRE             ? "nonsense"
              : brk == KIMI_WITHOUT_MERGES ? "kimi-k2"
                                           : "gpt-2");
    if (brk == BREAK_TOKENS_TYPE)
        gw_kv_arr_i32(w, "tokenizer.ggml.tokens", types, 262);
    else if (brk == BREAK_EMPTY)
        gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, 0);
    else if (brk != BREAK_NO_TOKENS)
        gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, 262);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 262);
    if (brk != BREAK_NO_MERGES && brk != KIMI_WITHOUT_MERGES)
        gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, 5);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", brk == BREAK_BOS ? 262 : 260);
    return w;
}

/* WordPiece: [UNK] [CLS] [SEP], then word-initial pieces (U+2581 first) in both cases, with
 * and without an accent, a Hangul syllable and its first jamo. lowercase/strip: -1 leaves the
 * normalizer key out. */
static gguf_writer *wpm_vocab(int lowercase, int strip) {
    static const char *const texts[] = {"[UNK]",
                                        "[CLS]",
                                        "[SEP]",
                                        "\xe2\x96\x81hello",
                                        "\xe2\x96\x81Hello",
                                        "\xe2\x96\x81"
                                        "cafe",
                                        "\xe2\x96\x81"
                                        "caf\xc3\xa9",
                                        "\xe2\x96\x81\xed\x95\x9c",
                                        "\xe2\x96\x81\xe1\x84\x92"};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "bert");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, 9);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 9);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (lowercase >= 0) gw_kv_bool(w, "tokenizer.ggml.normalizer.lowercase", lowercase);
    if (strip >= 0) gw_kv_bool(w, "tokenizer.ggml.normalizer.strip_accents", strip);
    return w;
}

/* SentencePiece: <unk> <s> </s>, U+2581, a, b, "ab" and "\u2581a" with chosen scores, bytes. */
static gguf_writer *spm_vocab(breakage brk, float score_ab, float score_space_a) {
    static char bytes[256][8];
    const char *texts[264] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81",
                              "a",     "b",   "ab",   "\342\226\201a" /* "▁a" */};
    float scores[264] = {0, 0, 0, -5, -5, -5, score_ab, score_space_a};
    int32_t types[264] = {2, 3, 3, 1, 1, 1, 1, 1};
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[8 + b] = bytes[b];
        scores[8 + b] = 0;
        types[8 + b] = 6;
    }
    gguf_writer *w = gw_new();
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", texts, 264);
    if (brk == BREAK_SCORES_TYPE)
        gw_kv_arr_i32(w, "tokenizer.ggml.scores", types, 264);
    else
        gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, brk == BREAK_SCORES ? 100 : 264);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 264);
    return w;
}

static void expect_ids(const clinfer_vocab *v, const char *text, bool special, const int32_t *want,
                       size_t n_want) {
    int32_t ids[32];
    size_t n = 0;
    EXPECT_OK(vocab_tokenize(v, text, strlen(text), false, special, ids, 32, &n));
    bool same = n == n_want && memcmp(ids, want, n * sizeof *ids) == 0;
    EXPECT(same, "'%s' (special %d): %zu tokens, first %d", text, special, n, n ? ids[0] : -1);
}

/* The pieces (text, parse_special; NULL ends them) give the ids of want. */
static void expect_pieces(const clinfer_vocab *v, const char *const *texts, const bool *special,
                          const int32_t *want, size_t n_want) {
    clinfer_text_piece pieces[8];
    size_t n = 0, n_ids = 0;
    for (; texts[n]; n++)
        pieces[n] = (clinfer_text_piece){texts[n], strlen(texts[n]), special[n]};
    int32_t ids[32];
    EXPECT_OK(vocab_tokenize_pieces(v, pieces, n, false, ids, 32, &n_ids));
    bool same = n_ids == n_want && memcmp(ids, want, n_ids * sizeof *ids) == 0;
    EXPECT(same, "pieces from '%s': %zu tokens, first %d", texts[0], n_ids, n_ids ? ids[0] : -1);
}

int main(void) {
    clinfer_vocab *v = NULL;
    EXPECT_OK(load(bpe_vocab(BREAK_NONE), &v));
    if (v) {
        expect_ids(v, "abc", false, (int32_t[]){258}, 1);       /* a+b (rank 0), ab+c (rank 1) */
        expect_ids(v, "bcab", false, (int32_t[]){257, 256}, 2); /* ab before bc, by rank */
        expect_ids(v, "x ab", false, (int32_t[]){'x', 261}, 2);
        expect_ids(v, "a<|u|>b", false, (int32_t[]){'a', 259, 'b'}, 3);
        expect_ids(v, "<|c|>", true, (int32_t[]){260}, 1);
        int32_t ids[8];
        size_t n = 0;
        EXPECT_OK(vocab_tokenize(v, "<|c|>", 5, false, false, ids, 8, &n));
        EXPECT(n > 1, "control token matched without parse_special");
        EXPECT(vocab_is_eog(v, 260) && !vocab_is_eog(v, 259), "eog");
        /* merges cross pieces; a control token counts only whole inside a piece that reads it */
        expect_pieces(v, (const char *[]){"ab", "c", NULL}, (bool[]){false, false},
                      (int32_t[]){258}, 1);
        expect_pieces(v, (const char *[]){"x", "<|c|>", NULL}, (bool[]){false, true},
                      (int32_t[]){'x', 260}, 2);
        int32_t plain[8];
        size_t n_plain = 0;
        EXPECT_OK(vocab_tokenize(v, "<|c|>", 5, false, false, plain, 8, &n_plain));
        expect_pieces(v, (const char *[]){"<|c", "|>", NULL}, (bool[]){true, true}, plain, n_plain);
        EXPECT(vocab_tokenize_pieces(v, (clinfer_text_piece[]){{NULL, 3, true}}, 1, false, ids, 8,
                                     &n) == CLINFER_ERR_INVALID_ARGUMENT,
               "a piece without text");
        EXPECT_OK(vocab_tokenize_pieces(v, NULL, 0, false, ids, 8, &n));
        EXPECT(n == 0, "no pieces: %zu tokens", n);
        EXPECT(!vocab_add_bos(v) && vocab_bos(v) == -1, "byte-level BPE: no BOS");
    }
    vocab_free(v);

    EXPECT_OK(load(bpe_vocab(KIMI_WITHOUT_MERGES), &v));
    if (v) expect_ids(v, "abc", false, (int32_t[]){'a', 'b', 'c'}, 3); /* nothing merges */
    vocab_free(v);

    /* "none": no vocabulary, which a model file may have (its model loads without one) */
    uint8_t *buf = NULL;
    size_t len = 0;
    gguf_file *f = NULL;
    gguf_writer *w = bpe_vocab(BREAK_NO_VOCAB);
    if (gw_to_memory(w, &buf, &len) == 0 && gguf_open_memory(buf, len, &f) == CLINFER_OK)
        EXPECT(!vocab_present(f), "'none' is no vocabulary");
    gguf_close(f);
    free(buf);
    gw_free(w);

    /* WordPiece's normaliser as llama.cpp runs it: by default lower case and accents stripped
     * (a Hangul syllable to its first jamo); strip_accents follows lowercase unless given */
    static const struct {
        int lowercase, strip;
        int32_t hello, cafe, han;
    } wpm[] = {{-1, -1, 3, 5, 8}, {0, -1, 4, 6, 7}, {1, 0, 3, 6, 7}};
    for (size_t i = 0; i < sizeof wpm / sizeof wpm[0]; i++) {
        EXPECT_OK(load(wpm_vocab(wpm[i].lowercase, wpm[i].strip), &v));
        if (v)
            expect_ids(v, "Hello caf\xc3\xa9 \xed\x95\x9c", false,
                       (int32_t[]){wpm[i].hello, wpm[i].cafe, wpm[i].han}, 3);
        vocab_free(v);
    }

    EXPECT_OK(load(spm_vocab(BREAK_NONE, -1, -2), &v)); /* "ab" outscores "\u2581a" */
    if (v) {
        expect_ids(v, "ab", false, (int32_t[]){3, 6}, 2);
        expect_ids(v, "c", false, (int32_t[]){3, 8 + 'c'}, 2); /* byte fallback */
        expect_ids(v, "a<s>a", true, (int32_t[]){7, 1, 7}, 3); /* a space before each run */
        /* pieces: the spacing of one text (no new space per piece), <s> special only where its
         * piece reads special tokens */
        expect_pieces(v, (const char *[]){"a", "b", NULL}, (bool[]){true, true}, (int32_t[]){3, 6},
                      2);
        expect_pieces(v, (const char *[]){"a", "<s>", "a", NULL}, (bool[]){false, true, false},
                      (int32_t[]){7, 1, 7}, 3);
        int32_t plain[16];
        size_t n_plain = 0;
        EXPECT_OK(vocab_tokenize(v, "a<s>a", 5, false, false, plain, 16, &n_plain));
        expect_pieces(v, (const char *[]){"a", "<s>", "a", NULL}, (bool[]){true, false, true},
                      plain, n_plain);
        EXPECT(n_plain > 3, "'a<s>a' as plain text: %zu tokens", n_plain);
        EXPECT(vocab_add_bos(v) && vocab_bos(v) == 1 && vocab_eos(v) == 2,
               "SentencePiece defaults");
    }
    vocab_free(v);
    EXPECT_OK(load(spm_vocab(BREAK_NONE, -2, -1), &v)); /* "\u2581a" outscores "ab" */
    if (v) expect_ids(v, "ab", false, (int32_t[]){7, 5}, 2);
    vocab_free(v);

    static const struct {
        breakage brk;
        bool spm;
        clinfer_status want; /* 0: any failure */
    } bad[] = {
        {BREAK_SCORES, true, CLINFER_ERR_FORMAT},
        {BREAK_TYPE, false, CLINFER_ERR_FORMAT},
        {BREAK_BOS, false, CLINFER_ERR_FORMAT},
        {BREAK_MERGE, false, CLINFER_ERR_FORMAT},
        {BREAK_MODEL, false, CLINFER_ERR_UNSUPPORTED},
        {BREAK_PRE, false, CLINFER_ERR_UNSUPPORTED},
        {BREAK_NO_TOKENS, false, CLINFER_ERR_NOT_FOUND},
        {BREAK_TOKENS_TYPE, false, 0},
        {BREAK_SCORES_TYPE, true, 0},
        {BREAK_NO_MERGES, false, CLINFER_ERR_NOT_FOUND},
        {BREAK_EMPTY, false, CLINFER_ERR_FORMAT},
        {BREAK_NO_VOCAB, false, CLINFER_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clinfer_status st =
            load(bad[i].spm ? spm_vocab(bad[i].brk, -1, -2) : bpe_vocab(bad[i].brk), &v);
        EXPECT(v == NULL && st != CLINFER_OK && (!bad[i].want || st == bad[i].want),
               "breakage %d: status %s: %s", (int)bad[i].brk, clinfer_status_str(st),
               clinfer_last_error());
        EXPECT(strlen(clinfer_last_error()) > 0, "breakage %d: no message", (int)bad[i].brk);
        vocab_free(v);
    }
    return finish("test_tokenizer_load");
}
