/* Writes the seed corpus of fuzz_gguf into a folder: small valid files that together use every
 * value type, every tensor type, versions 2 and 3, a non-default alignment and a file without
 * tensors, so mutations start from deep inside the format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"

static int save(gguf_writer *w, const char *dir, const char *name, uint32_t version) {
    char path[4096];
    uint8_t *buf;
    size_t len;
    int rc = -1;
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    if (gw_to_memory(w, &buf, &len) == 0) {
        buf[4] = (uint8_t)version; /* v2 and v3 share the layout */
        FILE *f = fopen(path, "wb");
        rc = f && fwrite(buf, 1, len, f) == len ? 0 : -1;
        if (f && fclose(f) != 0) rc = -1;
        free(buf);
    }
    gw_free(w);
    if (rc != 0) fprintf(stderr, "gguf_seeds: cannot write %s\n", path);
    return rc;
}

static void vocab(gguf_writer *w) {
    static const char *const tokens[] = {"<s>", "</s>", "a", "\u0120b", ""};
    static const float scores[] = {0, 0, -1, -2, -3};
    static const int32_t types[] = {3, 3, 1, 1, 1};
    static const char *const merges[] = {"a b", "\u0120 b"};
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", tokens, 5);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, 5);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 5);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, 2);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 0);
}

static void scalars(gguf_writer *w) {
    uint8_t u8 = 7;
    int8_t i8 = -7;
    uint16_t u16 = 700;
    int16_t i16 = -700;
    uint64_t u64 = 70000000000ull;
    int64_t i64 = -70000000000ll;
    double f64 = 0.5;
    static const int16_t a16[] = {1, -2, 3};
    static const bool abool[] = {true, false};
    gw_kv_scalar(w, "s.u8", GGUF_TYPE_UINT8, &u8);
    gw_kv_scalar(w, "s.i8", GGUF_TYPE_INT8, &i8);
    gw_kv_scalar(w, "s.u16", GGUF_TYPE_UINT16, &u16);
    gw_kv_scalar(w, "s.i16", GGUF_TYPE_INT16, &i16);
    gw_kv_u32(w, "s.u32", 70000);
    gw_kv_i32(w, "s.i32", -70000);
    gw_kv_f32(w, "s.f32", 0.25f);
    gw_kv_bool(w, "s.bool", true);
    gw_kv_scalar(w, "s.u64", GGUF_TYPE_UINT64, &u64);
    gw_kv_scalar(w, "s.i64", GGUF_TYPE_INT64, &i64);
    gw_kv_scalar(w, "s.f64", GGUF_TYPE_FLOAT64, &f64);
    gw_kv_str(w, "s.str", "seed");
    gw_kv_arr(w, "s.arr_i16", GGUF_TYPE_INT16, a16, 3);
    gw_kv_arr(w, "s.arr_bool", GGUF_TYPE_BOOL, abool, 2);
}

/* One tensor of each type, rows of one block, filled with a byte pattern. */
static void tensors(gguf_writer *w) {
    static const clinfer_dtype types[] = {CLINFER_DT_F32,  CLINFER_DT_F16,  CLINFER_DT_Q4_0,
                                          CLINFER_DT_Q4_1, CLINFER_DT_Q8_0, CLINFER_DT_Q4_K,
                                          CLINFER_DT_Q6_K};
    uint8_t data[2 * 256 * 4];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[32];
        int64_t ne[2] = {(int64_t)dtype_block_elems(types[i]), 2};
        if (ne[0] == 1) ne[0] = 4;
        snprintf(name, sizeof name, "blk.%zu.%s", i, dtype_name(types[i]));
        gw_tensor(w, name, types[i], 2, ne, data);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gguf_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    gguf_writer *w;
    int rc = 0;

    w = gw_new();
    vocab(w);
    rc |= save(w, dir, "vocab-only", 3);

    w = gw_new();
    scalars(w);
    rc |= save(w, dir, "scalars-v2", 2);

    w = gw_new();
    vocab(w);
    tensors(w);
    rc |= save(w, dir, "model", 3);

    w = gw_new();
    gw_kv_u32(w, "general.alignment", 64);
    scalars(w);
    tensors(w);
    rc |= save(w, dir, "aligned-64", 3);
    return rc ? 1 : 0;
}
