/* Tokenizer vectors: test_tokenizer_vocab NAME tokenizes every input of
 * ggml-vocab-NAME.gguf.inp and compares with the ids in .out (exact match), then checks that
 * pieces give the text back (where the tokenizer is lossless), also when streamed through
 * clinfer_utf8_complete, and the API's edge cases. A vocabulary published without vectors gets
 * the round trip and API checks on the texts of ggml-vocab-gpt-2.gguf.inp. The files are
 * llama.cpp's (tools/fetch_vocab.sh), in $CLINFER_VOCAB_DIR, else $CLINFER_TEST_VOCAB_DIR (the
 * checkout's models/vocab, from CMake); exit 77 naming each missing file when they are not
 * there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "gguf.h"
#include "tokenizer.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *size = (size_t)n;
    }
    return buf;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

static bool valid_utf8_chunk(const char *s, size_t n) {
    /* Every chunk the streamer lets out of valid text must end on a character boundary. */
    return clinfer_utf8_complete(s, n) == n;
}

/* Concatenates the pieces of ids two ways: whole, and streamed through clinfer_utf8_complete
 * (each chunk emitted ends on a character boundary). Returns the whole text (malloc'd). */
static char *detokenize(const clinfer_vocab *v, const int32_t *ids, size_t n, size_t *len,
                        bool *stream_ok) {
    size_t cap = 64, total = 0, pending = 0, streamed = 0;
    char *text = malloc(cap);
    char *stream = malloc(cap); /* what the stream emitted so far, then the held-back tail */
    *stream_ok = true;
    for (size_t i = 0; i < n; i++) {
        char piece[256];
        size_t plen;
        EXPECT_OK(vocab_piece(v, ids[i], piece, sizeof piece, &plen));
        if (total + pending + plen + 1 > cap) {
            cap = 2 * (total + pending + plen + 1);
            text = realloc(text, cap);
            stream = realloc(stream, cap);
        }
        memcpy(text + total, piece, plen);
        total += plen;
        memcpy(stream + streamed + pending, piece, plen);
        pending += plen;
        size_t ready = clinfer_utf8_complete(stream + streamed, pending);
        if (!valid_utf8_chunk(stream + streamed, ready)) *stream_ok = false;
        streamed += ready;
        pending -= ready;
    }
    if (streamed + pending != total || memcmp(stream, text, total) != 0) *stream_ok = false;
    free(stream);
    *len = total;
    return text;
}

/* What the pieces of a text's tokens give back. */
typedef enum {
    ROUND_TRIP_EXACT,        /* the text itself (byte-level BPE, Gemma 4's BPE) */
    ROUND_TRIP_SPACE_PREFIX, /* a space, then the text (SentencePiece's added space) */
    ROUND_TRIP_NONE,         /* normalised text (WordPiece, unigram): not checked */
} round_trip;

/* Every vocabulary file tools/fetch_vocab.sh fetches, with what llama.cpp does for it. */
static const struct {
    const char *name;
    round_trip trip;
    bool add_bos; /* prompts start with BOS (metadata, else the model's or family's default) */
} vocabs[] = {
    {"gpt-2", ROUND_TRIP_EXACT, false},          {"llama-spm", ROUND_TRIP_SPACE_PREFIX, true},
    {"bert-bge", ROUND_TRIP_NONE, true},         {"command-r", ROUND_TRIP_EXACT, true},
    {"deepseek-coder", ROUND_TRIP_EXACT, true},  {"deepseek-llm", ROUND_TRIP_EXACT, true},
    {"falcon", ROUND_TRIP_EXACT, false},         {"gemma-4", ROUND_TRIP_EXACT, true},
    {"llama-bpe", ROUND_TRIP_EXACT, true},       {"mpt", ROUND_TRIP_EXACT, false},
    {"phi-3", ROUND_TRIP_SPACE_PREFIX, true},    {"qwen2", ROUND_TRIP_EXACT, false},
    {"qwen35", ROUND_TRIP_EXACT, false},         {"refact", ROUND_TRIP_EXACT, false},
    {"starcoder", ROUND_TRIP_EXACT, false},      {"aquila", ROUND_TRIP_EXACT, false},
    {"baichuan", ROUND_TRIP_SPACE_PREFIX, true}, {"gpt-neox", ROUND_TRIP_EXACT, false},
    {"nomic-bert-moe", ROUND_TRIP_NONE, true},
};

/* Ids llama.cpp's llama-tokenize gives (no BOS, llama-cpp-python 0.3.36's llama.cpp) for what
 * the published vectors miss: the unigram's character map (full-width forms, ligatures, circled
 * digits, superscripts) and space merging; WordPiece's accent stripping (a Hangul syllable
 * keeps its first jamo, spacing marks go too). -1 ends each list. */
static const struct {
    const char *vocab, *text;
    int32_t ids[8];
} extra[] = {
    {"nomic-bert-moe",
     "\xef\xbc\xa8\xef\xbd\x85\xef\xbd\x8c\xef\xbd\x8c\xef\xbd\x8f  "
     "\xef\xbd\x97\xef\xbd\x8f\xef\xbd\x92\xef\xbd\x8c\xef\xbd\x84 \xef\xac\x81ne",
     {35378, 8999, 5885, -1}},
    {"nomic-bert-moe",
     "Caf\xc3\xa9   na\xc3\xafve  \xe2\x91\xa0\xe2\x91\xa1  x\xc2\xb2",
     {61427, 24, 9392, 272, 427, 1022, 304, -1}},
    {"nomic-bert-moe", "tab\there\nnew", {20928, 3688, 3525, -1}},
    {"bert-bge",
     "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xe0\xa4\x9e\xe0\xa4\xbf "
     "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7\xe0\xa4\xbf",
     {1469, 29991, 29999, 100, 1315, 29873, -1}},
};

static void check_extra(const clinfer_vocab *v, const char *name) {
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        if (strcmp(extra[i].vocab, name) != 0) continue;
        int32_t ids[64];
        size_t n = 0, n_want = 0;
        while (extra[i].ids[n_want] >= 0)
            n_want++;
        EXPECT_OK(
            vocab_tokenize(v, extra[i].text, strlen(extra[i].text), false, false, ids, 64, &n));
        EXPECT(n == n_want && memcmp(ids, extra[i].ids, n * sizeof *ids) == 0,
               "'%s': %zu ids, expected %zu", extra[i].text, n, n_want);
    }
}

static void check_vectors(const clinfer_vocab *v, char *inp, const char *outp, round_trip trip) {
    size_t n_inputs = 0, mismatches = 0;
    const char *expected = outp ? outp : ""; /* NULL: no ids to compare with */
    char *cur = inp;
    int32_t ids[4096];
    for (char *sep; (sep = strstr(cur, SEPARATOR)); cur = sep + strlen(SEPARATOR)) {
        *sep = '\0';
        size_t len = (size_t)(sep - cur);
        int32_t want[4096];
        size_t n_want = 0;
        const char *eol = outp ? strchr(expected, '\n') : expected;
        if (!eol) eol = expected + strlen(expected);
        for (const char *p = expected; p < eol;) {
            char *end;
            long id = strtol(p, &end, 10);
            if (end == p) break;
            want[n_want++] = (int32_t)id;
            p = end;
        }
        expected = *eol ? eol + 1 : eol;
        size_t n = 0;
        EXPECT_OK(vocab_tokenize(v, cur, len, false, false, ids, 4096, &n));
        bool same = !outp || (n == n_want && memcmp(ids, want, n * sizeof *ids) == 0);
        EXPECT(same, "input %zu '%s'", n_inputs, cur);
        if (!same && mismatches++ < 8) {
            print_ids("expected", want, n_want);
            print_ids("got     ", ids, n);
        }
        size_t dlen;
        bool stream_ok;
        char *text = detokenize(v, ids, n, &dlen, &stream_ok);
        EXPECT(stream_ok, "input %zu: streamed pieces differ or split a character", n_inputs);
        if (trip == ROUND_TRIP_EXACT)
            EXPECT(dlen == len && memcmp(text, cur, len) == 0, "input %zu: round trip '%.*s'",
                   n_inputs, (int)dlen, text);
        if (trip == ROUND_TRIP_SPACE_PREFIX && len)
            EXPECT(dlen == len + 1 && text[0] == ' ' && memcmp(text + 1, cur, len) == 0,
                   "input %zu: round trip '%.*s'", n_inputs, (int)dlen, text);
        free(text);
        n_inputs++;
    }
    EXPECT(n_inputs > 0, "no inputs found");
    printf("%zu inputs, %zu mismatches%s\n", n_inputs, mismatches,
           outp ? "" : " (no ids published: round trips only)");
}

/* Behaviour beyond the vectors: buffer sizes, lookups, specials, invalid UTF-8. */
static void check_api(const clinfer_vocab *v, bool byte_level) {
    const char *text = "Hello world, hello tokens!";
    size_t n = 0, n2 = 0;
    int32_t ids[64], few[2];
    EXPECT_OK(vocab_tokenize(v, text, strlen(text), false, false, ids, 64, &n));
    EXPECT(n > 2, "%zu tokens", n);
    clinfer_status st = vocab_tokenize(v, text, strlen(text), false, false, few, 2, &n2);
    EXPECT(st == CLINFER_ERR_BUFFER_TOO_SMALL && n2 == n, "status %d, %zu needed", st, n2);
    EXPECT(few[0] == ids[0] && few[1] == ids[1], "partial output differs");

    int32_t bos = vocab_bos(v);
    if (bos >= 0) {
        EXPECT_OK(vocab_tokenize(v, text, strlen(text), true, false, ids, 64, &n2));
        EXPECT(n2 >= n + 1 && ids[0] == bos, "add_bos: %zu tokens, first %d", n2, ids[0]);
    }
    for (int32_t id = 0; id < 5; id++) {
        char piece[256];
        size_t len;
        EXPECT_OK(vocab_piece(v, id, piece, sizeof piece, &len));
    }
    char small[1];
    size_t need = 0;
    int32_t big = -1;
    for (size_t id = 0; id < vocab_n_tokens(v) && big < 0; id++) {
        char piece[256];
        size_t len;
        if (vocab_piece(v, (int32_t)id, piece, sizeof piece, &len) == CLINFER_OK && len > 1)
            big = (int32_t)id;
    }
    st = vocab_piece(v, big, small, sizeof small, &need);
    EXPECT(st == CLINFER_ERR_BUFFER_TOO_SMALL && need > 1, "piece into 1 byte: %d", st);
    EXPECT(vocab_piece(v, -1, small, 1, &need) == CLINFER_ERR_INVALID_ARGUMENT, "id -1");

    /* BOS and EOS are found by their text, and with parse_special their text is one token */
    const int32_t specials[] = {bos, vocab_eos(v)};
    for (size_t i = 0; i < 2; i++) {
        char piece[256];
        size_t len;
        if (specials[i] < 0) continue;
        EXPECT_OK(vocab_piece(v, specials[i], piece, sizeof piece, &len));
        EXPECT(vocab_find(v, piece, len) == specials[i], "find token %d", specials[i]);
        EXPECT_OK(vocab_tokenize(v, piece, len, false, true, ids, 64, &n2));
        EXPECT(n2 == 1 && ids[0] == specials[i], "parse_special '%.*s': %zu tokens", (int)len,
               piece, n2);
        EXPECT_OK(vocab_tokenize(v, piece, len, false, false, ids, 64, &n2));
        EXPECT(n2 > 1 || ids[0] != specials[i], "'%.*s' matched without parse_special", (int)len,
               piece);
    }
    if (vocab_eos(v) >= 0) EXPECT(vocab_is_eog(v, vocab_eos(v)), "eos ends generation");
    EXPECT(vocab_find(v, "no such token \x01", 15) == -1, "find of a non-token");

    /* invalid UTF-8 is tokenized byte-wise and, for lossless tokenizers, comes back unchanged
     * where each of its bytes comes back alone (not every vocabulary has a token for bytes UTF-8
     * never uses, and some give their byte character to an added token of the same text) */
    const char bad[] = "ok \xff\xfe \xe2\x82 \xc0\xaf end \xf0\x9f";
    EXPECT_OK(vocab_tokenize(v, bad, sizeof bad - 1, false, true, ids, 64, &n2));
    bool every_byte = true;
    for (size_t i = 0; i < sizeof bad - 1; i++) {
        size_t nb = 0, blen;
        bool stream_ok;
        EXPECT_OK(vocab_tokenize(v, bad + i, 1, false, false, few, 2, &nb));
        char *back = detokenize(v, few, nb, &blen, &stream_ok);
        every_byte = every_byte && blen == 1 && back[0] == bad[i];
        free(back);
    }
    if (byte_level && every_byte) {
        size_t dlen;
        bool stream_ok;
        char *back = detokenize(v, ids, n2, &dlen, &stream_ok);
        EXPECT(dlen == sizeof bad - 1 && memcmp(back, bad, dlen) == 0, "invalid UTF-8 round trip");
        free(back);
    }
}

int main(int argc, char **argv) {
    size_t which = 0;
    while (argc == 2 && which < sizeof vocabs / sizeof vocabs[0] &&
           strcmp(vocabs[which].name, argv[1]))
        which++;
    if (argc != 2 || which == sizeof vocabs / sizeof vocabs[0]) {
        fprintf(stderr, "usage: %s VOCAB_NAME (one of this test's table)\n", argv[0]);
        return 2;
    }
    const char *dir = getenv("CLINFER_VOCAB_DIR");
    if (!dir || !*dir) dir = getenv("CLINFER_TEST_VOCAB_DIR");
    if (!dir || !*dir) dir = ".";
    /* the vocabulary, its inputs and ids, and the inputs to use where it has none */
    static const char *const suffix[] = {"", ".inp", ".out"};
    char path[4][1024];
    struct stat sb;
    for (size_t i = 0; i < 3; i++)
        snprintf(path[i], sizeof path[i], "%s/ggml-vocab-%s.gguf%s", dir, argv[1], suffix[i]);
    snprintf(path[3], sizeof path[3], "%s/ggml-vocab-gpt-2.gguf.inp", dir);
    bool has_vectors = stat(path[1], &sb) == 0;
    const char *needed[] = {path[0], has_vectors ? path[1] : path[3], has_vectors ? path[2] : NULL};
    bool missing = false;
    for (size_t i = 0; i < 3; i++) {
        if (needed[i] && stat(needed[i], &sb) != 0) {
            printf("skipped: %s is missing\n", needed[i]);
            missing = true;
        }
    }
    if (missing) {
        printf("fetch the tokenizer vectors with 'bash tools/fetch_vocab.sh' and set "
               "CLINFER_VOCAB_DIR to the directory it prints (tools/test.sh does both)\n");
        return 77;
    }
    size_t inp_size, out_size;
    char *inp = read_file(needed[1], &inp_size);
    char *outp = needed[2] ? read_file(needed[2], &out_size) : NULL;
    gguf_file *f = NULL;
    if (!inp || (needed[2] && !outp) || gguf_open(path[0], &f) != CLINFER_OK) {
        fprintf(stderr, "FAILED: cannot read %s or its inputs: %s\n", path[0],
                clinfer_last_error());
        return 1;
    }
    clinfer_vocab *v = NULL;
    EXPECT_OK(vocab_load(f, &v));
    gguf_close(f); /* the vocabulary keeps its own copy */
    if (v) {
        check_vectors(v, inp, outp, vocabs[which].trip);
        check_extra(v, argv[1]);
        check_api(v, vocabs[which].trip == ROUND_TRIP_EXACT);
        EXPECT(vocab_add_bos(v) == vocabs[which].add_bos, "add_bos default");
    }
    vocab_free(v);
    free(inp);
    free(outp);
    return finish(argv[0]);
}
