/* See supported.h. */
#include "supported.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "chat.h"
#include "options.h"
#include "quant.h"
#include "tokenizer.h"

/* The index-th type that matmuls run over, in id order. */
static const char *weight_type_at(size_t index) {
    for (uint32_t id = 0; id < CLINFER_DT_ID_LIMIT; id++)
        if (clinfer_dtype_valid(id) && clinfer_dtype_is_weight((clinfer_dtype)id) && !index--)
            return clinfer_dtype_name((clinfer_dtype)id);
    return NULL;
}

const char *clinfer_supported(clinfer_support_kind kind, size_t index) {
    switch (kind) {
    case CLINFER_SUPPORT_ARCHITECTURE:
        return clinfer_arch_name_at(index);
    case CLINFER_SUPPORT_WEIGHT_TYPE:
        return weight_type_at(index);
    case CLINFER_SUPPORT_TOKENIZER:
        return clinfer_vocab_model_at(index);
    case CLINFER_SUPPORT_CHAT_TEMPLATE:
        return chat_format_name_at(index);
    case CLINFER_SUPPORT_KERNEL_PATH:
        return index < (size_t)INT32_MAX
                   ? clinfer_kernel_path_name((clinfer_kernel_path)(index + 1))
                   : NULL;
    }
    return NULL;
}

void clinfer_supported_list(clinfer_support_kind kind, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    const char *name;
    for (size_t i = 0; used < size && (name = clinfer_supported(kind, i)); i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", name);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* Levenshtein distance, ignoring case; names longer than 63 bytes count as 63. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb) {
    size_t row[64];
    na = na > 63 ? 63 : na;
    nb = nb > 63 ? 63 : nb;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            size_t best = diag + !same;
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

const char *clinfer_supported_closest(clinfer_support_kind kind, const char *name, size_t len) {
    const char *best = NULL, *cand;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; (cand = clinfer_supported(kind, i)); i++) {
        size_t n = strlen(cand), d = distance(name, len, cand, n);
        size_t longer = n > len ? n : len;
        if (3 * d <= longer && d < best_d) {
            best = cand;
            best_d = d;
        }
    }
    return best;
}
