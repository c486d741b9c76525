#include "cli_common.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "model_registry.h"

/* The first use of a device compiles its kernels for seconds: say so, once, rather than wait
 * silently (--quiet turns it off; --verbose names each program). */
static void note_compile(const clinfer_compile_event *e, void *user) {
    (void)user;
    if (e->count == 1)
        fprintf(stderr,
                "clinfer: compiling OpenCL kernels for %s (first use of this device or "
                "weight type; cached for later runs)\n",
                e->device);
}

void cli_model_opts_init(cli_model_opts *o) {
    o->path = NULL;
    clinfer_model_params_default(&o->params);
    o->params.options.on_compile = note_compile;
}

int cli_model_option(int opt, const char *arg, cli_model_opts *o) {
    switch (opt) {
    case 'm':
        o->path = arg;
        return 1;
    case OPT_REFERENCE:
        o->params.backend = CLINFER_BACKEND_REFERENCE;
        return 1;
    case 'v':
        o->params.verbose = true;
        return 1;
    case 'q':
        o->params.options.on_compile = NULL;
        return 1;
    case 't': {
        long n;
        if (!cli_parse_long("-t", arg, 1, 4096, &n)) return -1;
        o->params.options.threads = (uint32_t)n;
        return 1;
    }
    default:
        return cli_placement_option(opt, arg, &o->params);
    }
}

/* ---- placement: --device with one device or a list, --tensor-split and -ngl (llama.cpp's
 * flags), and its report for `clinfer info` ---------------------------------------------- */

/* Splits a comma-separated list into at most CLINFER_MAX_DEVICES items of a copy of it (one per
 * process: kept as long as the model params point into it); 0 and an error on a bad list. */
static size_t split_list(const char *option, const char *arg, char *copy, size_t size,
                         char *items[CLINFER_MAX_DEVICES]) {
    if (snprintf(copy, size, "%s", arg) >= (int)size) {
        cli_error("%s: '%.40s...' is too long", option, arg);
        return 0;
    }
    size_t n = 0;
    for (char *p = copy, *comma;; p = comma + 1) {
        comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p || n == CLINFER_MAX_DEVICES) {
            cli_error("%s: '%s' is not a list of 1 to %d non-empty items separated by commas",
                      option, arg, CLINFER_MAX_DEVICES);
            return 0;
        }
        items[n++] = p;
        if (!comma) return n;
    }
}

static int device_option(const char *arg, clinfer_model_params *p) {
    static char copy[1024];
    char *items[CLINFER_MAX_DEVICES];
    size_t n = split_list("--device", arg, copy, sizeof copy, items);
    if (!n) return -1;
    memset(p->placement.devices, 0, sizeof p->placement.devices);
    if (n == 1) {
        p->options.device = items[0];
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        p->placement.devices[i] = items[i];
    return 1;
}

static int tensor_split_option(const char *arg, clinfer_model_params *p) {
    char copy[512], *items[CLINFER_MAX_DEVICES];
    size_t n = split_list("--tensor-split", arg, copy, sizeof copy, items);
    if (!n) return -1;
    memset(p->placement.shares, 0, sizeof p->placement.shares);
    for (size_t i = 0; i < n; i++)
        if (!cli_parse_float("--tensor-split", items[i], 0.0f, 1e6f, &p->placement.shares[i]))
            return -1;
    return 1;
}

int cli_placement_option(int opt, const char *arg, clinfer_model_params *p) {
    long n;
    switch (opt) {
    case OPT_DEVICE:
        return device_option(arg, p);
    case OPT_TENSOR_SPLIT:
        return tensor_split_option(arg, p);
    case OPT_N_GPU_LAYERS:
        /* llama.cpp's "all" and "auto": every layer and the head */
        if (!strcmp(arg, "all") || !strcmp(arg, "auto"))
            n = INT32_MAX;
        else if (!cli_parse_long("--n-gpu-layers", arg, 0, INT32_MAX, &n))
            return -1;
        p->placement.n_gpu_layers = (int32_t)n;
        if (n == 0) p->options.device = "cpu"; /* no layer on a GPU */
        return 1;
    default:
        return 0;
    }
}

void cli_print_placement(const clinfer_model *model, const char *prefix, FILE *out) {
    clinfer_model_placement pl;
    if (clinfer_model_get_placement(model, &pl) != CLINFER_OK) return;
    for (uint32_t d = 0; d < pl.n_devices; d++) {
        fprintf(out, "%sdevice %zu: ", prefix, pl.devices[d].index);
        if (pl.devices[d].n_layers)
            fprintf(out, "layers %u-%u", pl.devices[d].first_layer,
                    pl.devices[d].first_layer + pl.devices[d].n_layers - 1);
        else
            fprintf(out, "no layers");
        fprintf(out, "%s%s, %.2f MiB of weights (%s)\n",
                pl.devices[d].embeddings ? ", embeddings" : "", pl.devices[d].head ? ", head" : "",
                pl.devices[d].weight_bytes / 1048576.0, pl.devices[d].device);
    }
}

int cli_sampler_option(int opt, const char *arg, clinfer_sampler_params *p) {
    long v;
    switch (opt) {
    case OPT_TEMP:
        return cli_parse_float("--temp", arg, 0.0f, 100.0f, &p->temperature) ? 1 : -1;
    case OPT_TOP_K:
        if (!cli_parse_long("--top-k", arg, 0, INT32_MAX, &v)) return -1;
        p->top_k = (int32_t)v;
        return 1;
    case OPT_TOP_P:
        return cli_parse_float("--top-p", arg, 1e-6f, 1.0f, &p->top_p) ? 1 : -1;
    case OPT_MIN_P:
        return cli_parse_float("--min-p", arg, 0.0f, 1.0f, &p->min_p) ? 1 : -1;
    case OPT_REPEAT_PENALTY:
        return cli_parse_float("--repeat-penalty", arg, 1e-3f, 100.0f, &p->repeat_penalty) ? 1 : -1;
    case OPT_REPEAT_LAST_N:
        if (!cli_parse_long("--repeat-last-n", arg, 0, 1 << 20, &v)) return -1;
        p->repeat_last_n = (int32_t)v;
        return 1;
    case 's': {
        if (!strcmp(arg, "-1")) return 1; /* random, as when absent (cli_generator_open) */
        char *end;
        errno = 0;
        unsigned long long s = strtoull(arg, &end, 0);
        if (errno || end == arg || *end || arg[0] == '-') {
            cli_error("--seed: '%s' is not a non-negative whole number or -1 (random)", arg);
            return -1;
        }
        p->seed = s;
        return 1;
    }
    default:
        return 0;
    }
}

void cli_gen_opts_init(cli_gen_opts *o, long n_predict) {
    *o = (cli_gen_opts){.n_predict = n_predict};
    cli_model_opts_init(&o->model);
    clinfer_sampler_params_default(&o->sampling);
    o->sampling.seed = RANDOM_SEED;
}

int cli_gen_option(int opt, const char *arg, cli_gen_opts *o) {
    int used = cli_model_option(opt, arg, &o->model);
    if (!used) used = cli_sampler_option(opt, arg, &o->sampling);
    if (used) return used;
    switch (opt) {
    case 'n': /* -1: until the end of the text or the context */
        return cli_parse_long("-n", arg, -1, INT32_MAX, &o->n_predict) ? 1 : -1;
    case OPT_CHAT_TEMPLATE:
        o->chat_template = arg;
        return 1;
    case OPT_SYSTEM:
        o->system = arg;
        return 1;
    case 'c':
        return cli_parse_long("-c", arg, 0, INT32_MAX, &o->n_ctx) ? 1 : -1;
    case OPT_CACHE_TYPE_K:
    case OPT_CACHE_TYPE_V:
        if (strcmp(arg, "f16") && strcmp(arg, "f32")) {
            cli_error("--cache-type-%c: '%s' is not a KV cache type clinfer keeps (f16, f32)",
                      opt == OPT_CACHE_TYPE_K ? 'k' : 'v', arg);
            return -1;
        }
        o->kv_f32[opt == OPT_CACHE_TYPE_V] = !strcmp(arg, "f32");
        return 1;
    default:
        return cli_act_option(opt, arg, &o->act);
    }
}

int cli_act_option(int opt, const char *arg, clinfer_activations *act) {
    if (opt == OPT_F32_ACT || opt == OPT_Q8_ACT) {
        *act = opt == OPT_F32_ACT ? CLINFER_ACT_F32 : CLINFER_ACT_Q8;
        return 1;
    }
    if (opt != OPT_ACT) return 0;
    if (clinfer_activations_parse(arg, act) == CLINFER_OK) return 1;
    cli_error("--act: %s", clinfer_last_error());
    return -1;
}

/* A seed for runs that asked for none: different each run, said on stderr so a run can be
 * repeated. */
static uint64_t random_seed(void) {
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    if (f) fclose(f);
    return s >> 32; /* short enough to type back */
}

void cli_note_seed(cli_generator *g) {
    if (g->drawn_seed)
        fprintf(stderr, "clinfer: seed %llu (-s %llu repeats this run)\n",
                (unsigned long long)g->drawn_seed, (unsigned long long)g->drawn_seed);
    g->drawn_seed = 0;
}

int cli_generator_open(const char *command, const cli_gen_opts *o, cli_generator *g) {
    *g = (cli_generator){0};
    if (o->kv_f32[0] != o->kv_f32[1])
        return cli_error("%s: K and V share one cache type: --cache-type-k %s needs "
                         "--cache-type-v %s",
                         command, o->kv_f32[0] ? "f32" : "f16", o->kv_f32[0] ? "f32" : "f16");
    clinfer_sampler_params sampling = o->sampling;
    if (sampling.seed == RANDOM_SEED && sampling.temperature > 0) {
        sampling.seed = random_seed();
        g->drawn_seed = sampling.seed;
    }
    if (clinfer_sampler_create(&sampling, &g->sampler) != CLINFER_OK)
        return cli_error("%s: %s", command, clinfer_last_error());
    if (cli_load_model(&o->model, &g->model, &g->load_ms)) return 1;
    clinfer_context_params cp;
    clinfer_context_params_default(&cp);
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.activations = o->act;
    cp.kv_f32 = o->kv_f32[0];
    clinfer_status st = clinfer_context_create(g->model, &cp, &g->ctx);
    if (st != CLINFER_OK)
        return cli_error("%s: cannot create a context: %s (%s)", command, clinfer_last_error(),
                         clinfer_status_str(st));
    clinfer_model_info info;
    if (clinfer_model_get_info(g->model, &info) == CLINFER_OK &&
        clinfer_context_n_ctx(g->ctx) > info.n_ctx_train)
        fprintf(stderr,
                "clinfer: a context of %u tokens is longer than the %u the model was "
                "trained on; text past that may degrade\n",
                clinfer_context_n_ctx(g->ctx), info.n_ctx_train);
    return 0;
}

void cli_generator_free(cli_generator *g) {
    clinfer_sampler_free(g->sampler);
    clinfer_context_free(g->ctx);
    clinfer_model_free(g->model);
    *g = (cli_generator){0};
}

int cli_parse_options(const char *command, int argc, char **argv, const char *optstring,
                      const struct option *options, cli_option_fn handle, void *user,
                      void (*usage)(FILE *out)) {
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, optstring, options, NULL)) != -1) {
        int used = handle(opt, optarg, user);
        if (used < 0) return 1;
        if (used) continue;
        if (opt != 'h') return cli_bad_option(command, opt, argv);
        usage(stdout);
        return 2;
    }
    return 0;
}

int cli_bad_option(const char *command, int opt, char **argv) {
    /* A long option is named by its word; a short one may sit inside a bundle ("-vx"). */
    const char *prev = optind > 1 ? argv[optind - 1] : "";
    char short_opt[3] = {'-', (char)optopt, '\0'};
    const char *word = !strncmp(prev, "--", 2) || optopt <= 0 || optopt > 255 ? prev : short_opt;
    if (opt == ':')
        return cli_error("%s: option '%s' needs a value (see clinfer %s --help)", command, word,
                         command);
    return cli_error("%s: unknown option '%s' (see clinfer %s --help)", command, word, command);
}

bool cli_parse_long(const char *option, const char *arg, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi) {
        cli_error("%s: '%s' is not a whole number in [%ld, %ld]", option, arg, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char *option, const char *arg, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || v < lo || v > hi) {
        cli_error("%s: '%s' is not a number in [%g, %g]", option, arg, (double)lo, (double)hi);
        return false;
    }
    *out = v;
    return true;
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* By access(), not by opening: opening a FIFO (a model still being written) would block. */
static bool file_exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* A model named on the command line as a registry name (tools/models.txt) or the name of a
 * file in the models cache: its path in buf; false when name is neither (or a path). 1 and an
 * error printed when it names a registry model not fetched yet. */
static int cached_model(const char *name, char *buf, size_t size, bool *found) {
    char dir[4096];
    cli_registry_model m;
    *found = false;
    if (strchr(name, '/') || !cli_models_dir(dir, sizeof dir)) return 0;
    bool registered = cli_registry_find(name, false, &m);
    snprintf(buf, size, "%s/%s", dir, registered ? m.file : name);
    *found = file_exists(buf);
    if (registered && !*found)
        return cli_error("model '%s' is not in %s yet; `clinfer pull %s` fetches it", name, dir,
                         name);
    return 0;
}

int cli_model_path(const cli_model_opts *o, char *buf, size_t size, const char **path) {
    *path = o->path;
    if (o->path) {
        bool found = false;
        if (!file_exists(o->path) && cached_model(o->path, buf, size, &found)) return 1;
        if (found) *path = buf;
        return 0;
    }
    /* The registry's first model, in the cache or in ./models, where earlier versions of
     * tools/fetch_model.sh stored it. */
    cli_registry_model m;
    char dir[4096] = "~/.cache/clinfer/models";
    if (!cli_registry_at(0, &m)) return cli_error("no -m MODEL given and no default model");
    bool found = false;
    if (cli_models_dir(dir, sizeof dir)) {
        snprintf(buf, size, "%s/%s", dir, m.file);
        found = file_exists(buf);
    }
    if (!found) snprintf(buf, size, "models/%s", m.file);
    if (!found && !file_exists(buf))
        return cli_error("no -m MODEL given and the default model (%s) is not in %s; "
                         "`clinfer pull %s` fetches it",
                         m.file, dir, m.name);
    *path = buf;
    fprintf(stderr, "clinfer: no -m given, using the default model %s\n", buf);
    return 0;
}

int cli_load_model(const cli_model_opts *o, clinfer_model **model, double *load_ms) {
    char buf[4096];
    const char *path;
    if (cli_model_path(o, buf, sizeof buf, &path)) return 1;
    /* clinfer_model_load checks the whole file before any device set-up. */
    double t0 = cli_now_ms();
    clinfer_status st = clinfer_model_load(path, &o->params, model);
    if (load_ms) *load_ms = cli_now_ms() - t0;
    if (st != CLINFER_OK)
        return cli_error("cannot load model '%s': %s (%s)", path, clinfer_last_error(),
                         clinfer_status_str(st));
    return 0;
}

int cli_tokenize(const clinfer_model *model, const char *text, bool special, bool first,
                 int32_t **tokens, size_t *n_tokens) {
    /* clinfer_tokenize adds BOS when asked; whether this model's prompts start with one is
     * its metadata's add_bos_token (SmolLM2's BOS is <|im_start|>, which it must not get). */
    bool add_bos = first && clinfer_token_add_bos(model);
    size_t len = strlen(text), cap = len + 2, n = 0; /* enough unless a piece is under a byte */
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *t = malloc(cap * sizeof *t);
        if (!t) return cli_error("out of memory tokenizing %zu bytes", len);
        clinfer_status st = clinfer_tokenize(model, text, len, add_bos, special, t, cap, &n);
        if (st == CLINFER_OK) {
            *tokens = t;
            *n_tokens = n;
            return 0;
        }
        free(t);
        if (st != CLINFER_ERR_BUFFER_TOO_SMALL)
            return cli_error("cannot tokenize the prompt: %s (%s)", clinfer_last_error(),
                             clinfer_status_str(st));
        cap = n;
    }
    return cli_error("cannot tokenize the prompt: the token count changed between two calls");
}

char *cli_read_file(const char *what, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long size = -1;
    struct stat st;
    if (f && (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))) {
        fclose(f);
        cli_error("%s: cannot read '%s': not a regular file", what, path);
        return NULL;
    }
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f && size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1)) &&
        fread(text, 1, (size_t)size, f) == (size_t)size) {
        text[size] = '\0';
        *len = (size_t)size;
    } else {
        cli_error("%s: cannot read '%s': %s", what, path,
                  f && text ? "short read" : strerror(errno ? errno : EIO));
        free(text);
        text = NULL;
    }
    if (f) fclose(f);
    return text;
}

bool cli_stream_text(const char *text, size_t len, void *user) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    cli_text_sink *sink = user;
    if (sink && !sink->failed) {
        if (sink->len + len + 1 > sink->cap) {
            size_t cap = (sink->len + len + 1) * 2;
            char *s = realloc(sink->text, cap);
            if (!s) {
                sink->failed = true; /* the caller needs the whole text: stop generating */
                return false;
            }
            sink->text = s;
            sink->cap = cap;
        }
        memcpy(sink->text + sink->len, text, len);
        sink->len += len;
        sink->text[sink->len] = '\0';
    }
    return true;
}

void cli_print_stats(double load_ms, const clinfer_generate_stats *s) {
    double prefill = s->prefill_ms > 0 ? (double)s->n_prompt * 1e3 / s->prefill_ms : 0;
    double decode = s->decode_ms > 0 ? (double)s->n_generated * 1e3 / s->decode_ms : 0;
    fputs("clinfer: ", stderr);
    if (load_ms >= 0) fprintf(stderr, "load %.0f ms, ", load_ms);
    fprintf(stderr,
            "prefill %.1f tok/s (%zu tokens, %.0f ms), decode %.1f tok/s (%zu tokens, %.0f ms)\n",
            prefill, s->n_prompt, s->prefill_ms, decode, s->n_generated, s->decode_ms);
}

void cli_log(clinfer_log_level level, const char *message, void *user) {
    (void)user;
    fprintf(stderr, "clinfer: %s%s\n", level == CLINFER_LOG_WARN ? "warning: " : "", message);
}
