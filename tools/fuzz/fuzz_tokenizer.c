/* libFuzzer harness for the tokenizer: the input bytes are tokenized with the GPT-2 vocabulary
 * (llama.cpp's ggml-vocab-gpt-2.gguf from tools/fetch_vocab.sh, loaded once from
 * $CLINFER_VOCAB_DIR, else $CLINFER_TEST_VOCAB_DIR; exit 77 when it is missing) with
 * special-token parsing on and off. Tokenizing must succeed on any bytes, and without special
 * tokens the pieces must give the input back byte for byte (byte-level BPE loses nothing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static clinfer_vocab *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("CLINFER_VOCAB_DIR");
    if (!dir || !*dir) dir = getenv("CLINFER_TEST_VOCAB_DIR");
    if (!dir || !*dir) dir = ".";
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", dir);
    if (stat(path, &sb) != 0) {
        fprintf(stderr,
                "fuzz_tokenizer: skipped: %s is missing (fetch the tokenizer vectors with "
                "'bash tools/fetch_vocab.sh' and set CLINFER_VOCAB_DIR to the directory it "
                "prints)\n",
                path);
        exit(77);
    }
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != CLINFER_OK || clinfer_vocab_load(f, &vocab) != CLINFER_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path, clinfer_last_error());
        exit(1);
    }
    gguf_close(f);
    return 0;
}

/* The concatenated pieces must equal the input. */
static void check_round_trip(const int32_t *ids, size_t n, const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    size_t len = 0;
    if (!text) return;
    for (size_t i = 0; i < n; i++) {
        size_t plen;
        if (clinfer_vocab_piece(vocab, ids[i], text + len, size - len, &plen) != CLINFER_OK)
            abort();
        len += plen;
    }
    if (len != size || memcmp(text, data, size) != 0) abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t *ids = malloc((size + 1) * sizeof *ids); /* at most one token per byte, plus BOS */
    if (!ids) return 0;
    for (int special = 0; special < 2; special++) {
        size_t n = 0;
        clinfer_status st = clinfer_vocab_tokenize(vocab, (const char *)data, size, special,
                                                   special, ids, size + 1, &n);
        if (st != CLINFER_OK || n > size + 1) abort();
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= clinfer_vocab_n_tokens(vocab)) abort();
        if (!special) check_round_trip(ids, n, data, size);
    }
    free(ids);
    return 0;
}
