/* clinfer: writing a model file in other weight types.
 * Part of the public API: clinfer.h includes it and is the one header to include. */

#ifndef CLINFER_PUBLIC_QUANTIZE_H
#define CLINFER_PUBLIC_QUANTIZE_H

#include "clinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    bool fallback; /* rows do not fit the mix's type: to_type is the nearest that does */
} clinfer_quantize_tensor;

typedef void (*clinfer_quantize_progress)(const clinfer_quantize_tensor *tensor, void *user);

typedef struct {
    clinfer_file_type file_type;
    uint32_t n_threads;    /* 0: one per online CPU; the output is the same for any count */
    bool allow_requantize; /* dequantize quantized inputs first (else refused: a second loss) */
    clinfer_quantize_progress progress; /* optional: called after each tensor is written */
    void *progress_user;
} clinfer_quantize_params;

CLINFER_API void
clinfer_quantize_params_default(clinfer_quantize_params *params); /* Q4_K_M, all CPUs */

/* Writes in_path (F32, F16 or BF16 weights; quantized with allow_requantize) to out_path with
 * each tensor's type as llama-quantize chooses it for the file type; all metadata kept. Written
 * as out_path.tmp and renamed when complete: a failure leaves neither behind. */
CLINFER_API clinfer_status clinfer_quantize_file(const char *in_path, const char *out_path,
                                                 const clinfer_quantize_params *params);

#ifdef __cplusplus
}
#endif
#endif
