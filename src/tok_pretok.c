/* Pre-tokenizers of byte-level BPE vocabularies: the regular expressions each model family was
 * trained with (as in its tokenizer.json, in the form llama.cpp's converter names through
 * tokenizer.ggml.pre), run by PCRE2 with Unicode properties. A family may chain several
 * regexes: each one splits the words the previous produced, and both its matches and the text
 * between them become words, so no byte is ever dropped. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tok_internal.h"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* (?i:'s|...) spelled out so that case folding stays ASCII as in the original. */
#define CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define LLAMA3_LIKE_RE(DIGITS)                                                                     \
    CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" DIGITS                                 \
                    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Non-ASCII characters are written as \x{...}: editors and tools that normalise Unicode
 * would otherwise turn range ends such as U+1F7D or U+212A KELVIN SIGN into other characters. */
#define CJK_RE "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define BLOOM_RE " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+",
                                         "[0-9][0-9][0-9]", NULL};
static const char *const re_gpt2[] = {GPT2_RE, NULL};
static const char *const re_llama3[] = {LLAMA3_LIKE_RE("{1,3}"), NULL};
static const char *const re_qwen2[] = {LLAMA3_LIKE_RE(""), NULL};
static const char *const re_starcoder[] = {"\\p{N}", GPT2_RE, NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]",
                                        NULL};
/* DeepSeek LLM: cased letters (Lu, Ll, Lt) of the scripts it was trained on. */
static const char *const re_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{"
    "293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-"
    "\\x{38A}"
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{"
    "1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{"
    "1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{"
    "1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
    "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{"
    "FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    CJK_RE,
    "\\p{N}+",
    NULL};
static const char *const re_deepseek_coder[] = {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                CJK_RE,     "\\p{N}",      NULL};
static const char *const re_bloom[] = {BLOOM_RE, NULL};
static const char *const re_viking[] = {BLOOM_RE, "\\p{N}", NULL};

static const struct {
    const char *name; /* tokenizer.ggml.pre */
    const char *const *regexes;
    bool ignore_merges;
} families[] = {
    {"default", re_default, false},
    {"gpt-2", re_gpt2, false},
    {"gpt2", re_gpt2, false},
    {"mpt", re_gpt2, false},
    {"olmo", re_gpt2, false},
    {"jais", re_gpt2, false},
    {"phi-2", re_gpt2, false},
    {"roberta-bpe", re_gpt2, false},
    {"llama3", re_llama3, true},
    {"llama-v3", re_llama3, true},
    {"llama-bpe", re_llama3, true},
    {"falcon3", re_llama3, true},
    {"dbrx", re_llama3, false},
    {"smaug-bpe", re_llama3, false},
    {"chatglm-bpe", re_llama3, false},
    {"smollm", re_starcoder, false},
    {"starcoder", re_starcoder, false},
    {"refact", re_starcoder, false},
    {"command-r", re_starcoder, false},
    {"codeshell", re_starcoder, false},
    {"exaone", re_starcoder, false},
    {"minerva-7b", re_starcoder, false},
    {"qwen2", re_qwen2, false},
    {"stablelm2", re_qwen2, false},
    {"deepseek-r1-qwen", re_qwen2, false},
    {"deepseek-llm", re_deepseek_llm, false},
    {"deepseek-coder", re_deepseek_coder, false},
    {"falcon", re_falcon, false},
    {"poro-chat", re_bloom, false},
    {"bloom", re_bloom, false},
    {"gpt3-finnish", re_bloom, false},
    {"viking", re_viking, false},
};

#define MAX_REGEXES 8

struct tok_pretok {
    pcre2_code *re[MAX_REGEXES];
    size_t n_re;
};

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_re; i++)
        pcre2_code_free(p->re[i]);
    free(p);
}

clinfer_status tok_pretok_create(const char *name, size_t name_len, tok_pretok **out,
                                 bool *ignore_merges) {
    clinfer_status st = CLINFER_OK;
    tok_pretok *p = NULL;
    *out = NULL;
    size_t fam = 0;
    while (fam < sizeof families / sizeof families[0] &&
           !(strlen(families[fam].name) == name_len &&
             memcmp(families[fam].name, name, name_len) == 0))
        fam++;
    if (fam == sizeof families / sizeof families[0])
        return clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                            "tokenizer: unknown pre-tokenizer tokenizer.ggml.pre = '%.*s'",
                            (int)(name_len > 64 ? 64 : name_len), name);
    p = calloc(1, sizeof *p);
    if (!p) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: pre-tokenizer");
    /* MATCH_INVALID_UTF: invalid bytes match nothing, so they fall between matches and become
     * words of their own; DOLLAR_ENDONLY: '$' means the end of the word, as in the original. */
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    for (const char *const *re = families[fam].regexes; *re; re++) {
        int err;
        PCRE2_SIZE err_off;
        p->re[p->n_re] =
            pcre2_compile((PCRE2_SPTR)*re, PCRE2_ZERO_TERMINATED, options, &err, &err_off, NULL);
        if (!p->re[p->n_re]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            st = clinfer_fail(CLINFER_ERR_UNSUPPORTED,
                              "tokenizer: pre-tokenizer '%s' regex %zu at offset %zu: %s",
                              families[fam].name, p->n_re, (size_t)err_off, (const char *)msg);
            goto cleanup;
        }
        /* JIT is only a speed-up: the interpreter gives the same matches where it is missing. */
        pcre2_jit_compile(p->re[p->n_re], PCRE2_JIT_COMPLETE);
        p->n_re++;
    }
    *ignore_merges = families[fam].ignore_merges;
    *out = p;
    p = NULL;
cleanup:
    tok_pretok_free(p);
    return st;
}

typedef struct {
    tok_span *items;
    size_t n, cap;
} span_list;

static clinfer_status span_push(span_list *l, size_t off, size_t len) {
    if (len == 0) return CLINFER_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        tok_span *items = realloc(l->items, cap * sizeof *items);
        if (!items) return clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: %zu words", cap);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = (tok_span){(uint32_t)off, (uint32_t)len};
    return CLINFER_OK;
}

/* Splits the word at text + w.off by re: matches and the gaps between them. */
static clinfer_status split_word(const pcre2_code *re, const char *text, tok_span w,
                                 pcre2_match_data *md, pcre2_match_context *mc, span_list *out) {
    clinfer_status st = CLINFER_OK;
    PCRE2_SPTR subject = (PCRE2_SPTR)(text + w.off);
    size_t emitted = 0, start = 0;
    while (start < w.len) {
        int rc = pcre2_match(re, subject, w.len, start, 0, md, mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "tokenizer: pre-tokenizer regex failed in a word of %u bytes: %s",
                                w.len, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) { /* an empty match splits nothing: look again one character on */
            start = ov[0] + tok_char_len(text + w.off + ov[0], w.len - ov[0]);
            continue;
        }
        CHECK(span_push(out, w.off + emitted, ov[0] - emitted));
        CHECK(span_push(out, w.off + ov[0], ov[1] - ov[0]));
        emitted = start = ov[1];
    }
    CHECK(span_push(out, w.off + emitted, w.len - emitted));
cleanup:
    return st;
}

clinfer_status tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **spans,
                                size_t *n_spans) {
    clinfer_status st = CLINFER_OK;
    span_list cur = {0}, next = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    pcre2_jit_stack *stack = NULL;
    *spans = NULL;
    *n_spans = 0;
    if (len > UINT32_MAX)
        return clinfer_fail(CLINFER_ERR_INVALID_ARGUMENT, "tokenizer: text of %zu bytes", len);
    md = pcre2_match_data_create(4, NULL);
    mc = pcre2_match_context_create(NULL);
    /* Long runs of whitespace or letters need more than the default 32 KiB of JIT stack. */
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!md || !mc || !stack) {
        st = clinfer_fail(CLINFER_ERR_OUT_OF_MEMORY, "tokenizer: regex match data");
        goto cleanup;
    }
    pcre2_jit_stack_assign(mc, NULL, stack);
    CHECK(span_push(&cur, 0, len));
    for (size_t r = 0; r < p->n_re; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++)
            CHECK(split_word(p->re[r], text, cur.items[i], md, mc, &next));
        span_list t = cur;
        cur = next;
        next = t;
    }
    *spans = cur.items;
    *n_spans = cur.n;
    cur.items = NULL;
cleanup:
    free(cur.items);
    free(next.items);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    return st;
}
