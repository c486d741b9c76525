/* Layers split across devices (src/placement.c, src/split_plan.c): on two OpenCL devices (two PoCL
 * CPU devices: POCL_DEVICES="pthread pthread", tests/split.cmake; or, with --cross, PoCL's and
 * another platform's, label rusticl), a tiny model split by shares, by -ngl (three segments: the
 * head back on the first device) and with its tied head on another device than the embeddings
 * gives the logits of one device, within verify's whole-evaluation bound, in single steps and in
 * batches of two sequences, and `clinfer verify` passes on the split; the placement is reported;
 * bad placements are refused. --memory: under CLINFER_DEVICE_MEMORY (set by this program for a
 * child of itself), a model larger than one device runs split by memory, and one larger than
 * both is refused. Skips (77) with fewer than two such devices. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tiny_model.h"

extern char **environ;

#define N_PROMPT 6
#define N_DECODE 3
#define WHOLE_BOUND 1e-5 /* verify's bound of the whole evaluation, f32 activations */

static char dev_a[24], dev_b[24]; /* the two devices' indices as specs */

/* Two devices to split over: two PoCL CPU devices, or (cross) PoCL's and one of another
 * platform. */
static bool find_devices(bool cross) {
    size_t count = 0, a = SIZE_MAX, b = SIZE_MAX;
    if (clinfer_device_count(&count) != CLINFER_OK) return false;
    for (size_t i = 0; i < count; i++) {
        clinfer_device_info info;
        if (clinfer_device_get_info(i, &info) != CLINFER_OK) continue;
        bool pocl = info.vendor == CLINFER_VENDOR_POCL && info.type == CLINFER_DEVICE_CPU;
        if (pocl && a == SIZE_MAX)
            a = i;
        else if (b == SIZE_MAX && (cross ? !pocl : pocl))
            b = i;
    }
    if (a == SIZE_MAX || b == SIZE_MAX) return false;
    snprintf(dev_a, sizeof dev_a, "%zu", a);
    snprintf(dev_b, sizeof dev_b, "%zu", b);
    return true;
}

static clinfer_context_params context_params(void) {
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = 32;
    cp.activations = CLINFER_ACT_F32;
    return cp;
}

static void single_params(clinfer_model_params *p, const char *device) {
    clinfer_model_params_default(p);
    p->options.device = device;
}

/* The logits of tiny_model_decode on a model loaded with p. */
static clinfer_status decode(const char *path, const clinfer_model_params *p, float *out,
                             clinfer_model_placement *pl) {
    clinfer_model *m = NULL;
    clinfer_context_params cp = context_params();
    clinfer_status st = clinfer_model_load(path, p, &m);
    if (st == CLINFER_OK && pl) st = clinfer_model_get_placement(m, pl);
    if (st == CLINFER_OK) st = tiny_model_decode(m, &cp, N_PROMPT, N_DECODE, out);
    clinfer_model_free(m);
    return st;
}

/* Two sequences' prompts in one batch, then a decode step of both: the logits of each step's
 * entries that ask for them, appended to out. */
static clinfer_status batch_decode(const char *path, const clinfer_model_params *p, float *out) {
    clinfer_model *m = NULL;
    clinfer_context *c = NULL;
    clinfer_context_params cp = context_params();
    cp.n_seq_max = 2;
    size_t n_vocab = tiny_model_n_vocab();
    clinfer_status st = clinfer_model_load(path, p, &m);
    if (st == CLINFER_OK) st = clinfer_context_create(m, &cp, &c);
    clinfer_batch_entry e[8];
    for (int i = 0; i < 8; i++) /* 5 tokens of sequence 0, then 3 of sequence 1 */
        e[i] = (clinfer_batch_entry){.token = 5 + 7 * i,
                                     .pos = (uint32_t)(i < 5 ? i : i - 5),
                                     .seq = i < 5 ? 0 : 1,
                                     .logits = i == 4 || i == 7};
    if (st == CLINFER_OK) st = clinfer_batch_eval(c, e, 8);
    for (int k = 0; k < 2 && st == CLINFER_OK; k++) {
        const float *l;
        st = clinfer_get_logits_ith(c, k ? 7 : 4, &l, NULL);
        if (st == CLINFER_OK) memcpy(out + k * n_vocab, l, n_vocab * sizeof *l);
    }
    clinfer_batch_entry step[2] = {{.token = 11, .pos = 5, .seq = 0, .logits = true},
                                   {.token = 12, .pos = 3, .seq = 1, .logits = true}};
    if (st == CLINFER_OK) st = clinfer_batch_eval(c, step, 2);
    for (int k = 0; k < 2 && st == CLINFER_OK; k++) {
        const float *l;
        st = clinfer_get_logits_ith(c, k, &l, NULL);
        if (st == CLINFER_OK) memcpy(out + (2 + k) * n_vocab, l, n_vocab * sizeof *l);
    }
    clinfer_context_free(c);
    clinfer_model_free(m);
    return st;
}

typedef struct {
    const char *name;
    const char *devices[3];
    float shares[2];
    int32_t n_gpu_layers;
    const char *device; /* options.device */
    /* what clinfer_model_get_placement must say: devices, and the first device's layers
     * (UINT32_MAX: any) */
    uint32_t n_devices, first_layers;
    bool head_on_first;
} placement_case;

/* One placement against the one-device logits: decode and batch, then verify. */
static void check_case(const char *path, const placement_case *k, const float *base,
                       const float *base_batch, bool run_verify) {
    size_t n_vocab = tiny_model_n_vocab(), n = (1 + N_DECODE) * n_vocab;
    float *got = malloc(n * sizeof *got), *batch = malloc(4 * n_vocab * sizeof *batch);
    clinfer_model_params p;
    single_params(&p, k->device);
    memcpy(p.placement.devices, k->devices, sizeof k->devices);
    memcpy(p.placement.shares, k->shares, sizeof k->shares);
    p.placement.n_gpu_layers = k->n_gpu_layers;
    clinfer_model_placement pl;
    clinfer_status st = decode(path, &p, got, &pl);
    EXPECT(st == CLINFER_OK, "%s: %s", k->name, clinfer_last_error());
    if (st == CLINFER_OK) {
        EXPECT(pl.n_devices == k->n_devices, "%s: %u devices", k->name, pl.n_devices);
        EXPECT(k->first_layers == UINT32_MAX || pl.devices[0].n_layers == k->first_layers,
               "%s: %u layers on the first", k->name, pl.devices[0].n_layers);
        EXPECT(pl.devices[0].head == k->head_on_first, "%s: the head's device", k->name);
        double e = nmse(got, base, n);
        EXPECT(e <= WHOLE_BOUND, "%s: NMSE %g against one device", k->name, e);
        printf("%s: %u device(s), NMSE %g against one device\n", k->name, pl.n_devices, e);
    }
    st = batch_decode(path, &p, batch);
    EXPECT(st == CLINFER_OK, "%s batch: %s", k->name, clinfer_last_error());
    if (st == CLINFER_OK) {
        double e = nmse(batch, base_batch, 4 * n_vocab);
        EXPECT(e <= WHOLE_BOUND, "%s: batch NMSE %g against one device", k->name, e);
    }
    if (run_verify) {
        int32_t tokens[20];
        for (int i = 0; i < 20; i++)
            tokens[i] = 3 + 11 * i;
        clinfer_context_params cp = context_params();
        clinfer_verify_report *r = NULL;
        EXPECT_OK(clinfer_verify(path, &p, &cp, tokens, 20, &r));
        EXPECT(r && r->n_failed == 0, "%s: verify failed %zu rows", k->name, r ? r->n_failed : 0);
        if (r)
            printf("%s: verify %zu rows, worst NMSE %g\n", k->name, r->n_rows,
                   r->rows[r->worst].nmse);
        clinfer_verify_report_free(r);
    }
    free(got);
    free(batch);
}

/* Placements the library refuses, and the error it names. Devices: 'a', 'b' (the two found),
 * 'x' (an index past the last), 0 (none); reference: on the reference backend, which has no
 * devices to place layers on. */
static void check_refusals(const char *path) {
    static const struct {
        char devices[2];
        float share;
        int32_t ngl;
        bool reference;
        clinfer_status want;
        const char *says;
    } cases[] = {
        {{'a', 'a'}, 0, 0, false, CLINFER_ERR_INVALID_ARGUMENT, "listed twice"},
        {{'a', 'b'}, 0, 2, false, CLINFER_ERR_INVALID_ARGUMENT, "exclude each other"},
        {{'a', 'b'}, -1, 0, false, CLINFER_ERR_INVALID_ARGUMENT, "not a number >= 0"},
        {{'a', 'x'}, 0, 0, false, CLINFER_ERR_NOT_FOUND, "no device with that index"},
        {{0, 0}, 0, -3, false, CLINFER_ERR_INVALID_ARGUMENT, "negative"},
        {{0, 0},
         1,
         0,
         false,
         CLINFER_ERR_INVALID_ARGUMENT,
         "name 1 device(s), but the device list (--device A,B) has 0"},
        {{'a', 'b'}, 0, 0, true, CLINFER_ERR_INVALID_ARGUMENT, "the reference backend"},
        {{0, 0}, 0, 2, true, CLINFER_ERR_INVALID_ARGUMENT, "the reference backend"},
        {{0, 0}, 3, 0, true, CLINFER_ERR_INVALID_ARGUMENT, "the reference backend"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clinfer_model_params p;
        single_params(&p, dev_a);
        if (cases[i].reference) p.backend = CLINFER_BACKEND_REFERENCE;
        for (int d = 0; d < 2; d++) {
            char c = cases[i].devices[d];
            p.placement.devices[d] = c == 'a' ? dev_a : c == 'b' ? dev_b : c == 'x' ? "999" : NULL;
        }
        p.placement.shares[0] = cases[i].share;
        p.placement.n_gpu_layers = cases[i].ngl;
        clinfer_model *m = NULL;
        clinfer_status st = clinfer_model_load(path, &p, &m);
        EXPECT(st == cases[i].want && strstr(clinfer_last_error(), cases[i].says),
               "refusal %zu: %s (%s), wanted '%s'", i, clinfer_status_str(st), clinfer_last_error(),
               cases[i].says);
        clinfer_model_free(m);
    }
}

/* A model of n_layer F32 layers (untied head unless tied). */
static int write_model(const char *path, uint32_t n_layer, bool tied) {
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_F32);
    spec.n_layer = n_layer;
    spec.tied = tied;
    return tiny_model_write(&spec, path);
}

/* The child of --memory: the device memory is capped at what the parent set; a model of
 * `weights` bytes runs split (want_split) or is refused. */
static int memory_child(const char *path, bool want_split) {
    clinfer_model_params p;
    clinfer_model_params_default(&p);
    p.options.device = dev_a;
    clinfer_model *m = NULL;
    clinfer_status st = clinfer_model_load(path, &p, &m);
    if (!want_split) {
        EXPECT(st == CLINFER_ERR_OUT_OF_MEMORY && strstr(clinfer_last_error(), "do not fit"),
               "the model beyond both devices: %s (%s)", clinfer_status_str(st),
               clinfer_last_error());
        printf("refused: %s\n", clinfer_last_error());
    } else {
        EXPECT(st == CLINFER_OK, "the split by memory: %s", clinfer_last_error());
        clinfer_model_placement pl = {0};
        if (st == CLINFER_OK) EXPECT_OK(clinfer_model_get_placement(m, &pl));
        EXPECT(pl.n_devices >= 2, "split by memory over %u devices", pl.n_devices);
        size_t n = (1 + N_DECODE) * tiny_model_n_vocab();
        float *got = malloc(n * sizeof *got), *ref = malloc(n * sizeof *ref);
        clinfer_context_params cp = context_params();
        if (st == CLINFER_OK) EXPECT_OK(tiny_model_decode(m, &cp, N_PROMPT, N_DECODE, got));
        clinfer_model *r = NULL;
        EXPECT_OK(tiny_model_load(path, CLINFER_BACKEND_REFERENCE, CLINFER_DEFAULT, &r));
        EXPECT_OK(tiny_model_decode(r, &cp, N_PROMPT, N_DECODE, ref));
        double e = nmse(got, ref, n);
        EXPECT(e <= WHOLE_BOUND, "split by memory: NMSE %g against the reference", e);
        printf("split by memory over %u devices: NMSE %g against the reference\n", pl.n_devices, e);
        clinfer_model_free(r);
        free(got);
        free(ref);
    }
    clinfer_model_free(m);
    return check_failures ? 1 : 0;
}

/* Runs this program again as memory_child under CLINFER_DEVICE_MEMORY=cap and, where max_alloc
 * is not 0, CLINFER_MAX_ALLOC=max_alloc. */
static void run_child(const char *self, const char *path, uint64_t cap, uint64_t max_alloc,
                      bool want_split) {
    char memory[64], alloc[64];
    snprintf(memory, sizeof memory, "%llu", (unsigned long long)cap);
    snprintf(alloc, sizeof alloc, "%llu", (unsigned long long)max_alloc);
    setenv("CLINFER_DEVICE_MEMORY", memory, 1);
    if (max_alloc) setenv("CLINFER_MAX_ALLOC", alloc, 1);
    char *argv[] = {(char *)self, "--memory-child", (char *)path, want_split ? "split" : "refuse",
                    NULL};
    pid_t pid;
    int status = 0;
    check_icd_env_restore();
    EXPECT(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0, "spawn %s", self);
    EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the child under %s bytes of device memory (allocations of %s at most) failed "
           "(status %d)",
           memory, max_alloc ? alloc : "any size", status);
    unsetenv("CLINFER_DEVICE_MEMORY");
    unsetenv("CLINFER_MAX_ALLOC");
}

/* The memory cases: the model's weights as one device holds them, then children with a device
 * memory of 0.7 of them (split) and 0.4 (refused); and split by memory where no allocation may
 * hold a whole layer tensor (8 KiB of 16-32 KiB: each weight in parts on its device). */
static void check_memory(const char *self, const char *path) {
    clinfer_model *m = NULL;
    clinfer_model_params p;
    single_params(&p, dev_a);
    EXPECT_OK(clinfer_model_load(path, &p, &m));
    clinfer_model_info info = {0};
    if (m) EXPECT_OK(clinfer_model_get_info(m, &info));
    clinfer_model_free(m);
    run_child(self, path, info.weight_bytes * 7 / 10, 0, true);
    run_child(self, path, info.weight_bytes * 4 / 10, 0, false);
    run_child(self, path, info.weight_bytes * 7 / 10, 8192, true);
}

int main(int argc, char **argv) {
    bool cross = argc > 1 && !strcmp(argv[1], "--cross");
    bool child = argc > 3 && !strcmp(argv[1], "--memory-child");
    if (!find_devices(cross)) {
        printf("fewer than two %s devices: skipped\n", cross ? "PoCL and other OpenCL" : "PoCL");
        return 77;
    }
    if (child) return memory_child(argv[2], !strcmp(argv[3], "split"));
    char path[64], tied_path[64], big_path[64];
    snprintf(path, sizeof path, "split_%d.gguf", (int)getpid());
    snprintf(tied_path, sizeof tied_path, "split_tied_%d.gguf", (int)getpid());
    snprintf(big_path, sizeof big_path, "split_big_%d.gguf", (int)getpid());
    if (write_model(path, 4, false) || write_model(tied_path, 4, true) ||
        write_model(big_path, 8, false))
        return 1;
    size_t n_vocab = tiny_model_n_vocab();
    float *base = malloc((1 + N_DECODE) * n_vocab * sizeof *base);
    float *base_batch = malloc(4 * n_vocab * sizeof *base_batch);
    const placement_case cases[] = {
        {"shares 1,1", {dev_a, dev_b}, {1, 1}, 0, NULL, 2, 2, false},
        {"shares 3,1", {dev_a, dev_b}, {3, 1}, 0, NULL, 2, 3, false},
        {"by memory", {dev_a, dev_b}, {0, 0}, 0, NULL, 2, UINT32_MAX, false},
        {"-ngl 1", {NULL}, {0}, 1, dev_b, 2, 3, true},
        {"-ngl 4 (every layer, not the head)", {NULL}, {0}, 4, dev_b, 2, 0, true},
        {"-ngl 5 (every layer and the head)", {NULL}, {0}, 5, dev_b, 1, 4, true},
        {"shares 0,1 (one device)", {dev_a, dev_b}, {0, 1}, 0, NULL, 1, 4, true},
    };
    const char *paths[] = {path, tied_path};
    for (int t = 0; t < 2; t++) {
        clinfer_model_params p;
        single_params(&p, dev_a);
        EXPECT_OK(decode(paths[t], &p, base, NULL));
        EXPECT_OK(batch_decode(paths[t], &p, base_batch));
        printf("-- %s head\n", t ? "tied" : "untied");
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_case(paths[t], &cases[i], base, base_batch, t == 0 && i < 4);
    }
    check_refusals(path);
    if (!cross) check_memory(argv[0], big_path);
    remove(path);
    remove(tied_path);
    remove(big_path);
    free(base);
    free(base_batch);
    printf("%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
