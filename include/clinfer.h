/* clinfer: run transformer language models through OpenCL on any vendor's device.
 *
 * Conventions: every call returns a clinfer_status (CLINFER_OK == 0); on failure
 * clinfer_last_error() holds a message saying what failed and with which values. The library
 * never exits or aborts. Handles are opaque; each *_create or *_load has a matching *_free.
 * Thread safety: the error message is per thread; a model may be shared between threads, and
 * its contexts run at once (each has its own device queue and scratch and reads the model's
 * weights); one context is used by one thread at a time.
 */
#ifndef CLINFER_H
#define CLINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. CMakeLists.txt reads it from these lines as the project's version
 * (the one place it is written); clinfer_version() gives the library's, which a program can
 * compare with CLINFER_VERSION_STRING to catch a header and a library of different builds. */
#define CLINFER_VERSION_MAJOR 0
#define CLINFER_VERSION_MINOR 1
#define CLINFER_VERSION_PATCH 0
#define CLINFER_VERSION_STRING "0.1.0"

/* Marks the library's interface. The library is compiled with hidden visibility, so
 * libclinfer.so exports exactly the functions declared with it. For a program including this
 * header it changes nothing (a declaration's default visibility is what it has anyway). A
 * definition made before this header replaces it. */
#ifndef CLINFER_API
#if defined(__GNUC__) || defined(__clang__)
#define CLINFER_API __attribute__((visibility("default")))
#else
#define CLINFER_API
#endif
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (CLINFER_VERSION_STRING as the library was built). */
CLINFER_API const char *clinfer_version(void);

/* ---- status ---------------------------------------------------------------------------- */

/* 0 is success. OpenCL error codes (-1 .. -1999) pass through unchanged; the library's own
 * codes live in the range below -2000. */
typedef int32_t clinfer_status;

enum {
    CLINFER_OK = 0,
    CLINFER_ERR_INVALID_ARGUMENT = -2001, /* a caller passed a bad value */
    CLINFER_ERR_OUT_OF_MEMORY = -2002,    /* host allocation failed */
    CLINFER_ERR_IO = -2003,               /* a file could not be opened, read or written */
    CLINFER_ERR_FORMAT = -2004,           /* malformed input file (GGUF, cache entry, ...) */
    CLINFER_ERR_UNSUPPORTED = -2005,      /* valid but not supported (type, architecture) */
    CLINFER_ERR_NO_PLATFORM = -2006,      /* no OpenCL platform or device */
    CLINFER_ERR_BUILD = -2007,            /* an OpenCL program failed to build */
    CLINFER_ERR_DEVICE_LOST = -2008,      /* the device failed; the context is unusable */
    CLINFER_ERR_NOT_FOUND = -2009,        /* a named key, tensor or device does not exist */
    CLINFER_ERR_CONTEXT_FULL = -2010,     /* the tokens do not fit the context length */
    CLINFER_ERR_BUFFER_TOO_SMALL = -2011, /* the caller's output array is too small */
    CLINFER_ERR_ABORTED = -2012,          /* a caller's callback asked to stop */
};

/* A short name for a status: "CL_OUT_OF_RESOURCES", "CLINFER_ERR_FORMAT", ... */
CLINFER_API const char *clinfer_status_str(clinfer_status status);

/* The message of the last failure on this thread ("" when none). */
CLINFER_API const char *clinfer_last_error(void);

/* ---- callbacks: diagnostics, stopping an eval, load progress ---------------------------- */

typedef enum {
    CLINFER_LOG_WARN = 0, /* something went wrong and was worked around (a damaged cache entry) */
    CLINFER_LOG_INFO,     /* load steps and sizes (clinfer_model_params.verbose), profiles */
    CLINFER_LOG_DEBUG,    /* the backend's decisions: CLINFER_VERBOSE=1 */
} clinfer_log_level;

/* message: one line or more, without a trailing newline; valid during the call. */
typedef void (*clinfer_log_callback)(clinfer_log_level level, const char *message, void *user);

/* Where the library's diagnostics go, for the whole process: the library never prints. NULL
 * (the default): nowhere. Calls are serialised (never two at once), from whichever thread logs;
 * a callback must not call clinfer_log_set itself. */
CLINFER_API void clinfer_log_set(clinfer_log_callback callback, void *user);

/* Asked between chunks of an eval (clinfer_context_set_abort): return true to stop. */
typedef bool (*clinfer_abort_callback)(void *user);

/* Told the fraction (0 to 1) of a model's weights loaded so far (clinfer_model_params.progress):
 * return false to stop the load (CLINFER_ERR_ABORTED). */
typedef bool (*clinfer_progress_callback)(float fraction, void *user);

/* ---- what this build supports ---------------------------------------------------------- */

typedef enum {
    CLINFER_SUPPORT_ARCHITECTURE,  /* general.architecture: "llama", "qwen2", ... */
    CLINFER_SUPPORT_WEIGHT_TYPE,   /* tensor types the backends multiply by: "F32", "Q4_K", ... */
    CLINFER_SUPPORT_TOKENIZER,     /* tokenizer.ggml.model: "gpt2" (byte-level BPE), ... */
    CLINFER_SUPPORT_CHAT_TEMPLATE, /* chat template names: "chatml", ... */
    CLINFER_SUPPORT_KERNEL_PATH,   /* OpenCL kernel paths: "cpu-rows", ... */
} clinfer_support_kind;

/* The index-th (from 0) name of kind that this build supports; NULL past the last, or for a kind
 * not listed above. Loop from 0 until NULL to list them all. */
CLINFER_API const char *clinfer_supported(clinfer_support_kind kind, size_t index);

/* ---- devices --------------------------------------------------------------------------- */

typedef enum {
    CLINFER_VENDOR_OTHER = 0,
    CLINFER_VENDOR_NVIDIA,
    CLINFER_VENDOR_AMD,
    CLINFER_VENDOR_INTEL,
    CLINFER_VENDOR_APPLE,
    CLINFER_VENDOR_ARM,
    CLINFER_VENDOR_QUALCOMM,
    CLINFER_VENDOR_POCL,
} clinfer_vendor;

typedef enum {
    CLINFER_DEVICE_CPU = 1,
    CLINFER_DEVICE_GPU = 2,
    CLINFER_DEVICE_ACCELERATOR = 4,
    CLINFER_DEVICE_OTHER = 8,
} clinfer_device_type;

typedef struct clinfer_device_info {
    char platform[128];
    char name[128];
    char vendor_name[128];
    char driver_version[64];
    char device_version[64];
    char opencl_c_version[64];
    char platform_version[128];
    clinfer_vendor vendor;
    clinfer_device_type type;
    uint32_t compute_units;
    uint32_t clock_mhz;
    uint64_t global_mem;
    uint64_t local_mem;
    uint64_t max_alloc;
    size_t max_work_group_size;
    uint32_t preferred_vector_width_float;
    uint32_t preferred_vector_width_half;
    bool fp16;            /* cl_khr_fp16 */
    bool fp64;            /* cl_khr_fp64 */
    bool subgroups;       /* cl_khr_subgroups or cl_intel_subgroups */
    bool int_dot;         /* cl_khr_integer_dot_product */
    char kernel_path[32]; /* variant chosen from the capabilities: "cpu-rows", ... */
} clinfer_device_info;

/* Enumerates every OpenCL device of every platform. No platform is not an error: *count is 0
 * (clinfer_last_error() then says why). */
CLINFER_API clinfer_status clinfer_device_count(size_t *count);
CLINFER_API clinfer_status clinfer_device_get_info(size_t index, clinfer_device_info *info);

/* Picks a device from spec: NULL or "" means the CLINFER_DEVICE environment variable, else the
 * strongest device. A spec is an index ("1"), a type ("gpu", "cpu") or a name substring.
 * reason (optional) receives a sentence saying why this device was chosen. */
CLINFER_API clinfer_status clinfer_device_select(const char *spec, size_t *index, char *reason,
                                                 size_t reason_size);

/* ---- models -------------------------------------------------------------------------- */

typedef struct clinfer_model clinfer_model;
typedef struct clinfer_context clinfer_context;

typedef enum {
    CLINFER_BACKEND_OPENCL = 0,    /* any OpenCL device */
    CLINFER_BACKEND_REFERENCE = 1, /* plain C on the host: the oracle */
} clinfer_backend_kind;

typedef enum {
    CLINFER_KERNEL_PATH_DEFAULT = 0,  /* chosen from the device's capabilities */
    CLINFER_KERNEL_PATH_CPU_ROWS,     /* one work-item per row: CPUs */
    CLINFER_KERNEL_PATH_GPU_SUBGROUP, /* reserved: not offered until it has kernels of its own */
    CLINFER_KERNEL_PATH_GPU_LOCAL_REDUCE, /* work-groups reduce in local memory: GPUs */
} clinfer_kernel_path;

typedef enum { CLINFER_DEFAULT = 0, CLINFER_ON, CLINFER_OFF } clinfer_toggle;

/* A kernel program about to be compiled (clinfer_backend_options.on_compile). */
typedef struct {
    const char *device;  /* the device's name */
    const char *program; /* the source's name, e.g. "matvec.cl" */
    unsigned count;      /* programs this model compiled so far, this one included */
} clinfer_compile_event;

/* How the OpenCL backend runs. A zeroed struct is the default: each field left at 0 or NULL
 * takes the value of its environment variable where set (named after the field), else the
 * default given. */
typedef struct {
    const char *device;              /* CLINFER_DEVICE; a spec as in clinfer_device_select */
    clinfer_kernel_path kernel_path; /* CLINFER_KERNEL_PATH: "cpu-rows" or "gpu-local-reduce" */
    const char *cache_dir;           /* CLINFER_CACHE_DIR: compiled kernels; else
                                      * $XDG_CACHE_HOME/clinfer, else ~/.cache/clinfer */
    clinfer_toggle clblast;          /* CLINFER_CLBLAST (0/1): CLBlast for f32 GEMM; else on
                                      * GPUs (where built with it) */
    clinfer_toggle graph;            /* CLINFER_GRAPH (0/1): a decode step in one launch on
                                      * cpu-rows devices (on: also where not a CPU, e.g. a
                                      * simulator); else on CPU devices, each context timing
                                      * its decode steps picks that or a launch per op (same
                                      * results), whichever runs faster at the time */
    clinfer_toggle profile;          /* CLINFER_PROFILE (0/1): per-op kernel times on stderr as
                                      * a context is freed; else off */
    uint32_t threads; /* CPU devices: run on this many of their compute units (threads; an
                       * OpenCL sub-device); 0, or as many as it has: all. Other devices
                       * ignore it. */
    /* Called before each kernel program is compiled from source, i.e. not found in the kernel
     * cache: the first use of a device (or of a weight type on it) compiles several, seconds
     * each on CPUs, so a program can say why it waits. May be called from any thread that
     * uses the model. NULL: not told. */
    void (*on_compile)(const clinfer_compile_event *event, void *user);
    void *on_compile_user;
} clinfer_backend_options;

typedef struct {
    clinfer_backend_kind backend;
    clinfer_backend_options options; /* for CLINFER_BACKEND_OPENCL */
    bool verbose;                    /* log load steps (CLINFER_LOG_INFO, clinfer_log_set) */
    /* Only the tokenizer (a vocab-only GGUF file will do): no weights, no backend, no
     * contexts; the token functions below work. */
    bool vocab_only;
    clinfer_progress_callback progress; /* NULL: not told */
    void *progress_user;
} clinfer_model_params;

CLINFER_API void clinfer_model_params_default(clinfer_model_params *params);
CLINFER_API clinfer_status clinfer_model_load(const char *path, const clinfer_model_params *params,
                                              clinfer_model **out);
CLINFER_API void clinfer_model_free(clinfer_model *model);

typedef struct {
    char architecture[32]; /* general.architecture: "llama", "qwen2", "gpt2", ... */
    char name[128];        /* general.name, if any */
    uint32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff;
    uint32_t head_dim, n_rot; /* n_rot: the dims of a head that rotate (0: no rope) */
    float rope_freq_base, norm_eps;
    bool rope_neox;
    uint64_t n_params;     /* weights' element count */
    uint64_t weight_bytes; /* as stored on the device */
    char backend[256];     /* the backend and device in use */
    /* The file: GGUF version and size, the chat format its tokenizer.chat_template is
     * recognised as ("" for none, "unrecognised"; without a template, the one its architecture
     * chats in: "gemma" for gemma3), its tensors by element type. */
    uint32_t gguf_version;
    uint64_t file_bytes;
    char chat_format[16];
    uint32_t n_tensors;
    struct {
        char type[8]; /* "F32", "Q4_K", ... */
        uint32_t count;
        uint64_t bytes;
    } tensor_types[16]; /* n_tensor_types, in type-id order */
    uint32_t n_tensor_types;
} clinfer_model_info;

CLINFER_API clinfer_status clinfer_model_get_info(const clinfer_model *model,
                                                  clinfer_model_info *info);

/* ---- tokens -------------------------------------------------------------------------- */

/* Writes up to capacity ids; *n_tokens receives the count needed, and the call returns
 * CLINFER_ERR_BUFFER_TOO_SMALL when it exceeds capacity. add_bos prepends BOS unconditionally,
 * whatever the model's metadata says; pass clinfer_token_add_bos(model) to start a prompt the
 * way the model expects; with add_bos, EOS is also appended where the model's metadata asks for
 * it (tokenizer.ggml.add_eos_token, as T5's files do), as llama.cpp does. parse_special: text
 * like "<|im_start|>" becomes its special token. Invalid UTF-8 is tokenized byte-wise. */
CLINFER_API clinfer_status clinfer_tokenize(const clinfer_model *model, const char *text,
                                            size_t len, bool add_bos, bool parse_special,
                                            int32_t *tokens, size_t capacity, size_t *n_tokens);
/* The bytes a token stands for (not NUL-terminated; may be part of a UTF-8 sequence). */
CLINFER_API clinfer_status clinfer_token_to_piece(const clinfer_model *model, int32_t token,
                                                  char *buf, size_t size, size_t *len);
/* For streaming pieces: how many leading bytes of buf can be shown now without splitting a
 * UTF-8 character, holding back only an incomplete but so far valid sequence at the end. */
CLINFER_API size_t clinfer_utf8_complete(const char *buf, size_t len);
CLINFER_API int32_t clinfer_token_bos(const clinfer_model *model); /* -1 if none */
/* Whether the model's prompts start with BOS (tokenizer.ggml.add_bos_token, else the default of
 * its tokenizer type); false for a model without a tokenizer. */
CLINFER_API bool clinfer_token_add_bos(const clinfer_model *model);
CLINFER_API int32_t clinfer_token_eos(const clinfer_model *model);
CLINFER_API bool clinfer_token_is_eog(const clinfer_model *model,
                                      int32_t token); /* ends generation */

/* ---- contexts: a KV cache and the state of one sequence -------------------------------- */

typedef enum {
    CLINFER_ACT_DEFAULT = 0, /* f32 for models under 1B parameters, q8 from 1B on where the
                              * device has integer dots for 8-bit x (CPUs with AVX2), else f32:
                              * the choice measured in docs/PERFORMANCE.md */
    CLINFER_ACT_Q8,          /* every matmul 8-bit */
    CLINFER_ACT_F32_HEAD,    /* the output projection (LM head) f32, the layers 8-bit */
    CLINFER_ACT_F32_ENDS,    /* the first and last layers and the LM head f32 */
    CLINFER_ACT_F32,         /* every matmul f32 */
} clinfer_activations;

/* "default", "q8", "f32-head", "f32-ends", "f32"; NULL for a value out of range. */
CLINFER_API const char *clinfer_activations_name(clinfer_activations activations);
/* The mode of one of those names into *out; CLINFER_ERR_INVALID_ARGUMENT for another name, with
 * clinfer_last_error() listing them. */
CLINFER_API clinfer_status clinfer_activations_parse(const char *name, clinfer_activations *out);

typedef struct {
    uint32_t n_ctx;   /* 0: the model's training context */
    uint32_t n_batch; /* prefill chunk; 0: 256 */
    bool kv_f32;      /* KV cache in f32 instead of f16 */
    /* Which matmuls over quantized weights (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) take their input
     * rounded to 8 bits per block of 32, 256 for the K-quants (as llama.cpp's CPU backend
     * does, for integer dot products) and which take it in f32: slower, closer to the exact
     * product. F16/F32 weights always take f32. */
    clinfer_activations activations;
    /* Keep the logits of every token of each eval, not only the last one's (perplexity,
     * scoring): clinfer_get_logits_ith. Costs n_batch rows of logits on the device. */
    bool logits_all;
    /* Keep the hidden state of every token of each eval (clinfer_get_embeddings_ith): costs a
     * read of n_batch rows of n_embd per chunk. */
    bool embeddings;
    /* Sequences the context holds at once (clinfer_batch_eval); 0: 1. Each owns n_ctx rows of
     * KV cache of its own, so the cache takes n_seq_max times one sequence's. Without
     * logits_all, one batch may ask for the logits of up to n_seq_max entries. */
    uint32_t n_seq_max;
} clinfer_context_params;

CLINFER_API void clinfer_context_params_default(clinfer_context_params *params);

/* What a context of this model needs on the device. */
typedef struct {
    uint64_t weight_bytes;   /* the model's weights (shared by all contexts) */
    uint64_t kv_bytes;       /* one context's KV cache (all its sequences) */
    uint64_t scratch_bytes;  /* one context's activations, logits and token ids */
    uint32_t n_ctx, n_batch; /* the effective values the figures were computed for */
    uint32_t n_seq_max;
} clinfer_memory_plan;

/* Resolves params (NULL: defaults) against the model: n_ctx 0 means the training context,
 * n_batch 0 means 256, and n_batch is capped at n_ctx. Fails for an n_ctx that the model
 * cannot address (learned positions beyond their table). */
CLINFER_API clinfer_status clinfer_model_memory_plan(const clinfer_model *model,
                                                     const clinfer_context_params *params,
                                                     clinfer_memory_plan *out);

CLINFER_API clinfer_status clinfer_context_create(clinfer_model *model,
                                                  const clinfer_context_params *params,
                                                  clinfer_context **out);
CLINFER_API void clinfer_context_free(clinfer_context *ctx);
CLINFER_API void clinfer_context_reset(clinfer_context *ctx);            /* forget all tokens */
CLINFER_API uint32_t clinfer_context_n_past(const clinfer_context *ctx); /* sequence 0's tokens */
CLINFER_API uint32_t clinfer_context_n_ctx(const clinfer_context *ctx);
/* The activations the context runs with: params.activations, CLINFER_ACT_DEFAULT resolved. */
CLINFER_API clinfer_activations clinfer_context_activations(const clinfer_context *ctx);

/* Asked before each chunk of n_batch tokens of an eval (each token of clinfer_generate): when it
 * returns true the eval stops with CLINFER_ERR_ABORTED and the context holds what it held before
 * (NULL: never asked). */
CLINFER_API void clinfer_context_set_abort(clinfer_context *ctx, clinfer_abort_callback callback,
                                           void *user);

/* Appends tokens to the sequence (sequence 0), n_batch at a time, each chunk one step as
 * clinfer_batch_eval runs it; afterwards the logits of the last one are available.
 * CLINFER_ERR_CONTEXT_FULL if they do not fit (nothing is evaluated then); after a failure or an
 * abort the sequence holds what it held before. */
CLINFER_API clinfer_status clinfer_eval(clinfer_context *ctx, const int32_t *tokens, size_t n);
CLINFER_API clinfer_status clinfer_get_logits(clinfer_context *ctx, const float **logits,
                                              size_t *n_vocab);
/* The logits of token i of the last eval (i < 0 counts from its end: -1 is the last token);
 * tokens before the last need a context made with logits_all. Valid until the next eval. */
CLINFER_API clinfer_status clinfer_get_logits_ith(clinfer_context *ctx, int32_t i,
                                                  const float **logits, size_t *n_vocab);

/* ---- embeddings: hidden states (contexts made with clinfer_context_params.embeddings) ---- */

/* Token i's hidden state of the last eval (i < 0 counts from its end): the final layer's output
 * after the output norm, the vector the LM head multiplies (llama.cpp's per-token embedding).
 * *n_embd receives its length. Valid until the next eval. */
CLINFER_API clinfer_status clinfer_get_embeddings_ith(clinfer_context *ctx, int32_t i,
                                                      const float **embd, size_t *n_embd);

typedef enum {
    CLINFER_POOLING_MEAN = 0, /* the mean of every token's hidden state */
    CLINFER_POOLING_LAST,     /* the last token's */
} clinfer_pooling;

/* One vector for the whole last eval (evaluate a text in one clinfer_eval after a reset), into
 * out[capacity]; normalize: scaled to Euclidean length 1 (as OpenAI's and llama-server's
 * /v1/embeddings return them). *n_embd receives the length, and CLINFER_ERR_BUFFER_TOO_SMALL
 * when it exceeds capacity. */
CLINFER_API clinfer_status clinfer_get_embeddings_pooled(clinfer_context *ctx,
                                                         clinfer_pooling pooling, bool normalize,
                                                         float *out, size_t capacity,
                                                         size_t *n_embd);

/* ---- batches of several sequences ------------------------------------------------------
 *
 * A context made with n_seq_max > 1 holds that many sequences (ids 0 .. n_seq_max - 1), each in
 * a KV cache region of n_ctx rows of its own. clinfer_eval appends to sequence 0; a batch
 * evaluates tokens of any sequences in one step, prompt tokens and decode tokens mixed: every
 * matrix product runs once over all the batch's tokens (n columns), and each token attends to
 * its own sequence's cached tokens up to its position. A server decodes all its streams with
 * one batch per step (one entry per stream) instead of one evaluation per stream. */

typedef struct {
    int32_t token;
    uint32_t pos; /* its position in its sequence */
    uint32_t seq; /* its sequence, < n_seq_max */
    bool logits;  /* keep its logits (clinfer_get_logits_ith(ctx, entry index)) */
} clinfer_batch_entry;

/* Evaluates n entries (1 <= n <= n_batch) as one step. A sequence's entries, in batch order,
 * continue it: the first at the position after its last token (clinfer_seq_len), the next ones
 * each one further; entries of different sequences may interleave. At most n_seq_max entries may
 * ask for logits (every entry with logits_all). Afterwards clinfer_get_logits_ith(ctx, i) gives
 * entry i's logits (i < 0 counts from the end), valid until the next evaluation. Bad input
 * (sequence, token, position, count) is refused with CLINFER_ERR_INVALID_ARGUMENT naming the
 * entry, a position at or past n_ctx with CLINFER_ERR_CONTEXT_FULL; nothing is evaluated then. */
CLINFER_API clinfer_status clinfer_batch_eval(clinfer_context *ctx,
                                              const clinfer_batch_entry *entries, size_t n);

CLINFER_API uint32_t clinfer_context_n_seq_max(const clinfer_context *ctx);
/* The tokens sequence seq holds (0 for a seq out of range). */
CLINFER_API uint32_t clinfer_seq_len(const clinfer_context *ctx, uint32_t seq);
/* The tokens it has room for: n_ctx - clinfer_seq_len (0 for a seq out of range). */
CLINFER_API uint32_t clinfer_seq_room(const clinfer_context *ctx, uint32_t seq);
/* Forgets sequence seq's tokens. */
CLINFER_API clinfer_status clinfer_seq_clear(clinfer_context *ctx, uint32_t seq);
/* Keeps the first n_keep tokens of seq (positions 0 .. n_keep - 1), forgetting the rest; an
 * n_keep at or past its length changes nothing. */
CLINFER_API clinfer_status clinfer_seq_truncate(clinfer_context *ctx, uint32_t seq,
                                                uint32_t n_keep);
/* Makes dst hold the first n tokens of src (a shared system prompt evaluated once), replacing
 * what dst held: their KV cache rows are copied. n <= clinfer_seq_len(src), src != dst. */
CLINFER_API clinfer_status clinfer_seq_copy_prefix(clinfer_context *ctx, uint32_t src, uint32_t dst,
                                                   uint32_t n);

/* ---- sampling ------------------------------------------------------------------------ */

typedef struct {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* the window of the penalties: the last N tokens (prompt included) */
    uint64_t seed;
    /* OpenAI's: a token seen c times in the window loses presence_penalty (if c > 0) plus
     * c * frequency_penalty from its logit. 0: off (the default). */
    float presence_penalty, frequency_penalty;
} clinfer_sampler_params;

typedef struct clinfer_sampler clinfer_sampler;

CLINFER_API void clinfer_sampler_params_default(clinfer_sampler_params *params);
CLINFER_API clinfer_status clinfer_sampler_create(const clinfer_sampler_params *params,
                                                  clinfer_sampler **out);
CLINFER_API void clinfer_sampler_free(clinfer_sampler *sampler);
CLINFER_API clinfer_status clinfer_sampler_sample(clinfer_sampler *sampler, const float *logits,
                                                  size_t n_vocab, int32_t *token);
/* Records a token in the history the repetition penalty looks at. */
CLINFER_API void clinfer_sampler_accept(clinfer_sampler *sampler, int32_t token);

/* Constrains the draws to a GBNF grammar (llama.cpp's format; the output matches rule root):
 * each clinfer_sampler_sample first drops the tokens that cannot continue a match (greedy and
 * sampled alike), then advances the grammar past the token it returns (clinfer_sampler_accept
 * does not: it also takes prompt tokens). An end-of-generation token is allowed only where the
 * grammar may end, other control tokens never. Replaces an earlier grammar; gbnf NULL removes
 * it. A bad grammar: CLINFER_ERR_INVALID_ARGUMENT, its message "grammar: line L, column C: ...".
 * When no token can continue (a dead end, or a complete grammar and no end-of-generation token)
 * clinfer_sampler_sample returns CLINFER_ERR_INVALID_ARGUMENT. */
CLINFER_API clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *sampler,
                                                       const clinfer_model *model,
                                                       const char *gbnf);
/* GBNF for the JSON texts a JSON schema allows (OpenAI's strict structured outputs: object,
 * array, string, number, integer, boolean, null, enum, const, anyOf, $ref into $defs,
 * properties, required, additionalProperties, items, minItems, maxItems, minLength, maxLength);
 * schema_json NULL: any JSON object (OpenAI's json_object). Properties come in the schema's
 * order, without extra keys. A keyword it does not handle: CLINFER_ERR_UNSUPPORTED naming it.
 * *gbnf_out is allocated; release it with clinfer_free. */
CLINFER_API clinfer_status clinfer_json_schema_to_grammar(const char *schema_json,
                                                          char **gbnf_out);

/* ---- chat ---------------------------------------------------------------------------- */

typedef struct {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} clinfer_chat_message;

/* Renders messages with the model's tokenizer.chat_template (or template_name: "chatml",
 * "llama3", "llama2", "gemma"); add_assistant appends the assistant turn's opening.
 * *out is allocated; release it with clinfer_free. */
CLINFER_API clinfer_status clinfer_chat_apply_template(const clinfer_model *model,
                                                       const char *template_name,
                                                       const clinfer_chat_message *messages,
                                                       size_t n, bool add_assistant, char **out);
CLINFER_API void clinfer_free(void *p);

/* ---- generation ---------------------------------------------------------------------- */

/* Receives text as it is generated, always whole UTF-8 characters; return false to stop. */
typedef bool (*clinfer_text_callback)(const char *text, size_t len, void *user);

typedef struct {
    size_t n_prompt, n_generated;
    double prefill_ms, decode_ms;
} clinfer_generate_stats;

/* Evaluates prompt tokens (after what the context holds), then samples up to n_predict tokens,
 * stopping early at an end-of-generation token. stats may be NULL. n_predict < 0: until end of
 * generation or a full context; otherwise CLINFER_ERR_CONTEXT_FULL up front when prompt plus
 * n_predict do not fit. sampler NULL: greedy. Generated tokens (not the end-of-generation one)
 * are evaluated into the context, so a conversation can go on from there. */
CLINFER_API clinfer_status clinfer_generate(clinfer_context *ctx, const int32_t *prompt,
                                            size_t n_prompt, int32_t n_predict,
                                            clinfer_sampler *sampler,
                                            clinfer_text_callback callback, void *user,
                                            clinfer_generate_stats *stats);

/* ---- verification: a device against the reference backend ------------------------------ */

/* One region written by one op of the forward pass, the device's against the reference's. */
typedef struct {
    const char *phase; /* "prefill", "decode", or "whole" for the logits of a whole evaluation */
    int32_t layer;     /* -1: before the first layer (embeddings); n_layer: output norm and head */
    char op[64];       /* the op and the tensors it reads: "rmsnorm attn_norm", "matmul ffn_down" */
    const char *output; /* the region: "y", "x" (in place), "out", "k cache", "v cache", ... */
    double nmse;        /* sum (device - reference)^2 / sum reference^2 (NaN: the device wrote
                         * non-finite values) */
    double max_abs;     /* the largest |device - reference| */
    uint32_t worst_pos; /* the token position of that element */
    double bound;       /* the NMSE tolerance applied */
    bool ok;            /* nmse <= bound */
} clinfer_verify_row;

typedef struct {
    char device[256];   /* the device's backend, as clinfer_model_info.backend */
    char tolerance[64]; /* the tolerance table's entry applied: "Q4_1 weights, 8-bit activations" */
    double bound;       /* its NMSE bound of one op */
    double bound_whole; /* and of the whole evaluation's logits */
    clinfer_verify_row *rows;
    size_t n_rows;
    size_t n_failed;                   /* rows past their bound */
    size_t first_failed;               /* the first such row (n_rows: none) */
    size_t worst;                      /* the op row (not "whole") with the largest NMSE */
    int32_t top_device, top_reference; /* the whole evaluation's most likely next token */
    uint32_t n_layer;                  /* the model's: the head's rows have this layer */
} clinfer_verify_report;

/* Whether a device computes what the reference backend does. Loads the model at model_path twice,
 * with device_params (NULL: defaults, on OpenCL) and on the reference backend, and evaluates
 * tokens on both: all but the last as one prefill batch, then the last as a decode step (cp: as
 * for clinfer_context_create, NULL: defaults; n_batch is not looked at, n_ctx 0 means n_tokens).
 *   Op by op: each op runs alone on both (never in one launch with others) and every region it
 *   wrote is compared, one row each; then the device gets the reference's values, so that every
 *   op starts from the same state and a row measures that op alone. The head's matmul gives the
 *   logits.
 *   Whole: the same batches again as clinfer_eval runs them, each side on its own, and one last
 *   row compares the logits: the differences of all ops carried on.
 * The tolerances (bound, bound_whole) come from one table, by the loosest weight type among the
 * matmuls and whether they round activations to 8 bits. CLINFER_OK whether or not rows pass: *out
 * says (free it with clinfer_verify_report_free). */
CLINFER_API clinfer_status clinfer_verify(const char *model_path,
                                          const clinfer_model_params *device_params,
                                          const clinfer_context_params *cp, const int32_t *tokens,
                                          size_t n_tokens, clinfer_verify_report **out);
CLINFER_API void clinfer_verify_report_free(clinfer_verify_report *report);

/* "cpu-rows" or "gpu-local-reduce" (as CLINFER_KERNEL_PATH takes) into *out; "gpu-subgroup"
 * gives CLINFER_ERR_UNSUPPORTED (not offered), any other name CLINFER_ERR_INVALID_ARGUMENT. */
CLINFER_API clinfer_status clinfer_kernel_path_parse(const char *name, clinfer_kernel_path *out);

/* ---- quantization ---------------------------------------------------------------------- */

/* What clinfer_quantize_file writes: a mix of weight types named as llama.cpp's llama-quantize
 * names them. The values are llama.cpp's file type numbers, written as general.file_type. */
typedef enum {
    CLINFER_FTYPE_F32 = 0,
    CLINFER_FTYPE_F16 = 1,
    CLINFER_FTYPE_Q4_0 = 2,
    CLINFER_FTYPE_Q4_1 = 3,
    CLINFER_FTYPE_Q8_0 = 7,
    CLINFER_FTYPE_Q5_0 = 8,
    CLINFER_FTYPE_Q5_1 = 9,
    CLINFER_FTYPE_Q2_K = 10,
    CLINFER_FTYPE_Q3_K_S = 11,
    CLINFER_FTYPE_Q3_K_M = 12,
    CLINFER_FTYPE_Q4_K_M = 15,
    CLINFER_FTYPE_Q5_K_S = 16,
    CLINFER_FTYPE_Q5_K_M = 17,
    CLINFER_FTYPE_Q6_K = 18,
} clinfer_file_type;

/* "Q4_K_M", ...; NULL for a value not listed above. */
CLINFER_API const char *clinfer_file_type_name(clinfer_file_type type);
/* A name as above in any case; "Q4_K" means Q4_K_M, as in llama-quantize. */
CLINFER_API clinfer_status clinfer_file_type_from_name(const char *name, clinfer_file_type *out);

/* A tensor as written, for progress reports. */
typedef struct {
    size_t index, count;             /* the index-th (from 0) of count tensors */
    const char *name;                /* valid during the call */
    const char *from_type, *to_type; /* element types: "F32", "Q4_K", ... */
    uint64_t from_bytes, to_bytes;
    bool fallback; /* its row length does not fit the mix's type: to_type is the nearest that
                    * does */
} clinfer_quantize_tensor;

typedef void (*clinfer_quantize_progress)(const clinfer_quantize_tensor *tensor, void *user);

typedef struct {
    clinfer_file_type file_type;
    uint32_t n_threads;    /* 0: one per online CPU; the output is the same for any count */
    bool allow_requantize; /* quantized input tensors are dequantized first (refused without:
                            * precision is lost twice) */
    clinfer_quantize_progress progress; /* optional: called after each tensor is written */
    void *progress_user;
} clinfer_quantize_params;

CLINFER_API void
clinfer_quantize_params_default(clinfer_quantize_params *params); /* Q4_K_M, all CPUs */

/* Writes the model in_path (F32, F16 or BF16 weights; quantized ones with allow_requantize) to
 * out_path with each tensor's type chosen as llama-quantize chooses it for the file type:
 * 1-D tensors and norms keep theirs, the output matrix and the more sensitive layers get more bits
 * in the K mixes. All metadata is kept. The file is written as out_path.tmp and renamed when
 * complete, so a failure leaves neither behind. */
CLINFER_API clinfer_status clinfer_quantize_file(const char *in_path, const char *out_path,
                                                 const clinfer_quantize_params *params);

#ifdef __cplusplus
}
#endif
#endif
