/* clinfer_quantize_file on bad input: a missing or non-GGUF file, a file that is no model, an
 * unknown file type, NaN weights, a shard of a split model, an output that cannot be written.
 * Each fails with its status and a message that says what is wrong, and leaves neither OUT nor
 * OUT.tmp behind; an OUT that existed before a failure is left as it was. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "gguf_writer.h"
#include "random.h"
#include "temp_tree.h"

static char dir[] = "/tmp/clinfer-test-quantize-errors-XXXXXX";
static char out[sizeof dir + 32], tmp[sizeof dir + 40];

static bool exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* Quantizing in to out fails with want and a message holding needle; no output is left. */
static void expect_failure(const char *in, const char *out_path, clinfer_file_type ft,
                           clinfer_status want, const char *needle) {
    char out_tmp[sizeof dir + 64];
    clinfer_quantize_params p;
    clinfer_quantize_params_default(&p);
    p.file_type = ft;
    clinfer_status st = clinfer_quantize_file(in, out_path, &p);
    EXPECT(st == want, "%s: %s, want %s: %s", needle, clinfer_status_str(st),
           clinfer_status_str(want), clinfer_last_error());
    EXPECT(strstr(clinfer_last_error(), needle) != NULL, "message lacks '%s': %s", needle,
           clinfer_last_error());
    snprintf(out_tmp, sizeof out_tmp, "%s.tmp", out_path);
    EXPECT(!exists(out_tmp), "%s: %s left behind", needle, out_tmp);
}

/* A one-layer llama whose attn_q holds value at element 300 (row 1), with string and number
 * arrays to copy. */
static void write_model(const char *path, const char *arch, float value, bool split) {
    static float w[256 * 2];
    static const char *const tokens[] = {"a", "bc", "def"};
    gguf_writer *g = gw_new();
    if (arch) gw_kv_str(g, "general.architecture", arch);
    gw_kv_arr_str(g, "tokenizer.ggml.tokens", tokens, 3);
    gw_kv_arr_f32(g, "tokenizer.ggml.scores", (const float[]){0, -1, -2}, 3);
    if (split) gw_kv_scalar(g, "split.count", GGUF_TYPE_UINT16, &(uint16_t){3});
    memset(w, 0, sizeof w);
    w[300] = value;
    gw_tensor(g, "blk.0.attn_q.weight", CLINFER_DT_F32, 2, (const int64_t[]){256, 2}, w);
    EXPECT(gw_write_file(g, path) == 0, "writing %s", path);
    gw_free(g);
}

/* Random bytes of the good file changed: each mutant quantizes or fails with a message (under the
 * sanitizers: never reading out of bounds), and what it writes opens again. */
static void test_mutants(const char *good) {
    static uint8_t orig[1 << 16], buf[1 << 16];
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/mutant.gguf", dir);
    FILE *f = fopen(good, "rb");
    size_t len = f ? fread(orig, 1, sizeof orig, f) : 0;
    if (f) fclose(f);
    EXPECT(len > 0 && len < sizeof orig, "reading %s", good);
    size_t n_ok = 0;
    rng_seed(23);
    for (int i = 0; i < 200 && len > 0; i++) {
        memcpy(buf, orig, len);
        /* mostly the header and metadata, where a byte changes meaning */
        for (int k = 0, n = 1 + (int)(rng_next() % 4); k < n; k++)
            buf[rng_next() % (rng_next() % 2 ? 400 : len)] = (uint8_t)rng_next();
        f = fopen(path, "wb");
        if (f) {
            fwrite(buf, 1, len, f);
            fclose(f);
        }
        clinfer_quantize_params p;
        clinfer_quantize_params_default(&p);
        p.file_type = i % 2 ? CLINFER_FTYPE_Q4_K_M : CLINFER_FTYPE_Q4_0;
        p.allow_requantize = true;
        clinfer_status st = clinfer_quantize_file(path, out, &p);
        EXPECT(st == CLINFER_OK || clinfer_last_error()[0], "mutant %d failed without a message",
               i);
        gguf_file *g = NULL;
        if (st == CLINFER_OK) {
            n_ok++;
            EXPECT_OK(gguf_open(out, &g));
            gguf_close(g);
        }
        EXPECT(!exists(tmp), "mutant %d left %s", i, tmp);
        remove(out);
    }
    printf("mutants: %zu of 200 quantized\n", n_ok);
    remove(path);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char good[sizeof dir + 32], path[sizeof dir + 32];
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(good, sizeof good, "%s/good.gguf", dir);
    write_model(good, "llama", 0.5f, false);

    EXPECT(clinfer_quantize_file(NULL, out, NULL) == CLINFER_ERR_INVALID_ARGUMENT, "NULL in");
    EXPECT(clinfer_quantize_file(good, NULL, NULL) == CLINFER_ERR_INVALID_ARGUMENT, "NULL out");

    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    expect_failure(path, out, CLINFER_FTYPE_Q8_0, CLINFER_ERR_IO, "missing.gguf");
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("not a model\n", f);
        fclose(f);
    }
    expect_failure(path, out, CLINFER_FTYPE_Q8_0, CLINFER_ERR_FORMAT, "not a GGUF file");
    remove(path);
    snprintf(path, sizeof path, "%s/noarch.gguf", dir);
    write_model(path, NULL, 0.5f, false);
    expect_failure(path, out, CLINFER_FTYPE_Q8_0, CLINFER_ERR_FORMAT, "general.architecture");
    snprintf(path, sizeof path, "%s/split.gguf", dir);
    write_model(path, "llama", 0.5f, true);
    expect_failure(path, out, CLINFER_FTYPE_Q8_0, CLINFER_ERR_UNSUPPORTED, "3 shards");
    expect_failure(good, out, (clinfer_file_type)5, CLINFER_ERR_INVALID_ARGUMENT,
                   "unknown file type 5");
    remove(path);

    /* NaN and infinity name the tensor and row; an existing OUT is left as it was */
    f = fopen(out, "w");
    if (f) {
        fputs("old", f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/nan.gguf", dir);
    write_model(path, "llama", NAN, false);
    expect_failure(path, out, CLINFER_FTYPE_Q4_0, CLINFER_ERR_FORMAT,
                   "'blk.0.attn_q.weight': row 1");
    write_model(path, "llama", -INFINITY, false);
    expect_failure(path, out, CLINFER_FTYPE_F16, CLINFER_ERR_FORMAT, "NaN or infinity");
    char old[8] = "";
    f = fopen(out, "r");
    if (f) {
        EXPECT(fgets(old, sizeof old, f) && !strcmp(old, "old"), "OUT changed: '%s'", old);
        fclose(f);
    }
    remove(out);
    remove(path);

    /* outputs that cannot be written: a missing folder, an existing folder */
    snprintf(path, sizeof path, "%s/no/such/dir.gguf", dir);
    expect_failure(good, path, CLINFER_FTYPE_Q8_0, CLINFER_ERR_IO, "cannot create");
    snprintf(path, sizeof path, "%s/folder", dir);
    EXPECT(mkdir(path, 0700) == 0, "mkdir %s", path);
    expect_failure(good, path, CLINFER_FTYPE_Q8_0, CLINFER_ERR_IO, "cannot rename");
    rmdir(path);

    test_mutants(good);

    /* and the same file quantizes once the problems are gone */
    EXPECT_OK(clinfer_quantize_file(good, out, NULL));
    EXPECT(exists(out) && !exists(tmp), "a good run left no %s or a %s", out, tmp);
    remove(out);
    remove(good);
    remove_tree(dir);
    return finish("test_quantize_errors");
}
