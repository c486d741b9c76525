/* Logits of every position (clinfer_context_params.logits_all) and `clinfer perplexity` (argv[1]
 * is the binary) on a tiny model:
 *   - with logits_all, an eval of n tokens in chunks of n_batch gives each position the logits
 *     that evaluating the tokens one by one gives (reference backend, and OpenCL where there is
 *     a device); without it only the last position's are kept, and asking for another fails;
 *   - the perplexity the command prints (--json, reference backend) equals one computed here
 *     from the reference backend's logits, token by token, the way llama-perplexity scores;
 *   - a run compared with its own base has a KL divergence of exactly 0 and 100% top-1
 *     agreement; OpenCL against a reference base is small and positive;
 *   - damaged or mismatched bases and too short texts are refused with a message, exit 1. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

#define N_CTX 32
#define N_CHUNK 3

static const char *binary;
static char model_path[64], text_path[64], base_path[64], out_path[64];

static clinfer_model *load(clinfer_backend_kind kind) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    clinfer_model *m = NULL;
    EXPECT_OK(clinfer_model_load(model_path, &p, &m));
    return m;
}

/* The ids of the text as the command reads them (BOS first where the model wants it). */
static size_t text_tokens(const clinfer_model *m, const char *text, int32_t *ids, size_t cap) {
    size_t n = 0;
    EXPECT_OK(
        clinfer_tokenize(m, text, strlen(text), clinfer_token_add_bos(m), false, ids, cap, &n));
    return n;
}

/* bound: the NMSE allowed between a row of a batched eval and the same token's alone (OpenCL
 * runs batches through GEMM kernels, single tokens through matvec ones). */
static void test_logits_all(clinfer_backend_kind kind, const char *what, double bound) {
    clinfer_model *m = load(kind);
    if (!m) return;
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = 3 + (i * 37) % 250;
    size_t nv = tiny_model_n_vocab();
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_batch = 7; /* three chunks */
    cp.logits_all = true;
    clinfer_context *all = NULL, *one = NULL, *last = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &all));
    cp.logits_all = false;
    EXPECT_OK(clinfer_context_create(m, &cp, &one));
    EXPECT_OK(clinfer_context_create(m, &cp, &last));
    if (all && one && last) {
        EXPECT_OK(clinfer_eval(all, ids, 20));
        EXPECT_OK(clinfer_eval(last, ids, 20));
        double worst = 0;
        for (int i = 0; i < 20; i++) {
            const float *a, *b;
            EXPECT_OK(clinfer_eval(one, &ids[i], 1));
            EXPECT_OK(clinfer_get_logits(one, &b, NULL));
            EXPECT_OK(clinfer_get_logits_ith(all, i, &a, NULL));
            double e = nmse(a, b, nv);
            worst = e > worst ? e : worst;
        }
        EXPECT(worst <= bound, "%s: logits_all rows differ from one-by-one logits: NMSE %g", what,
               worst);
        const float *a, *b;
        EXPECT_OK(clinfer_get_logits_ith(all, -1, &a, NULL));
        EXPECT_OK(clinfer_get_logits(last, &b, NULL));
        EXPECT(nmse(a, b, nv) <= bound, "%s: the last row differs without logits_all: NMSE %g",
               what, nmse(a, b, nv));
        EXPECT(clinfer_get_logits_ith(last, 3, &a, NULL) == CLINFER_ERR_INVALID_ARGUMENT &&
                   strstr(clinfer_last_error(), "logits_all"),
               "%s: token 3 without logits_all: %s", what, clinfer_last_error());
        EXPECT(clinfer_get_logits_ith(all, 20, &a, NULL) == CLINFER_ERR_INVALID_ARGUMENT,
               "%s: token 20 of 20 accepted", what);
        printf("%s: logits_all rows match one-by-one evaluation (worst NMSE %.2e)\n", what, worst);
    }
    clinfer_context_free(all);
    clinfer_context_free(one);
    clinfer_context_free(last);
    clinfer_model_free(m);
}

/* llama-perplexity's definition, on the reference backend one token at a time. */
static double direct_ppl(const char *text) {
    clinfer_model *m = load(CLINFER_BACKEND_REFERENCE);
    if (!m) return NAN;
    static int32_t ids[4096];
    size_t n = text_tokens(m, text, ids, 4096), nv = tiny_model_n_vocab();
    clinfer_context *ctx = NULL;
    EXPECT_OK(clinfer_context_create(m, NULL, &ctx));
    double nll = 0;
    size_t count = 0;
    for (size_t c = 0; ctx && c < N_CHUNK && (c + 1) * N_CTX <= n; c++) {
        clinfer_context_reset(ctx);
        for (size_t j = 0; j + 1 < N_CTX; j++) {
            int32_t id =
                j == 0 && clinfer_token_add_bos(m) ? clinfer_token_bos(m) : ids[c * N_CTX + j];
            const float *l;
            EXPECT_OK(clinfer_eval(ctx, &id, 1));
            EXPECT_OK(clinfer_get_logits(ctx, &l, NULL));
            if (j < N_CTX / 2) continue;
            double max = l[0], sum = 0;
            for (size_t v = 1; v < nv; v++)
                max = l[v] > max ? l[v] : max;
            for (size_t v = 0; v < nv; v++)
                sum += exp(l[v] - max);
            nll -= l[ids[c * N_CTX + j + 1]] - max - log(sum);
            count++;
        }
    }
    clinfer_context_free(ctx);
    clinfer_model_free(m);
    return exp(nll / (double)count);
}

/* Runs the command with args; its exit status, stdout in out_path. */
static int run(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' perplexity -m %s -c %d --chunks %d %s >%s 2>>%s.err", binary,
             model_path, N_CTX, N_CHUNK, args, out_path, out_path);
    check_icd_env_restore();
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static cJSON *run_json(const char *args) {
    char full[512];
    snprintf(full, sizeof full, "%s --json", args);
    EXPECT(run(full) == 0, "`perplexity %s` failed", full);
    FILE *f = fopen(out_path, "r");
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[len] = '\0';
    return cJSON_Parse(text);
}

static double number(cJSON *root, const char *a, const char *b) {
    cJSON *o = cJSON_GetObjectItem(root, a);
    if (b) o = cJSON_GetObjectItem(o, b);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static void test_command(bool have_opencl) {
    char args[256];
    snprintf(args, sizeof args, "--reference -f %s", text_path);
    cJSON *r = run_json(args);
    double ppl = number(r, "ppl", NULL);
    FILE *f = fopen(text_path, "r");
    static char text[1 << 16];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[len] = '\0';
    double want = direct_ppl(text);
    EXPECT(fabs(ppl - want) <= 1e-4 * want, "perplexity %.6f, computed directly %.6f", ppl, want);
    EXPECT(number(r, "tokens_scored", NULL) == N_CHUNK * (N_CTX / 2 - 1), "%g tokens scored",
           number(r, "tokens_scored", NULL));
    printf("perplexity %.6f = direct %.6f\n", ppl, want);
    cJSON_Delete(r);

    snprintf(args, sizeof args, "--reference -f %s --kl-divergence-base %s", text_path, base_path);
    EXPECT(run(args) == 0, "writing the base failed");
    snprintf(args, sizeof args, "--reference --kl-divergence-base %s --kl-divergence", base_path);
    r = run_json(args);
    EXPECT(number(r, "kl_divergence", "mean") == 0 && number(r, "kl_divergence", "same_top") == 1,
           "KLD against itself: mean %g, same top %g", number(r, "kl_divergence", "mean"),
           number(r, "kl_divergence", "same_top"));
    EXPECT(number(r, "kl_divergence", "ppl_ratio") == 1, "ppl ratio against itself %g",
           number(r, "kl_divergence", "ppl_ratio"));
    cJSON_Delete(r);
    if (have_opencl) {
        snprintf(args, sizeof args, "--kl-divergence-base %s --kl-divergence", base_path);
        r = run_json(args);
        double kld = number(r, "kl_divergence", "mean");
        EXPECT(kld > 0 && kld < 0.05, "KLD of OpenCL (8-bit activations) against the reference: %g",
               kld);
        printf("OpenCL against the reference: mean KLD %.3g, same top %.3f\n", kld,
               number(r, "kl_divergence", "same_top"));
        cJSON_Delete(r);
    }

    /* refusals: a damaged base, a base for another context, a text too short */
    FILE *b = fopen(base_path, "r+b");
    if (b) {
        fseek(b, 0, SEEK_END);
        EXPECT(ftruncate(fileno(b), ftell(b) - 4) == 0, "truncating the base");
        fclose(b);
    }
    snprintf(args, sizeof args, "--reference --kl-divergence-base %s --kl-divergence", base_path);
    EXPECT(run(args) == 1, "a damaged base was accepted");
    EXPECT(run("--reference --kl-divergence-base /nonexistent/base --kl-divergence") == 1,
           "a missing base was accepted");
    FILE *s = fopen(text_path, "w");
    if (s) fputs("too short", s), fclose(s);
    snprintf(args, sizeof args, "--reference -f %s", text_path);
    EXPECT(run(args) == 1, "a text shorter than two contexts was accepted");
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_perplexity CLINFER\n"), 1;
    binary = argv[1];
    int pid = (int)getpid();
    snprintf(model_path, sizeof model_path, "ppl_model_%d.gguf", pid);
    snprintf(text_path, sizeof text_path, "ppl_text_%d.txt", pid);
    snprintf(base_path, sizeof base_path, "ppl_base_%d.kld", pid);
    snprintf(out_path, sizeof out_path, "ppl_out_%d.txt", pid);
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    EXPECT(tiny_model_write(&spec, model_path) == 0, "writing %s", model_path);
    FILE *t = fopen(text_path, "w");
    for (int i = 0; t && i < 40; i++)
        fprintf(t, "Line %d of a text about tiny models, %d words long.\n", i, 7 * i % 13);
    if (t) fclose(t);

    size_t n_devices = 0;
    bool have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    test_logits_all(CLINFER_BACKEND_REFERENCE, "reference", 1e-10);
    if (have_opencl) test_logits_all(CLINFER_BACKEND_OPENCL, "OpenCL", 1e-6);
    test_command(have_opencl);
    char err[80];
    snprintf(err, sizeof err, "%s.err", out_path);
    remove(model_path), remove(text_path), remove(base_path), remove(out_path), remove(err);
    return finish("test_perplexity");
}
