/* Options and steps that several subcommands share: the model to load (-m, --device,
 * --reference, with the default model as fallback), sampling flags and number parsing. Each
 * command lists CLI_MODEL_OPTIONS / CLI_SAMPLER_OPTIONS in its getopt_long table and passes
 * the options it does not handle itself to cli_model_option / cli_sampler_option. */
#ifndef CLINFER_CLI_COMMON_H
#define CLINFER_CLI_COMMON_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clinfer.h"

/* getopt_long values of the long-only options (above any short option character). */
enum {
    OPT_DEVICE = 256,
    OPT_REFERENCE,
    OPT_TEMP,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_REPEAT_PENALTY,
    OPT_REPEAT_LAST_N,
    OPT_CHAT,
    OPT_CHAT_TEMPLATE,
    OPT_CTX,
    OPT_SYSTEM,
    OPT_PROFILE,
    OPT_F32_ACT,
    OPT_Q8_ACT,
    OPT_ACT,
    OPT_KERNEL_PATH,
    OPT_N_GPU_LAYERS,
    OPT_TENSOR_SPLIT,
    OPT_CACHE_TYPE_K,
    OPT_CACHE_TYPE_V,
};

#define CLI_MODEL_OPTIONS                                                                          \
    {"model", required_argument, NULL, 'm'}, {"device", required_argument, NULL, OPT_DEVICE},      \
        {"reference", no_argument, NULL, OPT_REFERENCE}, {"verbose", no_argument, NULL, 'v'},      \
        {"quiet", no_argument, NULL, 'q'}, {"threads", required_argument, NULL, 't'},              \
        {"n-gpu-layers", required_argument, NULL, OPT_N_GPU_LAYERS},                               \
        {"tensor-split", required_argument, NULL, OPT_TENSOR_SPLIT}, {                             \
        "help", no_argument, NULL, 'h'                                                             \
    }
#define CLI_MODEL_SHORT "m:vqht:"
#define CLI_MODEL_HELP                                                                             \
    "  -m, --model FILE     GGUF model: a file, or a model's name in `clinfer models`\n"           \
    "                       (default: the default model of `clinfer pull`)\n"                      \
    "      --device SPEC    OpenCL device: index, cpu, gpu or a name part (default:\n"             \
    "                       $CLINFER_DEVICE, else the strongest device); A,B,...: the layers\n"    \
    "                       split across these devices in order (the last runs the head)\n"        \
    "      --tensor-split a,b,...  each --device's share of the layers (default: by memory)\n"     \
    "  -ngl, --n-gpu-layers N  the last N layers on --device, the head too where N exceeds\n"      \
    "                       the layer count, the rest on the CPU device; 0: all on the CPU\n"      \
    "      --reference      run on the plain C reference backend instead of OpenCL\n"              \
    "  -v, --verbose        log the loading steps\n"                                               \
    "  -q, --quiet          do not say when kernels are compiled (first use of a device)\n"        \
    "  -t, --threads N      on a CPU device, run on N of its cores (default: all)\n"               \
    "  -h, --help           this help\n"

#define CLI_SAMPLER_OPTIONS                                                                        \
    {"temp", required_argument, NULL, OPT_TEMP}, {"top-k", required_argument, NULL, OPT_TOP_K},    \
        {"top-p", required_argument, NULL, OPT_TOP_P},                                             \
        {"min-p", required_argument, NULL, OPT_MIN_P},                                             \
        {"repeat-penalty", required_argument, NULL, OPT_REPEAT_PENALTY},                           \
        {"repeat-last-n", required_argument, NULL, OPT_REPEAT_LAST_N}, {                           \
        "seed", required_argument, NULL, 's'                                                       \
    }
#define CLI_SAMPLER_HELP                                                                           \
    "      --temp T         temperature; 0 is greedy (default 0.8)\n"                              \
    "      --top-k K        keep the K most likely tokens; 0 is off (default 40)\n"                \
    "      --top-p P        keep the most likely tokens up to mass P; 1 is off (default 0.95)\n"   \
    "      --min-p M        drop tokens below M times the top probability (default 0.05)\n"        \
    "      --repeat-penalty R  penalise tokens of the last N; 1 is off (default 1)\n"              \
    "      --repeat-last-n N   the window of --repeat-penalty (default 64)\n"                      \
    "  -s, --seed S         random seed; the same seed gives the same text (default or -1:\n"      \
    "                       a new one each run, printed on stderr)\n"

/* clinfer_sampler_params.seed before cli_generator_open draws one (no -s, or -s -1). */
#define RANDOM_SEED UINT64_MAX

typedef struct {
    const char *path; /* NULL: the default model */
    clinfer_model_params params;
} cli_model_opts;

void cli_model_opts_init(cli_model_opts *o);

/* For an option a command does not handle itself: 1 consumed, 0 not one of the shared
 * options, -1 a bad value (error already printed). */
int cli_model_option(int opt, const char *arg, cli_model_opts *o);
int cli_sampler_option(int opt, const char *arg, clinfer_sampler_params *p);
/* --device (a list of devices too), --tensor-split and -ngl into p, as cli_model_option
 * answers. */
int cli_placement_option(int opt, const char *arg, clinfer_model_params *p);
/* The model's devices and their layers, one line each after prefix. */
void cli_print_placement(const clinfer_model *model, const char *prefix, FILE *out);

/* The options of the commands that generate text (run, chat): the model and sampling options,
 * -n, --chat-template, --system, --ctx and --f32-act. Each such command lists CLI_GEN_OPTIONS in
 * its getopt_long table, CLI_GEN_SHORT in its optstring, and passes what it does not handle itself
 * to cli_gen_option. */
#define CLI_GEN_OPTIONS                                                                            \
    CLI_MODEL_OPTIONS, CLI_SAMPLER_OPTIONS, {"n-predict", required_argument, NULL, 'n'},           \
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},                             \
        {"system", required_argument, NULL, OPT_SYSTEM},                                           \
        {"ctx-size", required_argument, NULL, 'c'}, {"ctx", required_argument, NULL, 'c'},         \
        {"cache-type-k", required_argument, NULL, OPT_CACHE_TYPE_K},                               \
        {"cache-type-v", required_argument, NULL, OPT_CACHE_TYPE_V}, CLI_ACT_OPTIONS
#define CLI_GEN_SHORT CLI_MODEL_SHORT "n:c:s:"
/* -c and the KV cache's type (after llama.cpp's -ctk, -ctv), for the commands' help. */
#define CLI_CTX_HELP                                                                               \
    "  -c, --ctx-size N     context length; 0 is the model's (default 0)\n"                        \
    "  -ctk, --cache-type-k T  the KV cache's type, f16 (default) or f32; K and V take one\n"      \
    "  -ctv, --cache-type-v T  type, so both are given alike\n"

typedef struct {
    cli_model_opts model;
    clinfer_sampler_params sampling;
    const char *chat_template, *system; /* NULL: the model's template / no system message */
    long n_predict, n_ctx;
    clinfer_activations act; /* --act, --f32-act, --q8-act */
    bool kv_f32[2];          /* --cache-type-k, --cache-type-v f32 (else f16) */
} cli_gen_opts;

void cli_gen_opts_init(cli_gen_opts *o, long n_predict);
/* As cli_model_option, for all of CLI_GEN_OPTIONS. */
int cli_gen_option(int opt, const char *arg, cli_gen_opts *o);

/* What generating text needs: the sampler, the model (load_ms: its load time) and a context
 * of o->n_ctx tokens. */
typedef struct {
    clinfer_sampler *sampler;
    clinfer_model *model;
    clinfer_context *ctx;
    double load_ms;
    uint64_t drawn_seed; /* the seed drawn for this run (no -s, or -s -1); 0: none */
} cli_generator;

/* Says the drawn seed on stderr, once, as generation starts (an error before it stays the only
 * line). */
void cli_note_seed(cli_generator *g);

/* Creates all of *g (zeroed first); on failure prints a one-line error starting "command: "
 * and returns 1, leaving what was made for cli_generator_free. */
int cli_generator_open(const char *command, const cli_gen_opts *o, cli_generator *g);
void cli_generator_free(cli_generator *g);

/* A command's handler of one option: 1 consumed, 0 not one of its options, -1 a bad value
 * (error already printed). */
typedef int (*cli_option_fn)(int opt, const char *arg, void *user);

/* A command's getopt_long loop over argv from argv[1]: each option goes to handle; what it does
 * not consume is -h (usage on stdout) or an error. optstring starts with ':'. Returns 0 to go on
 * (arguments from optind on are left to the caller), 1 on an error (printed), 2 after -h. */
int cli_parse_options(const char *command, int argc, char **argv, const char *optstring,
                      const struct option *options, cli_option_fn handle, void *user,
                      void (*usage)(FILE *out));

/* The getopt_long error for '?' / ':' returns, as one line; returns 1. Needs opterr = 0 and
 * an optstring starting with ':'. */
int cli_bad_option(const char *command, int opt, char **argv);

/* o->path (where it names no file but a model of the registry or a file in the models cache:
 * that file, in buf), or where the default model is (buf, saying so on stderr). Prints a
 * one-line error and returns 1 when there is none. */
int cli_model_path(const cli_model_opts *o, char *buf, size_t size, const char **path);

/* Resolves o->path (or the default model, saying so on stderr), checks the file exists and
 * is a GGUF file, and loads it. Prints a one-line error and returns 1 on failure. */
int cli_load_model(const cli_model_opts *o, clinfer_model **model, double *load_ms);

/* Parse a whole number / finite float in [lo, hi]; print a one-line error naming the option
 * and return false otherwise. */
bool cli_parse_long(const char *option, const char *arg, long lo, long hi, long *out);
bool cli_parse_float(const char *option, const char *arg, float lo, float hi, float *out);

double cli_now_ms(void);

/* The library's diagnostics on stderr, "clinfer: " first (clinfer_log_set; main sets it): what
 * -v and CLINFER_VERBOSE=1 turn on, and warnings. */
void cli_log(clinfer_log_level level, const char *message, void *user);

/* --profile: clinfer_backend_options.profile (a per-op table on stderr as each context is
 * freed). */
#define CLI_PROFILE_HELP                                                                           \
    "      --profile        profile on stderr (CLINFER_PROFILE=1): time per op kind and per\n"     \
    "                       token wall = kernels + gaps (launches, host work); OpenCL times its\n" \
    "                       kernels with events, the reference backend waits for each op\n"

/* --act MODE, --f32-act, --q8-act (run, chat, bench, perplexity):
 * clinfer_context_params.activations, parsed by cli_act_option. */
#define CLI_ACT_OPTIONS                                                                            \
    {"act", required_argument, NULL, OPT_ACT}, {"f32-act", no_argument, NULL, OPT_F32_ACT}, {      \
        "q8-act", no_argument, NULL, OPT_Q8_ACT                                                    \
    }
#define CLI_ACT_HELP                                                                               \
    "      --act MODE       which matmuls over quantized weights round their input to 8 bits\n"    \
    "                       (integer dot products, faster) and which take it in f32 (closer\n"     \
    "                       to the exact product): q8 (all 8-bit), f32-head (the LM head f32),\n"  \
    "                       f32-ends (first and last layers and head f32), f32 (all f32);\n"       \
    "                       default: the measured choice (docs/PERFORMANCE.md)\n"                  \
    "      --f32-act        --act f32\n"                                                           \
    "      --q8-act         --act q8\n"

/* For OPT_ACT, OPT_F32_ACT, OPT_Q8_ACT: 1 consumed, 0 not one of them, -1 a bad value. */
int cli_act_option(int opt, const char *arg, clinfer_activations *act);

/* Tokenizes text; special: special-token markers become their tokens (chat templates write
 * them as text), else they are plain text; first: the text starts the sequence, so it gets BOS
 * if the model's prompts start with one. *tokens is malloc'ed. Prints the error; 1 on failure. */
int cli_tokenize(const clinfer_model *model, const char *text, bool special, bool first,
                 int32_t **tokens, size_t *n_tokens);

/* The whole file at path, NUL-terminated (*len without the NUL), malloc'ed; NULL with the error
 * printed (naming what) on failure. */
char *cli_read_file(const char *what, const char *path, size_t *len);

/* Streams generated text to stdout as it arrives (the clinfer_generate callback); user may be
 * NULL or a cli_text_sink that also keeps a copy. */
typedef struct {
    char *text;
    size_t len, cap;
    bool failed;
} cli_text_sink;
bool cli_stream_text(const char *text, size_t len, void *user);

/* "load 123 ms, prefill 45.6 tok/s (12 tokens, ...), decode 7.8 tok/s (48 tokens, ...)" on
 * stderr; load_ms < 0 leaves the load time out. */
void cli_print_stats(double load_ms, const clinfer_generate_stats *stats);

#endif
