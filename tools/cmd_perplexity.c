/* clinfer perplexity: the perplexity of a model on a text, computed as llama-perplexity computes
 * it so that the two figures compare on the same file and text: the text is tokenized whole
 * (BOS first where the model's prompts start with one), cut into chunks of n_ctx tokens, each
 * chunk evaluated from an empty context with its first token replaced by BOS, and the second
 * half of each chunk scored (the logits at position j predict token j + 1, for j from n_ctx / 2
 * to n_ctx - 2). With --kl-divergence-base FILE a run saves its log-probabilities; adding
 * --kl-divergence compares this run with that saved one instead (kld_file.h, scores.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "kld_file.h"
#include "scores.h"

enum { OPT_CHUNKS = 512, OPT_JSON, OPT_KLD_BASE, OPT_KLD };

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer perplexity [-m MODEL] -f TEXT [-c 512] [--chunks N] [-b B] [--json]\n"
            "       clinfer perplexity [-m MODEL] -f TEXT --kl-divergence-base BASE\n"
            "       clinfer perplexity [-m MODEL] --kl-divergence-base BASE --kl-divergence\n\n"
            "The perplexity of MODEL on the text of file TEXT, computed as llama-perplexity\n"
            "does (chunks of -c tokens from an empty context, each starting with BOS, the\n"
            "second half of each scored). The running estimate goes to stderr per chunk, the\n"
            "final one with its uncertainty to stdout.\n\n"
            "  -f, --file TEXT      the text to score (required unless --kl-divergence)\n"
            "  -c, --ctx-size N     tokens per chunk (default 512)\n"
            "      --chunks N       score at most N chunks (default: all the text holds)\n"
            "  -b, --batch-size B   tokens per evaluation step (default: min(N, 512))\n"
            "      --kl-divergence-base BASE  save this run's log-probabilities to BASE, or\n"
            "                       with --kl-divergence compare this run with BASE: KL\n"
            "                       divergence (mean, percentiles), top-1 agreement and the\n"
            "                       perplexity ratio, on BASE's tokens\n"
            "      --kl-divergence  compare with BASE instead of writing it\n"
            "      --json           the results as one JSON object on stdout\n" CLI_ACT_HELP
                CLI_MODEL_HELP);
}

typedef struct {
    cli_model_opts model;
    const char *file, *kld_base;
    bool kld, json;
    clinfer_activations act;
    long n_ctx, n_chunks, n_batch;
} ppl_opts;

static int ppl_option(int opt, const char *arg, void *user) {
    ppl_opts *o = user;
    int used = cli_model_option(opt, arg, &o->model);
    if (used) return used;
    switch (opt) {
    case 'f':
        o->file = arg;
        return 1;
    case 'c':
        return cli_parse_long("-c", arg, 2, 1 << 20, &o->n_ctx) ? 1 : -1;
    case 'b':
        return cli_parse_long("-b", arg, 1, 1 << 20, &o->n_batch) ? 1 : -1;
    case OPT_CHUNKS:
        return cli_parse_long("--chunks", arg, 1, 1 << 30, &o->n_chunks) ? 1 : -1;
    case OPT_KLD_BASE:
        o->kld_base = arg;
        return 1;
    case OPT_KLD:
        o->kld = true;
        return 1;
    case OPT_JSON:
        o->json = true;
        return 1;
    default:
        return cli_act_option(opt, arg, &o->act);
    }
}

static int parse(int argc, char **argv, ppl_opts *o) {
    static const struct option options[] = {
        CLI_MODEL_OPTIONS,
        {"file", required_argument, NULL, 'f'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch-size", required_argument, NULL, 'b'},
        {"chunks", required_argument, NULL, OPT_CHUNKS},
        {"kl-divergence-base", required_argument, NULL, OPT_KLD_BASE},
        {"kl-divergence", no_argument, NULL, OPT_KLD},
        {"json", no_argument, NULL, OPT_JSON},
        CLI_ACT_OPTIONS,
        {NULL, 0, NULL, 0}};
    int rc = cli_parse_options("perplexity", argc, argv, ":" CLI_MODEL_SHORT "f:c:b:", options,
                               ppl_option, o, usage);
    if (rc) return rc;
    if (optind < argc)
        return cli_error("perplexity: unexpected argument '%s' (the text file goes after -f)",
                         argv[optind]);
    if (o->kld && !o->kld_base)
        return cli_error("perplexity: --kl-divergence needs --kl-divergence-base BASE");
    if (!o->kld && !o->file) return cli_error("perplexity: no text; pass a file with -f TEXT");
    return 0;
}

/* What one run scores: the tokens, cut into n_chunk chunks of n_ctx. */
typedef struct {
    int32_t *tokens;
    size_t n_tokens;
    uint32_t n_ctx, n_chunk, first; /* first: the first scored position of a chunk */
} ppl_plan;

/* The tokens and chunking of a run: from the text, or from the base of a comparison. */
static int plan_run(const ppl_opts *o, const clinfer_model *m, kld_file *base, ppl_plan *p) {
    if (o->kld) {
        if (kld_file_open(base, o->kld_base, &p->tokens)) return 1;
        if (o->n_ctx && (uint32_t)o->n_ctx != base->n_ctx)
            return cli_error("perplexity: -c %ld, but the base '%s' was made with -c %u", o->n_ctx,
                             o->kld_base, base->n_ctx);
        p->n_ctx = base->n_ctx;
        p->n_chunk = base->n_chunk;
        if (o->n_chunks && (uint32_t)o->n_chunks < p->n_chunk) p->n_chunk = (uint32_t)o->n_chunks;
        p->n_tokens = (size_t)base->n_chunk * base->n_ctx;
    } else {
        size_t len;
        char *text = cli_read_file("perplexity", o->file, &len);
        if (!text) return 1;
        int rc = cli_tokenize(m, text, false, true, &p->tokens, &p->n_tokens);
        free(text);
        if (rc) return 1;
        p->n_ctx = o->n_ctx ? (uint32_t)o->n_ctx : 512;
        if (p->n_tokens < 2 * (size_t)p->n_ctx)
            return cli_error("perplexity: '%s' is %zu tokens; a context of %u needs at least %u",
                             o->file, p->n_tokens, p->n_ctx, 2 * p->n_ctx);
        size_t most = p->n_tokens / p->n_ctx;
        p->n_chunk =
            (uint32_t)(o->n_chunks && (size_t)o->n_chunks < most ? (size_t)o->n_chunks : most);
    }
    p->first = p->n_ctx / 2;
    return 0;
}

typedef struct {
    nll_stats nll;
    kld_stats kld;
} ppl_result;

/* Evaluates chunk c and scores its positions into lp (rows of n_vocab log-probabilities). */
static int score_chunk(clinfer_context *ctx, const clinfer_model *m, const ppl_plan *p, uint32_t c,
                       float *lp, size_t n_vocab) {
    const int32_t *chunk = p->tokens + (size_t)c * p->n_ctx;
    int32_t *ids = malloc(p->n_ctx * sizeof *ids);
    if (!ids) return cli_error("perplexity: no memory for a chunk");
    memcpy(ids, chunk, p->n_ctx * sizeof *ids);
    if (clinfer_token_add_bos(m) && clinfer_token_bos(m) >= 0) ids[0] = clinfer_token_bos(m);
    clinfer_context_reset(ctx);
    clinfer_status st = clinfer_eval(ctx, ids, p->n_ctx);
    free(ids);
    for (uint32_t j = p->first; st == CLINFER_OK && j + 1 < p->n_ctx; j++) {
        const float *logits;
        st = clinfer_get_logits_ith(ctx, (int32_t)j, &logits, NULL);
        if (st == CLINFER_OK) scores_log_softmax(logits, n_vocab, lp + (j - p->first) * n_vocab);
    }
    if (st != CLINFER_OK)
        return cli_error("perplexity: chunk %u: %s (%s)", c + 1, clinfer_last_error(),
                         clinfer_status_str(st));
    return 0;
}

/* Scores every chunk; writes or compares with the base where asked. */
static int run_chunks(const ppl_opts *o, clinfer_context *ctx, const clinfer_model *m,
                      size_t n_vocab, const ppl_plan *p, kld_file *base, ppl_result *r) {
    size_t rows = p->n_ctx - 1 - p->first;
    float *lp = malloc(rows * n_vocab * sizeof *lp);
    float *base_lp = o->kld ? malloc(rows * n_vocab * sizeof *base_lp) : NULL;
    int rc =
        !lp || (o->kld && !base_lp) ? cli_error("perplexity: no memory for %zu rows", rows) : 0;
    double t0 = cli_now_ms();
    for (uint32_t c = 0; !rc && c < p->n_chunk; c++) {
        if ((rc = score_chunk(ctx, m, p, c, lp, n_vocab))) break;
        if (o->kld && (rc = kld_file_read_chunk(base, base_lp))) break;
        if (o->kld_base && !o->kld && (rc = kld_file_write_chunk(base, lp))) break;
        const int32_t *next = p->tokens + (size_t)c * p->n_ctx + p->first + 1;
        for (size_t i = 0; i < rows; i++) {
            nll_add(&r->nll, -(double)lp[i * n_vocab + (size_t)next[i]]);
            if (o->kld &&
                !kld_add(&r->kld, base_lp + i * n_vocab, lp + i * n_vocab, n_vocab, next[i]))
                rc = cli_error("perplexity: no memory for the KL divergence");
        }
        if (c == 0)
            fprintf(stderr, "perplexity: %.2f s per chunk, about %.0f s for %u chunks\n",
                    (cli_now_ms() - t0) / 1e3, (cli_now_ms() - t0) / 1e3 * p->n_chunk, p->n_chunk);
        fprintf(stderr, "[%u]%.4f,%s", c + 1, nll_ppl(&r->nll), c + 1 == p->n_chunk ? "\n" : "");
    }
    free(lp);
    free(base_lp);
    return rc;
}

static const double percentiles[] = {100, 99.9, 99, 95, 90, 50, 10, 5, 1, 0};

static void print_text(const ppl_opts *o, ppl_result *r) {
    printf("Final estimate: PPL = %.4f +/- %.5f\n", nll_ppl(&r->nll), nll_ppl_error(&r->nll));
    if (!o->kld) return;
    kld_stats *k = &r->kld;
    double mean = k->kld_sum / (double)k->n, var = k->kld_sum2 / (double)k->n - mean * mean;
    printf("Mean PPL(base)   = %.4f +/- %.5f\n", nll_ppl(&k->base), nll_ppl_error(&k->base));
    printf("PPL(run)/PPL(base) = %.6f\n", nll_ppl(&k->run) / nll_ppl(&k->base));
    printf("Mean KLD         = %.6f +/- %.6f\n", mean,
           k->n > 1 && var > 0 ? sqrt(var / (double)(k->n - 1)) : 0.0);
    for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++)
        printf("KLD %5.1f%%       = %.6f\n", percentiles[i], kld_percentile(k, percentiles[i]));
    printf("Same top token   = %.3f%% of %zu\n", 100.0 * (double)k->same_top / (double)k->n, k->n);
}

static void print_json(const ppl_opts *o, const ppl_plan *p, ppl_result *r) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "n_ctx", p->n_ctx);
    cJSON_AddNumberToObject(root, "chunks", p->n_chunk);
    cJSON_AddNumberToObject(root, "tokens_scored", (double)r->nll.count);
    cJSON_AddNumberToObject(root, "ppl", nll_ppl(&r->nll));
    cJSON_AddNumberToObject(root, "ppl_error", nll_ppl_error(&r->nll));
    if (o->kld) {
        kld_stats *k = &r->kld;
        cJSON *kld = cJSON_AddObjectToObject(root, "kl_divergence");
        cJSON_AddNumberToObject(kld, "ppl_base", nll_ppl(&k->base));
        cJSON_AddNumberToObject(kld, "ppl_ratio", nll_ppl(&k->run) / nll_ppl(&k->base));
        cJSON_AddNumberToObject(kld, "mean", k->kld_sum / (double)k->n);
        cJSON *pct = cJSON_AddObjectToObject(kld, "percentiles");
        for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++) {
            char name[16];
            snprintf(name, sizeof name, "%g", percentiles[i]);
            cJSON_AddNumberToObject(pct, name, kld_percentile(k, percentiles[i]));
        }
        cJSON_AddNumberToObject(kld, "same_top", (double)k->same_top / (double)k->n);
    }
    char *text = cJSON_Print(root);
    if (text) puts(text);
    free(text);
    cJSON_Delete(root);
}

int cmd_perplexity(int argc, char **argv) {
    ppl_opts o = {0};
    cli_model_opts_init(&o.model);
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL;
    kld_file base = {0};
    ppl_plan p = {0};
    ppl_result r = {0};
    rc = 1;
    clinfer_model_info info;
    bool writing = false;
    if (cli_load_model(&o.model, &m, NULL) || plan_run(&o, m, &base, &p)) goto cleanup;
    clinfer_model_get_info(m, &info);
    if (o.kld && base.n_vocab != info.n_vocab) {
        cli_error("perplexity: the base '%s' has a vocabulary of %u, the model %u", o.kld_base,
                  base.n_vocab, info.n_vocab);
        goto cleanup;
    }
    writing = o.kld_base && !o.kld;
    if (writing && kld_file_create(&base, o.kld_base, info.n_vocab, p.n_ctx, p.n_chunk,
                                   p.n_ctx - 1 - p.first, p.tokens))
        goto cleanup;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = p.n_ctx;
    cp.n_batch = (uint32_t)(o.n_batch ? o.n_batch : 512);
    cp.logits_all = true;
    cp.activations = o.act;
    clinfer_status st = clinfer_context_create(m, &cp, &ctx);
    if (st != CLINFER_OK) {
        cli_error("perplexity: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        goto cleanup;
    }
    fprintf(stderr, "perplexity: %zu tokens, %u chunks of %u, scoring positions %u to %u of each\n",
            p.n_tokens, p.n_chunk, p.n_ctx, p.first, p.n_ctx - 2);
    if (run_chunks(&o, ctx, m, info.n_vocab, &p, &base, &r) || kld_file_close(&base)) goto cleanup;
    if (o.json)
        print_json(&o, &p, &r);
    else
        print_text(&o, &r);
    rc = 0;
cleanup:
    kld_file_close(&base);
    if (rc && writing) remove(o.kld_base); /* no partial base to compare with later */
    kld_free(&r.kld);
    free(p.tokens);
    clinfer_context_free(ctx);
    clinfer_model_free(m);
    return rc;
}
