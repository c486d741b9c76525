/* The base-run file of the KL divergence; see kld_file.h. Layout, little-endian as written by
 * the host (the file is meant for the machine that made it): "CLKLD001", u32 n_vocab, n_ctx,
 * n_chunk, rows, then n_chunk * n_ctx int32 tokens, then n_chunk * rows * n_vocab f32. */
#include "kld_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char magic[8] = {'C', 'L', 'K', 'L', 'D', '0', '0', '1'};
enum { HEADER_BYTES = 8 + 4 * 4 };

static int io_error(const kld_file *k, const char *doing) {
    return cli_error("perplexity: %s '%s': %s", doing, k->path, errno ? strerror(errno) : "short");
}

static size_t chunk_floats(const kld_file *k) {
    return (size_t)k->rows * k->n_vocab;
}

int kld_file_create(kld_file *k, const char *path, uint32_t n_vocab, uint32_t n_ctx,
                    uint32_t n_chunk, uint32_t rows, const int32_t *tokens) {
    *k = (kld_file){
        .path = path, .n_vocab = n_vocab, .n_ctx = n_ctx, .n_chunk = n_chunk, .rows = rows};
    uint32_t header[4] = {n_vocab, n_ctx, n_chunk, rows};
    size_t n_tokens = (size_t)n_chunk * n_ctx;
    errno = 0;
    if (!(k->f = fopen(path, "wb")) || fwrite(magic, 1, sizeof magic, k->f) != sizeof magic ||
        fwrite(header, sizeof header[0], 4, k->f) != 4 ||
        fwrite(tokens, sizeof *tokens, n_tokens, k->f) != n_tokens)
        return io_error(k, "cannot write the KL-divergence base");
    return 0;
}

int kld_file_open(kld_file *k, const char *path, int32_t **tokens) {
    *k = (kld_file){.path = path};
    *tokens = NULL;
    char got[sizeof magic];
    uint32_t header[4];
    struct stat st;
    errno = 0;
    if (!(k->f = fopen(path, "rb")) || fstat(fileno(k->f), &st) != 0)
        return io_error(k, "cannot open the KL-divergence base");
    if (fread(got, 1, sizeof got, k->f) != sizeof got || memcmp(got, magic, sizeof magic) ||
        fread(header, sizeof header[0], 4, k->f) != 4)
        return cli_error("perplexity: '%s' is not a KL-divergence base written by "
                         "`clinfer perplexity --kl-divergence-base`",
                         path);
    k->n_vocab = header[0], k->n_ctx = header[1], k->n_chunk = header[2], k->rows = header[3];
    /* every count against the file's size before anything is allocated */
    uint64_t tokens_bytes = (uint64_t)k->n_chunk * k->n_ctx * sizeof(int32_t);
    uint64_t data_bytes = (uint64_t)k->n_chunk * k->rows * k->n_vocab * sizeof(float);
    if (!k->n_vocab || k->n_ctx < 2 || !k->n_chunk || k->rows >= k->n_ctx ||
        (uint64_t)st.st_size != HEADER_BYTES + tokens_bytes + data_bytes)
        return cli_error("perplexity: KL-divergence base '%s' is damaged: %u chunks of %u tokens, "
                         "%u scored, vocabulary %u do not match its %lld bytes",
                         path, k->n_chunk, k->n_ctx, k->rows, k->n_vocab, (long long)st.st_size);
    size_t n_tokens = (size_t)k->n_chunk * k->n_ctx;
    if (!(*tokens = malloc(n_tokens * sizeof **tokens)))
        return cli_error("perplexity: no memory for %zu tokens", n_tokens);
    if (fread(*tokens, sizeof **tokens, n_tokens, k->f) != n_tokens)
        return io_error(k, "cannot read the tokens of");
    for (size_t i = 0; i < n_tokens; i++)
        if ((*tokens)[i] < 0 || (uint32_t)(*tokens)[i] >= k->n_vocab)
            return cli_error("perplexity: KL-divergence base '%s': token %zu is %d, outside its "
                             "vocabulary of %u",
                             path, i, (*tokens)[i], k->n_vocab);
    return 0;
}

int kld_file_write_chunk(kld_file *k, const float *lp) {
    errno = 0;
    if (fwrite(lp, sizeof *lp, chunk_floats(k), k->f) != chunk_floats(k))
        return io_error(k, "cannot write");
    return 0;
}

int kld_file_read_chunk(kld_file *k, float *lp) {
    errno = 0;
    if (fread(lp, sizeof *lp, chunk_floats(k), k->f) != chunk_floats(k))
        return io_error(k, "cannot read");
    return 0;
}

int kld_file_close(kld_file *k) {
    errno = 0;
    int rc = k->f && fclose(k->f) != 0 ? io_error(k, "cannot finish") : 0;
    k->f = NULL;
    return rc;
}
