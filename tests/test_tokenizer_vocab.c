/* Tokenizer vectors: test_tokenizer_vocab NAME tokenizes every input of
 * ggml-vocab-NAME.gguf.inp and compares with the ids in .out (exact match), then checks that
 * pieces give the text back (byte-level BPE and SentencePiece), also when streamed through
 * clinfer_utf8_complete, and the API's edge cases. The files are llama.cpp's
 * (tools/fetch_vocab.sh), in $CLINFER_VOCAB_DIR, else $CLINFER_TEST_VOCAB_DIR (the checkout's
 * models/vocab, from CMake); exit 77 naming each missing file when they are not there. */
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
        EXPECT_OK(clinfer_vocab_piece(v, ids[i], piece, sizeof piece, &plen));
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

static void check_vectors(const clinfer_vocab *v, char *inp, const char *outp, bool byte_level,
                          bool space_prefix) {
    size_t n_inputs = 0, mismatches = 0;
    const char *expected = outp;
    char *cur = inp;
    int32_t ids[4096];
    for (char *sep; (sep = strstr(cur, SEPARATOR)); cur = sep + strlen(SEPARATOR)) {
        *sep = '\0';
        size_t len = (size_t)(sep - cur);
        int32_t want[4096];
        size_t n_want = 0;
        const char *eol = strchr(expected, '\n');
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
        EXPECT_OK(clinfer_vocab_tokenize(v, cur, len, false, false, ids, 4096, &n));
        bool same = n == n_want && memcmp(ids, want, n * sizeof *ids) == 0;
        EXPECT(same, "input %zu '%s'", n_inputs, cur);
        if (!same && mismatches++ < 8) {
            print_ids("expected", want, n_want);
            print_ids("got     ", ids, n);
        }
        size_t dlen;
        bool stream_ok;
        char *text = detokenize(v, ids, n, &dlen, &stream_ok);
        EXPECT(stream_ok, "input %zu: streamed pieces differ or split a character", n_inputs);
        if (byte_level)
            EXPECT(dlen == len && memcmp(text, cur, len) == 0, "input %zu: round trip '%.*s'",
                   n_inputs, (int)dlen, text);
        if (space_prefix && len)
            EXPECT(dlen == len + 1 && text[0] == ' ' && memcmp(text + 1, cur, len) == 0,
                   "input %zu: round trip '%.*s'", n_inputs, (int)dlen, text);
        free(text);
        n_inputs++;
    }
    EXPECT(n_inputs > 0, "no inputs found");
    printf("%zu inputs, %zu mismatches\n", n_inputs, mismatches);
}

/* Behaviour beyond the vectors: buffer sizes, lookups, specials, invalid UTF-8. */
static void check_api(const clinfer_vocab *v, bool byte_level) {
    const char *text = "Hello world, hello tokens!";
    size_t n = 0, n2 = 0;
    int32_t ids[64], few[2];
    EXPECT_OK(clinfer_vocab_tokenize(v, text, strlen(text), false, false, ids, 64, &n));
    EXPECT(n > 2, "%zu tokens", n);
    clinfer_status st = clinfer_vocab_tokenize(v, text, strlen(text), false, false, few, 2, &n2);
    EXPECT(st == CLINFER_ERR_BUFFER_TOO_SMALL && n2 == n, "status %d, %zu needed", st, n2);
    EXPECT(few[0] == ids[0] && few[1] == ids[1], "partial output differs");

    int32_t bos = clinfer_vocab_bos(v);
    if (bos >= 0) {
        EXPECT_OK(clinfer_vocab_tokenize(v, text, strlen(text), true, false, ids, 64, &n2));
        EXPECT(n2 >= n + 1 && ids[0] == bos, "add_bos: %zu tokens, first %d", n2, ids[0]);
    }
    for (int32_t id = 0; id < 5; id++) {
        char piece[256];
        size_t len;
        EXPECT_OK(clinfer_vocab_piece(v, id, piece, sizeof piece, &len));
    }
    char small[1];
    size_t need = 0;
    int32_t big = -1;
    for (size_t id = 0; id < clinfer_vocab_n_tokens(v) && big < 0; id++) {
        char piece[256];
        size_t len;
        if (clinfer_vocab_piece(v, (int32_t)id, piece, sizeof piece, &len) == CLINFER_OK && len > 1)
            big = (int32_t)id;
    }
    st = clinfer_vocab_piece(v, big, small, sizeof small, &need);
    EXPECT(st == CLINFER_ERR_BUFFER_TOO_SMALL && need > 1, "piece into 1 byte: %d", st);
    EXPECT(clinfer_vocab_piece(v, -1, small, 1, &need) == CLINFER_ERR_INVALID_ARGUMENT, "id -1");

    /* BOS and EOS are found by their text, and with parse_special their text is one token */
    const int32_t specials[] = {bos, clinfer_vocab_eos(v)};
    for (size_t i = 0; i < 2; i++) {
        char piece[256];
        size_t len;
        if (specials[i] < 0) continue;
        EXPECT_OK(clinfer_vocab_piece(v, specials[i], piece, sizeof piece, &len));
        EXPECT(clinfer_vocab_find(v, piece, len) == specials[i], "find token %d", specials[i]);
        EXPECT_OK(clinfer_vocab_tokenize(v, piece, len, false, true, ids, 64, &n2));
        EXPECT(n2 == 1 && ids[0] == specials[i], "parse_special '%.*s': %zu tokens", (int)len,
               piece, n2);
        EXPECT_OK(clinfer_vocab_tokenize(v, piece, len, false, false, ids, 64, &n2));
        EXPECT(n2 > 1 || ids[0] != specials[i], "'%.*s' matched without parse_special", (int)len,
               piece);
    }
    if (clinfer_vocab_eos(v) >= 0)
        EXPECT(clinfer_vocab_is_eog(v, clinfer_vocab_eos(v)), "eos ends generation");
    EXPECT(clinfer_vocab_find(v, "no such token \x01", 15) == -1, "find of a non-token");

    /* invalid UTF-8 is tokenized byte-wise and, for byte-level BPE, comes back unchanged */
    const char bad[] = "ok \xff\xfe \xe2\x82 \xc0\xaf end \xf0\x9f";
    EXPECT_OK(clinfer_vocab_tokenize(v, bad, sizeof bad - 1, false, true, ids, 64, &n2));
    if (byte_level) {
        size_t dlen;
        bool stream_ok;
        char *back = detokenize(v, ids, n2, &dlen, &stream_ok);
        EXPECT(dlen == sizeof bad - 1 && memcmp(back, bad, dlen) == 0, "invalid UTF-8 round trip");
        free(back);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VOCAB_NAME (gpt-2, llama-spm, bert-bge)\n", argv[0]);
        return 2;
    }
    const char *dir = getenv("CLINFER_VOCAB_DIR");
    if (!dir || !*dir) dir = getenv("CLINFER_TEST_VOCAB_DIR");
    if (!dir || !*dir) dir = ".";
    static const char *const suffix[] = {"", ".inp", ".out"}; /* vocab, inputs, ids */
    char path[3][1024];
    bool missing = false;
    for (size_t i = 0; i < 3; i++) {
        struct stat sb;
        snprintf(path[i], sizeof path[i], "%s/ggml-vocab-%s.gguf%s", dir, argv[1], suffix[i]);
        if (stat(path[i], &sb) != 0) {
            printf("skipped: %s is missing\n", path[i]);
            missing = true;
        }
    }
    if (missing) {
        printf("fetch the tokenizer vectors with 'bash tools/fetch_vocab.sh' and set "
               "CLINFER_VOCAB_DIR to the directory it prints (tools/test.sh does both)\n");
        return 77;
    }
    size_t inp_size, out_size;
    char *inp = read_file(path[1], &inp_size);
    char *outp = read_file(path[2], &out_size);
    gguf_file *f = NULL;
    if (!inp || !outp || gguf_open(path[0], &f) != CLINFER_OK) {
        fprintf(stderr, "FAILED: cannot read %s or its .inp/.out: %s\n", path[0],
                clinfer_last_error());
        return 1;
    }
    clinfer_vocab *v = NULL;
    EXPECT_OK(clinfer_vocab_load(f, &v));
    gguf_close(f); /* the vocabulary keeps its own copy */
    if (v) {
        bool byte_level = strcmp(argv[1], "gpt-2") == 0;
        bool spm = strcmp(argv[1], "llama-spm") == 0;
        check_vectors(v, inp, outp, byte_level, spm);
        check_api(v, byte_level);
        EXPECT(clinfer_vocab_add_bos(v) == !byte_level, "add_bos default");
    }
    clinfer_vocab_free(v);
    free(inp);
    free(outp);
    return finish(argv[0]);
}
