/* Hidden states (clinfer_context_params.embeddings) on tiny f32 llama, gpt2 and gemma3 models (an
 * RMS norm, a layer norm with bias, gemma's 1 + w), on the reference backend and on OpenCL where
 * there is a device:
 *   - the last token's state is the vector the LM head multiplies: output.weight (read from the
 *     file; token_embd.weight where tied) times it gives the logits the context returns;
 *   - an eval of 20 tokens in chunks of 7 gives each token the state that evaluating the tokens
 *     one by one gives;
 *   - mean pooling is the mean of the per-token states, last pooling the last one's, and
 *     normalizing scales them to length 1;
 *   - OpenCL's states match the reference backend's;
 *   - a context without embeddings, nothing evaluated, a token out of range, a short buffer and
 *     an unknown pooling are refused with a message.
 * With CLINFER_MODEL set (the default model), its mean-pooled embedding of a text on OpenCL
 * matches the reference backend's (cosine similarity). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf.h"
#include "tiny_model.h"

#define N_TOKENS 20
#define N_BATCH 7

static char model_path[64];

static clinfer_model *load(const char *path, clinfer_backend_kind kind) {
    clinfer_model *m = NULL;
    EXPECT_OK(tiny_model_load(path, kind, CLINFER_DEFAULT, &m));
    return m;
}

static clinfer_context *context(clinfer_model *m, uint32_t n_batch) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 64;
    cp.n_batch = n_batch;
    cp.embeddings = true;
    clinfer_context *c = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &c));
    return c;
}

static double cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

/* The logits of the last token against output.weight (tied: token_embd.weight) times its
 * state. */
static void check_head(clinfer_context *c, const char *what) {
    gguf_file *f = NULL;
    EXPECT_OK(gguf_open(model_path, &f));
    const gguf_tensor *w = f ? gguf_find_tensor(f, "output.weight") : NULL;
    if (f && !w) w = gguf_find_tensor(f, "token_embd.weight"); /* tied */
    EXPECT(w && w->type == CLINFER_DT_F32, "%s: no f32 output.weight", what);
    const float *embd = NULL, *logits = NULL;
    size_t d = 0, nv = 0;
    EXPECT_OK(clinfer_get_embeddings_ith(c, -1, &embd, &d));
    EXPECT_OK(clinfer_get_logits(c, &logits, &nv));
    if (w && w->type == CLINFER_DT_F32 && embd && logits && (int64_t)d == w->ne[0]) {
        float *want = malloc(nv * sizeof *want);
        for (size_t v = 0; v < nv; v++) {
            double s = 0;
            for (size_t j = 0; j < d; j++)
                s += (double)((const float *)w->data)[v * d + j] * embd[j];
            want[v] = (float)s;
        }
        double e = nmse(logits, want, nv);
        EXPECT(e < 1e-10, "%s: logits differ from output.weight x state: NMSE %g", what, e);
        free(want);
    }
    gguf_close(f);
}

/* Returns the states of the batched eval ([N_TOKENS][d], malloc'd) for the cross-backend check. */
static float *test_backend(clinfer_backend_kind kind, const char *what, double bound) {
    clinfer_model *m = load(model_path, kind);
    if (!m) return NULL;
    int32_t ids[N_TOKENS];
    for (int i = 0; i < N_TOKENS; i++)
        ids[i] = 3 + (i * 37) % 250;
    clinfer_context *all = context(m, N_BATCH), *one = context(m, N_BATCH);
    float *states = NULL;
    size_t d = 0;
    const float *row = NULL;
    if (!all || !one) goto done;
    EXPECT(clinfer_get_embeddings_ith(all, 0, &row, &d) == CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "nothing evaluated"),
           "%s: states before an eval: %s", what, clinfer_last_error());
    EXPECT_OK(clinfer_eval(all, ids, N_TOKENS));
    EXPECT_OK(clinfer_get_embeddings_ith(all, 0, &row, &d));
    if (!row) goto done;
    check_head(all, what);
    states = malloc((size_t)N_TOKENS * d * sizeof *states);
    double worst = 0;
    for (int t = 0; t < N_TOKENS; t++) {
        const float *a = NULL, *b = NULL;
        EXPECT_OK(clinfer_get_embeddings_ith(all, t, &a, NULL));
        EXPECT_OK(clinfer_eval(one, &ids[t], 1));
        EXPECT_OK(clinfer_get_embeddings_ith(one, 0, &b, NULL));
        if (!a || !b) break;
        memcpy(states + (size_t)t * d, a, d * sizeof *a);
        double e = nmse(a, b, d);
        worst = e > worst ? e : worst;
    }
    EXPECT(worst <= bound, "%s: batched states differ from one-by-one ones: NMSE %g", what, worst);

    float *mean = malloc(d * sizeof *mean), *got = malloc(d * sizeof *got);
    double len = 0;
    for (size_t j = 0; j < d; j++) {
        double s = 0;
        for (int t = 0; t < N_TOKENS; t++)
            s += states[(size_t)t * d + j];
        mean[j] = (float)(s / N_TOKENS);
        len += (double)mean[j] * mean[j];
    }
    size_t n = 0;
    EXPECT_OK(clinfer_get_embeddings_pooled(all, CLINFER_POOLING_MEAN, false, got, d, &n));
    EXPECT(n == d && nmse(got, mean, d) < 1e-12, "%s: mean pooling is not the mean", what);
    EXPECT_OK(clinfer_get_embeddings_pooled(all, CLINFER_POOLING_MEAN, true, got, d, &n));
    for (size_t j = 0; j < d; j++)
        mean[j] = (float)(mean[j] / sqrt(len));
    EXPECT(nmse(got, mean, d) < 1e-12, "%s: normalized mean pooling is not the mean / |mean|",
           what);
    EXPECT_OK(clinfer_get_embeddings_pooled(all, CLINFER_POOLING_LAST, false, got, d, &n));
    EXPECT(nmse(got, states + (size_t)(N_TOKENS - 1) * d, d) == 0,
           "%s: last pooling is not the last state", what);
    EXPECT(clinfer_get_embeddings_pooled(all, CLINFER_POOLING_LAST, false, got, d - 1, &n) ==
                   CLINFER_ERR_BUFFER_TOO_SMALL &&
               n == d,
           "%s: a short buffer: %s", what, clinfer_last_error());
    EXPECT(clinfer_get_embeddings_pooled(all, (clinfer_pooling)7, false, got, d, &n) ==
                   CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "pooling 7"),
           "%s: pooling 7: %s", what, clinfer_last_error());
    EXPECT(clinfer_get_embeddings_ith(all, N_TOKENS, &row, NULL) == CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "outside"),
           "%s: token %d: %s", what, N_TOKENS, clinfer_last_error());
    free(mean);
    free(got);
    printf("%s: %d states as one-by-one (worst NMSE %.2e); pooling and head checked\n", what,
           N_TOKENS, worst);
done:
    clinfer_context_free(all);
    clinfer_context_free(one);
    clinfer_model_free(m);
    return states;
}

static void test_without(void) {
    clinfer_model *m = load(model_path, CLINFER_BACKEND_REFERENCE);
    clinfer_context *c = NULL;
    EXPECT_OK(clinfer_context_create(m, NULL, &c));
    int32_t id = 5;
    const float *row = NULL;
    if (c) EXPECT_OK(clinfer_eval(c, &id, 1));
    EXPECT(clinfer_get_embeddings_ith(c, 0, &row, NULL) == CLINFER_ERR_INVALID_ARGUMENT &&
               strstr(clinfer_last_error(), "without embeddings"),
           "states of a context without embeddings: %s", clinfer_last_error());
    clinfer_context_free(c);
    clinfer_model_free(m);
}

/* The default model: a text's mean-pooled, normalized embedding on both backends. */
static void test_default_model(void) {
    const char *path = getenv("CLINFER_MODEL");
    if (!path || !*path) {
        printf("CLINFER_MODEL unset: the default model's check skipped\n");
        return;
    }
    const char *text = "The capital of France is Paris, a city on the Seine.";
    float *v[2] = {NULL, NULL};
    size_t d = 0;
    clinfer_backend_kind kinds[2] = {CLINFER_BACKEND_REFERENCE, CLINFER_BACKEND_OPENCL};
    for (int k = 0; k < 2; k++) {
        clinfer_model *m = load(path, kinds[k]);
        clinfer_context *c = m ? context(m, 0) : NULL;
        int32_t ids[64];
        size_t n = 0;
        if (c)
            EXPECT_OK(clinfer_tokenize(m, text, strlen(text), clinfer_token_add_bos(m), false, ids,
                                       64, &n));
        if (c && n) EXPECT_OK(clinfer_eval(c, ids, n));
        clinfer_model_info info;
        if (m && clinfer_model_get_info(m, &info) == CLINFER_OK) d = info.n_embd;
        v[k] = calloc(d ? d : 1, sizeof *v[k]);
        if (c) EXPECT_OK(clinfer_get_embeddings_pooled(c, CLINFER_POOLING_MEAN, true, v[k], d, &d));
        clinfer_context_free(c);
        clinfer_model_free(m);
    }
    double cs = cosine(v[0], v[1], d);
    EXPECT(cs > 0.9999, "default model: OpenCL's embedding against the reference's: cosine %.6f",
           cs);
    printf("default model: embedding of %zu values, OpenCL against reference cosine %.6f\n", d, cs);
    free(v[0]);
    free(v[1]);
}

int main(void) {
    size_t n_devices = 0;
    bool have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    static const char *const archs[] = {"llama", "gpt2", "gemma3"}; /* RMS, layer and 1+w norms */
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        tiny_model_spec spec;
        tiny_model_default(&spec, archs[a], CLINFER_DT_F32);
        snprintf(model_path, sizeof model_path, "/tmp/clinfer_embd_%d.gguf", (int)getpid());
        if (tiny_model_write(&spec, model_path) != 0) return 1;
        char what[64];
        snprintf(what, sizeof what, "%s, reference", archs[a]);
        float *ref = test_backend(CLINFER_BACKEND_REFERENCE, what, 1e-10);
        if (a == 0) test_without();
        if (have_opencl) {
            snprintf(what, sizeof what, "%s, OpenCL", archs[a]);
            float *dev = test_backend(CLINFER_BACKEND_OPENCL, what, 1e-6);
            if (ref && dev) {
                double e = nmse(dev, ref, (size_t)N_TOKENS * spec.n_embd);
                EXPECT(e < 1e-8, "%s: OpenCL's states differ from the reference's: NMSE %g",
                       archs[a], e);
                printf("%s: OpenCL against reference: NMSE %.2e\n", archs[a], e);
            }
            free(dev);
        }
        free(ref);
        remove(model_path);
    }
    if (have_opencl) test_default_model();
    return finish("test_embeddings");
}
