/* clinfer_verify on tiny models: every op of every layer within the tolerance on each OpenCL
 * kernel path (the GPU paths forced through options.kernel_path, so that they are proven on PoCL
 * too), for llama and gpt2 and several weight types; and with one kernel's output corrupted
 * (CLINFER_FAULT="corrupt-<op>:N:V", backends/opencl/fault.h) exactly that op's row fails, named
 * by phase, layer and op. The reference against itself gives NMSE 0 without any device; the rest
 * exits 77 where there is no OpenCL device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

#define N_TOKENS 12

static int32_t tokens[N_TOKENS];

static void model_path(char *path, size_t size, const char *arch, clinfer_dtype type) {
    snprintf(path, size, "verify_%s_%s_%d.gguf", arch, dtype_name(type), (int)getpid());
}

static int write_model(const char *arch, clinfer_dtype type, char *path, size_t size) {
    tiny_model_spec spec;
    tiny_model_default(&spec, arch, type);
    model_path(path, size, arch, type);
    return tiny_model_write(&spec, path);
}

static clinfer_verify_report *verify(const char *path, clinfer_backend_kind kind,
                                     clinfer_kernel_path kernel_path, bool f32_act) {
    clinfer_model_params mp;
    clinfer_model_params_default(&mp);
    mp.backend = kind;
    mp.options.kernel_path = kernel_path;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.activations = f32_act ? CLINFER_ACT_F32 : CLINFER_ACT_Q8;
    clinfer_verify_report *r = NULL;
    EXPECT_OK(clinfer_verify(path, &mp, &cp, tokens, N_TOKENS, &r));
    return r;
}

/* Whether a row of this phase and layer has this op label. */
static bool has_row(const clinfer_verify_report *r, const char *phase, int layer, const char *op) {
    for (size_t i = 0; i < r->n_rows; i++)
        if (!strcmp(r->rows[i].phase, phase) && r->rows[i].layer == layer &&
            !strcmp(r->rows[i].op, op))
            return true;
    return false;
}

static void test_reference_itself(void) {
    char path[128];
    EXPECT(write_model("llama", CLINFER_DT_Q4_1, path, sizeof path) == 0, "writing %s", path);
    clinfer_verify_report *r = verify(path, CLINFER_BACKEND_REFERENCE, 0, false);
    if (r) {
        EXPECT(r->n_rows > 30 && r->n_failed == 0 && r->first_failed == r->n_rows,
               "%zu rows, %zu failed", r->n_rows, r->n_failed);
        for (size_t i = 0; i < r->n_rows; i++)
            EXPECT(r->rows[i].nmse == 0 && r->rows[i].max_abs == 0, "row %zu (%s) NMSE %g", i,
                   r->rows[i].op, r->rows[i].nmse);
        EXPECT(!strcmp(r->tolerance, "Q4_1 weights, 8-bit activations"), "tolerance '%s'",
               r->tolerance);
        /* labels: the prefill's matmuls one by one, the decode step's q, k and v in one */
        EXPECT(has_row(r, "prefill", 1, "matmul attn_v") && has_row(r, "prefill", 0, "rope k") &&
                   has_row(r, "decode", 1, "matmul attn_q+attn_k+attn_v") &&
                   has_row(r, "decode", 0, "matmul ffn_gate+ffn_up") &&
                   has_row(r, "prefill", (int)r->n_layer, "matmul output") &&
                   has_row(r, "whole", (int)r->n_layer, "eval (fused launches)"),
               "labels missing");
        EXPECT(r->top_device == r->top_reference, "top tokens %d, %d", r->top_device,
               r->top_reference);
    }
    clinfer_verify_report_free(r);
    remove(path);
}

static const struct {
    clinfer_kernel_path path;
    const char *name;
} paths[] = {{CLINFER_KERNEL_PATH_DEFAULT, "default"},
             {CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE, "gpu-local-reduce"}};

/* Every row within its bound on every kernel path. */
static void test_paths(const char *arch, clinfer_dtype type, bool f32_act) {
    char path[128];
    EXPECT(write_model(arch, type, path, sizeof path) == 0, "writing %s", path);
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        clinfer_verify_report *r = verify(path, CLINFER_BACKEND_OPENCL, paths[p].path, f32_act);
        if (!r) continue;
        const clinfer_verify_row *w = &r->rows[r->worst], *last = &r->rows[r->n_rows - 1];
        printf("%s %s %s%s: %zu rows, worst %s layer %d %s (%s) NMSE %.2e, whole %.2e [%s]\n", arch,
               dtype_name(type), paths[p].name, f32_act ? " f32-act" : "", r->n_rows, w->phase,
               w->layer, w->op, w->output, w->nmse, last->nmse, r->tolerance);
        EXPECT(r->n_failed == 0, "%s %s on %s: %zu rows failed, the first %s layer %d %s NMSE %g",
               arch, dtype_name(type), paths[p].name, r->n_failed, r->rows[r->first_failed].phase,
               r->rows[r->first_failed].layer, r->rows[r->first_failed].op,
               r->rows[r->first_failed].nmse);
        EXPECT(r->top_device == r->top_reference, "top tokens %d, %d", r->top_device,
               r->top_reference);
        clinfer_verify_report_free(r);
    }
    remove(path);
}

/* CLINFER_FAULT=spec corrupts one op: exactly its row fails (the next op starts again from the
 * reference's state), named as want_phase, want_layer, want_op, want_output. */
static void test_fault(const char *arch, clinfer_dtype type, const char *spec,
                       const char *want_phase, int want_layer, const char *want_op,
                       const char *want_output) {
    char path[128];
    EXPECT(write_model(arch, type, path, sizeof path) == 0, "writing %s", path);
    setenv("CLINFER_FAULT", spec, 1);
    clinfer_verify_report *r = verify(path, CLINFER_BACKEND_OPENCL, 0, false);
    unsetenv("CLINFER_FAULT");
    if (r) {
        EXPECT(r->n_failed == 1, "%s: %zu rows failed", spec, r->n_failed);
        const clinfer_verify_row *f = &r->rows[r->first_failed < r->n_rows ? r->first_failed : 0];
        EXPECT(!f->ok && !strcmp(f->phase, want_phase) && f->layer == want_layer &&
                   !strcmp(f->op, want_op) && !strcmp(f->output, want_output),
               "%s: the failing row is %s layer %d %s (%s)", spec, f->phase, f->layer, f->op,
               f->output);
        EXPECT(r->worst == r->first_failed, "%s: the worst row is not the failing one", spec);
        printf("%s: fails %s layer %d %s (%s), NMSE %.3g\n", spec, f->phase, f->layer, f->op,
               f->output, f->nmse);
    }
    clinfer_verify_report_free(r);
    remove(path);
}

int main(void) {
    for (int i = 0; i < N_TOKENS; i++)
        tokens[i] = 3 + (i * 37) % 250;
    test_reference_itself();
    size_t devices = 0;
    if (clinfer_device_count(&devices) != CLINFER_OK || devices == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        finish("test_verify");
        return check_failures ? 1 : 77;
    }
    test_paths("llama", CLINFER_DT_Q4_1, false);
    test_paths("llama", CLINFER_DT_Q4_1, true);
    test_paths("llama", CLINFER_DT_F16, false);
    test_paths("gpt2", CLINFER_DT_Q8_0, false);
    test_paths("gpt2", CLINFER_DT_Q4_K, false);
    test_paths("llama", CLINFER_DT_Q5_K, false); /* a type the tolerances once left out */
    /* mixtures of experts with 8-bit activations: routing, expert matmuls (a prefill's grouped
     * tokens, a decode step's experts) and their sum, op by op */
    test_paths("qwen3moe", CLINFER_DT_Q4_K, false);
    test_paths("olmoe", CLINFER_DT_Q8_0, false);
    test_paths("mixtral", CLINFER_DT_Q4_0, false);
    /* gpt-oss's MXFP4 experts with their biases, its sinks and clamped SwiGLU */
    test_paths("gpt-oss", CLINFER_DT_MXFP4, false);
    /* two layers: rmsnorm 3 is layer 1's attn_norm, matmul 5 layer 0's ffn_gate */
    test_fault("llama", CLINFER_DT_Q4_1, "corrupt-rmsnorm:3:7", "prefill", 1, "rmsnorm attn_norm",
               "y");
    test_fault("llama", CLINFER_DT_Q4_1, "corrupt-matmul:5:7", "prefill", 0, "matmul ffn_gate",
               "y");
    /* the decode step's first attention; gpt2's second store is layer 0's values into the f16
     * cache */
    test_fault("gpt2", CLINFER_DT_Q8_0, "corrupt-attention:3:7", "decode", 0, "attention", "out");
    test_fault("gpt2", CLINFER_DT_Q8_0, "corrupt-store:2:7", "prefill", 0, "store v", "dst");
    test_fault("gpt2", CLINFER_DT_Q8_0, "corrupt-layernorm:1:7", "prefill", 0,
               "layernorm attn_norm", "y");
    return finish("test_verify");
}
