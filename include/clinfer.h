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

/* This header's version, which CMakeLists.txt reads as the project's; compare it with
 * clinfer_version() to catch a header and a library of different builds. */
#define CLINFER_VERSION_MAJOR 0
#define CLINFER_VERSION_MINOR 1
#define CLINFER_VERSION_PATCH 0
#define CLINFER_VERSION_STRING "0.1.0"

/* The library's interface: built with hidden visibility, libclinfer.so exports exactly what is
 * declared with it (nothing changes for a program; a definition made earlier replaces it). */
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

/* 0 is success; OpenCL's codes (-1 .. -1999) pass through, the library's own are below -2000. */
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

/* Where the library's diagnostics go, process-wide (NULL, the default: nowhere; it never
 * prints). Calls are serialised, from whichever thread logs; never call this from the callback. */
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

/* Every device of every OpenCL platform; none is no error: *count 0, clinfer_last_error() why. */
CLINFER_API clinfer_status clinfer_device_count(size_t *count);
CLINFER_API clinfer_status clinfer_device_get_info(size_t index, clinfer_device_info *info);

/* Picks a device from spec, an index ("1"), a type ("gpu", "cpu") or a name substring; NULL or
 * "": $CLINFER_DEVICE, else the strongest. reason (optional) receives why. */
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

/* "cpu-rows" or "gpu-local-reduce" (as CLINFER_KERNEL_PATH takes) into *out; "gpu-subgroup"
 * gives CLINFER_ERR_UNSUPPORTED (not offered), any other name CLINFER_ERR_INVALID_ARGUMENT. */
CLINFER_API clinfer_status clinfer_kernel_path_parse(const char *name, clinfer_kernel_path *out);

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
                                      * cpu-rows devices; else on PoCL CPUs each context times both
                                      * ways (same results) and takes the faster */
    clinfer_toggle profile;          /* CLINFER_PROFILE (0/1): per-op kernel times on stderr as
                                      * a context is freed; else off */
    uint32_t threads; /* CPU devices: this many compute units (an OpenCL sub-device); 0: all.
                       * Other devices ignore it. */
    /* Told before each program is compiled (not found in the kernel cache; seconds each on
     * CPUs), from any thread that uses the model, so a program can say why it waits. */
    void (*on_compile)(const clinfer_compile_event *event, void *user);
    void *on_compile_user;
} clinfer_backend_options;

/* ---- placement: layers split across devices (docs/DEVICES.md) ---- */

#define CLINFER_MAX_DEVICES 8

/* Where a model's layers run. Zeroed: on options.device alone, or, where the model's weights do
 * not fit that device's memory, split across it and the other devices by their memory. The
 * embeddings run with the first layer; each device holds its layers' weights and KV cache, and
 * each step's hidden state crosses once per boundary. */
typedef struct {
    /* The devices in order, each a spec as clinfer_device_select takes (NULL ends the list; a
     * device at most once): the first takes the first layers, the last the output head. One:
     * that device, in place of options.device. */
    const char *devices[CLINFER_MAX_DEVICES];
    /* Each listed device's share of the layers (llama.cpp's --tensor-split); all 0: in
     * proportion to each device's memory. */
    float shares[CLINFER_MAX_DEVICES];
    /* > 0 (llama.cpp's -ngl): the last n_gpu_layers layers on options.device, the output head
     * too where it exceeds the layer count, the rest on the first other CPU device (none: all
     * on options.device); not with devices. 0: not asked. */
    int32_t n_gpu_layers;
} clinfer_placement;

typedef struct {
    clinfer_backend_kind backend;
    clinfer_backend_options options; /* for CLINFER_BACKEND_OPENCL */
    clinfer_placement placement;     /* for CLINFER_BACKEND_OPENCL */
    bool verbose;                    /* log load steps (CLINFER_LOG_INFO, clinfer_log_set) */
    /* Only the tokenizer (a vocab-only file will do): token functions, no weights or contexts */
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
    /* A mixture of experts (n_expert 0: none): each token's n_expert_used of n_expert experts,
     * the parameters and weight bytes one token reads (the unchosen experts' left out) */
    uint32_t n_expert, n_expert_used;
    uint64_t n_params_active, weight_bytes_active;
    char backend[256]; /* the backend and device in use */
    /* The file: GGUF version, size, the chat format of its tokenizer.chat_template ("" none,
     * "unrecognised", else its architecture's: "gemma"), its tensors by element type. */
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
    char rope_scaling[64]; /* "none", "linear x2", "llama3 (rope_freqs)", "yarn x4 of 32768", ... */
} clinfer_model_info;

CLINFER_API clinfer_status clinfer_model_get_info(const clinfer_model *model,
                                                  clinfer_model_info *info);

/* The devices a model runs on (one unless its layers are split), in the order its layers cross
 * them. */
typedef struct {
    uint32_t n_devices;
    struct {
        char device[256];      /* as clinfer_model_info.backend names it */
        size_t index;          /* as clinfer_device_get_info's */
        uint32_t first_layer;  /* its layers: first_layer .. first_layer + n_layers - 1 */
        uint32_t n_layers;     /* (0: none, the head alone) */
        bool embeddings, head; /* whether it runs the token embeddings, the output head */
        uint64_t weight_bytes; /* its share of clinfer_model_info.weight_bytes */
    } devices[CLINFER_MAX_DEVICES];
} clinfer_model_placement;

CLINFER_API clinfer_status clinfer_model_get_placement(const clinfer_model *model,
                                                       clinfer_model_placement *out);

/* ---- tokens -------------------------------------------------------------------------- */

/* Writes up to capacity ids; *n_tokens receives the count needed (CLINFER_ERR_BUFFER_TOO_SMALL
 * past capacity). add_bos prepends BOS whatever the metadata says (clinfer_token_add_bos says
 * what the model expects) and appends EOS where tokenizer.ggml.add_eos_token asks, as llama.cpp
 * does. parse_special: "<|im_start|>" becomes its special token. Bad UTF-8 goes byte-wise. */
CLINFER_API clinfer_status clinfer_tokenize(const clinfer_model *model, const char *text,
                                            size_t len, bool add_bos, bool parse_special,
                                            int32_t *tokens, size_t capacity, size_t *n_tokens);
/* clinfer_tokenize of n pieces as one text, only pieces with parse_special reading special
 * tokens (a chat's template markers, not its contents). */
typedef struct {
    const char *text;
    size_t len;
    bool parse_special;
} clinfer_text_piece;
CLINFER_API clinfer_status clinfer_tokenize_pieces(const clinfer_model *model,
                                                   const clinfer_text_piece *pieces, size_t n,
                                                   bool add_bos, int32_t *tokens, size_t capacity,
                                                   size_t *n_tokens);
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
    /* Which matmuls over quantized weights take x rounded to 8 bits per block (32; 256 for
     * K-quants), as llama.cpp's CPU backend does for integer dots, and which take f32 (slower,
     * closer to exact). F16/F32 weights always take f32. */
    clinfer_activations activations;
    bool logits_all; /* every token's logits, not only the last's (clinfer_get_logits_ith) */
    bool embeddings; /* every token's hidden state (clinfer_get_embeddings_ith) */
    /* Sequences held at once (clinfer_batch_eval); 0: 1. Each has n_ctx rows of KV cache; a
     * batch may ask for the logits of up to n_seq_max entries. */
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

/* Resolves params (NULL: defaults): n_ctx 0 is the training context, n_batch 0 is 256, capped at
 * n_ctx. Fails for an n_ctx the model cannot address (past learned positions' table). */
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

/* One vector for the whole last eval (one text, one clinfer_eval after a reset) into
 * out[capacity], normalize: to length 1 (as /v1/embeddings gives them). *n_embd receives the
 * length (CLINFER_ERR_BUFFER_TOO_SMALL past capacity). */
CLINFER_API clinfer_status clinfer_get_embeddings_pooled(clinfer_context *ctx,
                                                         clinfer_pooling pooling, bool normalize,
                                                         float *out, size_t capacity,
                                                         size_t *n_embd);

/* ---- batches of several sequences ------------------------------------------------------
 *
 * A context made with n_seq_max > 1 holds sequences 0 .. n_seq_max - 1, each with n_ctx rows of
 * KV cache. A batch evaluates tokens of any sequences in one step, prompt and decode tokens
 * mixed: each matrix product runs once over all of them, each token attending to its own
 * sequence. clinfer_eval appends to sequence 0. */

typedef struct {
    int32_t token;
    uint32_t pos; /* its position in its sequence */
    uint32_t seq; /* its sequence, < n_seq_max */
    bool logits;  /* keep its logits (clinfer_get_logits_ith(ctx, entry index)) */
} clinfer_batch_entry;

/* Evaluates n entries (1 <= n <= n_batch) as one step. A sequence's entries, in batch order,
 * continue it from clinfer_seq_len one position each; sequences may interleave. At most
 * n_seq_max entries ask for logits (any with logits_all): clinfer_get_logits_ith(ctx, i) then.
 * Bad input is refused, nothing evaluated: CLINFER_ERR_INVALID_ARGUMENT naming the entry, or
 * CLINFER_ERR_CONTEXT_FULL for a position at or past n_ctx. */
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
    /* OpenAI's: a token seen c > 0 times in the window loses presence + c * frequency (0: off) */
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

/* Constrains the draws to a GBNF grammar (llama.cpp's format, rule root): each sample drops the
 * tokens that cannot continue a match, then advances past the one returned (accept does not).
 * End of generation is allowed only where the grammar may end, other control tokens never.
 * gbnf NULL removes it. A bad grammar: CLINFER_ERR_INVALID_ARGUMENT ("grammar: line L, column C:
 * ..."), as is a sample where no token can continue. */
CLINFER_API clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *sampler,
                                                       const clinfer_model *model,
                                                       const char *gbnf);
/* GBNF for the JSON a schema allows (OpenAI's strict structured outputs: types, enum, const,
 * anyOf, $ref into $defs, properties in order, required, additionalProperties, items, min/max
 * Items and Length); NULL: any JSON object. Another keyword: CLINFER_ERR_UNSUPPORTED naming it.
 * Release *gbnf_out with clinfer_free. */
CLINFER_API clinfer_status clinfer_json_schema_to_grammar(const char *schema_json, char **gbnf_out);

/* ---- chat ---------------------------------------------------------------------------- */

typedef struct {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} clinfer_chat_message;

/* Renders messages with the model's tokenizer.chat_template (or template_name: "chatml", "llama3",
 * ..., as clinfer_supported lists them); add_assistant appends the assistant turn's opening.
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

/* Evaluates prompt (after what the context holds), then samples up to n_predict tokens (< 0:
 * until end of generation or a full context; else CLINFER_ERR_CONTEXT_FULL up front when they
 * do not fit), stopping at end of generation. sampler NULL: greedy; stats may be NULL. Generated
 * tokens stay in the context, so a conversation goes on from there. */
CLINFER_API clinfer_status clinfer_generate(clinfer_context *ctx, const int32_t *prompt,
                                            size_t n_prompt, int32_t n_predict,
                                            clinfer_sampler *sampler,
                                            clinfer_text_callback callback, void *user,
                                            clinfer_generate_stats *stats);

#ifdef __cplusplus
}
#endif

/* Verification and quantization, declared apart (included here: clinfer.h is the one header
 * to include). */
#include "clinfer_verify.h"
#include "clinfer_quantize.h"

#endif
