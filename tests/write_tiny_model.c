/* write_tiny_model PATH [ARCH]: writes a tiny random model (Q8_0 weights; see tiny_model.h) for
 * scripts such as tools/valgrind.sh that run the clinfer binary on a model without a download. */
#include <stdio.h>

#include "tiny_model.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: write_tiny_model PATH [llama|qwen2|qwen3|gpt2]\n");
        return 2;
    }
    tiny_model_spec spec;
    tiny_model_default(&spec, argc > 2 ? argv[2] : "llama", CLINFER_DT_Q8_0);
    return tiny_model_write(&spec, argv[1]) == 0 ? 0 : 1;
}
