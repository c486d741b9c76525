/* The architectures clinfer runs: one line each (see arch.h). */
#include "arch.h"

extern const clinfer_arch clinfer_arch_llama, clinfer_arch_qwen2, clinfer_arch_qwen3,
    clinfer_arch_phi3, clinfer_arch_gemma3, clinfer_arch_gpt2;

static const clinfer_arch *const archs[] = {&clinfer_arch_llama,  &clinfer_arch_qwen2,
                                            &clinfer_arch_qwen3,  &clinfer_arch_phi3,
                                            &clinfer_arch_gemma3, &clinfer_arch_gpt2};

const clinfer_arch *clinfer_arch_find(gguf_str name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (gguf_str_eq(name, archs[i]->name)) return archs[i];
    return NULL;
}

const char *clinfer_arch_name_at(size_t index) {
    return index < sizeof archs / sizeof archs[0] ? archs[index]->name : NULL;
}
