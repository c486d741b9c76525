#include "fault.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Counters restart whenever CLINFER_FAULT changes, so a test can arm a fault by setting the
 * variable without a reset hook; the spec is compared by value because setenv may reuse memory. */
enum { MAX_KINDS = 20, KIND_LEN = 24, SPEC_LEN = 256 }; /* kinds: 5 + one per op kind */

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_spec[SPEC_LEN];
static struct {
    char kind[KIND_LEN];
    unsigned long count;
} fault_counts[MAX_KINDS];

static unsigned long *counter_for(const char *kind) {
    for (int i = 0; i < MAX_KINDS; i++) {
        if (fault_counts[i].kind[0] == '\0') {
            strncpy(fault_counts[i].kind, kind, KIND_LEN - 1);
            return &fault_counts[i].count;
        }
        if (strncmp(fault_counts[i].kind, kind, KIND_LEN - 1) == 0) return &fault_counts[i].count;
    }
    return NULL;
}

/* Finds "kind:N:ERR" for this kind in the spec; returns ERR when N equals count. */
static cl_int match(const char *spec, const char *kind, unsigned long count) {
    size_t kind_len = strlen(kind);
    for (const char *p = spec, *next; p; p = next) {
        next = strchr(p, ',');
        if (next) next++;
        if (strncmp(p, kind, kind_len) != 0 || p[kind_len] != ':') continue;
        char *end;
        unsigned long n = strtoul(p + kind_len + 1, &end, 10);
        if (*end != ':') continue;
        long err = strtol(end + 1, &end, 10);
        if (n == count && err != 0) return (cl_int)err;
    }
    return CL_SUCCESS;
}

cl_int cl_fault(const char *kind) {
    const char *spec = getenv("CLINFER_FAULT");
    if (!spec || !*spec) return CL_SUCCESS;
    pthread_mutex_lock(&fault_lock);
    if (strncmp(spec, fault_spec, SPEC_LEN - 1) != 0) {
        strncpy(fault_spec, spec, SPEC_LEN - 1);
        memset(fault_counts, 0, sizeof fault_counts);
    }
    unsigned long *count = counter_for(kind);
    cl_int err = CL_SUCCESS;
    if (count) err = match(fault_spec, kind, ++*count);
    pthread_mutex_unlock(&fault_lock);
    return err;
}
