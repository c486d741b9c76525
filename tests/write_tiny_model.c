/* write_tiny_model PATH [ARCH [TYPE]]: writes a tiny random model (Q8_0 weights unless TYPE, a
 * name of the type table; see tiny_model.h) for scripts such as tools/valgrind.sh that run the
 * clinfer binary on a model without a download. */
#include <stdio.h>
#include <strings.h>

#include "tiny_model.h"
#include "weight_types.h"

int main(int argc, char **argv) {
    clinfer_dtype types[CLINFER_DT_ID_LIMIT], type = CLINFER_DT_Q8_0;
    size_t n = weight_types(types), i = 0;
    if (argc == 4)
        while (i < n && strcasecmp(argv[3], clinfer_dtype_name(types[i])))
            i++;
    if (argc < 2 || argc > 4 || i == n) {
        fprintf(
            stderr,
            "usage: write_tiny_model PATH [llama|qwen2|qwen3|phi3|gemma3|mistral|gpt2 [TYPE]]\n");
        return 2;
    }
    if (argc == 4) type = types[i];
    tiny_model_spec spec;
    tiny_model_default(&spec, argc > 2 ? argv[2] : "llama", type);
    return tiny_model_write(&spec, argv[1]) == 0 ? 0 : 1;
}
