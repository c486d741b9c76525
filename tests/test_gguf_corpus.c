/* Hostile GGUF files: one hand-made file per bug class of the design notes (each a known crash or
 * CVE in some reader) must fail with CLINFER_ERR_FORMAT (or UNSUPPORTED for a real but
 * unsupported tensor type) and a message naming the field; every byte-prefix truncation and
 * thousands of seeded single-byte mutations of a valid file must open or fail cleanly. Buffers
 * are copied to exact-size allocations so the sanitizers see any read past the end.
 *
 * test_gguf_corpus [DIR] also writes the valid base file and every bad file into DIR, for
 * checking the CLI (`clinfer info`, `clinfer run`) on them. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "random.h"

#define F32 GGUF_TYPE_FLOAT32
#define U32 GGUF_TYPE_UINT32

/* A small valid model: metadata with a vocabulary and two tensors. A case that replaces a
 * well-known key with a bad one names it in omit. */
static void base(gguf_writer *w, const char *omit) {
    static const char *const tokens[] = {"<s>", "</s>", "a", "b"};
    static const float scores[] = {0, 0, -1, -2};
    static const int32_t types[] = {3, 3, 1, 1};
    float emb[8 * 4];
    uint8_t q[2 * 34];
    for (size_t i = 0; i < sizeof emb / sizeof emb[0]; i++)
        emb[i] = (float)i * 0.25f;
    for (size_t i = 0; i < sizeof q; i++)
        q[i] = (uint8_t)(i * 7);
#define KEEP(key) (!omit || strcmp(omit, key) != 0)
    if (KEEP("general.architecture")) gw_kv_str(w, "general.architecture", "llama");
    gw_kv_u32(w, "llama.block_count", 1);
    if (KEEP("tokenizer.ggml.tokens")) gw_kv_arr_str(w, "tokenizer.ggml.tokens", tokens, 4);
    if (KEEP("tokenizer.ggml.scores")) gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, 4);
    if (KEEP("tokenizer.ggml.token_type")) gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 4);
#undef KEEP
    gw_tensor(w, "token_embd.weight", CLINFER_DT_F32, 2, (const int64_t[]){8, 4}, emb);
    gw_tensor(w, "blk.0.attn_q.weight", CLINFER_DT_Q8_0, 2, (const int64_t[]){32, 2}, q);
}

/* Little-endian field encoders for raw values. */
static void le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}
static void le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

/* A raw kv holding an array header (element type, count) followed by extra bytes. */
static void raw_array(gguf_writer *w, const char *key, uint32_t elem, uint64_t n, const void *extra,
                      size_t extra_len) {
    uint8_t v[64];
    le32(v, elem);
    le64(v + 4, n);
    memcpy(v + 12, extra, extra_len);
    gw_kv_raw(w, key, strlen(key), GGUF_TYPE_ARRAY, v, 12 + extra_len);
}

static void raw_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                       uint32_t type, uint64_t offset) {
    gw_tensor_raw(w, name, strlen(name), n_dims, ne, type, offset);
    gw_data_min(w, 4096);
}

/* ---- cases built through the writer ------------------------------------------------------ */

static void k_string_past_eof(gguf_writer *w) {
    uint8_t v[11];
    le64(v, 1000);
    memcpy(v + 8, "abc", 3);
    gw_kv_raw(w, "general.name", 12, GGUF_TYPE_STRING, v, sizeof v);
}
static void k_string_len_wraps(gguf_writer *w) {
    uint8_t v[8];
    le64(v, UINT64_MAX - 3);
    gw_kv_raw(w, "general.name", 12, GGUF_TYPE_STRING, v, sizeof v);
}
static void k_array_past_eof(gguf_writer *w) {
    raw_array(w, "x.arr", U32, 1000, "\1\0\0\0", 4);
}
static void k_array_len_overflow(gguf_writer *w) {
    raw_array(w, "x.arr", U32, 1ull << 62, "\1\0\0\0", 4);
}
static void k_str_array_huge(gguf_writer *w) {
    raw_array(w, "x.arr", GGUF_TYPE_STRING, 1ull << 40, "", 0);
}
static void k_str_array_elem_past_eof(gguf_writer *w) {
    uint8_t e[8 + 1 + 8];
    le64(e, 1);
    e[8] = 'a';
    le64(e + 9, 5000);
    raw_array(w, "x.arr", GGUF_TYPE_STRING, 2, e, sizeof e);
}
static void k_empty_key(gguf_writer *w) {
    gw_kv_raw(w, "", 0, U32, "\1\0\0\0", 4);
}
static void k_nul_in_key(gguf_writer *w) {
    gw_kv_raw(w, "a\0b", 3, U32, "\1\0\0\0", 4);
}
static void k_duplicate_key(gguf_writer *w) {
    gw_kv_u32(w, "llama.block_count", 2);
}
static void k_unknown_type(gguf_writer *w) {
    gw_kv_raw(w, "x.val", 5, 13, "\1\0\0\0", 4);
}
static void k_unknown_type_huge(gguf_writer *w) {
    gw_kv_raw(w, "x.val", 5, UINT32_MAX, "\1\0\0\0", 4);
}
static void k_nested_array(gguf_writer *w) {
    uint8_t inner[12];
    le32(inner, U32);
    le64(inner + 4, 0);
    raw_array(w, "x.arr", GGUF_TYPE_ARRAY, 1, inner, sizeof inner);
}
static void k_unknown_elem_type(gguf_writer *w) {
    raw_array(w, "x.arr", 99, 1, "\0\0\0\0", 4);
}
static void k_bool_value(gguf_writer *w) {
    gw_kv_raw(w, "x.flag", 6, GGUF_TYPE_BOOL, "\2", 1);
}
static void k_bool_array(gguf_writer *w) {
    raw_array(w, "x.flags", GGUF_TYPE_BOOL, 3, "\1\0\7", 3);
}
static void k_alignment_type(gguf_writer *w) {
    uint64_t a = 32;
    gw_kv_scalar(w, "general.alignment", GGUF_TYPE_UINT64, &a);
}
static void k_alignment_zero(gguf_writer *w) {
    gw_kv_u32(w, "general.alignment", 0);
}
static void k_alignment_npot(gguf_writer *w) {
    gw_kv_u32(w, "general.alignment", 48);
}
static void k_alignment_huge(gguf_writer *w) {
    gw_kv_u32(w, "general.alignment", 1u << 31);
}
static void k_scores_type(gguf_writer *w) {
    static const int32_t s[] = {0, 0, -1, -2};
    gw_kv_arr_i32(w, "tokenizer.ggml.scores", s, 4);
}
static void k_scores_short(gguf_writer *w) {
    static const float s[] = {0, 0, -1};
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", s, 3);
}
static void k_tokens_type(gguf_writer *w) {
    gw_kv_str(w, "tokenizer.ggml.tokens", "a b c d");
}
static void k_token_type_type(gguf_writer *w) {
    static const float t[] = {1, 1, 1, 1};
    gw_kv_arr_f32(w, "tokenizer.ggml.token_type", t, 4);
}
static void k_arch_type(gguf_writer *w) {
    gw_kv_u32(w, "general.architecture", 1);
}

static void t_name_long(gguf_writer *w) {
    char name[66];
    memset(name, 'n', 65);
    name[65] = '\0';
    raw_tensor(w, name, 1, (const uint64_t[]){8}, CLINFER_DT_F32, 0);
}
static void t_name_empty(gguf_writer *w) {
    gw_tensor_raw(w, "", 0, 1, (const uint64_t[]){8}, CLINFER_DT_F32, 0);
}
static void t_name_duplicate(gguf_writer *w) {
    static const float x[8];
    gw_tensor(w, "token_embd.weight", CLINFER_DT_F32, 1, (const int64_t[]){8}, x);
}
static void t_dims_0(gguf_writer *w) {
    raw_tensor(w, "t", 0, NULL, CLINFER_DT_F32, 0);
}
static void t_dims_5(gguf_writer *w) {
    raw_tensor(w, "t", 5, (const uint64_t[]){1, 1, 1, 1, 1}, CLINFER_DT_F32, 0);
}
static void t_dims_huge(gguf_writer *w) {
    raw_tensor(w, "t", UINT32_MAX, (const uint64_t[]){8, 8, 8, 8, 8, 8, 8, 8}, CLINFER_DT_F32, 0);
}
static void t_dim_zero(gguf_writer *w) {
    raw_tensor(w, "t", 2, (const uint64_t[]){8, 0}, CLINFER_DT_F32, 0);
}
static void t_dim_negative(gguf_writer *w) {
    raw_tensor(w, "t", 2, (const uint64_t[]){(uint64_t)-4, 2}, CLINFER_DT_F32, 0);
}
static void t_elems_overflow(gguf_writer *w) {
    raw_tensor(w, "t", 3, (const uint64_t[]){1ull << 32, 1ull << 32, 4}, CLINFER_DT_F32, 0);
}
static void t_bytes_overflow(gguf_writer *w) {
    raw_tensor(w, "t", 2, (const uint64_t[]){1ull << 31, 1ull << 31}, CLINFER_DT_F32, 0);
}
static void t_block_multiple(gguf_writer *w) {
    raw_tensor(w, "t", 2, (const uint64_t[]){33, 2}, CLINFER_DT_Q8_0, 0);
}
static void t_type_unknown(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){32}, 99, 0);
}
static void t_type_retired(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){32}, 4 /* ggml's retired Q4_2 */, 0);
}
static void t_type_unsupported(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){256}, 23 /* IQ4_XS */, 0);
}
static void t_offset_unaligned(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){8}, CLINFER_DT_F32, 4);
}
/* Raw tensors get their own data region far after the base's tensors. */
static void t_overlap(gguf_writer *w) {
    raw_tensor(w, "t1", 1, (const uint64_t[]){16}, CLINFER_DT_F32, 1024);
    raw_tensor(w, "t2", 1, (const uint64_t[]){16}, CLINFER_DT_F32, 1024 + 32);
}
static void t_offset_wraps(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){16}, CLINFER_DT_F32, UINT64_MAX - 31);
}
static void t_past_eof(gguf_writer *w) {
    raw_tensor(w, "t", 1, (const uint64_t[]){16}, CLINFER_DT_F32, 4096);
}

/* ---- cases patched after serialization ---------------------------------------------------- */

static void p_magic(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    memcpy(b, "GGML", 4);
}
static void p_version_1(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le32(b + 4, 1);
}
static void p_version_4(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le32(b + 4, 4);
}
static void p_big_endian(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le32(b + 4, 3u << 24);
}
static void p_n_tensors_huge(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le64(b + 8, UINT64_MAX);
}
static void p_n_tensors_overflow(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le64(b + 8, (UINT64_MAX / 33) + 2); /* times the minimum tensor info size wraps */
}
static void p_n_tensors_plus_one(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le64(b + 8, 3);
}
static void p_n_kv_huge(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le64(b + 16, UINT64_MAX);
}
static void p_n_kv_overflow(uint8_t *b, size_t *len, gw_sections s) {
    (void)len, (void)s;
    le64(b + 16, (UINT64_MAX / 14) + 2);
}
static void p_key_len_past_eof(uint8_t *b, size_t *len, gw_sections s) {
    (void)len;
    le64(b + s.header_end, 1ull << 40);
}
static void p_empty_file(uint8_t *b, size_t *len, gw_sections s) {
    (void)b, (void)s;
    *len = 0;
}
static void p_cut_magic(uint8_t *b, size_t *len, gw_sections s) {
    (void)b, (void)s;
    *len = 3;
}
static void p_cut_header(uint8_t *b, size_t *len, gw_sections s) {
    (void)b, (void)s;
    *len = 12;
}
static void p_cut_header_end(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.header_end;
}
static void p_cut_in_kv(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.header_end + 8 + 5; /* inside the first key */
}
static void p_cut_kv_end(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.kv_end;
}
static void p_cut_tensor_offset(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.tensors_end - 1;
}
static void p_cut_tensors_end(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.tensors_end;
}
static void p_cut_data_start(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.data_start;
}
static void p_cut_last_byte(uint8_t *b, size_t *len, gw_sections s) {
    (void)b;
    *len = s.total - 1;
}

typedef struct {
    const char *name;
    const char *omit;                                        /* base key the case replaces */
    void (*build)(gguf_writer *w);                           /* adds to the base model */
    void (*patch)(uint8_t *buf, size_t *len, gw_sections s); /* edits the serialized file */
    clinfer_status status;
    const char *expect; /* the message must contain this */
} bad_case;

#define FMT CLINFER_ERR_FORMAT
static const bad_case cases[] = {
    {"bad-magic", NULL, NULL, p_magic, FMT, "magic"},
    {"version-1", NULL, NULL, p_version_1, FMT, "version 1"},
    {"version-4", NULL, NULL, p_version_4, FMT, "version 4"},
    {"big-endian", NULL, NULL, p_big_endian, FMT, "big-endian"},
    {"n-tensors-huge", NULL, NULL, p_n_tensors_huge, FMT, "n_tensors 18446744073709551615"},
    {"n-tensors-overflow", NULL, NULL, p_n_tensors_overflow, FMT, "n_tensors"},
    {"n-tensors-one-more", NULL, NULL, p_n_tensors_plus_one, FMT, "tensor 2"},
    {"n-kv-huge", NULL, NULL, p_n_kv_huge, FMT, "n_kv 18446744073709551615"},
    {"n-kv-overflow", NULL, NULL, p_n_kv_overflow, FMT, "n_kv"},
    {"key-length-past-eof", NULL, NULL, p_key_len_past_eof, FMT, "key: length 1099511627776"},
    {"string-past-eof", NULL, k_string_past_eof, NULL, FMT, "string value: length 1000"},
    {"string-length-wraps", NULL, k_string_len_wraps, NULL, FMT, "string value: length"},
    {"array-past-eof", NULL, k_array_past_eof, NULL, FMT, "array length 1000"},
    {"array-length-overflow", NULL, k_array_len_overflow, NULL, FMT, "array length 4611686"},
    {"string-array-huge", NULL, k_str_array_huge, NULL, FMT, "array length 1099511627776"},
    {"string-array-element-past-eof", NULL, k_str_array_elem_past_eof, NULL, FMT,
     "array string element: length 5000"},
    {"empty-key", NULL, k_empty_key, NULL, FMT, "key is empty"},
    {"nul-in-key", NULL, k_nul_in_key, NULL, FMT, "key 'a' holds a NUL byte"},
    {"duplicate-key", NULL, k_duplicate_key, NULL, FMT, "duplicate key 'llama.block_count'"},
    {"unknown-value-type", NULL, k_unknown_type, NULL, FMT, "unknown value type 13"},
    {"unknown-value-type-huge", NULL, k_unknown_type_huge, NULL, FMT,
     "unknown value type 4294967295"},
    {"nested-array", NULL, k_nested_array, NULL, FMT, "nested arrays"},
    {"unknown-array-element-type", NULL, k_unknown_elem_type, NULL, FMT,
     "unknown array element type 99"},
    {"bool-value", NULL, k_bool_value, NULL, FMT, "'x.flag': bool value 2"},
    {"bool-array-element", NULL, k_bool_array, NULL, FMT, "bool array element 2"},
    {"alignment-wrong-type", NULL, k_alignment_type, NULL, FMT,
     "'general.alignment': value has type u64, expected u32"},
    {"alignment-zero", NULL, k_alignment_zero, NULL, FMT, "'general.alignment' is 0"},
    {"alignment-not-power-of-two", NULL, k_alignment_npot, NULL, FMT, "'general.alignment' is 48"},
    {"alignment-huge", NULL, k_alignment_huge, NULL, FMT, "'general.alignment' is 2147483648"},
    {"scores-wrong-type", "tokenizer.ggml.scores", k_scores_type, NULL, FMT,
     "'tokenizer.ggml.scores': value has type array of i32, expected array of f32"},
    {"scores-shorter-than-vocab", "tokenizer.ggml.scores", k_scores_short, NULL, FMT,
     "'tokenizer.ggml.scores' has 3 elements"},
    {"tokens-wrong-type", "tokenizer.ggml.tokens", k_tokens_type, NULL, FMT,
     "'tokenizer.ggml.tokens': value has type string"},
    {"token-type-wrong-type", "tokenizer.ggml.token_type", k_token_type_type, NULL, FMT,
     "'tokenizer.ggml.token_type': value has type array of f32"},
    {"architecture-wrong-type", "general.architecture", k_arch_type, NULL, FMT,
     "'general.architecture': value has type u32"},
    {"tensor-name-too-long", NULL, t_name_long, NULL, FMT,
     "tensor name of 65 bytes is longer than 64"},
    {"tensor-name-empty", NULL, t_name_empty, NULL, FMT, "tensor name is empty"},
    {"tensor-name-duplicate", NULL, t_name_duplicate, NULL, FMT,
     "duplicate tensor name 'token_embd.weight'"},
    {"n-dims-0", NULL, t_dims_0, NULL, FMT, "'t': n_dims 0"},
    {"n-dims-5", NULL, t_dims_5, NULL, FMT, "'t': n_dims 5"},
    {"n-dims-huge", NULL, t_dims_huge, NULL, FMT, "n_dims 4294967295"},
    {"dim-zero", NULL, t_dim_zero, NULL, FMT, "ne[1] = 0"},
    {"dim-negative", NULL, t_dim_negative, NULL, FMT, "ne[0] = -4"},
    {"element-count-overflow", NULL, t_elems_overflow, NULL, FMT, "element count overflows"},
    {"byte-size-overflow", NULL, t_bytes_overflow, NULL, FMT, "byte size"},
    {"ne0-not-block-multiple", NULL, t_block_multiple, NULL, FMT,
     "ne[0] = 33 is not a multiple of the Q8_0 block size 32"},
    {"tensor-type-unknown", NULL, t_type_unknown, NULL, FMT, "unknown tensor type 99"},
    {"tensor-type-retired", NULL, t_type_retired, NULL, FMT, "unknown tensor type 4"},
    {"tensor-type-unsupported", NULL, t_type_unsupported, NULL, CLINFER_ERR_UNSUPPORTED,
     "tensor type IQ4_XS (23)"},
    {"offset-unaligned", NULL, t_offset_unaligned, NULL, FMT,
     "'t': offset 4 is not a multiple of the alignment 32"},
    {"tensors-overlap", NULL, t_overlap, NULL, FMT, "'t1' (offset 1024, size 64) overlaps"},
    {"offset-wraps", NULL, t_offset_wraps, NULL, FMT, "past end of file"},
    {"tensor-past-eof", NULL, t_past_eof, NULL, FMT, "'t': offset 4096 + size 64 is past end"},
    {"empty-file", NULL, NULL, p_empty_file, FMT, "magic"},
    {"cut-in-magic", NULL, NULL, p_cut_magic, FMT, "magic"},
    {"cut-in-header", NULL, NULL, p_cut_header, FMT, "n_tensors"},
    {"cut-after-header", NULL, NULL, p_cut_header_end, FMT, "n_kv"},
    {"cut-in-key", NULL, NULL, p_cut_in_kv, FMT, "n_kv"},
    {"cut-after-metadata", NULL, NULL, p_cut_kv_end, FMT, "tensor 0: tensor name"},
    {"cut-in-tensor-offset", NULL, NULL, p_cut_tensor_offset, FMT, "tensor offset"},
    {"cut-after-tensor-infos", NULL, NULL, p_cut_tensors_end, FMT, "past end of file"},
    {"cut-at-data", NULL, NULL, p_cut_data_start, FMT, "past end of file"},
    {"cut-last-byte", NULL, NULL, p_cut_last_byte, FMT, "past end of file"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* Serializes the base model with a case applied; the caller frees *buf. sections (optional)
 * receives the layout before any patch. */
static int build(const bad_case *c, uint8_t **buf, size_t *len, gw_sections *sections) {
    gguf_writer *w = gw_new();
    if (!w) return -1;
    base(w, c ? c->omit : NULL);
    if (c && c->build) c->build(w);
    int rc = gw_to_memory(w, buf, len);
    if (rc == 0 && c && c->patch) c->patch(*buf, len, gw_last_sections(w));
    if (sections) *sections = gw_last_sections(w);
    gw_free(w);
    return rc;
}

static volatile unsigned touched; /* keeps the reads below from being optimised away */

/* Opens an exact-size copy; on success touches every string and tensor byte so a bad offset
 * table or range shows up under the sanitizers. */
static clinfer_status open_copy(const uint8_t *buf, size_t len) {
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return CLINFER_ERR_OUT_OF_MEMORY;
    memcpy(copy, buf, len);
    gguf_file *f = NULL;
    err_clear();
    clinfer_status st = gguf_open_memory(copy, len, &f);
    if (st == CLINFER_OK) {
        unsigned sum = 0;
        for (size_t i = 0; i < gguf_kv_count(f); i++) {
            const gguf_kv *kv = gguf_kv_at(f, i);
            for (uint64_t j = 0;
                 kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && j < kv->arr_n;
                 j++) {
                gguf_str s = gguf_arr_str(kv, j);
                for (uint64_t k = 0; k < s.len; k++)
                    sum += (uint8_t)s.ptr[k];
            }
        }
        for (size_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            for (uint64_t k = 0; k < t->size; k++)
                sum += ((const uint8_t *)t->data)[k];
        }
        touched += sum;
        gguf_close(f);
    } else {
        EXPECT(f == NULL, "no handle on failure");
        EXPECT(clinfer_last_error()[0] != '\0', "failure status %d has a message", st);
    }
    free(copy);
    return st;
}

static void test_cases(const char *dump_dir) {
    for (size_t i = 0; i < N_CASES; i++) {
        const bad_case *c = &cases[i];
        uint8_t *buf;
        size_t len;
        if (build(c, &buf, &len, NULL) != 0) {
            EXPECT(0, "case %s: the writer failed", c->name);
            continue;
        }
        clinfer_status st = open_copy(buf, len);
        EXPECT(st == c->status, "case %s: status %s, expected %s (%s)", c->name,
               clinfer_status_str(st), clinfer_status_str(c->status), clinfer_last_error());
        EXPECT(strstr(clinfer_last_error(), c->expect) != NULL,
               "case %s: message \"%s\" lacks \"%s\"", c->name, clinfer_last_error(), c->expect);
        if (dump_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%02zu-%s.gguf", dump_dir, i, c->name);
            FILE *f = fopen(path, "wb");
            EXPECT(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "writing %s", path);
        }
        free(buf);
    }
}

static void test_truncations_and_mutations(const char *dump_dir) {
    uint8_t *buf;
    gw_sections sec;
    size_t len;
    if (build(NULL, &buf, &len, &sec) != 0) {
        EXPECT(0, "the writer failed on the base model");
        return;
    }
    EXPECT(open_copy(buf, len) == CLINFER_OK, "the base model opens: %s", clinfer_last_error());
    if (dump_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/valid.gguf", dump_dir);
        FILE *f = fopen(path, "wb");
        EXPECT(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "writing %s", path);
    }

    /* The base ends with tensor data, so every proper prefix is malformed. */
    for (size_t n = 0; n < len; n++) {
        clinfer_status st = open_copy(buf, n);
        EXPECT(st == CLINFER_ERR_FORMAT, "prefix of %zu bytes: %s", n, clinfer_status_str(st));
    }

    rng_seed(20261122);
    size_t n_ok = 0;
    for (int i = 0; i < 3000; i++) {
        /* Most mutations hit the header, metadata and tensor infos: data bytes are opaque. */
        size_t span = rng_next() % 4 ? sec.tensors_end : len;
        size_t pos = (size_t)(rng_next() % span);
        uint8_t old = buf[pos];
        /* Half the mutations set a boundary value, which hits counts and lengths harder. */
        static const uint8_t specials[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x20};
        uint64_t r = rng_next();
        buf[pos] = r & 1 ? specials[(r >> 1) % sizeof specials] : (uint8_t)(r >> 8);
        clinfer_status st = open_copy(buf, len);
        EXPECT(st == CLINFER_OK || st == CLINFER_ERR_FORMAT || st == CLINFER_ERR_UNSUPPORTED,
               "mutation %d (byte %zu = 0x%02x): %s", i, pos, buf[pos], clinfer_status_str(st));
        n_ok += st == CLINFER_OK;
        buf[pos] = old;
    }
    printf("mutations: %zu of 3000 still open\n", n_ok);
    free(buf);
}

int main(int argc, char **argv) {
    const char *dump_dir = argc > 1 ? argv[1] : NULL;
    printf("%zu bad-file cases\n", N_CASES);
    test_cases(dump_dir);
    test_truncations_and_mutations(dump_dir);
    return finish("test_gguf_corpus");
}
