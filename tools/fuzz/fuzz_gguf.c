/* libFuzzer harness for the GGUF reader: the input is opened as a GGUF buffer. A failure must
 * leave no handle and a message; a success must hold together: every string element and tensor
 * byte is readable (the sanitizers watch), every key and tensor name is found again through the
 * lookup index, and the typed getters answer every key without crashing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* keeps the reads from being optimised away */

/* name as a C string (names hold no NUL: the reader checks). */
static void c_string(gguf_str s, char *buf, size_t cap) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = '\0';
}

static void walk_kv(const gguf_file *f, const gguf_kv *kv) {
    static char key[65536 + 1];
    c_string(kv->key, key, sizeof key);
    if (gguf_find_kv(f, key) != kv) {
        fprintf(stderr, "fuzz_gguf: key '%s' is not found again\n", key);
        abort();
    }
    uint32_t u32;
    int32_t i32;
    float f32;
    bool b;
    gguf_str s;
    const gguf_kv *arr;
    gguf_get_u32(f, key, &u32);
    gguf_get_i32(f, key, &i32);
    gguf_get_f32(f, key, &f32);
    gguf_get_bool(f, key, &b);
    if (gguf_get_str(f, key, &s) == CLINFER_OK)
        for (uint64_t i = 0; i < s.len; i++)
            sink += (uint8_t)s.ptr[i];
    if (gguf_get_arr(f, key, GGUF_TYPE_STRING, &arr) == CLINFER_OK)
        for (uint64_t i = 0; i < arr->arr_n; i++) {
            gguf_str e = gguf_arr_str(arr, i);
            for (uint64_t j = 0; j < e.len; j++)
                sink += (uint8_t)e.ptr[j];
        }
    if (gguf_get_arr(f, key, GGUF_TYPE_FLOAT32, &arr) == CLINFER_OK)
        for (uint64_t i = 0; i < arr->arr_n; i++)
            sink += gguf_arr_f32(arr, i) > 0;
    if (gguf_get_arr(f, key, GGUF_TYPE_INT32, &arr) == CLINFER_OK)
        for (uint64_t i = 0; i < arr->arr_n; i++)
            sink += (unsigned)gguf_arr_i32(arr, i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    clinfer_status st = gguf_open_memory(data, size, &f);
    if (st != CLINFER_OK) {
        if (f || clinfer_last_error()[0] == '\0') {
            fprintf(stderr, "fuzz_gguf: failure %d left a handle or no message\n", st);
            abort();
        }
        return 0;
    }
    for (size_t i = 0; i < gguf_kv_count(f); i++)
        walk_kv(f, gguf_kv_at(f, i));
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char name[65];
        c_string(t->name, name, sizeof name);
        if (gguf_find_tensor(f, name) != t) {
            fprintf(stderr, "fuzz_gguf: tensor '%s' is not found again\n", name);
            abort();
        }
        for (uint64_t j = 0; j < t->size; j++)
            sink += ((const uint8_t *)t->data)[j];
    }
    gguf_close(f);
    return 0;
}
