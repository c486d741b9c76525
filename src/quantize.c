/* clinfer_quantize_file: the input is mapped (gguf_open), each tensor's type chosen up front
 * (quant_mix.c), so the header with every offset is written first and the tensors then stream to
 * the file one slab of rows at a time: memory holds one slab, never the output. The rows of a slab
 * are split between threads; each row is converted on its own, so the bytes do not depend on the
 * thread count. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "gguf_write.h"
#include "quantize.h"

#define QUANT_VERSION 2u       /* general.quantization_version: ggml's current block layouts */
#define SLAB_BYTES (16u << 20) /* output bytes converted per round of the threads */
#define MAX_THREADS 256

void clinfer_quantize_params_default(clinfer_quantize_params *params) {
    if (params) *params = (clinfer_quantize_params){.file_type = CLINFER_FTYPE_Q4_K_M};
}

/* ---- converting rows -------------------------------------------------------------------- */

/* One thread's rows [row0, row0 + rows) of a slab. */
typedef struct {
    clinfer_dtype from, to;
    size_t k; /* row length */
    const uint8_t *src;
    uint8_t *dst;
    size_t row0, rows;
    float *scratch; /* k floats */
    size_t bad_row; /* the first row holding a NaN or infinity; SIZE_MAX for none */
} job;

static void *convert_rows(void *arg) {
    job *j = arg;
    size_t in_bytes = dtype_row_bytes(j->from, j->k);
    size_t out_bytes = dtype_row_bytes(j->to, j->k);
    j->bad_row = SIZE_MAX;
    for (size_t r = j->row0; r < j->row0 + j->rows; r++) {
        dequantize_row(j->from, j->src + r * in_bytes, j->scratch, j->k);
        for (size_t i = 0; i < j->k; i++)
            if (!isfinite(j->scratch[i])) {
                j->bad_row = r;
                return NULL;
            }
        quantize_row(j->to, j->scratch, j->dst + r * out_bytes, j->k);
    }
    return NULL;
}

/* Converts rows rows of src into dst on up to n_jobs threads (the caller's among them); a thread
 * that cannot be started leaves its rows to the caller. Returns the first bad row or SIZE_MAX. */
static size_t convert_slab(job *jobs, size_t n_jobs, pthread_t *threads, const uint8_t *src,
                           uint8_t *dst, size_t rows) {
    bool started[MAX_THREADS] = {false};
    if (n_jobs > rows) n_jobs = rows;
    for (size_t i = 0; i < n_jobs; i++) {
        jobs[i].src = src;
        jobs[i].dst = dst;
        jobs[i].row0 = rows * i / n_jobs;
        jobs[i].rows = rows * (i + 1) / n_jobs - jobs[i].row0;
        if (i > 0) started[i] = pthread_create(&threads[i], NULL, convert_rows, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < n_jobs; i++)
        if (!started[i]) convert_rows(&jobs[i]);
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < n_jobs; i++) {
        if (started[i]) pthread_join(threads[i], NULL);
        if (jobs[i].bad_row < bad) bad = jobs[i].bad_row;
    }
    return bad;
}

/* The file's tensor layout and the workers' buffers. */
typedef struct {
    const gguf_file *f;
    const quant_choice *choices;
    uint64_t alignment;
    size_t n_threads;
    job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    float *scratch; /* n_threads rows of the longest row */
} plan;

static uint64_t out_bytes(const gguf_tensor *t, clinfer_dtype to) {
    uint64_t rows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    return rows * dtype_row_bytes(to, (size_t)t->ne[0]);
}

/* Writes tensor i: copied when its type stays, else converted slab by slab. */
static clinfer_status write_tensor(plan *p, size_t i, gguf_out *out) {
    clinfer_status st = CLINFER_OK;
    const gguf_tensor *t = gguf_tensor_at(p->f, i);
    clinfer_dtype to = p->choices[i].type;
    uint8_t *dst = NULL;
    if (to == t->type) {
        st = gguf_out_write(out, t->data, (size_t)t->size);
        gguf_release(p->f, t->data, (size_t)t->size);
        return st;
    }
    size_t k = (size_t)t->ne[0], rows = (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    size_t in_row = dtype_row_bytes(t->type, k), out_row = dtype_row_bytes(to, k);
    size_t slab = SLAB_BYTES / out_row ? SLAB_BYTES / out_row : 1;
    if (slab > rows) slab = rows;
    if (!(dst = malloc(slab * out_row)))
        CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for %zu rows of %zu bytes", slab,
                       out_row));
    for (size_t j = 0; j < p->n_threads; j++)
        p->jobs[j] = (job){.from = t->type, .to = to, .k = k, .scratch = p->scratch + j * k};
    for (size_t r = 0; r < rows; r += slab) {
        size_t n = rows - r < slab ? rows - r : slab;
        const uint8_t *src = (const uint8_t *)t->data + r * in_row;
        size_t bad = convert_slab(p->jobs, p->n_threads, p->threads, src, dst, n);
        if (bad != SIZE_MAX)
            CHECK(err_fail(CLINFER_ERR_FORMAT,
                           "tensor '%.*s': row %zu holds a NaN or infinity; no type holds it",
                           gguf_show_len(t->name), t->name.ptr, r + bad));
        CHECK(gguf_out_write(out, dst, n * out_row));
        gguf_release(p->f, src, n * in_row); /* read once: drop the input's pages */
    }
cleanup:
    free(dst);
    return st;
}

/* ---- the file --------------------------------------------------------------------------- */

/* Keys llama-quantize drops: it writes these two anew and merges split files. */
static bool replaced_key(gguf_str key) {
    return gguf_str_eq(key, "general.file_type") ||
           gguf_str_eq(key, "general.quantization_version") || gguf_str_eq(key, "split.no") ||
           gguf_str_eq(key, "split.count") || gguf_str_eq(key, "split.tensors.count");
}

/* Refuses what cannot be written: shards of a split model, and quantized tensors that would be
 * quantized again without the caller's consent. */
static clinfer_status check_input(const plan *p, const clinfer_quantize_params *params) {
    uint32_t split_count = 1;
    if (gguf_find_kv(p->f, "split.count") &&
        gguf_get_u32(p->f, "split.count", &split_count) != CLINFER_OK)
        return CLINFER_ERR_FORMAT;
    if (split_count > 1)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "the file is one of %u shards of a split model: merge them first",
                        split_count);
    for (size_t i = 0; i < gguf_tensor_count(p->f); i++) {
        const gguf_tensor *t = gguf_tensor_at(p->f, i);
        if (p->choices[i].type == t->type || dtype_block_elems(t->type) == 1 ||
            params->allow_requantize)
            continue;
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "tensor '%.*s' is already %s: quantizing it to %s loses precision "
                        "twice, which needs allow_requantize",
                        gguf_show_len(t->name), t->name.ptr, dtype_name(t->type),
                        dtype_name(p->choices[i].type));
    }
    return CLINFER_OK;
}

/* Header, metadata (the input's, file type and quantization version written anew) and the
 * tensor infos at their new offsets. */
static void encode_meta(plan *p, clinfer_file_type ft, gguf_buf *b) {
    const gguf_file *f = p->f;
    uint64_t n_kv = 2, offset = 0;
    for (size_t i = 0; i < gguf_kv_count(f); i++)
        n_kv += !replaced_key(gguf_kv_at(f, i)->key);
    gguf_put_header(b, gguf_tensor_count(f), n_kv);
    for (size_t i = 0; i < gguf_kv_count(f); i++)
        if (!replaced_key(gguf_kv_at(f, i)->key)) gguf_put_kv(b, gguf_kv_at(f, i));
    static const char version_key[] = "general.quantization_version";
    static const char ftype_key[] = "general.file_type";
    gguf_put_kv_head(b, version_key, sizeof version_key - 1, GGUF_TYPE_UINT32);
    gguf_put_u32(b, QUANT_VERSION);
    gguf_put_kv_head(b, ftype_key, sizeof ftype_key - 1, GGUF_TYPE_UINT32);
    gguf_put_u32(b, (uint32_t)ft);
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        uint64_t ne[4];
        for (int d = 0; d < 4; d++)
            ne[d] = (uint64_t)t->ne[d];
        offset = gguf_align_up(offset, p->alignment);
        gguf_put_tensor_info(b, t->name.ptr, t->name.len, t->n_dims, ne, p->choices[i].type,
                             offset);
        offset += out_bytes(t, p->choices[i].type);
    }
}

static size_t thread_count(uint32_t asked) {
    long n = asked ? (long)asked : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (size_t)n;
}

/* Sets up p for f: the tensors' types and the workers' scratch rows. */
static clinfer_status plan_file(plan *p, const gguf_file *f, const clinfer_quantize_params *params,
                                quant_choice **choices) {
    clinfer_status st = CLINFER_OK;
    size_t n = gguf_tensor_count(f), max_k = 1;
    p->f = f;
    p->n_threads = thread_count(params->n_threads);
    p->alignment = GGUF_WRITE_ALIGNMENT;
    if (gguf_find_kv(f, "general.alignment")) { /* the reader checked it */
        uint32_t a = GGUF_WRITE_ALIGNMENT;
        CHECK(gguf_get_u32(f, "general.alignment", &a));
        p->alignment = a;
    }
    for (size_t i = 0; i < n; i++)
        if ((size_t)gguf_tensor_at(f, i)->ne[0] > max_k)
            max_k = (size_t)gguf_tensor_at(f, i)->ne[0];
    *choices = calloc(n ? n : 1, sizeof **choices);
    p->scratch = max_k <= SIZE_MAX / sizeof(float) / p->n_threads
                     ? malloc(max_k * p->n_threads * sizeof(float))
                     : NULL;
    if (!*choices || !p->scratch)
        CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory to plan %zu tensors", n));
    p->choices = *choices;
    CHECK(quant_mix_choose(f, params->file_type, *choices));
    CHECK(check_input(p, params));
cleanup:
    return st;
}

static void report(const plan *p, size_t i, const clinfer_quantize_params *params) {
    const gguf_tensor *t = gguf_tensor_at(p->f, i);
    char name[GGUF_SHOW + 1];
    memcpy(name, t->name.ptr, (size_t)gguf_show_len(t->name));
    name[gguf_show_len(t->name)] = '\0';
    clinfer_quantize_tensor info = {
        .index = i,
        .count = gguf_tensor_count(p->f),
        .name = name,
        .from_type = dtype_name(t->type),
        .to_type = dtype_name(p->choices[i].type),
        .from_bytes = t->size,
        .to_bytes = out_bytes(t, p->choices[i].type),
        .fallback = p->choices[i].fallback,
    };
    params->progress(&info, params->progress_user);
}

clinfer_status clinfer_quantize_file(const char *in_path, const char *out_path,
                                     const clinfer_quantize_params *params) {
    clinfer_status st = CLINFER_OK;
    clinfer_quantize_params defaults;
    gguf_file *f = NULL;
    quant_choice *choices = NULL;
    gguf_buf meta = {0};
    gguf_out out = {0};
    plan *p = calloc(1, sizeof *p);
    if (!in_path || !out_path)
        CHECK(err_fail(CLINFER_ERR_INVALID_ARGUMENT, "clinfer_quantize_file: NULL path"));
    if (!p) CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for the plan"));
    if (!params) {
        clinfer_quantize_params_default(&defaults);
        params = &defaults;
    }
    CHECK(gguf_open(in_path, &f));
    CHECK(plan_file(p, f, params, &choices));
    encode_meta(p, params->file_type, &meta);
    if (meta.failed) CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for the header"));
    CHECK(gguf_out_open(&out, out_path));
    CHECK(gguf_out_write(&out, meta.p, meta.len));
    /* The data section and each tensor start at a multiple of the alignment (the offsets
     * encode_meta wrote); the last is padded too, as ggml's reader counts its size padded. */
    CHECK(gguf_out_pad(&out, p->alignment));
    for (size_t i = 0; i < gguf_tensor_count(f); i++) {
        CHECK(write_tensor(p, i, &out));
        CHECK(gguf_out_pad(&out, p->alignment));
        if (params->progress) report(p, i, params);
    }
    CHECK(gguf_out_commit(&out));
cleanup:
    if (st != CLINFER_OK) err_prefix("quantize");
    gguf_out_discard(&out);
    gguf_buf_free(&meta);
    if (p) free(p->scratch);
    free(p);
    free(choices);
    gguf_close(f);
    return st;
}
