/* clinfer verify: whether a device computes what the reference backend does, op by op
 * (clinfer_verify). Exit codes: 0 every row within the tolerance, 1 some past it, 2 an error. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_common.h"

#define EXIT_PAST_TOLERANCE 1
#define EXIT_ERROR 2

/* Mixes words, digits, punctuation and a non-ASCII character, cycled to fill -n tokens. */
#define DEFAULT_PROMPT                                                                             \
    "The capital of France is Paris. In 2023, about 2.1 million people lived there; its café "    \
    "terraces, museums and bridges draw visitors all year."

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer verify [-m MODEL] [-n N] [OPTIONS]\n\n"
            "Runs N tokens through the device and through the plain C reference backend, the\n"
            "first N-1 as one prefill batch and the last as a decode step, one op at a time, and\n"
            "compares every op's output: one row per op and output with its NMSE (squared error\n"
            "over the reference's energy), largest absolute error and the token position of it.\n"
            "A row fails past the NMSE bound of the model's weight type and activation format.\n"
            "Exit status: 0 all rows within the bound, 1 some past it, 2 an error.\n\n"
            "  -n, --n-tokens N     tokens to run (default 16)\n"
            "  -p, --prompt TEXT    the text whose tokens run, cycled to N (default: a fixed\n"
            "                       English sentence)\n"
            "      --kernel-path P  force cpu-rows or gpu-local-reduce kernels\n"
            "                       (default: $CLINFER_KERNEL_PATH, else the device's)\n"
            "      --kv-f32         KV cache in f32 instead of f16\n" CLI_ACT_HELP CLI_MODEL_HELP);
}

typedef struct {
    cli_model_opts model;
    clinfer_context_params cp;
    long n_tokens;
    const char *prompt;
} verify_opts;

enum { OPT_KV_F32 = OPT_KERNEL_PATH + 1 };

static int verify_option(int opt, const char *arg, void *user) {
    verify_opts *o = user;
    int used = cli_model_option(opt, arg, &o->model);
    if (used) return used;
    switch (opt) {
    case 'n':
        return cli_parse_long("-n", arg, 1, 4096, &o->n_tokens) ? 1 : -1;
    case 'p':
        o->prompt = arg;
        return 1;
    case OPT_KERNEL_PATH:
        if (clinfer_kernel_path_parse(arg, &o->model.params.options.kernel_path) == CLINFER_OK)
            return 1;
        cli_error("--kernel-path: %s", clinfer_last_error());
        return -1;
    case OPT_KV_F32:
        o->cp.kv_f32 = true;
        return 1;
    default:
        return cli_act_option(opt, arg, &o->cp.activations);
    }
}

/* The prompt's tokens, cycled to n; 1 on an error (printed). */
static int make_tokens(const verify_opts *o, const char *path, int32_t **out) {
    clinfer_model *vocab = NULL;
    int32_t *tokens = NULL;
    size_t n = 0;
    cli_model_opts vo = {.path = path};
    clinfer_model_params_default(&vo.params);
    vo.params.vocab_only = true;
    int rc = cli_load_model(&vo, &vocab, NULL) ||
             cli_tokenize(vocab, o->prompt ? o->prompt : DEFAULT_PROMPT, true, true, &tokens, &n);
    clinfer_model_free(vocab);
    if (rc) return 1;
    if (n == 0) {
        free(tokens);
        return cli_error("verify: the prompt has no tokens");
    }
    *out = malloc((size_t)o->n_tokens * sizeof **out);
    if (!*out) {
        free(tokens);
        return cli_error("verify: out of memory for %ld tokens", o->n_tokens);
    }
    for (long i = 0; i < o->n_tokens; i++)
        (*out)[i] = tokens[(size_t)i % n];
    free(tokens);
    return 0;
}

static void layer_name(const clinfer_verify_report *r, int32_t layer, char *buf, size_t size) {
    if (layer < 0)
        snprintf(buf, size, "embd");
    else if ((uint32_t)layer == r->n_layer)
        snprintf(buf, size, "head");
    else
        snprintf(buf, size, "%d", (int)layer);
}

static void print_row(const clinfer_verify_report *r, const clinfer_verify_row *row) {
    char layer[16];
    layer_name(r, row->layer, layer, sizeof layer);
    printf("%-7s %5s  %-32s %-7s %10.3e %10.3e %5u %8.0e  %s\n", row->phase, layer, row->op,
           row->output, row->nmse, row->max_abs, row->worst_pos, row->bound,
           row->ok ? "ok" : "FAIL");
}

/* Where a row is, for the summary: "prefill layer 3 rmsnorm ffn_norm (y)". */
static void row_name(const clinfer_verify_report *r, const clinfer_verify_row *row, char *buf,
                     size_t size) {
    char layer[16];
    layer_name(r, row->layer, layer, sizeof layer);
    snprintf(buf, size, "%s %s%s %s (%s)", row->phase, row->layer >= 0 ? "layer " : "", layer,
             row->op, row->output);
}

static int report(const clinfer_verify_report *r, long n_tokens) {
    char where[160];
    printf("verify: %s against the reference backend: ", r->device);
    if (n_tokens > 1)
        printf("a prefill batch of %ld tokens, then a decode step\n", n_tokens - 1);
    else
        printf("one decode step\n");
    printf("tolerance (%s): NMSE <= %.0e for each op, %.0e for the whole evaluation's logits\n\n",
           r->tolerance, r->bound, r->bound_whole);
    printf("%-7s %5s  %-32s %-7s %10s %10s %5s %8s\n", "phase", "layer", "op", "output", "NMSE",
           "max abs", "pos", "bound");
    for (size_t i = 0; i < r->n_rows; i++)
        print_row(r, &r->rows[i]);
    const clinfer_verify_row *worst = &r->rows[r->worst];
    row_name(r, worst, where, sizeof where);
    printf("\nworst row: %s: NMSE %.3e, max abs %.3e at position %u\n", where, worst->nmse,
           worst->max_abs, worst->worst_pos);
    printf("next token after the last: %d on the device, %d on the reference%s\n", r->top_device,
           r->top_reference, r->top_device == r->top_reference ? "" : " (they differ)");
    if (!r->n_failed) {
        printf("verify: OK: all %zu op rows within NMSE %.0e, the whole evaluation within %.0e\n",
               r->n_rows - 1, r->bound, r->bound_whole);
        return 0;
    }
    const clinfer_verify_row *first = &r->rows[r->first_failed];
    row_name(r, first, where, sizeof where);
    printf("verify: FAILED: %zu of %zu rows past their bound; the first: %s: NMSE %.3e > %.0e\n",
           r->n_failed, r->n_rows, where, first->nmse, first->bound);
    return EXIT_PAST_TOLERANCE;
}

int cmd_verify(int argc, char **argv) {
    static const struct option options[] = {
        CLI_MODEL_OPTIONS,
        {"n-tokens", required_argument, NULL, 'n'},
        {"prompt", required_argument, NULL, 'p'},
        {"kernel-path", required_argument, NULL, OPT_KERNEL_PATH},
        CLI_ACT_OPTIONS,
        {"kv-f32", no_argument, NULL, OPT_KV_F32},
        {NULL, 0, NULL, 0}};
    verify_opts o = {.n_tokens = 16};
    cli_model_opts_init(&o.model);
    clinfer_context_params_default(&o.cp);
    int rc = cli_parse_options("verify", argc, argv, ":" CLI_MODEL_SHORT "n:p:", options,
                               verify_option, &o, usage);
    if (rc) return rc == 2 ? 0 : EXIT_ERROR;
    if (optind < argc) {
        cli_error("verify: unexpected argument '%s'", argv[optind]);
        return EXIT_ERROR;
    }

    char buf[4096];
    const char *path;
    int32_t *tokens = NULL;
    if (cli_model_path(&o.model, buf, sizeof buf, &path) || make_tokens(&o, path, &tokens))
        return EXIT_ERROR;
    clinfer_verify_report *r = NULL;
    clinfer_status st =
        clinfer_verify(path, &o.model.params, &o.cp, tokens, (size_t)o.n_tokens, &r);
    free(tokens);
    if (st != CLINFER_OK) {
        cli_error("verify: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        return EXIT_ERROR;
    }
    rc = report(r, o.n_tokens);
    clinfer_verify_report_free(r);
    return rc;
}
