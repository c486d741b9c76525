/* clinfer_supported: what this build supports. Each list is read from the table that defines it
 * (arch.c, quant.c, tokenizer.c, chat.c, options.c), so an entry added there appears here; the
 * messages that refuse a file list and match the same tables through base/names.h. */

#include "arch.h"
#include "chat.h"
#include "clinfer.h"
#include "options.h"
#include "quant.h"
#include "tokenizer.h"

const char *clinfer_supported(clinfer_support_kind kind, size_t index) {
    switch (kind) {
    case CLINFER_SUPPORT_ARCHITECTURE:
        return arch_name_at(index);
    case CLINFER_SUPPORT_WEIGHT_TYPE:
        return dtype_weight_name_at(index);
    case CLINFER_SUPPORT_TOKENIZER:
        return vocab_model_at(index);
    case CLINFER_SUPPORT_CHAT_TEMPLATE:
        return chat_format_name_at(index);
    case CLINFER_SUPPORT_KERNEL_PATH:
        return kernel_path_at(index);
    }
    return NULL;
}
