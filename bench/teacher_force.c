/* A greedy continuation of another engine, fed to clinfer token by token (teacher forcing), for
 * bench/greedy_compare.py: teacher_force MODEL [N_CTX [ACT [KV]]] reads two lines of token ids on
 * stdin, the prompt's (BOS included where the model takes one) and the continuation's. It
 * evaluates the prompt in one call, then each continuation token but the last in a call of its
 * own (the decode path), and prints for each continuation token the logits' best token and the
 * log-probabilities of that token and of the teacher's:
 *     STEP BEST LOGPROB_BEST LOGPROB_TEACHER
 * N_CTX 0 is the model's context; ACT is an --act mode (default f32); KV the KV cache's type, f16
 * (the default) or f32. The kernel path and device
 * come from the environment, as for the CLI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clinfer.h"

#define MAX_TOKENS 4096

static int fail(clinfer_status st, const char *what) {
    fprintf(stderr, "teacher_force: %s: %s: %s\n", what, clinfer_status_str(st),
            clinfer_last_error());
    return 1;
}

/* One line of ids into ids[]; their count, or -1 past MAX_TOKENS or on a bad id. */
static int read_line(int32_t *ids) {
    int n = 0, c;
    long v;
    for (;;) {
        while ((c = getchar()) == ' ' || c == '\t')
            ;
        if (c == '\n' || c == EOF) return n;
        ungetc(c, stdin);
        if (scanf("%ld", &v) != 1 || v < 0 || v > INT32_MAX || n == MAX_TOKENS) return -1;
        ids[n++] = (int32_t)v;
    }
}

/* Prints step's line: the best token and the log-softmax of it and of the teacher's. */
static void report(int step, const float *logits, size_t n_vocab, int32_t teacher) {
    size_t best = 0;
    for (size_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    double sum = 0;
    for (size_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - logits[best]);
    double lse = logits[best] + log(sum);
    double lp_teacher = (size_t)teacher < n_vocab ? logits[teacher] - lse : -INFINITY;
    printf("%d %zu %.6f %.6f\n", step, best, logits[best] - lse, lp_teacher);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 5 || (argc > 4 && strcmp(argv[4], "f16") && strcmp(argv[4], "f32"))) {
        fprintf(stderr, "usage: teacher_force MODEL [N_CTX [ACT [f16|f32]]] < PROMPT_IDS_LINE "
                        "CONT_IDS_LINE\n");
        return 2;
    }
    static int32_t prompt[MAX_TOKENS], cont[MAX_TOKENS];
    int n_prompt = read_line(prompt), n_cont = n_prompt > 0 ? read_line(cont) : -1;
    if (n_prompt < 1 || n_cont < 1) {
        fprintf(stderr,
                "teacher_force: stdin: need a line of prompt ids and one of continuation "
                "ids (at most %d each)\n",
                MAX_TOKENS);
        return 2;
    }
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 0;
    cp.activations = CLINFER_ACT_F32;
    cp.kv_f32 = argc > 4 && !strcmp(argv[4], "f32");
    clinfer_status st = argc > 3 ? clinfer_activations_parse(argv[3], &cp.activations) : CLINFER_OK;
    if (st != CLINFER_OK) return fail(st, argv[3]);
    clinfer_model *m = NULL;
    clinfer_context *ctx = NULL;
    if ((st = clinfer_model_load(argv[1], NULL, &m)) != CLINFER_OK) return fail(st, argv[1]);
    if ((st = clinfer_context_create(m, &cp, &ctx)) != CLINFER_OK) {
        clinfer_model_free(m);
        return fail(st, "context");
    }
    const float *logits;
    size_t n_vocab;
    st = clinfer_eval(ctx, prompt, (size_t)n_prompt);
    for (int i = 0; st == CLINFER_OK && i < n_cont; i++) {
        if (i > 0) st = clinfer_eval(ctx, &cont[i - 1], 1);
        if (st == CLINFER_OK) st = clinfer_get_logits(ctx, &logits, &n_vocab);
        if (st == CLINFER_OK) report(i, logits, n_vocab, cont[i]);
    }
    clinfer_context_free(ctx);
    clinfer_model_free(m);
    return st == CLINFER_OK ? 0 : fail(st, "eval");
}
