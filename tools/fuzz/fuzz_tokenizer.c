/* libFuzzer harness for the tokenizers: the input bytes are tokenized with one vocabulary of
 * each tokenizer model (llama.cpp's vocab files from tools/fetch_vocab.sh, loaded once from
 * $CLINFER_VOCAB_DIR, else $CLINFER_TEST_VOCAB_DIR; exit 77 when one is missing) with
 * special-token parsing on and off, and split by every pre-tokenizer family. Tokenizing must
 * succeed on any bytes with ids in range; without special tokens the pieces of the lossless
 * tokenizers (byte-level BPE, Gemma 4's BPE with byte fallback) must give the input back byte
 * for byte; every family's words must cover the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "tok_internal.h"
#include "tok_pretok_table.h"
#include "tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef enum {
    LOSSY,        /* normalises, or adds a space */
    LOSSLESS,     /* gives back any bytes */
    LOSSLESS_MARK /* gives back bytes without U+2581, which stands for a space */
} fidelity;

static const struct {
    const char *name;
    fidelity fidelity;
} vocab_files[] = {
    {"gpt-2", LOSSLESS},        /* byte-level BPE */
    {"qwen35", LOSSLESS},       /* byte-level BPE, another pre-tokenizer */
    {"gemma-4", LOSSLESS_MARK}, /* gemma4: BPE over UTF-8 with <0xXX> fallback */
    {"llama-spm", LOSSY},       /* SentencePiece BPE */
    {"bert-bge", LOSSY},        /* WordPiece */
    {"nomic-bert-moe", LOSSY},  /* unigram */
};
#define N_VOCABS (sizeof vocab_files / sizeof vocab_files[0])

static clinfer_vocab *vocabs[N_VOCABS];
static tok_pretok *families[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("CLINFER_VOCAB_DIR");
    if (!dir || !*dir) dir = getenv("CLINFER_TEST_VOCAB_DIR");
    if (!dir || !*dir) dir = ".";
    for (size_t i = 0; i < N_VOCABS; i++) {
        char path[1024];
        struct stat sb;
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, vocab_files[i].name);
        if (stat(path, &sb) != 0) {
            fprintf(stderr,
                    "fuzz_tokenizer: skipped: %s is missing (fetch the tokenizer vectors with "
                    "'bash tools/fetch_vocab.sh' and set CLINFER_VOCAB_DIR to the directory it "
                    "prints)\n",
                    path);
            exit(77);
        }
        gguf_file *f = NULL;
        if (gguf_open(path, &f) != CLINFER_OK || vocab_load(f, &vocabs[i]) != CLINFER_OK) {
            fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path, clinfer_last_error());
            exit(1);
        }
        gguf_close(f);
    }
    if (tok_pretok_n_families > sizeof families / sizeof families[0]) abort();
    for (size_t i = 0; i < tok_pretok_n_families; i++) {
        tok_pretok_traits traits;
        const char *name = tok_pretok_families[i].name;
        if (tok_pretok_create(name, strlen(name), &families[i], &traits) != CLINFER_OK) abort();
    }
    return 0;
}

/* The concatenated pieces must equal the input. */
static void check_round_trip(const clinfer_vocab *v, const int32_t *ids, size_t n,
                             const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    size_t len = 0;
    if (!text) return;
    for (size_t i = 0; i < n; i++) {
        size_t plen;
        /* a piece that does not fit cannot be the input's */
        if (vocab_piece(v, ids[i], text + len, size - len, &plen) != CLINFER_OK) abort();
        len += plen;
    }
    if (len != size || memcmp(text, data, size) != 0) abort();
    free(text);
}

static bool has_space_mark(const uint8_t *data, size_t size) {
    for (size_t i = 0; i + 3 <= size; i++)
        if (memcmp(data + i, "\xe2\x96\x81", 3) == 0) return true;
    return false;
}

/* Every family's words are contiguous, non-empty and cover the input. */
static void check_families(const uint8_t *data, size_t size) {
    for (size_t i = 0; i < tok_pretok_n_families; i++) {
        tok_span *spans = NULL;
        size_t n = 0, end = 0;
        if (tok_pretok_split(families[i], (const char *)data, size, &spans, &n) != CLINFER_OK)
            abort();
        for (size_t w = 0; w < n; w++) {
            if (spans[w].off != end || spans[w].len == 0) abort();
            end += spans[w].len;
        }
        if (end != size) abort();
        free(spans);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (size_t k = 0; k < N_VOCABS; k++) {
        const clinfer_vocab *v = vocabs[k];
        for (int special = 0; special < 2; special++) {
            /* first the count (normalisation may lengthen the text), then the ids */
            size_t n = 0, n2 = 0;
            clinfer_status st =
                vocab_tokenize(v, (const char *)data, size, special, special, NULL, 0, &n);
            if (st != (n ? CLINFER_ERR_BUFFER_TOO_SMALL : CLINFER_OK)) abort();
            int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
            if (!ids) return 0;
            st = vocab_tokenize(v, (const char *)data, size, special, special, ids, n, &n2);
            if (st != CLINFER_OK || n2 != n) abort();
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || (size_t)ids[i] >= vocab_n_tokens(v)) abort();
            fidelity fid = vocab_files[k].fidelity;
            bool marks = fid == LOSSLESS_MARK && has_space_mark(data, size);
            if (!special && fid != LOSSY && !marks) check_round_trip(v, ids, n, data, size);
            free(ids);
        }
    }
    check_families(data, size);
    return 0;
}
