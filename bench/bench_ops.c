/* bench_ops (bench/, built as build/bench_ops): the matrix kernels against the device's own
 * roofline, measured in one run.
 *   1. roofline probe (cl/probe.cl): read bandwidth of a streaming sum over 256 MiB, f32 FMA rate
 *   2. matvec (decode, n = 1) for every weight type over the shapes of SmolLM2-135M and of larger
 *      models: min and median time, GB/s of the bytes actually read (the weights as stored on
 *      the device, f32 scales included, + x) and the share of the probed bandwidth
 *   3. GEMM (prefill) 512 x 1536 x 576 per type: GFLOP/s (2 m n k / t), ours and CLBlast's
 *      over f32 x, ours over 8-bit x (k cut to whole blocks: 512 for the K types); -n N sets its
 *      512 (8: a decode step of 8 sequences in one batch)
 * Times are wall clock around enqueue + sync, min and median of SAMPLES samples after WARMUPS
 * warm-ups; a sample repeats the op until it lasts about 2 ms so launch and sync overheads of
 * tiny shapes are amortised the way a decode loop amortises them.
 * --check is the correctness mode: the same ops once each, on weights whose rows all differ,
 * against the reference backend; the NMSE of every op, exit 1 past CHECK_NMSE. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend.h"
#include "cli.h"
#include "clinfer.h"
#include "opencl/matmul_cl.h"
#include "opencl/program.h"

enum { WARMUPS = 2, SAMPLES = 10, MAX_REPS = 1000 };
/* Device against reference: both round x to 8 bits the same way, so what is left is the order
 * of float sums (measured up to about 1e-7 on PoCL). */
#define CHECK_NMSE 1e-5
enum { OPT_DEVICE = 256 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const double SAMPLE_MS = 2.0;

/* The weight types, in type-id order (from the type table). */
static size_t weight_types(clinfer_dtype out[CLINFER_DT_ID_LIMIT]) {
    size_t n = 0;
    for (uint32_t t = 0; t < CLINFER_DT_ID_LIMIT; t++)
        if (dtype_is_weight((clinfer_dtype)t)) out[n++] = (clinfer_dtype)t;
    return n;
}

static const int shapes[][2] = {{576, 576},   {192, 576},   {1536, 576},  {576, 1536},
                                {49152, 576}, {2048, 2048}, {8192, 2048}, {14336, 4096}};
static const int gemm_m = 1536, gemm_k = 576;

typedef struct {
    double min_ms, median_ms;
} timing;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times ops[0 .. n_ops) on be as one step, run again and again (see the banner). Returns 0, or
 * prints the error and returns 1. */
static int time_ops(clinfer_backend *be, const clinfer_op *ops, int n_ops, timing *t) {
    double samples[SAMPLES], once = 0;
    clinfer_status st = CLINFER_OK;
    for (int i = 0; i < WARMUPS * n_ops && st == CLINFER_OK; i++) {
        double t0 = now_ms();
        st = be->i->op(be->ctx, &ops[i % n_ops]);
        if (st == CLINFER_OK) st = be->i->sync(be->ctx);
        once = now_ms() - t0;
    }
    int reps = once > 0 ? (int)(SAMPLE_MS / once) : MAX_REPS;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    for (int s = 0; s < SAMPLES && st == CLINFER_OK; s++) {
        double t0 = now_ms();
        for (int r = 0; r < reps * n_ops && st == CLINFER_OK; r++)
            st = be->i->op(be->ctx, &ops[r % n_ops]);
        if (st == CLINFER_OK) st = be->i->sync(be->ctx);
        samples[s] = (now_ms() - t0) / reps;
    }
    if (st != CLINFER_OK) return cli_error("%s: %s", clinfer_status_str(st), clinfer_last_error());
    qsort(samples, SAMPLES, sizeof samples[0], cmp_double);
    t->min_ms = samples[0];
    t->median_ms = (samples[SAMPLES / 2 - 1] + samples[SAMPLES / 2]) / 2;
    return 0;
}

/* ---- roofline probe -------------------------------------------------------------------- */

typedef struct {
    double read_gbps, fma_gflops;
} roofline;

static int time_kernel(cl_backend_ctx *b, cl_kernel kernel, size_t global, size_t local,
                       double *best_ms) {
    *best_ms = INFINITY;
    for (int i = 0; i < WARMUPS + SAMPLES; i++) {
        double t0 = now_ms();
        cl_int err =
            clEnqueueNDRangeKernel(b->queue, kernel, 1, NULL, &global, &local, 0, NULL, NULL);
        if (err == CL_SUCCESS) err = clFinish(b->queue);
        if (err != CL_SUCCESS) return cli_error("probe kernel: %s", clinfer_status_str(err));
        double ms = now_ms() - t0;
        if (i >= WARMUPS && ms < *best_ms) *best_ms = ms;
    }
    return 0;
}

static int probe(cl_backend_ctx *b, roofline *r) {
    const size_t floats = (size_t)64 << 20; /* 256 MiB: far beyond any cache */
    const cl_int per_item = 2048, iters = 4096;
    const size_t items = floats / (size_t)per_item, local = 8;
    const size_t fma_items = (size_t)b->info.compute_units * 64;
    const float a = 0.999f, c = 0.001f;
    cl_program program = NULL;
    cl_kernel stream = NULL, fma = NULL;
    cl_mem x = NULL, out = NULL;
    cl_int err = CL_SUCCESS;
    int rc = 1;
    double ms;
    clinfer_status st =
        cl_program_build(b->context, b->device, &b->info, b->cache_dir, "probe.cl", NULL, &program);
    if (st != CLINFER_OK) {
        cli_error("probe.cl: %s", clinfer_last_error());
        goto cleanup;
    }
    stream = clCreateKernel(program, "stream_sum", &err);
    if (err == CL_SUCCESS) fma = clCreateKernel(program, "fma_peak", &err);
    if (err == CL_SUCCESS)
        x = clCreateBuffer(b->context, CL_MEM_READ_ONLY, floats * sizeof(float), NULL, &err);
    if (err == CL_SUCCESS)
        out = clCreateBuffer(b->context, CL_MEM_WRITE_ONLY,
                             (items > fma_items ? items : fma_items) * sizeof(float), NULL, &err);
    const float zero = 0.0f;
    if (err == CL_SUCCESS)
        err = clEnqueueFillBuffer(b->queue, x, &zero, sizeof zero, 0, floats * sizeof(float), 0,
                                  NULL, NULL);
    if (err == CL_SUCCESS) err = clSetKernelArg(stream, 0, sizeof x, &x);
    if (err == CL_SUCCESS) err = clSetKernelArg(stream, 1, sizeof per_item, &per_item);
    if (err == CL_SUCCESS) err = clSetKernelArg(stream, 2, sizeof out, &out);
    if (err == CL_SUCCESS) err = clSetKernelArg(fma, 0, sizeof out, &out);
    if (err == CL_SUCCESS) err = clSetKernelArg(fma, 1, sizeof iters, &iters);
    if (err == CL_SUCCESS) err = clSetKernelArg(fma, 2, sizeof a, &a);
    if (err == CL_SUCCESS) err = clSetKernelArg(fma, 3, sizeof c, &c);
    if (err != CL_SUCCESS) {
        cli_error("probe setup: %s", clinfer_status_str(err));
        goto cleanup;
    }
    if (time_kernel(b, stream, items, local, &ms)) goto cleanup;
    r->read_gbps = (double)floats * sizeof(float) / (ms * 1e6);
    if (time_kernel(b, fma, fma_items, local, &ms)) goto cleanup;
    r->fma_gflops = (double)fma_items * iters * 6 * 16 * 2 / (ms * 1e6); /* 6 chains of 16 */
    rc = 0;
cleanup:
    if (x) clReleaseMemObject(x);
    if (out) clReleaseMemObject(out);
    if (stream) clReleaseKernel(stream);
    if (fma) clReleaseKernel(fma);
    if (program) clReleaseProgram(program);
    return rc;
}

/* ---- operands -------------------------------------------------------------------------- */

/* An m x k weight of type as stored. Timing: one pseudo-random row quantized once and repeated
 * (the data does not change the kernels' work, and quantizing 58M elements would dominate the
 * run); distinct (--check): every row different, so that a row read from the wrong place
 * shows. NULL when out of memory. */
static unsigned char *weight_data(clinfer_dtype type, int m, int k, bool distinct) {
    size_t row = dtype_row_bytes(type, (size_t)k);
    float *f = malloc((size_t)k * sizeof *f);
    unsigned char *data = malloc(row * (size_t)m);
    for (int r = 0; f && data && r < m; r++) {
        if (r > 0 && !distinct) {
            memcpy(data + row * (size_t)r, data, row);
            continue;
        }
        for (int i = 0; i < k; i++)
            f[i] = (float)(((long)i * 7919 + (long)r * 104729) % 2001 - 1000) / 1000.0f;
        quantize_row(type, f, data + row * (size_t)r, (size_t)k);
    }
    free(f);
    if (!f) {
        free(data);
        return NULL;
    }
    return data;
}

static int make_weight(clinfer_backend *be, clinfer_dtype type, int m, int k,
                       const unsigned char *data, clinfer_buffer **out) {
    clinfer_status st =
        data ? be->i->weight_create(be->ctx, type, m, k, data, out) : CLINFER_ERR_OUT_OF_MEMORY;
    if (st != CLINFER_OK)
        return cli_error("%s weight %d x %d: %s", dtype_name(type), m, k, clinfer_last_error());
    return 0;
}

static int make_buffer(clinfer_backend *be, size_t floats, clinfer_buffer **out) {
    float *v = malloc(floats * sizeof *v);
    clinfer_status st = CLINFER_ERR_OUT_OF_MEMORY;
    if (v) {
        for (size_t i = 0; i < floats; i++)
            v[i] = (float)(i % 17) / 17.0f - 0.5f;
        st = be->i->buffer_alloc(be->ctx, floats * sizeof *v, out);
        if (st == CLINFER_OK) st = be->i->buffer_write(be->ctx, *out, 0, floats * sizeof *v, v);
    }
    free(v);
    if (st != CLINFER_OK)
        return cli_error("buffer of %zu floats: %s", floats, clinfer_last_error());
    return 0;
}

/* y[n][m] = x[n][k] . W^T on be: timed (check NULL), or run once and compared with the
 * reference backend `check`, *nmse receiving the NMSE of y. *weight_bytes receives the weight's
 * size as stored. x_q8: x rounded to 8 bits first by a ROUND_Q8, timed with the matmul. */
static int bench_matmul(clinfer_backend *be, clinfer_backend *check, clinfer_dtype type, int m,
                        int k, int n, bool x_q8, timing *t, double *weight_bytes, double *nmse) {
    clinfer_backend *sides[2] = {be, check};
    clinfer_buffer *w[2] = {NULL, NULL}, *x[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
    clinfer_buffer *xq[2] = {NULL, NULL};
    float *out[2] = {NULL, NULL};
    unsigned char *data = weight_data(type, m, k, check != NULL);
    size_t ny = (size_t)n * m;
    int rc = 0;
    for (int s = 0; s < (check ? 2 : 1) && !rc; s++) {
        clinfer_backend *on = sides[s];
        rc = make_weight(on, type, m, k, data, &w[s]);
        if (!rc) rc = make_buffer(on, (size_t)n * k, &x[s]);
        if (!rc) rc = make_buffer(on, (size_t)n * k, &xq[s]);
        if (!rc) rc = make_buffer(on, ny, &y[s]);
        if (rc) break;
        int block = (int)dtype_q8_act_block(type);
        clinfer_op ops[2] = {
            {.kind = CLINFER_OP_ROUND_Q8,
             .round_q8 = {.x = {x[s], 0}, .y = {xq[s], 0}, .n = n, .k = k, .block = block}},
            {.kind = CLINFER_OP_MATMUL,
             .matmul = {.w = w[s],
                        .x = {x_q8 ? xq[s] : x[s], 0},
                        .y = {y[s], 0},
                        .m = m,
                        .k = k,
                        .n = n,
                        .x_q8 = x_q8}}};
        const clinfer_op *step = x_q8 ? ops : ops + 1;
        if (!check) {
            rc = time_ops(on, step, x_q8 ? 2 : 1, t);
            break;
        }
        clinfer_status st = on->i->op(on->ctx, &step[0]);
        if (st == CLINFER_OK && x_q8) st = on->i->op(on->ctx, &step[1]);
        if (st == CLINFER_OK && !(out[s] = malloc(ny * sizeof(float))))
            st = CLINFER_ERR_OUT_OF_MEMORY;
        if (st == CLINFER_OK) st = on->i->buffer_read(on->ctx, y[s], 0, ny * sizeof(float), out[s]);
        if (st != CLINFER_OK)
            rc = cli_error("%s matmul %d x %d x %d on %s: %s", dtype_name(type), n, m, k,
                           on->i->name(on->ctx), clinfer_last_error());
    }
    if (!rc) *weight_bytes = (double)w[0]->head.bytes;
    if (!rc && check) {
        double num = 0, den = 0;
        for (size_t i = 0; i < ny; i++) {
            double d = (double)out[0][i] - out[1][i];
            num += d * d;
            den += (double)out[1][i] * out[1][i];
        }
        *nmse = den > 0 ? num / den : num;
    }
    for (int s = 0; s < 2; s++) {
        if (w[s]) sides[s]->i->buffer_free(sides[s]->ctx, w[s]);
        if (x[s]) sides[s]->i->buffer_free(sides[s]->ctx, x[s]);
        if (xq[s]) sides[s]->i->buffer_free(sides[s]->ctx, xq[s]);
        if (y[s]) sides[s]->i->buffer_free(sides[s]->ctx, y[s]);
        free(out[s]);
    }
    free(data);
    return rc;
}

/* One op of --check: its line (what NULL: none), the worst NMSE and the failures so far. */
static void note_check(const char *what, clinfer_dtype type, bool q8, int n, int m, int k,
                       double nmse, double *worst, int *failed) {
    bool ok = nmse <= CHECK_NMSE; /* NaN fails too */
    *worst = nmse > *worst || nmse != nmse ? nmse : *worst;
    *failed += !ok;
    if (what)
        printf("%-12s %-5s %-3s n %-3d %6d x %-5d NMSE %.2e %s\n", what, dtype_name(type),
               q8 ? "q8" : "f32", n, m, k, nmse, ok ? "ok" : "FAIL");
}

/* ---- command --------------------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out, "usage: bench_ops [--device SPEC] [--type TYPE] [-n N] [--json] [--check]\n\n"
                 "Times the matvec and GEMM kernels for every weight type next to the device's\n"
                 "measured read bandwidth and FMA rate.\n\n"
                 "      --check          correctness instead of speed: each op once, against the\n"
                 "                       reference backend (NMSE; exit 1 past 1e-5)\n"
                 "      --device SPEC    OpenCL device: index, cpu, gpu or a name part\n"
                 "      --type TYPE      only this weight type (F32, F16, Q8_0, Q4_0, Q4_1, Q4_K,\n"
                 "                       Q6_K)\n"
                 "  -n N                 the GEMM's columns (512; 8: a batch of 8 decode steps)\n"
                 "      --json           one JSON object on stdout instead of the table\n"
                 "  -h, --help           this help\n");
}

int main(int argc, char **argv) {
    cli_program = "bench_ops";
    static const struct option options[] = {{"device", required_argument, NULL, OPT_DEVICE},
                                            {"json", no_argument, NULL, 'j'},
                                            {"type", required_argument, NULL, 't'},
                                            {"check", no_argument, NULL, 'c'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    const char *device = NULL, *only = NULL;
    bool json = false, checking = false;
    int opt;
    opterr = 0;
    int gemm_n = 512;
    while ((opt = getopt_long(argc, argv, ":hn:", options, NULL)) != -1) {
        if (opt == OPT_DEVICE)
            device = optarg;
        else if (opt == 'j')
            json = true;
        else if (opt == 't')
            only = optarg;
        else if (opt == 'c')
            checking = true;
        else if (opt == 'n') {
            if ((gemm_n = atoi(optarg)) < 1)
                return cli_error("-n '%s': the GEMM's columns, a positive number", optarg);
        } else if (opt == 'h') {
            usage(stdout);
            return 0;
        } else
            return cli_error("unknown option or missing value (see --help)");
    }
    if (optind < argc) return cli_error("unexpected argument '%s'", argv[optind]);
    clinfer_dtype bench_types[CLINFER_DT_ID_LIMIT];
    size_t n_types = weight_types(bench_types);
    bool known = !only;
    for (size_t t = 0; t < n_types; t++)
        known |= only && !strcasecmp(only, dtype_name(bench_types[t]));
    if (!known) return cli_error("--type '%s' is not a weight type (see --help)", only);

    size_t index = 0;
    char reason[256];
    clinfer_status st = clinfer_device_select(device, &index, reason, sizeof reason);
    if (st != CLINFER_OK) return cli_error("no device: %s", clinfer_last_error());
    clinfer_backend *be = NULL, *blas = NULL, *check = NULL;
    if ((st = cl_backend_create(index, NULL, &be)) != CLINFER_OK)
        return cli_error("%s", clinfer_last_error());
    if (checking && ref_backend_create(&check) != CLINFER_OK) {
        backend_free(be);
        return cli_error("%s", clinfer_last_error());
    }
    double worst = 0;
    int failed = 0, checked = 0;
    cl_backend_ctx *b = be->ctx;
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = NAN;
    cJSON *root = cJSON_CreateObject(), *mv = NULL, *gemm = NULL;
    cJSON_AddStringToObject(root, "device", be->i->describe(be->ctx));
    cJSON *la = cJSON_AddArrayToObject(root, "load_average");
    for (int i = 0; i < 3; i++)
        cJSON_AddItemToArray(la, cJSON_CreateNumber(load[i]));
    if (!json)
        printf("%s\nload average %.2f %.2f %.2f\n", be->i->describe(be->ctx), load[0], load[1],
               load[2]);

    roofline roof = {0, 0};
    int rc = checking ? 0 : probe(b, &roof);
    if (rc) goto done;
    if (!check) {
        cJSON *r = cJSON_AddObjectToObject(root, "roofline");
        cJSON_AddNumberToObject(r, "read_gbps", roof.read_gbps);
        cJSON_AddNumberToObject(r, "fma_gflops", roof.fma_gflops);
    }
    if (!json && !check)
        printf("roofline: read %.1f GB/s, f32 FMA %.1f GFLOP/s\n\n"
               "matvec (n = 1; x: f32 activations, or q8 rounded to 8 bits first)\n"
               "%-5s %-3s %13s %10s %10s %8s %7s\n",
               roof.read_gbps, roof.fma_gflops, "type", "x", "m x k", "min ms", "median ms", "GB/s",
               "% bw");

    mv = cJSON_AddArrayToObject(root, "matvec");
    for (size_t t = 0; t < n_types; t++)
        for (int q8 = 0; q8 < 2; q8++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                clinfer_dtype type = bench_types[t];
                int m = shapes[s][0], k = shapes[s][1];
                if (k % (int)dtype_block_elems(type) ||
                    (only && strcasecmp(only, dtype_name(type))) ||
                    (q8 && dtype_block_elems(type) == 1))
                    continue;
                timing tm;
                double weight_bytes = 0, nmse = 0;
                if ((rc = bench_matmul(be, check, type, m, k, 1, q8, &tm, &weight_bytes, &nmse)))
                    goto done;
                if (check) {
                    note_check(json ? NULL : "matvec", type, q8, 1, m, k, nmse, &worst, &failed);
                    checked++;
                    continue;
                }
                double bytes = weight_bytes + 4.0 * k;
                double gbps = bytes / (tm.min_ms * 1e6), pct = 100 * gbps / roof.read_gbps;
                cJSON *o = cJSON_CreateObject();
                cJSON_AddItemToArray(mv, o);
                cJSON_AddStringToObject(o, "type", dtype_name(type));
                cJSON_AddNumberToObject(o, "m", m);
                cJSON_AddNumberToObject(o, "k", k);
                cJSON_AddBoolToObject(o, "x_q8", q8);
                cJSON_AddNumberToObject(o, "min_ms", tm.min_ms);
                cJSON_AddNumberToObject(o, "median_ms", tm.median_ms);
                cJSON_AddNumberToObject(o, "gbps", gbps);
                cJSON_AddNumberToObject(o, "pct_bandwidth", pct);
                if (!json) {
                    printf("%-5s %-3s %6d x %-5d %10.4f %10.4f %8.1f %6.1f%%\n", dtype_name(type),
                           q8 ? "q8" : "f32", m, k, tm.min_ms, tm.median_ms, gbps, pct);
                    fflush(stdout);
                }
            }

    /* CLBlast's side of the f32 GEMM runs on a second context that routes f32 GEMM to it. */
    if (cl_backend_create(index, &(clinfer_backend_options){.clblast = CLINFER_ON}, &blas) !=
            CLINFER_OK ||
        !cl_matmul_clblast(blas->ctx)) {
        backend_free(blas);
        blas = NULL;
    }
    if (!json && !check)
        printf("\nGEMM %d x %d x %d (n x m x k)\n%-5s %-8s %10s %10s %9s %7s\n", gemm_n, gemm_m,
               gemm_k, "type", "kernel", "min ms", "median ms", "GFLOP/s", "% fma");
    gemm = cJSON_AddArrayToObject(root, "gemm");
    /* sides: f32 x (ours, then CLBlast's for f32 weights), then 8-bit x for quantized weights
     * (k cut to whole blocks) */
    for (size_t t = 0; t < n_types; t++)
        for (int side = 0; side < 3; side++) {
            clinfer_dtype type = bench_types[t];
            int blk = (int)dtype_block_elems(type), q8 = side == 2;
            int k = q8 ? gemm_k / blk * blk : gemm_k;
            if (k % blk || (only && strcasecmp(only, dtype_name(type)))) continue;
            clinfer_backend *on = side == 1 ? blas : be;
            if (side == 1 && (type != CLINFER_DT_F32 || !blas)) continue;
            if (q8 && blk == 1) continue;
            timing tm;
            double weight_bytes = 0, nmse = 0;
            if ((rc = bench_matmul(on, check, type, gemm_m, k, gemm_n, q8, &tm, &weight_bytes,
                                   &nmse)))
                goto done;
            if (check) {
                note_check(json        ? NULL
                           : side == 1 ? "gemm clblast"
                                       : "gemm",
                           type, q8, gemm_n, gemm_m, k, nmse, &worst, &failed);
                checked++;
                continue;
            }
            double gflops = 2.0 * gemm_m * gemm_n * k / (tm.min_ms * 1e6);
            const char *kernel = side == 1 ? "clblast" : q8 ? "clinf-q8" : "clinfer";
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(gemm, o);
            cJSON_AddStringToObject(o, "type", dtype_name(type));
            cJSON_AddStringToObject(o, "kernel", kernel);
            cJSON_AddNumberToObject(o, "min_ms", tm.min_ms);
            cJSON_AddNumberToObject(o, "median_ms", tm.median_ms);
            cJSON_AddNumberToObject(o, "gflops", gflops);
            cJSON_AddNumberToObject(o, "pct_fma", 100 * gflops / roof.fma_gflops);
            if (!json) {
                printf("%-5s %-8s %10.3f %10.3f %9.1f %6.1f%%\n", dtype_name(type), kernel,
                       tm.min_ms, tm.median_ms, gflops, 100 * gflops / roof.fma_gflops);
                fflush(stdout);
            }
        }
    if (!blas && !json) printf("(CLBlast: not built in or not available on this device)\n");
    if (check) {
        cJSON *c = cJSON_AddObjectToObject(root, "check");
        cJSON_AddNumberToObject(c, "ops", checked);
        cJSON_AddNumberToObject(c, "failed", failed);
        cJSON_AddNumberToObject(c, "worst_nmse", worst);
        if (!json)
            printf("check: %d ops against the reference backend, worst NMSE %.2e, %d past %.0e\n",
                   checked, worst, failed, CHECK_NMSE);
        rc = failed > 0;
    }
done:
    if (json && !rc) {
        char *text = cJSON_Print(root);
        if (text) puts(text);
        free(text);
    }
    cJSON_Delete(root);
    backend_free(blas);
    backend_free(check);
    backend_free(be);
    return rc;
}
