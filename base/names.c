/* Lists of names read through an accessor: joined for messages, and the nearest match by
 * case-insensitive edit distance; see names.h. */
#include "names.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void names_list(names_at_fn *name_at, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    const char *name;
    for (size_t i = 0; used < size && (name = name_at(i)); i++) {
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

const char *names_closest(names_at_fn *name_at, const char *name, size_t len) {
    const char *best = NULL, *cand;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; (cand = name_at(i)); i++) {
        size_t n = strlen(cand), d = distance(name, len, cand, n);
        size_t longer = n > len ? n : len;
        if (3 * d <= longer && d < best_d) {
            best = cand;
            best_d = d;
        }
    }
    return best;
}
