/* granite (IBM Granite 3.x dense): llama's layer (RMSNorm, rope, SwiGLU; optional biases) with
 * four scales: the token embeddings are multiplied by embedding_scale, the attention scores by
 * attention.scale (instead of 1 / sqrt(head_dim)), each sub-layer's output by residual_scale
 * before it joins the residual stream, and the logits divided by logit_scale. logit_scale is
 * required; the others apply where present and not 0, as llama.cpp reads them. Where
 * rope.scaling.finetuned is false the layers do not rotate. Output tied to token_embd where
 * output.weight is absent. */
#include <math.h>
#include <stdio.h>

#include "arch.h"
#include "error.h"

/* "granite.<suffix>" into *out: finite and not negative, and present and positive where
 * required. */
static clinfer_status read_scale(const gguf_file *f, const char *suffix, bool required,
                                 float *out) {
    char key[64];
    snprintf(key, sizeof key, "granite.%s", suffix);
    if (!gguf_find_kv(f, key))
        return required ? err_fail(CLINFER_ERR_FORMAT, "%s is missing", key) : CLINFER_OK;
    clinfer_status st = gguf_get_f32(f, key, out);
    if (st == CLINFER_OK && (!isfinite(*out) || *out < 0.0f || (required && *out == 0.0f)))
        st = err_fail(CLINFER_ERR_FORMAT, "%s %g must be %s and finite", key, (double)*out,
                      required ? "positive" : "positive (or 0: none)");
    return st;
}

static clinfer_status read_hparams(const gguf_file *f, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    bool rope = true;
    CHECK(arch_read_rms_rope(f, "granite", hp));
    CHECK(read_scale(f, "logit_scale", true, &hp->logit_scale));
    CHECK(read_scale(f, "residual_scale", false, &hp->residual_scale));
    CHECK(read_scale(f, "embedding_scale", false, &hp->embd_scale));
    CHECK(read_scale(f, "attention.scale", false, &hp->attn_scale));
    if (gguf_find_kv(f, "granite.rope.scaling.finetuned"))
        CHECK(gguf_get_bool(f, "granite.rope.scaling.finetuned", &rope));
    if (!rope) hp->n_rot = 0;
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

/* gate and up; a bias of the gate (which llama.cpp allows) is refused, not ignored. */
static clinfer_status load_ffn(clinfer_loader *ld, uint32_t il) {
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_gate.bias", il);
    if (gguf_find_tensor(ld->m->gguf, name))
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "model: tensor '%s': gate biases are not supported", name);
    return arch_load_gate_up(ld, il);
}

const clinfer_arch arch_desc_granite = {.name = "granite",
                                        .gated_ffn = true,
                                        .read_hparams = read_hparams,
                                        .load_qkv = arch_load_qkv_plain,
                                        .load_ffn = load_ffn,
                                        .embed = exec_token_embed,
                                        .layer = arch_layer_swiglu};
