/* Valid GGUF files: every value type and every tensor type written by the test writer reads back
 * with the same values, shapes and bytes, from memory and from a mapped file. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "random.h"

typedef struct {
    const char *name;
    clinfer_dtype type;
    uint32_t n_dims;
    int64_t ne[4];
} tensor_spec;

static const tensor_spec tensors[] = {
    {"tok_embd.weight", CLINFER_DT_F32, 2, {5, 3, 1, 1}},
    {"norm.weight", CLINFER_DT_F16, 1, {7, 1, 1, 1}},
    {"blk.0.attn_q.weight", CLINFER_DT_Q8_0, 2, {64, 2, 1, 1}},
    {"blk.0.attn_k.weight", CLINFER_DT_Q4_0, 1, {32, 1, 1, 1}},
    {"blk.0.attn_v.weight", CLINFER_DT_Q4_1, 3, {32, 1, 2, 1}},
    {"blk.0.ffn_up.weight", CLINFER_DT_Q4_K, 4, {256, 1, 1, 2}},
    {"blk.0.ffn_down.weight", CLINFER_DT_Q6_K, 2, {256, 2, 1, 1}},
};
#define N_TENSORS (sizeof tensors / sizeof tensors[0])

static size_t tensor_bytes(const tensor_spec *t) {
    return dtype_row_bytes(t->type, (size_t)t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Fills data[i] with random bytes for tensor i (caller frees). */
static void add_tensors(gguf_writer *w, uint8_t *data[N_TENSORS]) {
    for (size_t i = 0; i < N_TENSORS; i++) {
        size_t n = tensor_bytes(&tensors[i]);
        data[i] = malloc(n);
        for (size_t j = 0; j < n; j++)
            data[i][j] = (uint8_t)rng_next();
        gw_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims, tensors[i].ne, data[i]);
    }
}

static const char *const vocab[] = {"<s>", "</s>", "", "hello", " world", "\xe2\x96\x81x"};
#define N_VOCAB (sizeof vocab / sizeof vocab[0])

static void add_metadata(gguf_writer *w) {
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = 1ull << 40;
    int64_t i64 = -(1ll << 40);
    double f64 = 2.25;
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_scalar(w, "t.u8", GGUF_TYPE_UINT8, &u8);
    gw_kv_scalar(w, "t.i8", GGUF_TYPE_INT8, &i8);
    gw_kv_scalar(w, "t.u16", GGUF_TYPE_UINT16, &u16);
    gw_kv_scalar(w, "t.i16", GGUF_TYPE_INT16, &i16);
    gw_kv_u32(w, "t.u32", 4000000000u);
    gw_kv_i32(w, "t.i32", -2000000000);
    gw_kv_f32(w, "t.f32", 1.5f);
    gw_kv_bool(w, "t.bool", true);
    gw_kv_scalar(w, "t.u64", GGUF_TYPE_UINT64, &u64);
    gw_kv_scalar(w, "t.i64", GGUF_TYPE_INT64, &i64);
    gw_kv_scalar(w, "t.f64", GGUF_TYPE_FLOAT64, &f64);
    gw_kv_str(w, "t.str", "caf\xc3\xa9");
    gw_kv_str(w, "t.empty", "");

    float scores[N_VOCAB];
    int32_t types[N_VOCAB];
    for (size_t i = 0; i < N_VOCAB; i++) {
        scores[i] = -(float)i * 0.5f;
        types[i] = (int32_t)(i % 3) - 1;
    }
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", vocab, N_VOCAB);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, N_VOCAB);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, N_VOCAB);
    const uint16_t a16[] = {1, 65535, 7};
    const bool abool[] = {true, false};
    const double af64[] = {-1.0, 0.125};
    gw_kv_arr(w, "t.arr_u16", GGUF_TYPE_UINT16, a16, 3);
    gw_kv_arr(w, "t.arr_bool", GGUF_TYPE_BOOL, abool, 2);
    gw_kv_arr(w, "t.arr_f64", GGUF_TYPE_FLOAT64, af64, 2);
    gw_kv_arr_str(w, "t.arr_empty", NULL, 0);
}

static void check_metadata(const gguf_file *f) {
    uint32_t u32;
    int32_t i32;
    float f32;
    bool b;
    gguf_str s;
    const gguf_kv *kv;

    EXPECT(gguf_kv_count(f) == 21, "kv count %zu", gguf_kv_count(f));
    kv = gguf_kv_at(f, 1);
    EXPECT(kv && gguf_str_eq(kv->key, "t.u8") && kv->type == GGUF_TYPE_UINT8, "kv_at keeps order");
    EXPECT(gguf_kv_at(f, 21) == NULL, "kv_at past the end");

    EXPECT_OK(gguf_get_u32(f, "t.u8", &u32));
    EXPECT(u32 == 200, "u8 read as u32: %u", u32);
    EXPECT_OK(gguf_get_i32(f, "t.i8", &i32));
    EXPECT(i32 == -5, "i8: %d", i32);
    EXPECT_OK(gguf_get_u32(f, "t.u16", &u32));
    EXPECT(u32 == 60000, "u16: %u", u32);
    EXPECT_OK(gguf_get_i32(f, "t.i16", &i32));
    EXPECT(i32 == -30000, "i16: %d", i32);
    EXPECT_OK(gguf_get_u32(f, "t.u32", &u32));
    EXPECT(u32 == 4000000000u, "u32: %u", u32);
    EXPECT_OK(gguf_get_i32(f, "t.i32", &i32));
    EXPECT(i32 == -2000000000, "i32: %d", i32);
    EXPECT_OK(gguf_get_f32(f, "t.f32", &f32));
    EXPECT(f32 == 1.5f, "f32: %g", f32);
    EXPECT_OK(gguf_get_f32(f, "t.f64", &f32));
    EXPECT(f32 == 2.25f, "f64 read as f32: %g", f32);
    EXPECT_OK(gguf_get_bool(f, "t.bool", &b));
    EXPECT(b, "bool");
    kv = gguf_find_kv(f, "t.u64");
    EXPECT(kv && kv->type == GGUF_TYPE_UINT64 && memcmp(kv->data, "\0\0\0\0\0\1\0\0", 8) == 0,
           "u64 raw bytes");
    kv = gguf_find_kv(f, "t.i64");
    EXPECT(kv && kv->type == GGUF_TYPE_INT64 && memcmp(kv->data, "\0\0\0\0\0\xff\xff\xff", 8) == 0,
           "i64 raw bytes");
    EXPECT_OK(gguf_get_str(f, "t.str", &s));
    EXPECT(s.len == 5 && memcmp(s.ptr, "caf\xc3\xa9", 5) == 0, "string");
    EXPECT_OK(gguf_get_str(f, "t.empty", &s));
    EXPECT(s.len == 0, "empty string has length %llu", (unsigned long long)s.len);

    /* Conversions that do not fit, wrong types and absent keys. */
    EXPECT(gguf_get_u32(f, "t.i8", &u32) == CLINFER_ERR_FORMAT, "negative into u32");
    EXPECT(gguf_get_i32(f, "t.u32", &i32) == CLINFER_ERR_FORMAT, "4e9 into i32");
    EXPECT(gguf_get_u32(f, "t.u64", &u32) == CLINFER_ERR_FORMAT, "2^40 into u32");
    EXPECT(strstr(clinfer_last_error(), "t.u64") != NULL, "message names the key: %s",
           clinfer_last_error());
    EXPECT(gguf_get_u32(f, "t.f32", &u32) == CLINFER_ERR_FORMAT, "float into u32");
    EXPECT(gguf_get_str(f, "t.u32", &s) == CLINFER_ERR_FORMAT, "u32 as string");
    EXPECT(gguf_get_bool(f, "t.u8", &b) == CLINFER_ERR_FORMAT, "u8 as bool");
    EXPECT(gguf_get_f32(f, "t.str", &f32) == CLINFER_ERR_FORMAT, "string as f32");
    EXPECT(strstr(clinfer_last_error(), "t.str") && strstr(clinfer_last_error(), "string"),
           "message names key and type: %s", clinfer_last_error());
    EXPECT(gguf_get_u32(f, "no.such.key", &u32) == CLINFER_ERR_NOT_FOUND, "absent key");
    EXPECT(strstr(clinfer_last_error(), "no.such.key") != NULL, "message: %s",
           clinfer_last_error());
    EXPECT(gguf_find_kv(f, "t.u") == NULL && gguf_find_kv(f, "t.u88") == NULL, "prefix lookups");

    /* Arrays. */
    EXPECT_OK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv));
    EXPECT(kv->arr_n == N_VOCAB, "token count %llu", (unsigned long long)kv->arr_n);
    for (size_t i = 0; i < N_VOCAB && kv->arr_n == N_VOCAB; i++)
        EXPECT(gguf_str_eq(gguf_arr_str(kv, i), vocab[i]), "token %zu", i);
    EXPECT_OK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &kv));
    for (size_t i = 0; i < N_VOCAB; i++)
        EXPECT(gguf_arr_f32(kv, i) == -(float)i * 0.5f, "score %zu", i);
    EXPECT_OK(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &kv));
    for (size_t i = 0; i < N_VOCAB; i++)
        EXPECT(gguf_arr_i32(kv, i) == (int32_t)(i % 3) - 1, "token type %zu", i);
    EXPECT(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_INT32, &kv) == CLINFER_ERR_FORMAT,
           "element type is checked");
    EXPECT(gguf_get_arr(f, "t.u32", GGUF_TYPE_UINT32, &kv) == CLINFER_ERR_FORMAT,
           "scalar is not an array");
    EXPECT_OK(gguf_get_arr(f, "t.arr_u16", GGUF_TYPE_UINT16, &kv));
    EXPECT(kv->arr_n == 3 && memcmp(kv->data, "\x01\x00\xff\xff\x07\x00", 6) == 0, "u16 array");
    EXPECT_OK(gguf_get_arr(f, "t.arr_bool", GGUF_TYPE_BOOL, &kv));
    EXPECT(kv->arr_n == 2 && kv->data[0] == 1 && kv->data[1] == 0, "bool array");
    EXPECT_OK(gguf_get_arr(f, "t.arr_f64", GGUF_TYPE_FLOAT64, &kv));
    EXPECT(kv->arr_n == 2 && memcmp(kv->data + 8, "\0\0\0\0\0\0\xc0\x3f", 8) == 0, "f64 array");
    EXPECT_OK(gguf_get_arr(f, "t.arr_empty", GGUF_TYPE_STRING, &kv));
    EXPECT(kv->arr_n == 0, "empty array");
}

static void check_tensors(const gguf_file *f, const uint8_t *base, size_t data_start,
                          uint64_t alignment, uint8_t *const data[N_TENSORS]) {
    EXPECT(gguf_tensor_count(f) == N_TENSORS, "tensor count %zu", gguf_tensor_count(f));
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tensor_spec *s = &tensors[i];
        const gguf_tensor *t = gguf_find_tensor(f, s->name);
        EXPECT(t != NULL, "tensor %s found", s->name);
        if (!t) continue;
        EXPECT(t == gguf_tensor_at(f, i), "tensor_at keeps file order for %s", s->name);
        EXPECT(t->type == s->type && t->n_dims == s->n_dims, "%s type %d dims %u", s->name, t->type,
               t->n_dims);
        for (int d = 0; d < 4; d++)
            EXPECT(t->ne[d] == s->ne[d], "%s ne[%d] = %lld", s->name, d, (long long)t->ne[d]);
        EXPECT(t->size == tensor_bytes(s), "%s size %llu", s->name, (unsigned long long)t->size);
        EXPECT(t->offset % alignment == 0, "%s offset %llu aligned to %llu", s->name,
               (unsigned long long)t->offset, (unsigned long long)alignment);
        EXPECT((const uint8_t *)t->data == base + data_start + t->offset, "%s data pointer",
               s->name);
        EXPECT(memcmp(t->data, data[i], t->size) == 0, "%s data bytes", s->name);
    }
    EXPECT(gguf_find_tensor(f, "missing.weight") == NULL, "absent tensor");
    EXPECT(gguf_tensor_at(f, N_TENSORS) == NULL, "tensor_at past the end");
}

static void test_round_trip(void) {
    uint8_t *data[N_TENSORS];
    gguf_writer *w = gw_new();
    add_metadata(w);
    add_tensors(w, data);
    uint8_t *buf;
    size_t len;
    EXPECT(gw_to_memory(w, &buf, &len) == 0, "writer");
    gw_sections sec = gw_last_sections(w);

    gguf_file *f = NULL;
    EXPECT_OK(gguf_open_memory(buf, len, &f));
    if (f) {
        EXPECT(gguf_version(f) == 3 && gguf_file_size(f) == len, "version and size");
        check_metadata(f);
        check_tensors(f, buf, sec.data_start, 32, data);
        gguf_close(f);
    }

    /* The same bytes as a mapped file. */
    char path[] = "/tmp/clinfer_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0 && write(fd, buf, len) == (ssize_t)len, "temp file");
    if (fd >= 0) close(fd);
    f = NULL;
    EXPECT_OK(gguf_open(path, &f));
    if (f) {
        const gguf_tensor *t0 = gguf_tensor_at(f, 0);
        const uint8_t *base = (const uint8_t *)t0->data - sec.data_start - t0->offset;
        EXPECT(((uintptr_t)t0->data & 31) == 0, "mapped data is aligned");
        check_metadata(f);
        check_tensors(f, base, sec.data_start, 32, data);
        gguf_close(f);
    }
    unlink(path);

    /* Version 2 has the same layout. */
    buf[4] = 2;
    f = NULL;
    EXPECT_OK(gguf_open_memory(buf, len, &f));
    EXPECT(f && gguf_version(f) == 2, "version 2");
    gguf_close(f);

    free(buf);
    gw_free(w);
    for (size_t i = 0; i < N_TENSORS; i++)
        free(data[i]);
}

static void test_alignment(void) {
    uint8_t *data[N_TENSORS];
    gguf_writer *w = gw_new();
    gw_kv_u32(w, "general.alignment", 64);
    add_tensors(w, data);
    uint8_t *buf;
    size_t len;
    EXPECT(gw_to_memory(w, &buf, &len) == 0, "writer");
    gguf_file *f = NULL;
    EXPECT_OK(gguf_open_memory(buf, len, &f));
    EXPECT(gw_last_sections(w).data_start % 64 == 0, "writer aligned the data section");
    if (f) check_tensors(f, buf, gw_last_sections(w).data_start, 64, data);
    gguf_close(f);
    free(buf);
    gw_free(w);
    for (size_t i = 0; i < N_TENSORS; i++)
        free(data[i]);
}

/* A vocabulary-only file may end right after its metadata, without alignment padding. */
static void test_no_tensors(void) {
    gguf_writer *w = gw_new();
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", vocab, N_VOCAB);
    uint8_t *buf;
    size_t len;
    EXPECT(gw_to_memory(w, &buf, &len) == 0, "writer");
    size_t end = gw_last_sections(w).tensors_end;
    gguf_file *f = NULL;
    EXPECT_OK(gguf_open_memory(buf, end, &f));
    EXPECT(f && gguf_tensor_count(f) == 0 && gguf_kv_count(f) == 2, "counts");
    gguf_close(f);
    free(buf);
    gw_free(w);
}

static void test_io_errors(void) {
    gguf_file *f = NULL;
    EXPECT(gguf_open("/nonexistent/model.gguf", &f) == CLINFER_ERR_IO && f == NULL, "missing");
    EXPECT(strstr(clinfer_last_error(), "/nonexistent/model.gguf") != NULL, "message: %s",
           clinfer_last_error());
    EXPECT(gguf_open("/tmp", &f) == CLINFER_ERR_IO, "directory");
    EXPECT(gguf_open_memory(NULL, 0, &f) == CLINFER_ERR_FORMAT, "empty buffer");
    EXPECT(gguf_open_memory(NULL, 4, &f) == CLINFER_ERR_INVALID_ARGUMENT, "NULL buffer");
}

int main(void) {
    rng_seed(42);
    test_round_trip();
    test_alignment();
    test_no_tensors();
    test_io_errors();
    return finish("test_gguf");
}
