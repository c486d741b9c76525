/* olmo2 (OLMo 2, and OLMo 3's files): no norm before the sub-layers; each reads the residual
 * stream as it is, and its output is RMS-normed (post_attention_norm, post_ffw_norm) before it
 * is added back. q and k are RMS-normed over each token's whole row (attn_q_norm of n_head *
 * head_dim, attn_k_norm of n_head_kv * head_dim) before NeoX rope; SwiGLU feed-forward. Where
 * attention.sliding_window is given (OLMo 3), of every sliding_window_pattern (4) layers the
 * last attends to all positions, the others to the window only, rotating unscaled. As llama.cpp
 * reads these files. */
#include "arch.h"
#include "error.h"

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    const char *a = "olmo2";
    CHECK(arch_read_rms_rope(f, a, hp));
    hp->rope_neox = true;
    hp->qk_norm_rows = true;
    CHECK(arch_read_swa(f, a, 4, hp->rope_freq_base, hp));
    hp->rope_freq_scale_swa = 1.0f;
    /* llama.cpp rotates the local layers without YaRN's ramp and magnitude, which the
     * executor's layers share */
    if (hp->swa_window && hp->rope_scaling.type != ROPE_SCALING_NONE &&
        hp->rope_scaling.type != ROPE_SCALING_LINEAR)
        CHECK(err_fail(CLINFER_ERR_UNSUPPORTED,
                       "model: %s.attention.sliding_window %u with rope scaling: local layers "
                       "that rotate unscaled beside scaled global ones are not supported",
                       a, hp->swa_window));
cleanup:
    return st;
}

const clinfer_arch arch_desc_olmo2 = {.name = "olmo2",
                                      .gated_ffn = true,
                                      .no_pre_norms = true,
                                      .read_hparams = read_hparams,
                                      .load_qkv = arch_load_qkv_post_normed,
                                      .load_ffn = arch_load_gate_up,
                                      .embed = exec_token_embed,
                                      .layer = arch_layer_swiglu};
