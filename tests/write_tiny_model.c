/* write_tiny_model PATH [ARCH [TYPE[+TYPE...]]]: writes a tiny random model (Q8_0 weights unless
 * TYPE, a name of the type table, or a mix of up to four; see tiny_model.h) for scripts such as
 * tools/valgrind.sh that run the clinfer binary on a model without a download. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tiny_model.h"
#include "weight_types.h"

/* The type named name (n chars) of the table, or -1. */
static int type_named(const char *name, size_t n) {
    clinfer_dtype types[CLINFER_DT_ID_LIMIT];
    size_t count = weight_types(types);
    for (size_t i = 0; i < count; i++)
        if (strlen(dtype_name(types[i])) == n && !strncasecmp(name, dtype_name(types[i]), n))
            return (int)types[i];
    return -1;
}

int main(int argc, char **argv) {
    tiny_model_spec spec;
    tiny_model_default(&spec, argc > 2 && argc < 5 ? argv[2] : "llama", CLINFER_DT_Q8_0);
    int type = CLINFER_DT_Q8_0;
    if (argc == 4) { /* TYPE or a mix TYPE+TYPE..., the first setting the dimensions */
        const char *name = argv[3];
        size_t n = strcspn(name, "+");
        type = type_named(name, n);
        if (type >= 0) tiny_model_default(&spec, argv[2], (clinfer_dtype)type);
        for (name += n; type >= 0 && *name && spec.n_mix < 3; name += n) {
            n = strcspn(++name, "+");
            type = type_named(name, n);
            spec.mix[spec.n_mix++] = (clinfer_dtype)type;
        }
        if (*name) type = -1;
    }
    if (argc < 2 || argc > 4 || type < 0) {
        fprintf(stderr,
                "usage: write_tiny_model PATH "
                "[llama|qwen2|qwen3|phi3|gemma3|mistral|gpt2|llama3|yarn|phi3-longrope|"
                "gemma2|smollm3|granite|olmo2|qwen3moe|olmoe|mixtral|gpt-oss [TYPE[+TYPE...]]]\n");
        return 2;
    }
    return tiny_model_write(&spec, argv[1]) == 0 ? 0 : 1;
}
