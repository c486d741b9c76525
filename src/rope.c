/* The rotary embedding's hyperparameters and its per-pair frequency factors: the one place that
 * knows the rope variants. Every variant comes down to what the ROPE op takes (backend.h): a
 * base, a linear scale, an optional table of n_rot / 2 factors that divide each pair's angle
 * (staged with the f32 vectors: model->rope_factors, and model->rope_factors_long) and a
 * magnitude of the turned pairs (hp->rope_mscale: rope.scaling.attn_factor, times YaRN's).
 *   none, linear  no table (unless the file has rope_freqs.weight, which then applies too, as
 *                 in llama.cpp); linear scales every angle by 1 / rope.scaling.factor
 *   llama3        the table from rope_freqs.weight (what llama.cpp's converter writes), or
 *                 computed here from rope.scaling.{factor, low_freq_factor, high_freq_factor,
 *                 original_context_length} as that converter computes it; both: they must agree
 *   yarn          scale 1 / factor, and a table that undoes it on the pairs that turn often
 *                 within original_context_length (YaRN's ramp between yarn_beta_fast and
 *                 yarn_beta_slow turns), magnitude 1 + 0.1 ln(factor), as llama.cpp's rope does
 *   longrope      phi3's rope_factors_short.weight and rope_factors_long.weight: the long table
 *                 where a context holds more than original_context_length positions per
 *                 sequence (rope_factors_for), as llama.cpp chooses; files of phi3 128k models
 *                 name no rope.scaling.type, so the tensors say it; where one names it, a
 *                 rope.scaling.factor beside it scales the angles too, as in llama.cpp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "error.h"

#define ROPE_FREQS "rope_freqs.weight"
#define ROPE_LONG "rope_factors_long.weight"
#define ROPE_SHORT "rope_factors_short.weight"
#define TWO_PI 6.28318530717958647692

static const char *const scaling_names[] = {
    [ROPE_SCALING_NONE] = "none",         [ROPE_SCALING_LINEAR] = "linear",
    [ROPE_SCALING_LLAMA3] = "llama3",     [ROPE_SCALING_YARN] = "yarn",
    [ROPE_SCALING_LONGROPE] = "longrope",
};

/* A parameter the scaling type needs: its absence is a broken file, named. */
static clinfer_status needed(const gguf_file *f, const char *a, const char *type,
                             const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a, suffix);
    if (gguf_find_kv(f, key)) return CLINFER_OK;
    return err_fail(CLINFER_ERR_FORMAT, "%s.rope.scaling.type %s needs %s, which is missing", a,
                    type, key);
}

/* An optional positive, finite parameter (*out keeps its default where the key is absent). */
static clinfer_status positive(const gguf_file *f, const char *a, const char *suffix, float *out) {
    clinfer_status st = CLINFER_OK;
    CHECK(arch_key_f32(f, a, suffix, false, out));
    if (!(*out > 0.0f) || !isfinite(*out))
        return err_fail(CLINFER_ERR_FORMAT, "%s.%s %g is not positive", a, suffix, (double)*out);
cleanup:
    return st;
}

/* rope.scaling.factor: required by linear, llama3 and yarn. */
static clinfer_status read_factor(const gguf_file *f, const char *a, const char *type,
                                  float *factor) {
    clinfer_status st = CLINFER_OK;
    CHECK(needed(f, a, type, "rope.scaling.factor"));
    CHECK(arch_key_f32(f, a, "rope.scaling.factor", true, factor));
    if (!(*factor >= 1.0f && *factor <= 1024.0f))
        return err_fail(CLINFER_ERR_FORMAT, "%s.rope.scaling.factor %g is outside 1 .. 1024", a,
                        (double)*factor);
cleanup:
    return st;
}

/* Llama 3's parameters, all required: a file that names the scaling carries them. */
static clinfer_status read_llama3(const gguf_file *f, const char *a, rope_scaling *rs) {
    clinfer_status st = CLINFER_OK;
    static const char *const keys[] = {"rope.scaling.low_freq_factor",
                                       "rope.scaling.high_freq_factor",
                                       "rope.scaling.original_context_length"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        CHECK(needed(f, a, "llama3", keys[i]));
    CHECK(arch_key_f32(f, a, keys[0], true, &rs->low_freq_factor));
    CHECK(arch_key_f32(f, a, keys[1], true, &rs->high_freq_factor));
    CHECK(arch_key_u32(f, a, keys[2], true, &rs->orig_ctx));
    if (!(rs->low_freq_factor > 0.0f && rs->high_freq_factor > rs->low_freq_factor &&
          isfinite(rs->high_freq_factor)))
        return err_fail(CLINFER_ERR_FORMAT,
                        "%s.rope.scaling.low_freq_factor %g and high_freq_factor %g: need "
                        "0 < low < high",
                        a, (double)rs->low_freq_factor, (double)rs->high_freq_factor);
cleanup:
    return st;
}

/* YaRN's parameters beyond the factor, with llama.cpp's defaults (ext_factor 1, beta_fast 32,
 * beta_slow 1). */
static clinfer_status read_yarn(const gguf_file *f, const char *a, rope_scaling *rs) {
    clinfer_status st = CLINFER_OK;
    float log_mul = 0.0f;
    rs->ext_factor = 1.0f, rs->beta_fast = 32.0f, rs->beta_slow = 1.0f;
    CHECK(arch_key_f32(f, a, "rope.scaling.yarn_ext_factor", false, &rs->ext_factor));
    CHECK(positive(f, a, "rope.scaling.yarn_beta_fast", &rs->beta_fast));
    CHECK(positive(f, a, "rope.scaling.yarn_beta_slow", &rs->beta_slow));
    CHECK(arch_key_f32(f, a, "rope.scaling.yarn_log_multiplier", false, &log_mul));
    if (!(rs->ext_factor >= 0.0f && rs->ext_factor <= 1.0f))
        return err_fail(CLINFER_ERR_FORMAT, "%s.rope.scaling.yarn_ext_factor %g is outside 0 .. 1",
                        a, (double)rs->ext_factor);
    if (!(rs->beta_fast > rs->beta_slow))
        return err_fail(CLINFER_ERR_FORMAT,
                        "%s.rope.scaling.yarn_beta_fast %g must exceed yarn_beta_slow %g", a,
                        (double)rs->beta_fast, (double)rs->beta_slow);
    if (log_mul != 0.0f) /* DeepSeek's magnitude rule */
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "%s.rope.scaling.yarn_log_multiplier %g is not supported", a,
                        (double)log_mul);
cleanup:
    return st;
}

static clinfer_status read_scaling(const gguf_file *f, const char *a, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str type = {"none", 4};
    rope_scaling *rs = &hp->rope_scaling;
    *rs = (rope_scaling){.type = ROPE_SCALING_NONE, .factor = 1.0f, .attn_factor = 1.0f};
    hp->rope_freq_scale = 1.0f;
    if (gguf_find_kv(f, key)) CHECK(gguf_get_str(f, key, &type));
    size_t n_names = sizeof scaling_names / sizeof *scaling_names, i = 0;
    while (i < n_names && !gguf_str_eq(type, scaling_names[i]))
        i++;
    if (i == n_names)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "%s '%.*s' is not supported (none, linear, llama3, yarn, longrope)", key,
                        (int)(type.len > 32 ? 32 : type.len), type.ptr);
    rs->type = (rope_scaling_type)i;
    /* the magnitude every type takes, as llama.cpp's rope.scaling.attn_factor */
    CHECK(positive(f, a, "rope.scaling.attn_factor", &rs->attn_factor));
    rs->orig_ctx = hp->n_ctx_train; /* yarn's and longrope's default, as llama.cpp's */
    if (rs->type != ROPE_SCALING_LLAMA3)
        CHECK(arch_key_u32(f, a, "rope.scaling.original_context_length", false, &rs->orig_ctx));
    char factor_key[128]; /* longrope's is optional */
    snprintf(factor_key, sizeof factor_key, "%s.rope.scaling.factor", a);
    bool factor = rs->type == ROPE_SCALING_LINEAR || rs->type == ROPE_SCALING_LLAMA3 ||
                  rs->type == ROPE_SCALING_YARN ||
                  (rs->type == ROPE_SCALING_LONGROPE && gguf_find_kv(f, factor_key));
    if (factor) CHECK(read_factor(f, a, scaling_names[i], &rs->factor));
    if (rs->type == ROPE_SCALING_LLAMA3) CHECK(read_llama3(f, a, rs));
    if (rs->type == ROPE_SCALING_YARN) CHECK(read_yarn(f, a, rs));
    if (rs->orig_ctx == 0)
        return err_fail(CLINFER_ERR_FORMAT, "%s.rope.scaling.original_context_length is 0", a);
    /* as llama.cpp, a factor scales every type's angles but none's (and llama3's: per pair) */
    if (rs->type == ROPE_SCALING_LINEAR || rs->type == ROPE_SCALING_YARN ||
        rs->type == ROPE_SCALING_LONGROPE)
        hp->rope_freq_scale = 1.0f / rs->factor;
    float mscale = rs->attn_factor;
    if (rs->type == ROPE_SCALING_YARN && rs->ext_factor != 0.0f)
        mscale *= 1.0f + 0.1f * logf(rs->factor);
    hp->rope_mscale = mscale == 1.0f ? 0.0f : mscale;
cleanup:
    return st;
}

clinfer_status arch_read_rope(const gguf_file *f, const char *a, clinfer_hparams *hp) {
    clinfer_status st = CLINFER_OK;
    hp->rope_freq_base = 10000.0f;
    CHECK(arch_key_f32(f, a, "rope.freq_base", false, &hp->rope_freq_base));
    hp->n_rot = hp->head_dim;
    CHECK(arch_key_u32(f, a, "rope.dimension_count", false, &hp->n_rot));
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.rope.dimension_count %u must be even and at most "
                        "the head size %u",
                        a, hp->n_rot, hp->head_dim);
    if (!(hp->rope_freq_base > 0.0f) || !isfinite(hp->rope_freq_base))
        return err_fail(CLINFER_ERR_FORMAT, "model: %s.rope.freq_base %g is not positive", a,
                        (double)hp->rope_freq_base);
    CHECK(read_scaling(f, a, hp));
    if (hp->rope_scaling.type != ROPE_SCALING_NONE &&
        hp->rope_scaling.type != ROPE_SCALING_LINEAR && hp->n_rot == 0)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: %s.rope.scaling.type %s with rope.dimension_count 0", a,
                        scaling_names[hp->rope_scaling.type]);
cleanup:
    if (st != CLINFER_OK) err_prefix("model");
    return st;
}

/* ---- the tables -------------------------------------------------------------------------- */

/* Llama 3's factor of each pair, as llama.cpp's converter computes it (in f32): pairs whose
 * wavelength is below original_context_length / high_freq_factor keep their frequency, those
 * above original_context_length / low_freq_factor are slowed by factor, and those between
 * blend smoothly. */
static void llama3_factors(const clinfer_hparams *hp, float *out) {
    const rope_scaling *rs = &hp->rope_scaling;
    float ctx = (float)rs->orig_ctx, low = rs->low_freq_factor, high = rs->high_freq_factor;
    float low_wavelen = (float)((double)rs->orig_ctx / low);
    float high_wavelen = (float)((double)rs->orig_ctx / high);
    for (uint32_t j = 0; j < hp->n_rot / 2; j++) {
        float freq = 1.0f / powf(hp->rope_freq_base, (float)(2 * j) / (float)hp->n_rot);
        float wavelen = (float)TWO_PI / freq;
        if (wavelen < high_wavelen) {
            out[j] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[j] = rs->factor;
        } else {
            float smooth = (ctx / wavelen - low) / (high - low);
            out[j] = 1.0f / ((1.0f - smooth) / rs->factor + smooth);
        }
    }
}

/* The pair at which a rotation of n_rot dims turns `turns` times over ctx positions (YaRN's
 * correction dimension). */
static float yarn_dim(const clinfer_hparams *hp, float turns) {
    return (float)hp->n_rot * logf((float)hp->rope_scaling.orig_ctx / (turns * (float)TWO_PI)) /
           (2.0f * logf(hp->rope_freq_base));
}

/* YaRN on the table: pair j's angle, scaled by freq_scale s, becomes theta * (s (1 - r) + r) / s
 * of the interpolated one, r = ext_factor times the ramp from 1 (pairs below the beta_fast
 * dimension: extrapolated, as trained) to 0 (past beta_slow's: interpolated). */
static void yarn_factors(const clinfer_hparams *hp, float *table) {
    const rope_scaling *rs = &hp->rope_scaling;
    float low = fmaxf(0.0f, floorf(yarn_dim(hp, rs->beta_fast)));
    float high = fminf((float)hp->n_rot - 1.0f, ceilf(yarn_dim(hp, rs->beta_slow)));
    float s = hp->rope_freq_scale;
    for (uint32_t j = 0; j < hp->n_rot / 2; j++) {
        float y = ((float)j - low) / fmaxf(0.001f, high - low);
        float r = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * rs->ext_factor;
        table[j] *= s / (s * (1.0f - r) + r);
    }
}

/* A factor tensor: one per rotated pair, f32 or f16. */
static clinfer_status check_tensor(const clinfer_model *m, const gguf_tensor *t, const char *name) {
    const char *a = m->architecture;
    uint32_t pairs = m->hp.n_rot / 2;
    if (t->ne[0] != pairs || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: tensor '%s' has shape [%lld, %lld, %lld, %lld]; "
                        "%s.rope.dimension_count %u implies [%u] (a factor per rotated pair)",
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], a, m->hp.n_rot, pairs);
    if (t->type != CLINFER_DT_F32 && t->type != CLINFER_DT_F16)
        return err_fail(CLINFER_ERR_FORMAT, "model: tensor '%s' is %s, not F32 or F16", name,
                        dtype_name(t->type));
    if (pairs == 0)
        return err_fail(CLINFER_ERR_FORMAT, "model: tensor '%s' with %s.rope.dimension_count 0",
                        name, a);
    return CLINFER_OK;
}

/* Every factor of a table read from tensor name positive and finite. */
static clinfer_status check_values(const clinfer_model *m, const float *table, const char *name) {
    for (uint32_t j = 0; j < m->hp.n_rot / 2; j++)
        if (!(table[j] > 0.0f) || !isfinite(table[j]))
            return err_fail(CLINFER_ERR_FORMAT,
                            "model: tensor '%s' element %u is %g: rope frequency factors must "
                            "be positive",
                            name, j, (double)table[j]);
    return CLINFER_OK;
}

/* The file's llama3 parameters, where it has them beside rope_freqs.weight, give its factors. */
static clinfer_status check_llama3(const clinfer_model *m, const float *table) {
    uint32_t pairs = m->hp.n_rot / 2;
    float *want = malloc(pairs * sizeof *want);
    if (!want) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model: no memory for rope factors");
    llama3_factors(&m->hp, want);
    uint32_t j = 0;
    while (j < pairs && fabsf(table[j] - want[j]) <= 1e-3f * want[j])
        j++;
    float got = j < pairs ? table[j] : 0.0f, expect = j < pairs ? want[j] : 0.0f;
    free(want);
    const rope_scaling *rs = &m->hp.rope_scaling;
    if (j < pairs)
        return err_fail(CLINFER_ERR_FORMAT,
                        "model: tensor '" ROPE_FREQS "' element %u is %g, but %s.rope.scaling "
                        "(llama3, factor %g, low_freq_factor %g, high_freq_factor %g, "
                        "original_context_length %u) gives %g",
                        j, (double)got, m->architecture, (double)rs->factor,
                        (double)rs->low_freq_factor, (double)rs->high_freq_factor, rs->orig_ctx,
                        (double)expect);
    return CLINFER_OK;
}

/* One table into the staged vectors (*out; the checking pass checks it in a copy of its own):
 * tensor t's factors (name; t NULL: all 1, or Llama 3's formula), with YaRN's on top. */
static clinfer_status stage(clinfer_loader *ld, const gguf_tensor *t, const char *name,
                            clinfer_ref *out) {
    clinfer_status st = CLINFER_OK;
    const clinfer_model *m = ld->m;
    uint32_t pairs = m->hp.n_rot / 2;
    rope_scaling_type type = m->hp.rope_scaling.type;
    float *table = ld->upload ? ld->host + ld->used : malloc(pairs * sizeof *table);
    if (!table) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "model: no memory for rope factors");
    if (t) {
        CHECK(check_tensor(m, t, name));
        dequantize_row(t->type, t->data, table, pairs);
        CHECK(check_values(m, table, name));
        if (type == ROPE_SCALING_LLAMA3) CHECK(check_llama3(m, table));
    } else if (type == ROPE_SCALING_LLAMA3) {
        llama3_factors(&m->hp, table);
    } else {
        for (uint32_t j = 0; j < pairs; j++)
            table[j] = 1.0f;
    }
    if (type == ROPE_SCALING_YARN) yarn_factors(&m->hp, table);
    if (ld->upload) *out = (clinfer_ref){m->vectors, ld->used};
    ld->used += pairs;
cleanup:
    if (!ld->upload) free(table);
    return st;
}

clinfer_status model_load_rope_factors(clinfer_loader *ld) {
    clinfer_model *m = ld->m;
    const gguf_tensor *freqs = gguf_find_tensor(m->gguf, ROPE_FREQS);
    const gguf_tensor *lng = gguf_find_tensor(m->gguf, ROPE_LONG);
    const gguf_tensor *shrt = gguf_find_tensor(m->gguf, ROPE_SHORT);
    rope_scaling_type type = m->hp.rope_scaling.type;
    const char *a = m->architecture;
    m->rope_factors = m->rope_factors_long = (clinfer_ref){0};
    if (type == ROPE_SCALING_LONGROPE || lng || shrt) {
        if (freqs)
            return err_fail(CLINFER_ERR_FORMAT,
                            "model: tensor '" ROPE_FREQS "' beside longrope's '" ROPE_LONG
                            "' and '" ROPE_SHORT "': two sets of rope frequency factors");
        if (type != ROPE_SCALING_NONE && type != ROPE_SCALING_LONGROPE)
            return err_fail(CLINFER_ERR_FORMAT,
                            "model: longrope's factor tensors beside %s.rope.scaling.type %s", a,
                            scaling_names[type]);
        if (!lng || !shrt)
            return err_fail(CLINFER_ERR_FORMAT,
                            "model: tensor '%s' is missing: longrope needs '" ROPE_LONG
                            "' and '" ROPE_SHORT "'",
                            lng ? ROPE_SHORT : ROPE_LONG);
        clinfer_status st = stage(ld, shrt, ROPE_SHORT, &m->rope_factors);
        return st != CLINFER_OK ? st : stage(ld, lng, ROPE_LONG, &m->rope_factors_long);
    }
    if (!freqs && type != ROPE_SCALING_LLAMA3 && type != ROPE_SCALING_YARN) return CLINFER_OK;
    return stage(ld, freqs, ROPE_FREQS, &m->rope_factors);
}

clinfer_ref rope_factors_for(const clinfer_model *m, uint32_t n_ctx) {
    bool lng = m->rope_factors_long.buf && n_ctx > m->hp.rope_scaling.orig_ctx;
    return lng ? m->rope_factors_long : m->rope_factors;
}

void rope_describe(const clinfer_model *m, char *buf, size_t size) {
    const rope_scaling *rs = &m->hp.rope_scaling;
    bool longrope = m->rope_factors_long.buf != NULL;
    bool freqs = gguf_find_tensor(m->gguf, ROPE_FREQS) != NULL,
         plain = rs->type == ROPE_SCALING_NONE;
    size_t n = 0;
#define ADD(...) (n += n < size ? (size_t)snprintf(buf + n, size - n, __VA_ARGS__) : 0)
    ADD("%s", longrope         ? "longrope"
              : plain && freqs ? "per-pair factors"
                               : scaling_names[rs->type]);
    if (rs->type == ROPE_SCALING_LINEAR || rs->type == ROPE_SCALING_LLAMA3 ||
        rs->type == ROPE_SCALING_YARN || rs->factor != 1.0f)
        ADD(" x%g", (double)rs->factor);
    if (rs->type == ROPE_SCALING_YARN || longrope) ADD(" of %u", rs->orig_ctx);
    if (freqs) ADD(" (rope_freqs)");
    if (m->hp.rope_mscale != 0.0f) ADD(", magnitude %g", (double)m->hp.rope_mscale);
#undef ADD
}
