/* The file of a base run (`clinfer perplexity --kl-divergence-base FILE`) that later runs are
 * compared with: a header, the tokens of every chunk, then per chunk the log-probabilities of
 * its scored positions as f32, so that a run compared with its own base gives a KLD of exactly
 * 0. Every number read back is checked against the file's size first. */
#ifndef CLINFER_KLD_FILE_H
#define CLINFER_KLD_FILE_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    const char *path;
    uint32_t n_vocab, n_ctx, n_chunk;
    uint32_t rows; /* scored positions per chunk */
} kld_file;

/* Writes the header and the tokens (n_chunk * n_ctx). 1 on failure, printed. */
int kld_file_create(kld_file *k, const char *path, uint32_t n_vocab, uint32_t n_ctx,
                    uint32_t n_chunk, uint32_t rows, const int32_t *tokens);
/* Reads the header and the tokens (*tokens malloc'ed); 1 on failure, printed, naming what is
 * wrong with the file. */
int kld_file_open(kld_file *k, const char *path, int32_t **tokens);
/* One chunk's rows of n_vocab log-probabilities. 1 on failure, printed. */
int kld_file_write_chunk(kld_file *k, const float *lp);
int kld_file_read_chunk(kld_file *k, float *lp);
/* Closes; for a written file 1 when the data did not reach the disk (printed). */
int kld_file_close(kld_file *k);

#endif
