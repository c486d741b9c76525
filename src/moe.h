/* A mixture-of-experts feed-forward's hyperparameters (src/moe.c reads them, builds its ops):
 * each token's n_used experts of n_expert, chosen by a router, each a SwiGLU of n_ff rows. */
#ifndef CLINFER_MOE_H
#define CLINFER_MOE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint32_t n_expert, n_used; /* expert_count, expert_used_count; n_expert 0: a dense model */
    uint32_t n_ff;             /* expert_feed_forward_length, else feed_forward_length */
    int gating;                /* clinfer_moe_gating (backend.h), from expert_gating_func */
    bool norm;                 /* the chosen gates are divided by their sum (the family's) */
    float scale;               /* expert_weights_scale; 0: 1 */
} moe_hparams;

#endif
