/* The architectures clinfer runs: one line each (see arch.h). */
#include "arch.h"

#include <stdio.h>

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

void clinfer_arch_names(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof archs / sizeof archs[0] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", archs[i]->name);
        used += n > 0 ? (size_t)n : 0;
    }
}
