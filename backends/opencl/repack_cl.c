/* The host side of weight layouts (weights_cl.h): GGUF blocks re-laid out in one pass straight
 * into a part's quant and scale arrays, row-major with f16 scales widened (clinfer_block_split) or
 * interleaved by 16 rows (word_at in cl/weights.clh), the rows split between threads. Loading
 * a model is mostly this copy and the page faults of its destination, so both go to every core. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "weights_cl.h"

#define MAX_THREADS 16
#define MIN_THREAD_BYTES (4u << 20) /* less output than this per thread is not worth a thread */

typedef struct {
    const clinfer_block_split *l;
    int il;
    const uint8_t *src; /* row 0 of the part's GGUF rows */
    size_t nb, row_bytes;
    size_t rows;          /* GGUF rows (il: the last group of 16 is padded with zero rows) */
    uint8_t *q, *s;       /* the arrays */
    size_t row0, row_end; /* this thread's rows (il: multiples of 16, row_end may pass rows) */
} repack_job;

/* Row-major: each block's quants, then its scale segments (f16 widened to f32), zero-padded. */
static void split_rows(const repack_job *j) {
    const clinfer_block_split *l = j->l;
    size_t step = dtype_block_bytes(l->type), first = j->row0 * j->nb;
    const uint8_t *src = j->src + j->row0 * j->row_bytes;
    uint8_t *q = j->q + first * l->q_len, *s = j->s + first * l->s_bytes;
    for (size_t i = first; i < j->row_end * j->nb; i++, src += step, q += l->q_len) {
        memcpy(q, src + l->q_off, l->q_len);
        uint8_t *end = s + l->s_bytes;
        for (int g = 0; g < 2 && l->s[g].len; g++) {
            const clinfer_scale_segment *seg = &l->s[g];
            if (!seg->f16) {
                memcpy(s, src + seg->off, seg->len);
                s += seg->len;
                continue;
            }
            for (size_t h = 0; h < seg->len / 2; h++, s += sizeof(float)) {
                uint16_t bits;
                memcpy(&bits, src + seg->off + 2 * h, sizeof bits);
                float f = f16_to_f32(bits);
                memcpy(s, &f, sizeof f);
            }
        }
        memset(s, 0, (size_t)(end - s));
        s = end;
    }
}

/* Interleaved by 16: for each block column of a group, the 16 rows' quant words (4 bytes) word
 * by word, and their f16 scales (one segment, kept as it is) half by half. Rows past the last
 * read as zero blocks. w words and h halves per block: constants where it is inlined, so that
 * the copies unroll (Q4_0 1.7x faster than with them variable, by CPU time). */
static inline __attribute__((always_inline)) void interleave_rows_wh(const repack_job *j, size_t w,
                                                                     size_t h) {
    static const uint8_t zero[64]; /* more than any interleaved type's block */
    const clinfer_block_split *l = j->l;
    size_t step = dtype_block_bytes(l->type), q_off = l->q_off, s_off = l->s[0].off;
    uint8_t *q = j->q + j->row0 * j->nb * l->q_len, *s = j->s + j->row0 * j->nb * l->s[0].len;
    for (size_t g = j->row0; g < j->row_end; g += 16) {
        const uint8_t *blk[16];
        size_t adv[16]; /* 0 for padding rows, which stay on the zero block */
        for (size_t r = 0; r < 16; r++) {
            bool real = g + r < j->rows;
            blk[r] = real ? j->src + (g + r) * j->row_bytes : zero;
            adv[r] = real ? step : 0;
        }
        for (size_t b = 0; b < j->nb; b++, q += 64 * w, s += 32 * h) {
            for (size_t t = 0; t < w; t++)
                for (size_t r = 0; r < 16; r++)
                    memcpy(q + (t * 16 + r) * 4, blk[r] + q_off + 4 * t, 4);
            for (size_t t = 0; t < h; t++)
                for (size_t r = 0; r < 16; r++)
                    memcpy(s + (t * 16 + r) * 2, blk[r] + s_off + 2 * t, 2);
            for (size_t r = 0; r < 16; r++)
                blk[r] += adv[r];
        }
    }
}

static void interleave_rows(const repack_job *j) {
    size_t w = j->l->q_len / 4, h = j->l->s[0].len / 2;
    if (w == 8 && h == 1)
        interleave_rows_wh(j, 8, 1); /* Q8_0 */
    else if (w == 4 && h == 1)
        interleave_rows_wh(j, 4, 1); /* Q4_0 */
    else if (w == 4 && h == 2)
        interleave_rows_wh(j, 4, 2); /* Q4_1 */
    else
        interleave_rows_wh(j, w, h);
}

static void *repack_run(void *arg) {
    const repack_job *j = arg;
    if (j->il)
        interleave_rows(j);
    else
        split_rows(j);
    return NULL;
}

void cl_repack(const clinfer_block_split *l, int il, const uint8_t *src, size_t nb, size_t rows,
               uint8_t *q, uint8_t *s) {
    repack_job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    size_t unit = il ? 16 : 1, units = (rows + unit - 1) / unit;
    size_t bytes = rows * nb * dtype_block_bytes(l->type); /* read, about what is written */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (size_t)cpus;
    if (n > bytes / MIN_THREAD_BYTES) n = bytes / MIN_THREAD_BYTES ? bytes / MIN_THREAD_BYTES : 1;
    if (n > units) n = units;
    repack_job job = {l, il, src, nb, nb * dtype_block_bytes(l->type), rows, q, s, 0, 0};
    for (size_t i = 0; i < n; i++) {
        jobs[i] = job;
        jobs[i].row0 = units * i / n * unit;
        jobs[i].row_end = units * (i + 1) / n * unit;
        /* a thread that cannot start leaves its rows to this one */
        if (i > 0) started[i] = pthread_create(&threads[i], NULL, repack_run, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!started[i]) repack_run(&jobs[i]);
    for (size_t i = 1; i < n; i++)
        if (started[i]) pthread_join(threads[i], NULL);
}
