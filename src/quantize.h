/* Quantizing a GGUF file (clinfer_quantize_file): the type of each tensor for a file type
 * (quant_mix.c) and the threaded conversion that writes them (quantize.c). */
#ifndef CLINFER_QUANTIZE_H
#define CLINFER_QUANTIZE_H

#include <stdbool.h>

#include "clinfer.h"
#include "gguf.h"
#include "quant.h"

typedef struct {
    clinfer_dtype type;
    bool fallback; /* the mix's type does not fit the row length; type is the nearest that does */
} quant_choice;

/* The element type a file type is named after (Q4_K for Q4_K_M); false for an unknown one. */
bool quant_mix_base_type(clinfer_file_type ft, clinfer_dtype *out);

/* The type of every tensor of f for file type ft: choices[i] for gguf_tensor_at(f, i). Fails for
 * a file that is not a model (no general.architecture) or an unknown ft. */
clinfer_status quant_mix_choose(const gguf_file *f, clinfer_file_type ft, quant_choice *choices);

#endif
