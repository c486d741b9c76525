/* clinfer_quantize_file end to end. Tiny F32 llama models are quantized to every file type; each
 * result loads on the reference backend and on OpenCL (where a device exists), each tensor has the
 * type llama-quantize's rules give it and dequantizes within its type's bound of the source, and
 * the logits stay within a bound per file type of the F32 model's. One fixture's rows are 256
 * long (K blocks fit everywhere), the other's 320 (the K types fall back) with a tied LM head.
 * Also: any thread count writes the same bytes, BF16 input, and requantizing only on request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf.h"
#include "temp_tree.h"
#include "tiny_model.h"

#define N_PROMPT 4
#define N_DECODE 2

static char dir[] = "/tmp/clinfer-test-quantize-XXXXXX";
static bool have_opencl;

typedef struct {
    const char *tag;
    uint32_t n_embd, n_head, n_head_kv;
    bool tied;
} fixture;

static const fixture fixtures[] = {
    {"k256", 256, 4, 2, false},
    {"e320", 320, 5, 1, true},
};

/* Logits of the quantized model against the F32 model's: NMSE bound per file type (measured on
 * these fixtures at up to 40% of each bound, on both backends). */
static const struct {
    clinfer_file_type ft;
    double logits_nmse;
} targets[] = {
    {CLINFER_FTYPE_F32, 1e-9},    {CLINFER_FTYPE_F16, 1e-5},    {CLINFER_FTYPE_Q8_0, 2e-4},
    {CLINFER_FTYPE_Q6_K, 2e-3},   {CLINFER_FTYPE_Q4_K_M, 3e-2}, {CLINFER_FTYPE_Q4_0, 3e-2},
    {CLINFER_FTYPE_Q4_1, 3e-2},   {CLINFER_FTYPE_Q5_0, 1e-2},   {CLINFER_FTYPE_Q5_1, 1e-2},
    {CLINFER_FTYPE_Q2_K, 1.5e-1}, {CLINFER_FTYPE_Q3_K_S, 6e-2}, {CLINFER_FTYPE_Q3_K_M, 6e-2},
    {CLINFER_FTYPE_Q5_K_S, 1e-2}, {CLINFER_FTYPE_Q5_K_M, 1e-2},
};

/* A tensor against its F32 source: NMSE bound per element type, about twice what rounding to
 * nearest costs the fixtures' uniform weights in [-a, a] (step^2 / 12 over the variance a^2 / 3:
 * Q8_0 step a / 127 gives 1.6e-5, Q6_K a / 32 2.4e-4, Q5_0 a / 16 9.8e-4, Q4_0 a / 8 3.9e-3). */
static double type_bound(clinfer_dtype type) {
    switch (type) {
    case CLINFER_DT_F32:
        return 0.0;
    case CLINFER_DT_F16:
        return 1e-7;
    case CLINFER_DT_Q8_0:
        return 3e-5;
    case CLINFER_DT_Q6_K:
        return 5e-4;
    case CLINFER_DT_Q5_0: /* step a / 16: 9.8e-4 */
    case CLINFER_DT_Q5_1:
    case CLINFER_DT_Q5_K:
        return 2e-3;
    case CLINFER_DT_Q3_K: /* step a / 4: 1.6e-2 */
        return 3e-2;
    case CLINFER_DT_Q2_K: /* 4 levels per 16 elements: 4.8e-2 measured (tests/test_quant.c) */
        return 1e-1;
    default: /* the 4-bit types */
        return 8e-3;
    }
}

static void path_of(char *path, size_t size, const char *tag, const char *suffix) {
    snprintf(path, size, "%s/%s%s.gguf", dir, tag, suffix);
}

static bool exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* What llama-quantize gives a tensor of these two-layer models: 1-D tensors keep their type;
 * the LM head (output, or token_embd when tied) gets Q6_K, or Q8_0 in Q8_0 files and where its
 * rows do not fit the file's type. In the last of two layers Q4_K_M and Q5_K_M give attn_v and
 * ffn_down Q6_K; Q3_K_M gives attn_v Q5_K, ffn_down and attn_output Q4_K; Q2_K gives attn_v Q3_K
 * (Q4_K from 4 query heads per KV head), ffn_down and attn_output Q3_K. Then rows of 320 fall
 * back: Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 (the LM head's too). */
static clinfer_dtype expected_type(const gguf_tensor *t, const char *name, clinfer_file_type ft,
                                   const fixture *fx) {
    static const clinfer_dtype base[] = {
        [CLINFER_FTYPE_F32] = CLINFER_DT_F32,     [CLINFER_FTYPE_F16] = CLINFER_DT_F16,
        [CLINFER_FTYPE_Q4_0] = CLINFER_DT_Q4_0,   [CLINFER_FTYPE_Q4_1] = CLINFER_DT_Q4_1,
        [CLINFER_FTYPE_Q8_0] = CLINFER_DT_Q8_0,   [CLINFER_FTYPE_Q4_K_M] = CLINFER_DT_Q4_K,
        [CLINFER_FTYPE_Q6_K] = CLINFER_DT_Q6_K,   [CLINFER_FTYPE_Q5_0] = CLINFER_DT_Q5_0,
        [CLINFER_FTYPE_Q5_1] = CLINFER_DT_Q5_1,   [CLINFER_FTYPE_Q2_K] = CLINFER_DT_Q2_K,
        [CLINFER_FTYPE_Q3_K_S] = CLINFER_DT_Q3_K, [CLINFER_FTYPE_Q3_K_M] = CLINFER_DT_Q3_K,
        [CLINFER_FTYPE_Q5_K_S] = CLINFER_DT_Q5_K, [CLINFER_FTYPE_Q5_K_M] = CLINFER_DT_Q5_K};
    clinfer_dtype type = base[ft];
    int64_t k = t->ne[0];
    if (t->n_dims == 1) return t->type;
    if (type == CLINFER_DT_F32 || type == CLINFER_DT_F16) return type;
    bool fits = k % (int64_t)dtype_block_elems(type) == 0;
    bool v = strstr(name, "attn_v.weight") != NULL, down = strstr(name, "ffn_down.") != NULL;
    bool out = strstr(name, "attn_output.weight") != NULL, last = !strncmp(name, "blk.1.", 6);
    if (!strcmp(name, "output.weight") || (fx->tied && !strcmp(name, "token_embd.weight")))
        type = !fits || type == CLINFER_DT_Q8_0 ? CLINFER_DT_Q8_0 : CLINFER_DT_Q6_K;
    else if ((ft == CLINFER_FTYPE_Q4_K_M || ft == CLINFER_FTYPE_Q5_K_M) && last && (v || down))
        type = CLINFER_DT_Q6_K;
    else if (ft == CLINFER_FTYPE_Q3_K_M && (v || down || out))
        type = v ? CLINFER_DT_Q5_K : CLINFER_DT_Q4_K;
    else if (ft == CLINFER_FTYPE_Q2_K && (v || down || out))
        type = v && fx->n_head >= 4 * fx->n_head_kv ? CLINFER_DT_Q4_K : CLINFER_DT_Q3_K;
    if (k % (int64_t)dtype_block_elems(type) == 0) return type;
    switch (type) {
    case CLINFER_DT_Q4_K:
        return CLINFER_DT_Q5_0;
    case CLINFER_DT_Q5_K:
        return CLINFER_DT_Q5_1;
    case CLINFER_DT_Q6_K:
        return CLINFER_DT_Q8_0;
    default: /* Q2_K, Q3_K */
        return CLINFER_DT_Q4_0;
    }
}

static float *dequantized(const gguf_tensor *t) {
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    float *x = malloc(n * sizeof *x);
    if (x) dequantize_row(t->type, t->data, x, n);
    return x;
}

/* Every tensor of out has the expected type and dequantizes near its source; the metadata is
 * the source's plus file type and quantization version. */
static void check_tensors(const char *src_path, const char *out_path, clinfer_file_type ft,
                          const fixture *fx) {
    gguf_file *src = NULL, *out = NULL;
    EXPECT_OK(gguf_open(src_path, &src));
    EXPECT_OK(gguf_open(out_path, &out));
    if (!src || !out) goto done;
    uint32_t v = 0;
    EXPECT_OK(gguf_get_u32(out, "general.file_type", &v));
    EXPECT(v == (uint32_t)ft, "%s: general.file_type %u, want %d", out_path, v, (int)ft);
    EXPECT_OK(gguf_get_u32(out, "general.quantization_version", &v));
    EXPECT(v == 2, "%s: general.quantization_version %u", out_path, v);
    EXPECT(gguf_kv_count(out) == gguf_kv_count(src) + 2, "%s: %zu keys, source %zu", out_path,
           gguf_kv_count(out), gguf_kv_count(src));
    const gguf_kv *tokens = NULL;
    EXPECT_OK(gguf_get_arr(out, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens));
    EXPECT(tokens && tokens->arr_n == tiny_model_n_vocab(), "%s: tokens lost", out_path);
    EXPECT(gguf_tensor_count(out) == gguf_tensor_count(src), "%s: %zu tensors, source %zu",
           out_path, gguf_tensor_count(out), gguf_tensor_count(src));
    for (size_t i = 0; i < gguf_tensor_count(src) && i < gguf_tensor_count(out); i++) {
        const gguf_tensor *s = gguf_tensor_at(src, i), *o = gguf_tensor_at(out, i);
        char name[GGUF_SHOW + 1];
        snprintf(name, sizeof name, "%.*s", gguf_show_len(s->name), s->name.ptr);
        EXPECT(gguf_str_eq(o->name, name), "%s: tensor %zu is not %s", out_path, i, name);
        clinfer_dtype want = expected_type(s, name, ft, fx);
        EXPECT(o->type == want, "%s: %s is %s, want %s", out_path, name, dtype_name(o->type),
               dtype_name(want));
        float *x = dequantized(s), *y = dequantized(o);
        size_t n = (size_t)(s->ne[0] * s->ne[1] * s->ne[2] * s->ne[3]);
        double e = x && y ? nmse(y, x, n) : 1.0;
        EXPECT(e <= type_bound(o->type), "%s: %s (%s) nmse %.3g > %.3g", out_path, name,
               dtype_name(o->type), e, type_bound(o->type));
        free(x);
        free(y);
    }
done:
    gguf_close(src);
    gguf_close(out);
}

static clinfer_status load(const char *path, clinfer_backend_kind kind, clinfer_model **m) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.backend = kind;
    return clinfer_model_load(path, &p, m);
}

/* The model's logits on the fixed tokens, NULL if it does not load. */
static float *logits_of(const char *path, clinfer_backend_kind kind) {
    clinfer_model *m = NULL;
    size_t n = (size_t)(1 + N_DECODE) * tiny_model_n_vocab();
    float *out = malloc(n * sizeof *out);
    clinfer_status st = out ? load(path, kind, &m) : CLINFER_ERR_OUT_OF_MEMORY;
    if (st == CLINFER_OK) st = tiny_model_decode(m, NULL, N_PROMPT, N_DECODE, out);
    EXPECT(st == CLINFER_OK, "%s on %s: %s", path,
           kind == CLINFER_BACKEND_OPENCL ? "OpenCL" : "reference", clinfer_last_error());
    clinfer_model_free(m);
    if (st == CLINFER_OK) return out;
    free(out);
    return NULL;
}

static clinfer_status quantize(const char *in, const char *out, clinfer_file_type ft,
                               uint32_t n_threads) {
    clinfer_quantize_params p;
    clinfer_quantize_params_default(&p);
    p.file_type = ft;
    p.n_threads = n_threads;
    return clinfer_quantize_file(in, out, &p);
}

static void write_fixture(const fixture *fx, clinfer_dtype type, const char *path) {
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", type);
    spec.n_embd = fx->n_embd;
    spec.n_head = fx->n_head;
    spec.n_head_kv = fx->n_head_kv;
    spec.n_ff = 512;
    spec.tied = fx->tied;
    EXPECT(tiny_model_write(&spec, path) == 0, "writing %s", path);
}

static void test_fixture(const fixture *fx) {
    char src[sizeof dir + 64], out[sizeof dir + 64], tmp[sizeof dir + 80];
    size_t n_logits = (size_t)(1 + N_DECODE) * tiny_model_n_vocab();
    path_of(src, sizeof src, fx->tag, "");
    write_fixture(fx, CLINFER_DT_F32, src);
    float *want = logits_of(src, CLINFER_BACKEND_REFERENCE);
    for (size_t i = 0; want && i < sizeof targets / sizeof targets[0]; i++) {
        clinfer_file_type ft = targets[i].ft;
        char suffix[32];
        snprintf(suffix, sizeof suffix, ".%s", clinfer_file_type_name(ft));
        path_of(out, sizeof out, fx->tag, suffix);
        EXPECT_OK(quantize(src, out, ft, 2));
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        EXPECT(!exists(tmp), "%s left behind", tmp);
        check_tensors(src, out, ft, fx);
        for (int cl = 0; cl < 1 + have_opencl; cl++) {
            float *got = logits_of(out, cl ? CLINFER_BACKEND_OPENCL : CLINFER_BACKEND_REFERENCE);
            double e = got ? nmse(got, want, n_logits) : 1.0;
            printf("%s %-6s %-9s logits nmse %.3g\n", fx->tag, clinfer_file_type_name(ft),
                   cl ? "OpenCL" : "reference", e);
            EXPECT(e <= targets[i].logits_nmse, "%s on %s: logits nmse %.3g > %.3g", out,
                   cl ? "OpenCL" : "reference", e, targets[i].logits_nmse);
            free(got);
        }
        if (ft != CLINFER_FTYPE_Q4_K_M) remove(out); /* kept for test_threads */
    }
    free(want);
    remove(src);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    *len = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        rewind(f);
        buf = n > 0 ? malloc((size_t)n) : NULL;
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) *len = (size_t)n;
    }
    if (f) fclose(f);
    return buf;
}

/* Threads 1 and 3 write the bytes threads 2 wrote (the fallback fixture's Q4_K_M, kept by
 * test_fixture), and the progress reports walk the tensors in order. */
typedef struct {
    size_t calls, next;
    bool in_order;
} progress_log;

static void on_progress(const clinfer_quantize_tensor *t, void *user) {
    progress_log *log = user;
    log->in_order = log->in_order && t->index == log->next++ && t->name && t->to_bytes > 0;
    log->calls++;
}

static void test_threads(void) {
    char src[sizeof dir + 64], two[sizeof dir + 64], other[sizeof dir + 64];
    path_of(src, sizeof src, "threads", "");
    path_of(two, sizeof two, "e320", ".Q4_K_M");
    path_of(other, sizeof other, "threads", ".Q4_K_M");
    write_fixture(&fixtures[1], CLINFER_DT_F32, src);
    size_t len2 = 0, len = 0;
    uint8_t *want = slurp(two, &len2);
    EXPECT(want && len2 > 0, "%s is missing", two);
    for (uint32_t n = 1; n <= 3; n += 2) {
        progress_log log = {0, 0, true};
        clinfer_quantize_params p;
        clinfer_quantize_params_default(&p);
        p.n_threads = n;
        p.progress = on_progress;
        p.progress_user = &log;
        EXPECT_OK(clinfer_quantize_file(src, other, &p));
        uint8_t *got = slurp(other, &len);
        EXPECT(got && want && len == len2 && !memcmp(got, want, len),
               "%u threads wrote other bytes than 2 (%zu vs %zu bytes)", n, len, len2);
        EXPECT(log.in_order && log.calls > 10, "%u threads: %zu progress calls, in order %d", n,
               log.calls, log.in_order);
        free(got);
        remove(other);
    }
    free(want);
    remove(two);
    remove(src);
}

/* BF16 weights: clinfer reads them but cannot run them; quantized they load. */
static void test_bf16(void) {
    char src[sizeof dir + 64], out[sizeof dir + 64];
    path_of(src, sizeof src, "bf16", "");
    path_of(out, sizeof out, "bf16", ".Q8_0");
    write_fixture(&fixtures[0], CLINFER_DT_BF16, src);
    clinfer_model *m = NULL;
    clinfer_status st = load(src, CLINFER_BACKEND_REFERENCE, &m);
    EXPECT(st == CLINFER_ERR_UNSUPPORTED && strstr(clinfer_last_error(), "BF16"),
           "loading BF16 weights: %s: %s", clinfer_status_str(st), clinfer_last_error());
    clinfer_model_free(m);
    EXPECT_OK(quantize(src, out, CLINFER_FTYPE_Q8_0, 0));
    check_tensors(src, out, CLINFER_FTYPE_Q8_0, &fixtures[0]);
    float *logits = logits_of(out, CLINFER_BACKEND_REFERENCE);
    free(logits);
    remove(out);
    remove(src);
}

/* A quantized model is quantized again only with allow_requantize; to its own type it is copied. */
static void test_requantize(void) {
    char src[sizeof dir + 64], out[sizeof dir + 64];
    path_of(src, sizeof src, "q8", "");
    path_of(out, sizeof out, "q8", ".out");
    write_fixture(&fixtures[0], CLINFER_DT_Q8_0, src);
    clinfer_status st = quantize(src, out, CLINFER_FTYPE_Q4_K_M, 0);
    EXPECT(st == CLINFER_ERR_UNSUPPORTED && strstr(clinfer_last_error(), "allow_requantize"),
           "requantizing without consent: %s: %s", clinfer_status_str(st), clinfer_last_error());
    EXPECT(!exists(out), "a refused quantization left %s", out);

    clinfer_quantize_params p;
    clinfer_quantize_params_default(&p);
    p.allow_requantize = true;
    EXPECT_OK(clinfer_quantize_file(src, out, &p));
    gguf_file *f = NULL;
    EXPECT_OK(gguf_open(out, &f));
    const gguf_tensor *t = f ? gguf_find_tensor(f, "blk.0.attn_q.weight") : NULL;
    EXPECT(t && t->type == CLINFER_DT_Q4_K, "requantized attn_q is %s",
           t ? dtype_name(t->type) : "missing");
    gguf_close(f);
    free(logits_of(out, CLINFER_BACKEND_REFERENCE));

    /* Q8_0 to Q8_0 changes no tensor: the data is copied byte for byte */
    EXPECT_OK(quantize(src, out, CLINFER_FTYPE_Q8_0, 0));
    gguf_file *a = NULL, *b = NULL;
    EXPECT_OK(gguf_open(src, &a));
    EXPECT_OK(gguf_open(out, &b));
    for (size_t i = 0; a && b && i < gguf_tensor_count(a); i++) {
        const gguf_tensor *x = gguf_tensor_at(a, i), *y = gguf_tensor_at(b, i);
        EXPECT(x->type == y->type && x->size == y->size && !memcmp(x->data, y->data, x->size),
               "tensor %zu changed", i);
    }
    gguf_close(a);
    gguf_close(b);
    remove(out);
    remove(src);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    size_t n_devices = 0;
    have_opencl = clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0;
    if (!have_opencl) printf("no OpenCL device: the reference backend only\n");
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
        test_fixture(&fixtures[i]);
    test_threads();
    test_bf16();
    test_requantize();
    remove_tree(dir);
    return finish("test_quantize");
}
