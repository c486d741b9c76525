/* read_bandwidth: this machine's memory read bandwidth as decode sees it, for the roofline of
 * bench/real_shapes.sh. N threads each sum their own slice of a buffer far larger than the caches
 * (64-bit integer adds, which the compiler vectorises without reordering concerns); the best of
 * several passes, in GB/s (1e9 bytes) on stdout. A plain C program rather than an OpenCL probe
 * so that the bound belongs to neither engine.
 *
 * usage: read_bandwidth [THREADS] [MIB]   (defaults 2 and 1024)
 * build: cc -O2 -march=native -pthread bench/read_bandwidth.c -o read_bandwidth */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PASSES = 7, MAX_THREADS = 64 };

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} slice;

static void *sum_slice(void *arg) {
    slice *s = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a += s->p[i];
        b += s->p[i + 1];
        c += s->p[i + 2];
        d += s->p[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    if (threads < 1 || threads > MAX_THREADS || mib < 64) {
        fprintf(stderr, "usage: read_bandwidth [THREADS 1..%d] [MIB >= 64]\n", MAX_THREADS);
        return 1;
    }
    size_t bytes = mib << 20, n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(bytes);
    if (!buf) {
        fprintf(stderr, "read_bandwidth: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    memset(buf, 1, bytes); /* touch every page before timing */
    slice s[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    double best = 0;
    uint64_t check = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        size_t per = n / (size_t)threads;
        double t0 = now_s();
        for (int t = 0; t < threads; t++) {
            s[t] = (slice){buf + (size_t)t * per, per, 0};
            pthread_create(&tid[t], NULL, sum_slice, &s[t]);
        }
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            check += s[t].sum;
        }
        double gbs = (double)(per * (size_t)threads * sizeof(uint64_t)) / (now_s() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    free(buf);
    printf("%.2f\n", best);
    return check == 0; /* uses the sums, so they are not optimised away */
}
