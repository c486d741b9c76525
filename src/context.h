/* What the core needs of a context beyond the public API: verification (src/verify.c) walks the
 * plan of a batch itself, op by op, instead of clinfer_eval running it; pooling (src/embed.c)
 * counts the last eval's tokens. */
#ifndef CLINFER_CONTEXT_H
#define CLINFER_CONTEXT_H

#include "executor.h"

typedef struct {
    exec_plan *plan;                /* for the batch's n tokens */
    const clinfer_backend *backend; /* the context's, which runs it */
    const exec_state *state;        /* the buffers and caches its ops refer to */
    int pos0;                       /* the position of its first token */
} context_batch;

/* Checks n tokens as clinfer_eval does (and n <= n_batch), writes their ids after what c holds
 * and fills out; nothing runs. clinfer_context_advance(c, n) once the plan has been walked. */
clinfer_status clinfer_context_stage(clinfer_context *c, const int32_t *tokens, size_t n,
                                     context_batch *out);
void clinfer_context_advance(clinfer_context *c, size_t n);

/* Tokens of the last eval (0: none since create or reset). */
size_t clinfer_context_n_eval(const clinfer_context *c);

#endif
