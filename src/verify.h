/* Verification's internals (src/verify.c, verify_label.c): clinfer_verify is in clinfer.h. */
#ifndef CLINFER_VERIFY_H
#define CLINFER_VERIFY_H

#include "executor.h"

/* Names a step's op in buf for a report row: its kind and the tensors it reads, as the GGUF file
 * names them less "blk.N." and ".weight" ("matmul attn_q+attn_k+attn_v", "rmsnorm ffn_norm"), or
 * what it rotates or stores ("rope k", "store v"). */
void verify_label(const clinfer_model *m, const exec_state *s, const exec_step *step, char *buf,
                  size_t size);

#endif
