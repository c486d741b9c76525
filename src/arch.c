/* The architectures clinfer runs: one line each (see arch.h). */
#include "arch.h"

extern const clinfer_arch arch_desc_llama, arch_desc_qwen2, arch_desc_qwen3, arch_desc_phi3,
    arch_desc_gemma3, arch_desc_gpt2, arch_desc_gemma2, arch_desc_smollm3, arch_desc_granite,
    arch_desc_olmo2;
extern const clinfer_arch arch_desc_qwen3moe, arch_desc_olmoe, arch_desc_gptoss;

static const clinfer_arch *const archs[] = {
    &arch_desc_llama,   &arch_desc_qwen2, &arch_desc_qwen3,    &arch_desc_phi3,
    &arch_desc_gemma3,  &arch_desc_gpt2,  &arch_desc_gemma2,   &arch_desc_smollm3,
    &arch_desc_granite, &arch_desc_olmo2, &arch_desc_qwen3moe, &arch_desc_olmoe,
    &arch_desc_gptoss};

const clinfer_arch *arch_find(gguf_str name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (gguf_str_eq(name, archs[i]->name)) return archs[i];
    return NULL;
}

const char *arch_name_at(size_t index) {
    return index < sizeof archs / sizeof archs[0] ? archs[index]->name : NULL;
}
