/* Batches of several sequences (clinfer_batch_eval, src/batch.c) on tiny random models of the
 * architectures that take each attention path (rotating: llama, gemma3 with its sliding window
 * and head norms; learned positions and plain cache stores: gpt2), on the reference backend and
 * on OpenCL with per-op and default (graph) launches:
 * - sequences of different prompt lengths, prompted in one batch, then decoded together step by
 *   step (one more sequence's prompt joining mid-way), give the logits (NMSE < 1e-8) and
 *   exactly the greedy tokens of each sequence alone through clinfer_eval;
 * - copying a prefix, truncating and clearing a sequence, then continuing, give the logits of
 *   evaluating the same tokens from scratch;
 * - with logits_all, a batch's every row equals clinfer_eval's;
 * - bad batches and sequence calls are refused with a status naming the problem, leaving the
 *   sequences as they were. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

#define N_SEQ 4
#define N_DECODE 12
#define MAX_TOKENS 64
#define JOIN_STEP 5 /* the decode step at which the last sequence's prompt joins */

static const int prompt_len[N_SEQ] = {5, 1, 9, 3};

static int32_t prompt_token(int seq, int i) {
    return 3 + (int32_t)((seq * 97 + i * 53) % 250);
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* The logits after tokens, evaluated alone (prompt in one eval when split is 0, else the first
 * split tokens in one eval and the rest one by one) on a fresh one-sequence context. */
static clinfer_status alone(clinfer_model *m, const int32_t *tokens, size_t n, size_t split,
                            float *out) {
    clinfer_context *ctx = NULL;
    const float *logits;
    size_t n_vocab;
    clinfer_status st = clinfer_context_create(m, NULL, &ctx);
    size_t first = split ? split : n;
    if (st == CLINFER_OK) st = clinfer_eval(ctx, tokens, first);
    for (size_t i = first; st == CLINFER_OK && i < n; i++)
        st = clinfer_eval(ctx, &tokens[i], 1);
    if (st == CLINFER_OK) st = clinfer_get_logits(ctx, &logits, &n_vocab);
    if (st == CLINFER_OK) memcpy(out, logits, n_vocab * sizeof *out);
    clinfer_context_free(ctx);
    return st;
}

static clinfer_context *batch_context(clinfer_model *m) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_seq_max = N_SEQ;
    cp.n_batch = 32;
    clinfer_context *ctx = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    return ctx;
}

/* Prompts of sequences 0 .. N_SEQ - 2 in one batch (with the logits of each one's last token),
 * then N_DECODE steps of one greedy token per sequence, the last sequence's prompt joining at
 * JOIN_STEP; each sequence's logits after each step checked against it alone. */
static void decode_together(clinfer_model *m, const char *what) {
    size_t n_vocab = tiny_model_n_vocab();
    clinfer_context *ctx = batch_context(m);
    float *ref = malloc(n_vocab * sizeof *ref);
    if (!ctx || !ref) goto done;
    int32_t seq_tokens[N_SEQ][MAX_TOKENS];
    int len[N_SEQ] = {0}, pending[N_SEQ]; /* pending: a sequence's next token, -1: none yet */
    clinfer_batch_entry e[32];
    double worst = 0;
    int compared = 0, tokens_same = 0;
    for (int step = -1; step < N_DECODE; step++) {
        size_t n = 0;
        for (int s = 0; s < N_SEQ; s++) {
            bool starts = (step == -1 && s < N_SEQ - 1) || (step == JOIN_STEP && s == N_SEQ - 1);
            if (starts) {
                for (int i = 0; i < prompt_len[s]; i++) {
                    seq_tokens[s][len[s]] = prompt_token(s, i);
                    e[n++] = (clinfer_batch_entry){seq_tokens[s][len[s]], (uint32_t)len[s],
                                                   (uint32_t)s, i == prompt_len[s] - 1};
                    len[s]++;
                }
            } else if (len[s] > 0) {
                seq_tokens[s][len[s]] = pending[s];
                e[n++] = (clinfer_batch_entry){pending[s], (uint32_t)len[s], (uint32_t)s, true};
                len[s]++;
            }
        }
        clinfer_status st = clinfer_batch_eval(ctx, e, n);
        EXPECT(st == CLINFER_OK, "%s: step %d: %s", what, step, clinfer_last_error());
        if (st != CLINFER_OK) break;
        for (size_t i = 0; i < n; i++) {
            if (!e[i].logits) continue;
            int s = (int)e[i].seq;
            const float *logits;
            EXPECT_OK(clinfer_get_logits_ith(ctx, (int32_t)i, &logits, NULL));
            EXPECT(clinfer_seq_len(ctx, (uint32_t)s) == (uint32_t)len[s], "%s: seq %d length", what,
                   s);
            EXPECT_OK(alone(m, seq_tokens[s], (size_t)len[s], (size_t)prompt_len[s], ref));
            double err = nmse(logits, ref, n_vocab);
            if (err > worst || err != err) worst = err;
            pending[s] = argmax(logits, n_vocab);
            tokens_same += pending[s] == argmax(ref, n_vocab);
            compared++;
        }
    }
    EXPECT(worst < 1e-8, "%s: batched vs alone logits NMSE %.3g", what, worst);
    EXPECT(tokens_same == compared, "%s: %d of %d greedy tokens as alone", what, tokens_same,
           compared);
    printf("%s: %d sequences decoded together: %d logits rows within NMSE %.3g of alone, greedy "
           "tokens equal\n",
           what, N_SEQ, compared, worst);
done:
    free(ref);
    clinfer_context_free(ctx);
}

/* The logits of entry i of the last batch equal those of tokens evaluated from scratch. */
static void expect_as_scratch(clinfer_model *m, clinfer_context *ctx, int i, const int32_t *tokens,
                              size_t n, const char *what) {
    size_t n_vocab = tiny_model_n_vocab();
    float *ref = malloc(n_vocab * sizeof *ref);
    const float *logits = NULL;
    EXPECT_OK(clinfer_get_logits_ith(ctx, i, &logits, NULL));
    EXPECT_OK(alone(m, tokens, n, 0, ref));
    if (logits && ref) {
        double err = nmse(logits, ref, n_vocab);
        EXPECT(err < 1e-8, "%s: NMSE %.3g against evaluating from scratch", what, err);
    }
    free(ref);
}

static void sequence_ops(clinfer_model *m, const char *what) {
    clinfer_context *ctx = batch_context(m);
    if (!ctx) return;
    int32_t p[10], a[11], b[7], c[6];
    clinfer_batch_entry e[10];
    for (int i = 0; i < 10; i++) {
        p[i] = prompt_token(5, i);
        e[i] = (clinfer_batch_entry){p[i], (uint32_t)i, 0, i == 9};
    }
    EXPECT_OK(clinfer_batch_eval(ctx, e, 10));
    /* sequence 2 shares sequence 0's first 6 tokens; both continue in one batch */
    EXPECT_OK(clinfer_seq_copy_prefix(ctx, 0, 2, 6));
    EXPECT(clinfer_seq_len(ctx, 2) == 6, "%s: copied length %u", what, clinfer_seq_len(ctx, 2));
    memcpy(a, p, sizeof p);
    a[10] = 77;
    memcpy(b, p, 6 * sizeof *p);
    b[6] = 140;
    clinfer_batch_entry both[2] = {{140, 6, 2, true}, {77, 10, 0, true}};
    EXPECT_OK(clinfer_batch_eval(ctx, both, 2));
    expect_as_scratch(m, ctx, 0, b, 7, "copied prefix, continued");
    expect_as_scratch(m, ctx, 1, a, 11, "source of the copy, continued");
    /* sequence 0 cut back to 5 tokens continues from there */
    EXPECT_OK(clinfer_seq_truncate(ctx, 0, 5));
    EXPECT(clinfer_seq_len(ctx, 0) == 5 &&
               clinfer_seq_room(ctx, 0) == clinfer_context_n_ctx(ctx) - 5,
           "%s: truncated length %u", what, clinfer_seq_len(ctx, 0));
    memcpy(c, p, 5 * sizeof *p);
    c[5] = 200;
    EXPECT_OK(clinfer_batch_eval(ctx, &(clinfer_batch_entry){200, 5, 0, true}, 1));
    expect_as_scratch(m, ctx, 0, c, 6, "truncated, continued");
    /* clinfer_eval continues sequence 0 */
    EXPECT(clinfer_context_n_past(ctx) == 6, "%s: n_past %u", what, clinfer_context_n_past(ctx));
    /* sequence 2 cleared starts afresh */
    EXPECT_OK(clinfer_seq_clear(ctx, 2));
    EXPECT_OK(clinfer_batch_eval(ctx, &(clinfer_batch_entry){p[3], 0, 2, true}, 1));
    expect_as_scratch(m, ctx, 0, &p[3], 1, "cleared, restarted");
    printf("%s: copy prefix, truncate, clear as from scratch\n", what);
    clinfer_context_free(ctx);
}

/* With logits_all every entry may ask for logits, more of them than there are sequences: a
 * prompt's rows equal clinfer_eval's rows of the same prompt. */
static void all_logits(clinfer_model *m, const char *what) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_seq_max = 2;
    cp.logits_all = true;
    clinfer_context *ctx = NULL, *one = NULL;
    EXPECT_OK(clinfer_context_create(m, &cp, &ctx));
    EXPECT_OK(clinfer_context_create(m, &cp, &one));
    int32_t p[6];
    clinfer_batch_entry e[6];
    for (int i = 0; i < 6; i++) {
        p[i] = prompt_token(3, i);
        e[i] = (clinfer_batch_entry){p[i], (uint32_t)i, 1, true};
    }
    if (ctx && one) {
        EXPECT_OK(clinfer_batch_eval(ctx, e, 6));
        EXPECT_OK(clinfer_eval(one, p, 6));
        double worst = 0;
        for (int i = 0; i < 6; i++) {
            const float *a = NULL, *b = NULL;
            EXPECT_OK(clinfer_get_logits_ith(ctx, i, &a, NULL));
            EXPECT_OK(clinfer_get_logits_ith(one, i, &b, NULL));
            double err = a && b ? nmse(a, b, tiny_model_n_vocab()) : 1;
            if (err > worst) worst = err;
        }
        EXPECT(worst < 1e-8, "%s: logits_all rows NMSE %.3g", what, worst);
    }
    clinfer_context_free(ctx);
    clinfer_context_free(one);
}

static void expect_refused(clinfer_context *ctx, const clinfer_batch_entry *e, size_t n,
                           clinfer_status want, const char *needle, const char *what) {
    uint32_t before[N_SEQ];
    for (uint32_t s = 0; s < N_SEQ; s++)
        before[s] = clinfer_seq_len(ctx, s);
    clinfer_status st = clinfer_batch_eval(ctx, e, n);
    EXPECT(st == want, "%s: status %s", what, clinfer_status_str(st));
    EXPECT(strstr(clinfer_last_error(), needle), "%s: message '%s' lacks '%s'", what,
           clinfer_last_error(), needle);
    for (uint32_t s = 0; s < N_SEQ; s++)
        EXPECT(clinfer_seq_len(ctx, s) == before[s], "%s: sequence %u changed", what, s);
}

static void bad_input(clinfer_model *m) {
    clinfer_context *ctx = batch_context(m);
    if (!ctx) return;
    uint32_t n_ctx = clinfer_context_n_ctx(ctx);
    EXPECT_OK(clinfer_batch_eval(ctx, &(clinfer_batch_entry){5, 0, 1, false}, 1));
    const float *logits;
    EXPECT(clinfer_get_logits_ith(ctx, 0, &logits, NULL) == CLINFER_ERR_INVALID_ARGUMENT,
           "logits of an entry that asked for none");
    expect_refused(ctx, &(clinfer_batch_entry){5, 0, N_SEQ, true}, 1, CLINFER_ERR_INVALID_ARGUMENT,
                   "sequence 4", "sequence out of range");
    expect_refused(ctx, &(clinfer_batch_entry){5, 2, 1, true}, 1, CLINFER_ERR_INVALID_ARGUMENT,
                   "continues at 1", "a gap in positions");
    expect_refused(ctx, (clinfer_batch_entry[]){{5, 1, 1, false}, {6, 1, 1, true}}, 2,
                   CLINFER_ERR_INVALID_ARGUMENT, "continues at 2", "a position twice");
    expect_refused(ctx, &(clinfer_batch_entry){5, 0, 1, true}, 1, CLINFER_ERR_INVALID_ARGUMENT,
                   "continues at 1", "a position held already");
    expect_refused(ctx, &(clinfer_batch_entry){5, n_ctx, 0, true}, 1, CLINFER_ERR_CONTEXT_FULL,
                   "past the context", "a position beyond room");
    expect_refused(ctx, &(clinfer_batch_entry){-1, 0, 0, true}, 1, CLINFER_ERR_INVALID_ARGUMENT,
                   "vocabulary", "a token out of range");
    clinfer_batch_entry many[33];
    for (int i = 0; i < 33; i++)
        many[i] = (clinfer_batch_entry){5, (uint32_t)i, 0, false};
    expect_refused(ctx, many, 33, CLINFER_ERR_INVALID_ARGUMENT, "n_batch", "more than n_batch");
    for (int i = 0; i < N_SEQ + 1; i++)
        many[i] = (clinfer_batch_entry){5, (uint32_t)i, 0, true};
    expect_refused(ctx, many, N_SEQ + 1, CLINFER_ERR_INVALID_ARGUMENT, "ask for logits",
                   "logits for more entries than sequences");
    expect_refused(ctx, NULL, 1, CLINFER_ERR_INVALID_ARGUMENT, "NULL", "no entries array");
    expect_refused(ctx, many, 0, CLINFER_ERR_INVALID_ARGUMENT, "no entries", "no entries");
    EXPECT(clinfer_seq_clear(ctx, N_SEQ) == CLINFER_ERR_INVALID_ARGUMENT, "clear out of range");
    EXPECT(clinfer_seq_truncate(ctx, 99, 0) == CLINFER_ERR_INVALID_ARGUMENT,
           "truncate out of range");
    EXPECT(clinfer_seq_copy_prefix(ctx, 1, 2, 2) == CLINFER_ERR_INVALID_ARGUMENT,
           "copying more than the source holds");
    EXPECT(clinfer_seq_copy_prefix(ctx, 1, 1, 1) == CLINFER_ERR_INVALID_ARGUMENT,
           "copying onto itself");
    EXPECT(clinfer_seq_copy_prefix(ctx, 1, N_SEQ, 1) == CLINFER_ERR_INVALID_ARGUMENT,
           "copying out of range");
    EXPECT(clinfer_seq_len(ctx, N_SEQ) == 0 && clinfer_seq_room(ctx, N_SEQ) == 0,
           "length and room out of range");
    EXPECT(clinfer_seq_len(ctx, 1) == 1, "sequence 1 holds %u", clinfer_seq_len(ctx, 1));
    /* a one-sequence context refuses sequence 1 */
    clinfer_context *one = NULL;
    EXPECT_OK(clinfer_context_create(m, NULL, &one));
    EXPECT(clinfer_context_n_seq_max(one) == 1, "n_seq_max default");
    if (one)
        EXPECT(clinfer_batch_eval(one, &(clinfer_batch_entry){5, 0, 1, true}, 1) ==
                   CLINFER_ERR_INVALID_ARGUMENT,
               "sequence 1 of a one-sequence context");
    clinfer_context_free(one);
    clinfer_context_free(ctx);
    printf("bad batches refused\n");
}

static void run_model(const char *path, clinfer_backend_kind kind, clinfer_toggle graph,
                      const char *what, bool errors) {
    clinfer_model *m = NULL;
    EXPECT_OK(tiny_model_load(path, kind, graph, &m));
    if (!m) return;
    decode_together(m, what);
    sequence_ops(m, what);
    all_logits(m, what);
    if (errors) bad_input(m);
    clinfer_model_free(m);
}

int main(void) {
    static const struct {
        const char *arch;
        clinfer_dtype type;
    } models[] = {
        {"llama", CLINFER_DT_Q4_0}, {"gemma3", CLINFER_DT_Q8_0}, {"gpt2", CLINFER_DT_F16}};
    size_t devices = 0;
    bool opencl = clinfer_device_count(&devices) == CLINFER_OK && devices > 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[128], what[96];
        snprintf(path, sizeof path, "batch_%s_%d.gguf", models[i].arch, (int)getpid());
        tiny_model_spec spec;
        tiny_model_default(&spec, models[i].arch, models[i].type);
        EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
        snprintf(what, sizeof what, "%s, reference", models[i].arch);
        run_model(path, CLINFER_BACKEND_REFERENCE, CLINFER_DEFAULT, what, i == 0);
        if (opencl) {
            snprintf(what, sizeof what, "%s, OpenCL per-op launches", models[i].arch);
            run_model(path, CLINFER_BACKEND_OPENCL, CLINFER_OFF, what, i == 0);
            snprintf(what, sizeof what, "%s, OpenCL default launches", models[i].arch);
            run_model(path, CLINFER_BACKEND_OPENCL, CLINFER_DEFAULT, what, false);
        }
        remove(path);
    }
    if (!opencl) printf("no OpenCL device: the reference backend only\n");
    return finish("test_batch");
}
