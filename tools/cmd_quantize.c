/* clinfer quantize: a model rewritten with quantized weights, each tensor's type chosen as
 * llama.cpp's llama-quantize chooses it (clinfer_quantize_file). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"

enum { OPT_ALLOW_REQUANTIZE = 512 };

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer quantize IN.gguf OUT.gguf TYPE [-t N] [--allow-requantize]\n\n"
            "Writes the model IN (F32, F16 or BF16 weights) to OUT with its matrices as TYPE,\n"
            "each tensor's type chosen as llama.cpp's llama-quantize chooses it: norms and\n"
            "biases keep theirs; the output matrix gets Q6_K and, in the K mixes, attn_v,\n"
            "ffn_down and attn_output get more bits on some layers. All metadata is kept.\n"
            "OUT appears only once complete.\n\n"
            "TYPE:");
    for (int t = 0; t < 64; t++) /* the library's list, in llama.cpp's numbering */
        if (clinfer_file_type_name((clinfer_file_type)t))
            fprintf(out, " %s", clinfer_file_type_name((clinfer_file_type)t));
    fprintf(out, " (Q3_K, Q4_K, Q5_K are their _M)\n\n"
                 "  -t, --threads N       threads; 0 is one per CPU (default); the file is the\n"
                 "                        same for any N\n"
                 "      --allow-requantize  quantize tensors that are quantized already (they\n"
                 "                        lose precision twice)\n"
                 "  -h, --help            this help\n");
}

static double mib(uint64_t bytes) {
    return (double)bytes / (1024.0 * 1024.0);
}

typedef struct {
    uint64_t in, out;
    size_t fallbacks;
} totals;

static void progress(const clinfer_quantize_tensor *t, void *user) {
    totals *sum = user;
    sum->in += t->from_bytes;
    sum->out += t->to_bytes;
    sum->fallbacks += t->fallback;
    fprintf(stderr, "[%4zu/%4zu] %-40s %-4s -> %-4s %9.3f MiB -> %9.3f MiB%s\n", t->index + 1,
            t->count, t->name, t->from_type, t->to_type, mib(t->from_bytes), mib(t->to_bytes),
            t->fallback ? "  (fallback: row length)" : "");
}

typedef struct {
    clinfer_quantize_params params;
    long threads;
} quantize_opts;

static int quantize_option(int opt, const char *arg, void *user) {
    quantize_opts *o = user;
    if (opt == 't') return cli_parse_long("--threads", arg, 0, 256, &o->threads) ? 1 : -1;
    if (opt != OPT_ALLOW_REQUANTIZE) return 0;
    o->params.allow_requantize = true;
    return 1;
}

int cmd_quantize(int argc, char **argv) {
    static const struct option options[] = {
        {"threads", required_argument, NULL, 't'},
        {"allow-requantize", no_argument, NULL, OPT_ALLOW_REQUANTIZE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    quantize_opts o = {.threads = 0};
    clinfer_quantize_params_default(&o.params);
    int rc = cli_parse_options("quantize", argc, argv, ":t:h", options, quantize_option, &o, usage);
    if (rc) return rc == 2 ? 0 : rc;
    if (argc - optind != 3)
        return cli_error("quantize: expected IN OUT TYPE, got %d argument%s (see clinfer "
                         "quantize --help)",
                         argc - optind, argc - optind == 1 ? "" : "s");
    const char *in = argv[optind], *out = argv[optind + 1], *type = argv[optind + 2];
    clinfer_quantize_params params = o.params;
    if (clinfer_file_type_from_name(type, &params.file_type) != CLINFER_OK)
        return cli_error("quantize: %s", clinfer_last_error());
    totals sum = {0};
    params.n_threads = (uint32_t)o.threads;
    params.progress = progress;
    params.progress_user = &sum;
    double t0 = cli_now_ms();
    clinfer_status st = clinfer_quantize_file(in, out, &params);
    if (st != CLINFER_OK) return cli_error("%s (%s)", clinfer_last_error(), clinfer_status_str(st));
    fprintf(stderr,
            "quantize: %s -> %s as %s: tensors %.2f MiB -> %.2f MiB in %.2f s; %zu fell back "
            "for their row length\n",
            in, out, clinfer_file_type_name(params.file_type), mib(sum.in), mib(sum.out),
            (cli_now_ms() - t0) / 1000.0, sum.fallbacks);
    return 0;
}
