/* Which type each tensor gets: the rules of llama.cpp's llama-quantize (src/llama-quant.cpp)
 * for the file types clinfer writes, so its files hold what llama.cpp's would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "quantize.h"

/* ---- file types ------------------------------------------------------------------------- */

static const struct {
    clinfer_file_type ft;
    const char *name;
    clinfer_dtype base; /* the type of most matrices */
} file_types[] = {
    {CLINFER_FTYPE_F32, "F32", CLINFER_DT_F32},
    {CLINFER_FTYPE_F16, "F16", CLINFER_DT_F16},
    {CLINFER_FTYPE_Q4_0, "Q4_0", CLINFER_DT_Q4_0},
    {CLINFER_FTYPE_Q4_1, "Q4_1", CLINFER_DT_Q4_1},
    {CLINFER_FTYPE_Q8_0, "Q8_0", CLINFER_DT_Q8_0},
    {CLINFER_FTYPE_Q5_0, "Q5_0", CLINFER_DT_Q5_0},
    {CLINFER_FTYPE_Q5_1, "Q5_1", CLINFER_DT_Q5_1},
    {CLINFER_FTYPE_Q2_K, "Q2_K", CLINFER_DT_Q2_K},
    {CLINFER_FTYPE_Q3_K_S, "Q3_K_S", CLINFER_DT_Q3_K},
    {CLINFER_FTYPE_Q3_K_M, "Q3_K_M", CLINFER_DT_Q3_K},
    {CLINFER_FTYPE_Q4_K_M, "Q4_K_M", CLINFER_DT_Q4_K},
    {CLINFER_FTYPE_Q5_K_S, "Q5_K_S", CLINFER_DT_Q5_K},
    {CLINFER_FTYPE_Q5_K_M, "Q5_K_M", CLINFER_DT_Q5_K},
    {CLINFER_FTYPE_Q6_K, "Q6_K", CLINFER_DT_Q6_K},
};
#define N_FILE_TYPES (sizeof file_types / sizeof file_types[0])

const char *clinfer_file_type_name(clinfer_file_type type) {
    for (size_t i = 0; i < N_FILE_TYPES; i++)
        if (file_types[i].ft == type) return file_types[i].name;
    return NULL;
}

clinfer_status clinfer_file_type_from_name(const char *name, clinfer_file_type *out) {
    if (!name || !out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "clinfer_file_type_from_name: NULL");
    static const struct {
        const char *alias;
        clinfer_file_type ft;
    } aliases[] = {/* llama-quantize's */
                   {"Q3_K", CLINFER_FTYPE_Q3_K_M},
                   {"Q4_K", CLINFER_FTYPE_Q4_K_M},
                   {"Q5_K", CLINFER_FTYPE_Q5_K_M}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) {
            *out = aliases[i].ft;
            return CLINFER_OK;
        }
    char known[192] = "";
    for (size_t i = 0; i < N_FILE_TYPES; i++) {
        if (!strcasecmp(name, file_types[i].name)) {
            *out = file_types[i].ft;
            return CLINFER_OK;
        }
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 file_types[i].name);
    }
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                    "unknown file type '%.32s' (known: %s; Q3_K, Q4_K and Q5_K mean their _M)",
                    name, known);
}

bool quant_mix_base_type(clinfer_file_type ft, clinfer_dtype *out) {
    for (size_t i = 0; i < N_FILE_TYPES; i++)
        if (file_types[i].ft == ft) {
            *out = file_types[i].base;
            return true;
        }
    return false;
}

/* ---- what a tensor is ------------------------------------------------------------------- */

/* llama.cpp's broad roles of tensors, found from their names as it does (the first match in this
 * order); only the roles its rules for these file types treat apart. */
typedef enum {
    ROLE_OTHER,
    ROLE_OUTPUT,
    ROLE_TOKEN_EMBD,
    ROLE_ATTN_V,
    ROLE_ATTN_K,
    ROLE_ATTN_OUT,
    ROLE_FFN_DOWN
} role;

static role role_of(const char *name) {
    if (!strcmp(name, "output.weight")) return ROLE_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return ROLE_TOKEN_EMBD;
    /* fused QKV and MLA's kv_b hold the values: they count as attn_v */
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") ||
        strstr(name, "attn_v.weight"))
        return ROLE_ATTN_V;
    if (strstr(name, "attn_k.weight")) return ROLE_ATTN_K;
    if (strstr(name, "attn_q.weight")) return ROLE_OTHER;
    if (strstr(name, "attn_output.weight")) return ROLE_ATTN_OUT;
    if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) return ROLE_OTHER;
    if (strstr(name, "ffn_down")) return ROLE_FFN_DOWN;
    return ROLE_OTHER;
}

/* Whether llama.cpp quantizes a tensor at all: matrices named *weight, less the norms, small
 * tables and the architectures' tensors it keeps as they are. */
static bool quantizable(const char *name, const gguf_tensor *t) {
    static const char *const kept_exact[] = {"position_embd.weight", "token_types.weight"};
    static const char *const kept_parts[] = {"_norm.weight",
                                             "ffn_gate_inp.weight",
                                             "ffn_gate_tid2eid.weight",
                                             "altup",
                                             "laurel",
                                             "per_layer_model_proj",
                                             "ssm_conv1d",
                                             "shortconv.conv.weight",
                                             "indexer.k_proj.weight",
                                             "indexer.q_proj.weight",
                                             "time_mix_first.weight",
                                             "time_mix_w0.weight",
                                             "time_mix_w1.weight",
                                             "time_mix_w2.weight",
                                             "time_mix_v0.weight",
                                             "time_mix_v1.weight",
                                             "time_mix_v2.weight",
                                             "time_mix_a0.weight",
                                             "time_mix_a1.weight",
                                             "time_mix_a2.weight",
                                             "time_mix_g1.weight",
                                             "time_mix_g2.weight",
                                             "time_mix_decay_w1.weight",
                                             "time_mix_decay_w2.weight",
                                             "time_mix_lerp_fused.weight",
                                             "attn_rel_b.weight",
                                             ".position_embd",
                                             "sam.pos_embd",
                                             "sam.neck.",
                                             "sam.net_",
                                             ".rel_pos",
                                             ".patch_embd",
                                             ".patch_merger",
                                             "a.rvq.codebook",
                                             "mm.a.code_embd"};
    int dims = 1; /* as ggml counts them: trailing dimensions of 1 do not count */
    for (int d = 1; d < 4; d++)
        if (t->ne[d] > 1) dims = d + 1;
    size_t len = strlen(name);
    if (dims < 2 || len < 6 || strcmp(name + len - 6, "weight") != 0) return false;
    for (size_t i = 0; i < sizeof kept_exact / sizeof kept_exact[0]; i++)
        if (!strcmp(name, kept_exact[i])) return false;
    for (size_t i = 0; i < sizeof kept_parts / sizeof kept_parts[0]; i++)
        if (strstr(name, kept_parts[i])) return false;
    return true;
}

/* The layer of "blk.N.*", -1 for tensors outside the layers. */
static int layer_of(const char *name) {
    int layer = -1, n = 0;
    if (sscanf(name, "blk.%d.%n", &layer, &n) != 1 || n == 0) return -1;
    return layer;
}

/* ---- the rules -------------------------------------------------------------------------- */

/* What the rules depend on beyond the tensor itself. */
typedef struct {
    clinfer_file_type ft;
    clinfer_dtype base;
    bool falcon, is_70b, tied; /* tied: no output.weight, token_embd is the LM head too */
    bool gqa4;                 /* at least 4 query heads per KV head */
    uint32_t n_layer, n_expert;
    int n_attn_v; /* attn_v-like tensors in the file */
} mix;

/* llama.cpp's layers that get more bits: the first and last eighth and every third between. */
static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool fits(clinfer_dtype type, int64_t ne0) {
    return ne0 % (int64_t)dtype_block_elems(type) == 0;
}

/* The K file types' attn_v. */
static clinfer_dtype attn_v_type(const mix *m, clinfer_dtype type, int i_v) {
    clinfer_file_type ft = m->ft;
    if (ft == CLINFER_FTYPE_Q2_K)
        type = m->gqa4 ? CLINFER_DT_Q4_K : CLINFER_DT_Q3_K;
    else if (ft == CLINFER_FTYPE_Q3_K_M)
        type = i_v < 2 ? CLINFER_DT_Q5_K : CLINFER_DT_Q4_K;
    else if ((ft == CLINFER_FTYPE_Q4_K_M || ft == CLINFER_FTYPE_Q5_K_M) &&
             use_more_bits(i_v, m->n_attn_v))
        type = CLINFER_DT_Q6_K;
    /* 70B: eight heads share each attn_v, which is small enough to afford more bits */
    if (m->is_70b && (type == CLINFER_DT_Q3_K || type == CLINFER_DT_Q4_K)) type = CLINFER_DT_Q5_K;
    return m->n_expert == 8 ? CLINFER_DT_Q8_0 : type;
}

static clinfer_dtype ffn_down_type(const mix *m, clinfer_dtype type, int i_down) {
    int n = (int)m->n_layer;
    switch (m->ft) {
    case CLINFER_FTYPE_Q2_K:
        return CLINFER_DT_Q3_K;
    case CLINFER_FTYPE_Q3_K_M:
        return i_down < n / 16                          ? CLINFER_DT_Q5_K
               : !m->falcon || use_more_bits(i_down, n) ? CLINFER_DT_Q4_K
                                                        : CLINFER_DT_Q3_K;
    case CLINFER_FTYPE_Q4_K_M:
        if (m->falcon)
            return i_down < n / 16            ? CLINFER_DT_Q6_K
                   : use_more_bits(i_down, n) ? CLINFER_DT_Q5_K
                                              : CLINFER_DT_Q4_K;
        return use_more_bits(i_down, n) ? CLINFER_DT_Q6_K : type;
    case CLINFER_FTYPE_Q5_K_M:
        return use_more_bits(i_down, n) ? CLINFER_DT_Q6_K : type;
    default:
        return type;
    }
}

static clinfer_dtype attn_out_type(const mix *m, clinfer_dtype type) {
    clinfer_file_type ft = m->ft;
    if (m->falcon) return type;
    if (m->n_expert == 8)
        return ft == CLINFER_FTYPE_Q2_K || ft == CLINFER_FTYPE_Q3_K_S ||
                       ft == CLINFER_FTYPE_Q3_K_M || ft == CLINFER_FTYPE_Q4_K_M
                   ? CLINFER_DT_Q5_K
                   : type;
    return ft == CLINFER_FTYPE_Q2_K     ? CLINFER_DT_Q3_K
           : ft == CLINFER_FTYPE_Q3_K_M ? CLINFER_DT_Q4_K
                                        : type;
}

/* The mix's type for a quantizable tensor of a quantized file type, before the row-length check.
 * i_v: its index among the attn_v-like tensors; i_down: among the ffn_down ones, in llama.cpp's
 * order (by layer). */
static clinfer_dtype mix_type(const mix *m, role r, int64_t ne0, int i_v, int i_down) {
    clinfer_dtype type = m->base;
    if (r == ROLE_OUTPUT || (m->tied && r == ROLE_TOKEN_EMBD)) {
        /* the LM head: Q6_K, unless the file is Q8_0 or its rows do not fit the base type */
        if (m->falcon || !fits(type, ne0)) return CLINFER_DT_Q8_0;
        return type == CLINFER_DT_Q8_0 ? type : CLINFER_DT_Q6_K;
    }
    if (r == ROLE_ATTN_V) return attn_v_type(m, type, i_v);
    if (r == ROLE_ATTN_K) return m->n_expert == 8 ? CLINFER_DT_Q8_0 : type;
    if (r == ROLE_FFN_DOWN) return ffn_down_type(m, type, i_down);
    if (r == ROLE_ATTN_OUT) return attn_out_type(m, type);
    return type;
}

/* A type whose blocks fit rows of ne0, as llama.cpp falls back to 32-element blocks: Q2_K and
 * Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0. Rows that fit no 32-element block
 * stay F16. */
static clinfer_dtype fallback(clinfer_dtype type, int64_t ne0) {
    switch (type) {
    case CLINFER_DT_Q2_K:
    case CLINFER_DT_Q3_K:
        type = CLINFER_DT_Q4_0;
        break;
    case CLINFER_DT_Q4_K:
        type = CLINFER_DT_Q5_0;
        break;
    case CLINFER_DT_Q5_K:
        type = CLINFER_DT_Q5_1;
        break;
    case CLINFER_DT_Q6_K:
        type = CLINFER_DT_Q8_0;
        break;
    default:
        break;
    }
    return fits(type, ne0) ? type : CLINFER_DT_F16;
}

/* A u32 hyperparameter <arch>.<suffix>, or dflt where absent or not a u32 (some models keep
 * per-layer arrays: the rules then do without it). */
static uint32_t hparam(const gguf_file *f, gguf_str arch, const char *suffix, uint32_t dflt) {
    char key[128];
    uint32_t v = dflt;
    snprintf(key, sizeof key, "%.*s.%s", gguf_show_len(arch), arch.ptr, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (kv && kv->type != GGUF_TYPE_ARRAY && gguf_get_u32(f, key, &v) != CLINFER_OK) {
        err_clear();
        v = dflt;
    }
    return v;
}

static void name_of(const gguf_tensor *t, char name[GGUF_SHOW + 1]) {
    memcpy(name, t->name.ptr, (size_t)gguf_show_len(t->name));
    name[gguf_show_len(t->name)] = '\0';
}

/* A tensor's place in llama.cpp's order (by layer, then by name) and its role. */
typedef struct {
    int layer;
    role r;
    gguf_str name;
} tensor_key;

static bool before(const tensor_key *a, const tensor_key *b) {
    if (a->layer != b->layer) return a->layer < b->layer;
    size_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = memcmp(a->name.ptr, b->name.ptr, n);
    return c < 0 || (c == 0 && a->name.len < b->name.len);
}

/* How many tensors of t's role precede it. */
static int rank_of(const tensor_key *keys, size_t n, const tensor_key *t) {
    int rank = 0;
    for (size_t i = 0; i < n; i++)
        rank += keys[i].r == t->r && before(&keys[i], t);
    return rank;
}

clinfer_status quant_mix_choose(const gguf_file *f, clinfer_file_type ft, quant_choice *choices) {
    clinfer_status st = CLINFER_OK;
    gguf_str arch;
    size_t n = gguf_tensor_count(f);
    mix m = {.ft = ft, .tied = !gguf_find_tensor(f, "output.weight")};
    char name[GGUF_SHOW + 1];
    tensor_key *keys = NULL;
    if (!quant_mix_base_type(ft, &m.base))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "unknown file type %d", (int)ft);
    if (!gguf_find_kv(f, "general.architecture"))
        return err_fail(CLINFER_ERR_FORMAT, "not a model: no general.architecture");
    CHECK(gguf_get_str(f, "general.architecture", &arch));
    if (!(keys = malloc((n ? n : 1) * sizeof *keys)))
        CHECK(err_fail(CLINFER_ERR_OUT_OF_MEMORY, "no memory for %zu tensors", n));
    int max_layer = -1;
    for (size_t i = 0; i < n; i++) {
        name_of(gguf_tensor_at(f, i), name);
        keys[i] = (tensor_key){layer_of(name), role_of(name), gguf_tensor_at(f, i)->name};
        m.n_attn_v += keys[i].r == ROLE_ATTN_V;
        if (keys[i].layer > max_layer) max_layer = keys[i].layer;
    }
    m.n_layer = hparam(f, arch, "block_count", (uint32_t)(max_layer + 1));
    m.n_expert = hparam(f, arch, "expert_count", 0);
    uint32_t n_head = hparam(f, arch, "attention.head_count", 0);
    m.falcon = gguf_str_eq(arch, "falcon");
    /* llama.cpp tells a 70B from the metadata alone this way */
    uint32_t n_head_kv = hparam(f, arch, "attention.head_count_kv", n_head);
    m.is_70b = gguf_str_eq(arch, "llama") && m.n_layer == 80 && n_head != n_head_kv;
    m.gqa4 = n_head_kv && n_head / n_head_kv >= 4; /* llama.cpp's n_gqa() */

    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        const tensor_key *k = &keys[i];
        quant_choice *c = &choices[i];
        name_of(t, name);
        *c = (quant_choice){t->type, false};
        if (!quantizable(name, t)) continue;
        /* F32 and F16 files make every quantizable tensor that type, without further rules */
        c->type = m.base;
        if (dtype_block_elems(m.base) == 1) continue;
        int i_v = k->r == ROLE_ATTN_V ? rank_of(keys, n, k) : 0;
        /* MoE models name the layer, as their experts' tensors come in no fixed order */
        int i_down = k->r != ROLE_FFN_DOWN ? 0 : m.n_expert > 1 ? k->layer : rank_of(keys, n, k);
        c->type = mix_type(&m, k->r, t->ne[0], i_v, i_down);
        if (!fits(c->type, t->ne[0])) {
            c->type = fallback(c->type, t->ne[0]);
            c->fallback = true;
        }
    }
cleanup:
    free(keys);
    return st;
}
