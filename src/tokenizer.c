/* Vocabulary loading and validation, special-token matching, pieces, and the dispatch to the
 * model's algorithm (tok_bpe.c, tok_dna.c, tok_spm.c, tok_wpm.c, tok_ugm.c). */
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "error.h"
#include "names.h"
#include "tok_internal.h"

void vocab_free(clinfer_vocab *v) {
    if (!v) return;
    tok_pretok_free(v->pretok);
    tok_strmap_free(&v->by_text);
    tok_strmap_free(&v->merge_rank);
    free(v->specials);
    free(v->ugm.charsmap);
    free(v->ugm.matchable.ids);
    free(v->rwkv_index.ids);
    free(v->plamo2_index.ids);
    free(v->tokens);
    free(v->arena);
    free(v);
}

/* ---- loading ---------------------------------------------------------------------------- */

/* An optional special id: absent keeps *id; -1 means none; anything else must be a token. */
static clinfer_status read_id(const gguf_file *f, const char *key, size_t n_tokens, int32_t *id) {
    if (!gguf_find_kv(f, key)) return CLINFER_OK;
    int32_t value;
    clinfer_status st = gguf_get_i32(f, key, &value);
    if (st != CLINFER_OK) return st;
    if (value < -1 || (value >= 0 && (size_t)value >= n_tokens))
        return err_fail(CLINFER_ERR_FORMAT, "tokenizer: %s = %d is not a token id (n_vocab %zu)",
                        key, value, n_tokens);
    *id = value;
    return CLINFER_OK;
}

static clinfer_status read_flag(const gguf_file *f, const char *key, bool *flag) {
    return gguf_find_kv(f, key) ? gguf_get_bool(f, key, flag) : CLINFER_OK;
}

static clinfer_status copy_tokens(clinfer_vocab *v, const gguf_file *f, const gguf_kv *texts,
                                  const gguf_kv *merges) {
    clinfer_status st = CLINFER_OK;
    const gguf_kv *scores = NULL, *types = NULL;
    if (gguf_find_kv(f, "tokenizer.ggml.scores")) {
        CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores));
        if (scores->arr_n < v->n_tokens)
            return err_fail(CLINFER_ERR_FORMAT, "tokenizer: %llu scores for %zu tokens",
                            (unsigned long long)scores->arr_n, v->n_tokens);
    }
    if (gguf_find_kv(f, "tokenizer.ggml.token_type")) {
        CHECK(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types));
        if (types->arr_n < v->n_tokens)
            return err_fail(CLINFER_ERR_FORMAT, "tokenizer: %llu token types for %zu tokens",
                            (unsigned long long)types->arr_n, v->n_tokens);
    }
    /* Lengths are bounded by the file size, so the sums cannot overflow 64 bits. */
    uint64_t bytes = 0;
    for (size_t i = 0; i < v->n_tokens; i++)
        bytes += gguf_arr_str(texts, i).len + 1;
    for (uint64_t i = 0; merges && i < merges->arr_n; i++)
        bytes += gguf_arr_str(merges, i).len + 1;
    if (bytes > SIZE_MAX)
        return err_fail(CLINFER_ERR_FORMAT, "tokenizer: %llu bytes of token text",
                        (unsigned long long)bytes);
    v->tokens = calloc(v->n_tokens, sizeof *v->tokens);
    v->arena = malloc((size_t)bytes);
    if (!v->tokens || !v->arena)
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu tokens, %llu bytes", v->n_tokens,
                        (unsigned long long)bytes);
    char *p = v->arena;
    for (size_t i = 0; i < v->n_tokens; i++) {
        gguf_str s = gguf_arr_str(texts, i);
        if (s.len > UINT32_MAX)
            return err_fail(CLINFER_ERR_FORMAT, "tokenizer: token %zu is %llu bytes", i,
                            (unsigned long long)s.len);
        int32_t type = types ? gguf_arr_i32(types, i) : TOK_TYPE_NORMAL;
        if (type < TOK_TYPE_UNDEFINED || type > TOK_TYPE_BYTE)
            return err_fail(CLINFER_ERR_FORMAT, "tokenizer: token %zu has type %d (0..6)", i, type);
        memcpy(p, s.ptr, s.len);
        size_t len = v->model == TOK_RWKV ? tok_rwkv_unescape(p, s.len) : s.len;
        p[len] = '\0';
        v->tokens[i] = (tok_entry){p, (uint32_t)len, type, scores ? gguf_arr_f32(scores, i) : 0};
        if (len > v->max_token_len) v->max_token_len = len;
        p += s.len + 1;
    }
    CHECK(tok_strmap_init(&v->by_text, v->n_tokens));
    for (size_t i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].len)
            CHECK(tok_strmap_put(&v->by_text, v->tokens[i].text, v->tokens[i].len, (int32_t)i));
    if (!merges) return CLINFER_OK;
    CHECK(tok_strmap_init(&v->merge_rank, merges->arr_n));
    for (uint64_t i = 0; i < merges->arr_n; i++) {
        gguf_str s = gguf_arr_str(merges, i);
        if (s.len < 3 || !memchr(s.ptr + 1, ' ', s.len - 2))
            return err_fail(CLINFER_ERR_FORMAT,
                            "tokenizer: merge %llu '%.*s' is not two pieces and a space",
                            (unsigned long long)i, (int)(s.len > 64 ? 64 : s.len), s.ptr);
        memcpy(p, s.ptr, s.len);
        p[s.len] = '\0';
        if (tok_strmap_get(&v->merge_rank, p, s.len) < 0) /* a repeated merge keeps its rank */
            CHECK(tok_strmap_put(&v->merge_rank, p, s.len, (int32_t)i));
        p += s.len + 1;
    }
cleanup:
    return st;
}

typedef struct {
    unsigned char first;
    uint32_t len;
    int32_t id;
} special_key;

/* By first byte, then longest first, so that the first match is the longest. */
static int special_order(const void *pa, const void *pb) {
    const special_key *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : 1;
}

static bool is_special_type(int32_t type) {
    return type == TOK_TYPE_CONTROL || type == TOK_TYPE_USER_DEFINED || type == TOK_TYPE_UNKNOWN;
}

static clinfer_status index_specials(clinfer_vocab *v) {
    size_t n = 0;
    for (size_t i = 0; i < v->n_tokens; i++)
        n += is_special_type(v->tokens[i].type) && v->tokens[i].len;
    special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    v->specials = malloc((n ? n : 1) * sizeof *v->specials);
    if (!keys || !v->specials) {
        free(keys);
        return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu special tokens", n);
    }
    n = 0;
    for (size_t i = 0; i < v->n_tokens; i++)
        if (is_special_type(v->tokens[i].type) && v->tokens[i].len)
            keys[n++] =
                (special_key){(unsigned char)v->tokens[i].text[0], v->tokens[i].len, (int32_t)i};
    qsort(keys, n, sizeof *keys, special_order);
    size_t k = 0;
    for (unsigned b = 0; b < 256; b++) {
        v->first_special[b] = (uint32_t)k;
        for (; k < n && keys[k].first == b; k++)
            v->specials[k] = keys[k].id;
    }
    v->first_special[256] = (uint32_t)k;
    free(keys);
    return CLINFER_OK;
}

/* Tokens that end a turn in the chat formats clinfer knows (the first found is EOT when the
 * metadata names none), and others that end generation. As in llama.cpp, these are control
 * tokens whatever type the file gives them. */
static const char *const turn_end_texts[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>",
                                             "<end_of_turn>", "<EOT>",      "<|eom_id|>"};
static const char *const text_end_texts[] = {"<|endoftext|>", "<|end_of_text|>", "<eos>", "<turn|>",
                                             "<|tool_response>"};

static void add_eog(clinfer_vocab *v, int32_t id) {
    if (id < 0 || v->n_eog == TOK_MAX_EOG || vocab_is_eog(v, id)) return;
    v->eog[v->n_eog++] = id;
}

static int32_t control_token(clinfer_vocab *v, const char *text) {
    int32_t id = tok_strmap_get(&v->by_text, text, strlen(text));
    if (id >= 0) v->tokens[id].type = TOK_TYPE_CONTROL;
    return id;
}

static void find_end_tokens(clinfer_vocab *v) {
    add_eog(v, v->eos);
    add_eog(v, v->eot);
    add_eog(v, v->eom);
    for (size_t i = 0; i < sizeof turn_end_texts / sizeof turn_end_texts[0]; i++) {
        int32_t id = control_token(v, turn_end_texts[i]);
        if (v->eot < 0) v->eot = id;
        add_eog(v, id);
    }
    for (size_t i = 0; i < sizeof text_end_texts / sizeof text_end_texts[0]; i++)
        add_eog(v, control_token(v, text_end_texts[i]));
}

static clinfer_status read_specials(clinfer_vocab *v, const gguf_file *f) {
    clinfer_status st = CLINFER_OK;
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = -1;
    v->add_bos = v->model == TOK_BPE ? v->bpe.add_bos != TOK_BOS_NO
                                     : v->model == TOK_SPM || v->model == TOK_WPM;
    v->add_space_prefix = v->model == TOK_SPM;
    if ((v->model == TOK_SPM || v->model == TOK_PLAMO2) && v->n_tokens > 2) {
        /* SentencePiece's fixed <unk> <s> </s> (PLaMo 2's <|plamo:unk|> ...) */
        v->unk = 0;
        v->bos = 1;
        v->eos = 2;
    }
    if (v->model == TOK_UGM) { /* T5's <pad> </s> <unk>, no BOS; inputs end with </s> */
        v->add_bos = false;
        v->add_eos = true;
        if (v->n_tokens > 2) {
            v->eos = 1;
            v->unk = 2;
        }
    }
    int32_t ignored;
    CHECK(read_id(f, "tokenizer.ggml.cls_token_id", v->n_tokens, &v->bos));
    CHECK(read_id(f, "tokenizer.ggml.bos_token_id", v->n_tokens, &v->bos));
    CHECK(read_id(f, "tokenizer.ggml.eos_token_id", v->n_tokens, &v->eos));
    CHECK(read_id(f, "tokenizer.ggml.eot_token_id", v->n_tokens, &v->eot));
    CHECK(read_id(f, "tokenizer.ggml.eom_token_id", v->n_tokens, &v->eom));
    CHECK(read_id(f, "tokenizer.ggml.unknown_token_id", v->n_tokens, &v->unk));
    CHECK(read_id(f, "tokenizer.ggml.seperator_token_id", v->n_tokens, &v->sep));
    CHECK(read_id(f, "tokenizer.ggml.padding_token_id", v->n_tokens, &ignored));
    CHECK(read_id(f, "tokenizer.ggml.mask_token_id", v->n_tokens, &ignored));
    CHECK(read_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos));
    CHECK(read_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos));
    CHECK(
        read_flag(f, "tokenizer.ggml.remove_extra_whitespaces", &v->ugm.remove_extra_whitespaces));
    CHECK(read_flag(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix));
    v->lowercase = v->model == TOK_WPM; /* BERT's normaliser; the whitespace model's is off */
    CHECK(read_flag(f, "tokenizer.ggml.normalizer.lowercase", &v->lowercase));
    v->strip_accents = v->lowercase;
    CHECK(read_flag(f, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents));
    if (v->model == TOK_BPE && v->bpe.add_bos == TOK_BOS_ALWAYS) v->add_bos = true;
    find_end_tokens(v);
cleanup:
    return st;
}

/* The tokenizer.ggml.model values and their algorithms. */
static const struct {
    const char *name;
    tok_model model;
    bool drop_whitespace; /* the whitespace model: BPE that splits on spaces and drops them */
    bool dna;             /* hybriddna: BPE with <dna> blocks of k-mers (tok_dna.c) */
    const char *pre;      /* a pre-tokenizer the model implies, whatever tokenizer.ggml.pre says */
} tok_models[] = {
    {"gpt2", TOK_BPE, false, false, NULL},      {"gemma4", TOK_BPE, false, false, "gemma4"},
    {"whitespace", TOK_BPE, true, false, NULL}, {"hybriddna", TOK_BPE, false, true, NULL},
    {"llama", TOK_SPM, false, false, NULL},     {"bert", TOK_WPM, false, false, NULL},
    {"t5", TOK_UGM, false, false, NULL},        {"rwkv", TOK_RWKV, false, false, NULL},
    {"plamo2", TOK_PLAMO2, false, false, NULL}};
#define N_TOK_MODELS (sizeof tok_models / sizeof tok_models[0])

const char *vocab_model_at(size_t index) {
    return index < N_TOK_MODELS ? tok_models[index].name : NULL;
}

clinfer_status vocab_load(const gguf_file *f, clinfer_vocab **out) {
    clinfer_status st = CLINFER_OK;
    clinfer_vocab *v = NULL;
    gguf_str model, pre = {"default", 7};
    const gguf_kv *texts = NULL, *merges = NULL;
    if (!f || !out) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "vocab_load: NULL argument");
    *out = NULL;
    v = calloc(1, sizeof *v);
    if (!v) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: vocabulary");
    CHECK(gguf_get_str(f, "tokenizer.ggml.model", &model));
    if (gguf_find_kv(f, "tokenizer.ggml.pre")) CHECK(gguf_get_str(f, "tokenizer.ggml.pre", &pre));
    size_t k = 0;
    while (k < N_TOK_MODELS && !gguf_str_eq(model, tok_models[k].name))
        k++;
    if (k == N_TOK_MODELS && (gguf_str_eq(model, "none") || gguf_str_eq(model, "no_vocab"))) {
        st = err_fail(CLINFER_ERR_UNSUPPORTED,
                      "tokenizer: the file has no vocabulary (tokenizer.ggml.model '%.*s')",
                      (int)model.len, model.ptr);
        goto cleanup;
    }
    if (k == N_TOK_MODELS) {
        char names[128];
        names_list(vocab_model_at, names, sizeof names);
        const char *closest = names_closest(vocab_model_at, model.ptr, model.len);
        st = err_fail(CLINFER_ERR_UNSUPPORTED,
                      "tokenizer: tokenizer.ggml.model '%.*s' is not supported (%s are)%s%s",
                      (int)(model.len > 64 ? 64 : model.len), model.ptr, names,
                      closest ? "; closest: " : "", closest ? closest : "");
        goto cleanup;
    }
    v->model = tok_models[k].model;
    v->drop_whitespace = tok_models[k].drop_whitespace;
    if (tok_models[k].pre) pre = (gguf_str){tok_models[k].pre, strlen(tok_models[k].pre)};
    CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &texts));
    if (texts->arr_n == 0 || texts->arr_n > INT32_MAX) {
        st = err_fail(CLINFER_ERR_FORMAT, "tokenizer: %llu tokens",
                      (unsigned long long)texts->arr_n);
        goto cleanup;
    }
    v->n_tokens = (size_t)texts->arr_n;
    /* Kimi K2's files may come without merges (llama.cpp then merges nothing) */
    if (v->model == TOK_BPE &&
        (gguf_find_kv(f, "tokenizer.ggml.merges") || !gguf_str_eq(pre, "kimi-k2")))
        CHECK(gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges));
    CHECK(copy_tokens(v, f, texts, merges));
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        v->byte_token[b] = tok_strmap_get(&v->by_text, name, 6);
    }
    if (v->model == TOK_BPE) CHECK(tok_bpe_init(v, pre.ptr, (size_t)pre.len));
    if (tok_models[k].dna) tok_dna_init(v); /* before index_specials sees the texts */
    if (v->model == TOK_UGM) CHECK(tok_ugm_init(v, f));
    if (v->model == TOK_RWKV) CHECK(tok_rwkv_init(v));
    if (v->model == TOK_PLAMO2) CHECK(tok_plamo2_init(v));
    CHECK(read_specials(v, f));
    CHECK(index_specials(v));
    *out = v;
    v = NULL;
cleanup:
    if (st != CLINFER_OK) err_prefix("loading the vocabulary");
    vocab_free(v);
    return st;
}

bool vocab_present(const gguf_file *f) {
    const gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.model");
    if (!kv) return false;
    if (kv->type != GGUF_TYPE_STRING) return true; /* for vocab_load to refuse */
    gguf_str model;
    return gguf_get_str(f, "tokenizer.ggml.model", &model) != CLINFER_OK ||
           (!gguf_str_eq(model, "none") && !gguf_str_eq(model, "no_vocab"));
}

/* ---- queries ---------------------------------------------------------------------------- */

size_t vocab_n_tokens(const clinfer_vocab *v) {
    return v->n_tokens;
}
int32_t vocab_bos(const clinfer_vocab *v) {
    return v->bos;
}
int32_t vocab_eos(const clinfer_vocab *v) {
    return v->eos;
}
int32_t vocab_eot(const clinfer_vocab *v) {
    return v->eot;
}
int32_t vocab_eom(const clinfer_vocab *v) {
    return v->eom;
}
bool vocab_add_bos(const clinfer_vocab *v) {
    return v->add_bos && v->bos >= 0;
}

bool vocab_is_eog(const clinfer_vocab *v, int32_t id) {
    for (size_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

int32_t vocab_find(const clinfer_vocab *v, const char *text, size_t len) {
    return text || !len ? tok_strmap_get(&v->by_text, text, len) : -1;
}

/* ---- tokenizing ------------------------------------------------------------------------- */

/* The longest special token starting at text, or -1. Without parse_special only user-defined
 * tokens count (as in Hugging Face tokenizers, where added tokens always split the text). */
static int32_t special_at(const clinfer_vocab *v, const char *text, size_t len,
                          bool parse_special) {
    unsigned char b = (unsigned char)text[0];
    for (uint32_t k = v->first_special[b]; k < v->first_special[b + 1]; k++) {
        const tok_entry *t = &v->tokens[v->specials[k]];
        if (!parse_special && t->type != TOK_TYPE_USER_DEFINED) continue;
        if (t->len <= len && memcmp(t->text, text, t->len) == 0) return v->specials[k];
    }
    return -1;
}

static clinfer_status encode_run(const clinfer_vocab *v, const char *text, size_t len,
                                 tok_ids *out) {
    if (len == 0) return CLINFER_OK;
    switch (v->model) {
    case TOK_BPE:
        return v->dna.on ? tok_dna_encode(v, text, len, out) : tok_bpe_encode(v, text, len, out);
    case TOK_SPM:
        return tok_spm_encode(v, text, len, out);
    case TOK_WPM:
        return tok_wpm_encode(v, text, len, out);
    case TOK_UGM:
        return tok_ugm_encode(v, text, len, out);
    case TOK_RWKV:
        return tok_rwkv_encode(v, text, len, out);
    case TOK_PLAMO2:
        return tok_plamo2_encode(v, text, len, out);
    }
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: model %d", (int)v->model);
}

clinfer_status vocab_tokenize(const clinfer_vocab *v, const char *text, size_t len, bool add_bos,
                              bool parse_special, int32_t *out, size_t cap, size_t *n_out) {
    clinfer_text_piece whole = {text, len, parse_special};
    return vocab_tokenize_pieces(v, &whole, 1, add_bos, out, cap, n_out);
}

/* The pieces one after another in one buffer (*joined: allocated where there are several). */
static clinfer_status join_pieces(const clinfer_text_piece *pieces, size_t n, const char **text,
                                  char **joined, size_t *len) {
    *len = 0;
    for (size_t p = 0; p < n; p++) {
        if (!pieces[p].text && pieces[p].len)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenize: piece %zu has no text", p);
        if (pieces[p].len > SIZE_MAX - *len)
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenize: the pieces' sizes overflow");
        *len += pieces[p].len;
    }
    *joined = NULL;
    *text = n == 1 ? pieces[0].text : NULL;
    if (n <= 1) return CLINFER_OK;
    if (!(*joined = malloc(*len + 1))) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenize");
    for (size_t p = 0, at = 0; p < n; at += pieces[p++].len)
        if (pieces[p].len) memcpy(*joined + at, pieces[p].text, pieces[p].len);
    *text = *joined;
    return CLINFER_OK;
}

clinfer_status vocab_tokenize_pieces(const clinfer_vocab *v, const clinfer_text_piece *pieces,
                                     size_t n, bool add_bos, int32_t *out, size_t cap,
                                     size_t *n_out) {
    clinfer_status st = CLINFER_OK;
    tok_ids ids = {0};
    char *joined = NULL;
    const char *text = NULL;
    size_t len = 0;
    if (!v || (!pieces && n) || (!out && cap) || !n_out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "vocab_tokenize: NULL argument");
    *n_out = 0;
    CHECK(join_pieces(pieces, n, &text, &joined, &len));
    if (add_bos && v->bos >= 0) CHECK(tok_ids_push(&ids, v->bos));
    size_t run = 0;                            /* start of the plain text not yet tokenized */
    size_t p = 0, end = n ? pieces[0].len : 0; /* the piece at i and where it ends */
    for (size_t i = 0; i < len;) {
        while (i >= end) /* a special token lies inside one piece */
            end += pieces[++p].len;
        int32_t special = special_at(v, text + i, end - i, pieces[p].parse_special);
        if (special < 0) {
            i++;
            continue;
        }
        CHECK(encode_run(v, text + run, i - run, &ids));
        CHECK(tok_ids_push(&ids, special));
        i += v->tokens[special].len;
        run = i;
    }
    if (run < len) CHECK(encode_run(v, text + run, len - run, &ids));
    if (add_bos && v->model == TOK_WPM && v->sep >= 0) CHECK(tok_ids_push(&ids, v->sep));
    if (add_bos && v->add_eos && v->eos >= 0) CHECK(tok_ids_push(&ids, v->eos));
    *n_out = ids.n;
    if (ids.n && cap) memcpy(out, ids.ids, (ids.n < cap ? ids.n : cap) * sizeof *out);
    if (ids.n > cap)
        st = err_fail(CLINFER_ERR_BUFFER_TOO_SMALL, "tokenizer: %zu tokens, room for %zu", ids.n,
                      cap);
cleanup:
    free(ids.ids);
    free(joined);
    return st;
}

/* ---- pieces ----------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t cap, len; /* len counts every byte, also those that did not fit */
} piece_out;

static void put(piece_out *p, const char *s, size_t n) {
    if (p->len < p->cap) memcpy(p->buf + p->len, s, n < p->cap - p->len ? n : p->cap - p->len);
    p->len += n;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* SentencePiece's <0xXX>; -1 when text is not of that form. */
static int byte_token_value(const tok_entry *t) {
    if (t->len != 6 || memcmp(t->text, "<0x", 3) != 0 || t->text[5] != '>') return -1;
    int hi = hex_digit(t->text[3]), lo = hex_digit(t->text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Byte-level BPE: each character stands for one byte; others (not from the byte map) are
 * kept as they are. */
static void put_byte_level(const clinfer_vocab *v, const tok_entry *t, piece_out *p) {
    for (size_t off = 0; off < t->len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)t->text + off,
                                              (utf8proc_ssize_t)(t->len - off), &cp);
        if (n > 0 && cp < 512 && v->char_byte[cp] >= 0) {
            char b = (char)v->char_byte[cp];
            put(p, &b, 1);
        } else {
            n = n > 0 ? n : 1;
            put(p, t->text + off, (size_t)n);
        }
        off += (size_t)n;
    }
}

/* SentencePiece and WordPiece: U+2581 stands for a space. */
static void put_unescaped(const tok_entry *t, piece_out *p) {
    size_t start = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (i + 3 <= t->len && memcmp(t->text + i, "\xe2\x96\x81", 3) == 0) {
            put(p, t->text + start, i - start);
            put(p, " ", 1);
            start = i + 3;
            i += 2;
        }
    }
    put(p, t->text + start, t->len - start);
}

clinfer_status vocab_piece(const clinfer_vocab *v, int32_t id, char *buf, size_t cap, size_t *len) {
    if (!v || (!buf && cap) || !len)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "vocab_piece: NULL argument");
    if (id < 0 || (size_t)id >= v->n_tokens)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: token id %d (n_vocab %zu)", id,
                        v->n_tokens);
    const tok_entry *t = &v->tokens[id];
    piece_out p = {buf, cap, 0};
    int byte = t->type == TOK_TYPE_BYTE ? byte_token_value(t) : -1;
    if (byte >= 0) {
        char b = (char)byte;
        put(&p, &b, 1);
    } else if (t->type == TOK_TYPE_UNUSED) {
        /* stands for nothing */
    } else if (is_special_type(t->type) || t->type == TOK_TYPE_BYTE) {
        put(&p, t->text, t->len);
    } else if (v->model == TOK_BPE && !v->bpe.raw_bytes) {
        put_byte_level(v, t, &p);
    } else if ((v->model == TOK_BPE && !v->bpe.escape_spaces) || v->model == TOK_RWKV ||
               v->model == TOK_PLAMO2) {
        put(&p, t->text, t->len); /* raw bytes */
    } else {
        put_unescaped(t, &p);
    }
    *len = p.len;
    if (p.len > cap)
        return err_fail(CLINFER_ERR_BUFFER_TOO_SMALL,
                        "tokenizer: piece of token %d is %zu "
                        "bytes, room for %zu",
                        id, p.len, cap);
    return CLINFER_OK;
}

size_t clinfer_utf8_complete(const char *buf, size_t len) {
    /* Look back over at most 3 continuation bytes for the lead byte of the last character. */
    for (size_t back = 1; back <= 4 && back <= len; back++) {
        unsigned char c = (unsigned char)buf[len - back];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                      : c >= 0xE0 && c <= 0xEF ? 3
                      : c >= 0xF0 && c <= 0xF4 ? 4
                                               : 1;
        return need > back ? len - back : len;
    }
    return len;
}
