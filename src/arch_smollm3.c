/* smollm3: llama's layer (RMSNorm, rope, SwiGLU), but every fourth layer (il = 3, 7, ...)
 * attends without rotating q and k. The interval is fixed, as llama.cpp fixes it: the converter
 * writes no key for the model's no_rope_layer_interval. Output tied to token_embd where
 * output.weight is absent. */
#include "arch.h"

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    hp->no_rope_step = 4;
    return arch_read_rms_rope(f, "smollm3", hp);
}

const clinfer_arch arch_desc_smollm3 = {.name = "smollm3",
                                        .gated_ffn = true,
                                        .read_hparams = read_hparams,
                                        .load_qkv = arch_load_qkv_plain,
                                        .load_ffn = arch_load_gate_up,
                                        .embed = exec_token_embed,
                                        .layer = arch_layer_swiglu};
