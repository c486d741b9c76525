/* The pre-tokenizer of every tokenizer.ggml.pre name llama.cpp accepts: the regular expressions
 * each model family's tokenizer.json splits text with, and the traits that go with the name.
 * Where llama.cpp's splitting differs from the original expression (it matches letter case only
 * in ASCII, and replaces some expressions by hand-written splitters), these expressions say what
 * llama.cpp does, since its ids are the reference. Each list runs in order, each expression
 * splitting the words the previous one made (tok_pretok.c). */
#include "tok_pretok_table.h"

/* Non-ASCII characters are written as \x{...}: editors and tools that normalise Unicode
 * would otherwise turn range ends such as U+1F7D or U+212A KELVIN SIGN into other characters. */

/* English contractions, case-insensitive in ASCII only: 's 't 're 've 'm 'll 'd. */
#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* One character that may lead a word: not a line break, letter or number. */
#define LEAD "[^\\r\\n\\p{L}\\p{N}]?"
/* Whitespace: a run ending in line breaks, a run that leaves its last space to the next word,
 * then any run. */
#define WS_TAIL "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* Llama 3 and its relatives: letter runs with one leading mark, DIGITS digits at a time,
 * punctuation runs taking the line breaks after them. */
#define LLAMA3_LIKE(LETTERS, DIGITS, PUNCT)                                                        \
    CONTR "|" LEAD LETTERS "+|\\p{N}" DIGITS "| ?" PUNCT "+[\\r\\n]*" WS_TAIL
#define NOT_LN "[^\\s\\p{L}\\p{N}]"
/* llama.cpp tells letter case apart in ASCII only: "upper" is any letter but a-z, "lower" any
 * letter but A-Z (non-ASCII letters are both). WITH_MARKS: combining marks count as both too. */
#define UPPERISH "(?:[A-Z]|[^\\P{L}\\x00-\\x7F])"
#define LOWERISH "(?:[a-z]|[^\\P{L}\\x00-\\x7F])"
#define UPPERISH_M "(?:[A-Z]|[^\\P{L}\\x00-\\x7F]|\\p{M})"
#define LOWERISH_M "(?:[a-z]|[^\\P{L}\\x00-\\x7F]|\\p{M})"
/* Cased words: capitals then small letters, or capitals alone; an optional contraction. */
#define CASED(UP, LOW, DIGITS)                                                                     \
    LEAD UP "*" LOW "+" CONTR "?|" LEAD UP "+" LOW "*" CONTR "?|\\p{N}" DIGITS "| ?" NOT_LN        \
            "+[\\r\\n/]*" WS_TAIL
/* Every ASCII punctuation mark and symbol. */
#define ASCII_PUNCT "[!-/:-@\\[-`{-~]"
/* DeepSeek V3 and relatives: an ASCII mark may lead an ASCII word; letters keep their marks. */
#define DEEPSEEK3_WORDS(NL)                                                                        \
    ASCII_PUNCT "[A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+" NL       \
                "|\\s+(?!\\S)|\\s+"
/* CJK ideographs (U+4E00..U+9FA5), then hiragana and katakana. */
#define IDEOGRAPHS_KANA "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+"
#define CJK_RE "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define BLOOM_RE " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
/* Digits in groups of three counted from the run's end: 1234567 -> 1|234|567. */
#define DIGITS_BY_THOUSANDS "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))"
/* Runs of line breaks and runs of anything else. */
#define LINES_RE "[^\\n]+|\\n+"
/* The code points llama.cpp counts as Han: the CJK unified ideographs with their extensions A
 * to F, and the compatibility ideographs. */
#define HAN                                                                                        \
    "\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{2A6DF}"               \
    "\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}"

static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+",
                                         "[0-9][0-9][0-9]", NULL};
static const char *const re_gpt2[] = {GPT2_RE, NULL};
static const char *const re_llama3[] = {LLAMA3_LIKE("\\p{L}", "{1,3}", NOT_LN), NULL};
/* Jais 2: Llama 3, whitespace runs cut into power-of-two lengths from 512 down. */
static const char *const re_jais2[] = {
    CONTR "|" LEAD "\\p{L}+|\\p{N}{1,3}| ?" NOT_LN "+[\\r\\n]*|\\s*[\\r\\n]+"
          "|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)"
          "|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s",
    NULL};
static const char *const re_qwen2[] = {LLAMA3_LIKE("\\p{L}", "", NOT_LN), NULL};
/* Qwen 3.5: combining marks stay with their letters. */
static const char *const re_qwen35[] = {
    LLAMA3_LIKE("[\\p{L}\\p{M}]", "", "[^\\s\\p{L}\\p{M}\\p{N}]"), NULL};
static const char *const re_minicpm5[] = {"\\p{N}{1,3}", LLAMA3_LIKE("\\p{L}", "+", NOT_LN), NULL};
/* Ufakzeka: Qwen 2 without contractions, so that Turkish suffixes after an apostrophe stay. */
static const char *const re_ufakzeka[] = {LEAD "\\p{L}+|\\p{N}| ?" NOT_LN "+[\\r\\n]*" WS_TAIL,
                                          NULL};
static const char *const re_laguna[] = {LINES_RE, LLAMA3_LIKE("\\p{L}", "", NOT_LN), NULL};
/* Bailing MoE: one line break per whitespace word. */
static const char *const re_bailingmoe[] = {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|" LEAD
                                            "\\p{L}+|\\p{N}| ?" NOT_LN
                                            "+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
                                            NULL};
/* Seed-Coder: punctuation runs stop before line breaks. */
static const char *const re_seed_coder[] = {
    CONTR "|" LEAD "\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}\\r\\n]+" WS_TAIL, NULL};
/* EXAONE MoE: words of letters (with their marks) joined by single spaces. */
static const char *const re_exaone_moe[] = {
    CONTR "|" LEAD "(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?" NOT_LN
          "+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
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
static const char *const re_deepseek3[] = {"\\p{N}{1,3}", IDEOGRAPHS_KANA,
                                           DEEPSEEK3_WORDS("[\\r\\n]*|\\s*[\\r\\n]+"), NULL};
/* Spark 2.5: each line break a word of its own, then single digits. */
static const char *const re_spark2_5[] = {"\\p{N}{1,3}", IDEOGRAPHS_KANA,
                                          DEEPSEEK3_WORDS("|[\\r\\n]"), "\\p{N}", NULL};
/* Youtu: Hangul, CJK punctuation, bopomofo, ideographs and kana first; then words whose case
 * llama.cpp does not tell apart (its classes of capitals and small letters are all letters). */
static const char *const re_youtu[] = {
    "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+"
    "|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}"
    "\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+"
    "|[\\x{3105}-\\x{312F}]+|" IDEOGRAPHS_KANA,
    LEAD "[\\p{L}\\p{M}]+" CONTR "?|\\p{N}| ?" NOT_LN "+[\\r\\n/]*" WS_TAIL, NULL};
static const char *const re_tekken[] = {CASED(UPPERISH, LOWERISH, ""), NULL};
static const char *const re_gpt4o[] = {CASED(UPPERISH, LOWERISH, "{1,3}"), NULL};
static const char *const re_granite_multi[] = {CASED(UPPERISH_M, LOWERISH_M, "{1,3}"), NULL};
static const char *const re_tiny_aya[] = {
    DIGITS_BY_THOUSANDS,
    LEAD "[\\p{L}\\p{M}]+" CONTR "?|\\p{N}{1,3}| ?" NOT_LN "+[\\r\\n/]*" WS_TAIL, NULL};
/* Kimi K2: Han runs, then words of other letters (marks not included). */
static const char *const re_kimi_k2[] = {"[" HAN "]+|" LEAD "[^\\P{L}" HAN "]+" CONTR
                                         "?|\\p{N}{1,3}| ?" NOT_LN "+[\\r\\n]*" WS_TAIL,
                                         NULL};
/* SuperBPE: number runs, cut before each group of three ASCII digits that ends the run. */
static const char *const re_superbpe[] = {"\\p{N}+", "(?=(?:[0-9]{3})+(?![0-9]))", NULL};
/* AFMoE: digits by thousands; runs of CJK, kana, halfwidth forms, Kangxi radicals, Thai, Lao,
 * Khmer, Myanmar, Javanese and Hangul; then DeepSeek V3's words. The compatibility ideographs'
 * range starts at U+8C48 in llama.cpp (a U+F900 normalised to its canonical equivalent), so
 * U+4E00..U+FAFF is one run there: kept so. */
static const char *const re_afmoe[] = {
    DIGITS_BY_THOUSANDS,
    "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{8C48}-\\x{FAFF}\\x{3040}-\\x{309F}\\x{30A0}-"
    "\\x{30FF}\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{0E40}-\\x{0E7F}\\x{0E80}-\\x{0EFF}"
    "\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}\\x{A9E0}-\\x{A9FF}\\x{AC00}-"
    "\\x{D7AF}\\x{1100}-\\x{11FF}]+",
    DEEPSEEK3_WORDS("[\\r\\n]*|\\s*[\\r\\n]+"), NULL};
/* Chameleon: sentinel and image tokens, tabs, line feeds and space pairs, single digits, single
 * punctuation marks, then GPT-2. */
static const char *const re_chameleon[] = {"<sentinel:[0-9]+>",
                                           "IMGIMG[A-I]{1,4}Z",
                                           "[\\t\\n]| {4}| {2}",
                                           "\\p{N}",
                                           "[\\p{P}!-/:-@\\[-`{-~]",
                                           GPT2_RE,
                                           NULL};
static const char *const re_bloom[] = {BLOOM_RE, NULL};
static const char *const re_viking[] = {BLOOM_RE, "\\p{N}", NULL};
/* SentencePiece-style BPE (Gemma 4, Sarvam): merges run over whole lines. */
static const char *const re_lines[] = {LINES_RE, NULL};
static const char *const re_whitespace[] = {"\\S+", NULL};

/* Traits (tok_internal.h): ignore_merges, raw_bytes, escape_spaces, newline_words, add_bos. */
#define T(i, r, e, n, b)                                                                           \
    { i, r, e, n, TOK_BOS_##b }
#define PLAIN T(false, false, false, false, NO)
#define WHOLE T(true, false, false, false, NO)
#define WHOLE_BOS T(true, false, false, false, YES)

const tok_pretok_family tok_pretok_families[] = {
    {"default", re_default, PLAIN},
    {"gpt-2", re_gpt2, PLAIN},
    {"phi-2", re_gpt2, PLAIN},
    {"jina-es", re_gpt2, PLAIN},
    {"jina-de", re_gpt2, PLAIN},
    {"gigachat", re_gpt2, PLAIN},
    {"jina-v2-es", re_gpt2, PLAIN},
    {"jina-v2-de", re_gpt2, PLAIN},
    {"a.x-4.0", re_gpt2, PLAIN},
    {"mellum", re_gpt2, PLAIN},
    {"modern-bert", re_gpt2, PLAIN},
    {"jina-v1-en", re_gpt2, PLAIN},
    {"jina-v2-code", re_gpt2, PLAIN},
    {"roberta-bpe", re_gpt2, PLAIN},
    {"mpt", re_gpt2, PLAIN},
    {"olmo", re_gpt2, PLAIN},
    {"jais", re_gpt2, PLAIN},
    {"exaone4", re_gpt2, PLAIN},
    {"trillion", re_gpt2, PLAIN},
    {"granite-docling", re_gpt2, PLAIN},
    {"llama3", re_llama3, WHOLE_BOS},
    {"llama-v3", re_llama3, WHOLE_BOS},
    {"llama-bpe", re_llama3, WHOLE_BOS},
    {"falcon3", re_llama3, WHOLE_BOS},
    {"falcon-h1", re_llama3, WHOLE_BOS},
    {"pixtral", re_llama3, WHOLE_BOS},
    {"midm-2.0", re_llama3, WHOLE_BOS},
    {"lfm2", re_llama3, WHOLE_BOS},
    {"jina-v5-nano", re_llama3, WHOLE_BOS},
    {"dbrx", re_llama3, PLAIN},
    {"smaug-bpe", re_llama3, PLAIN},
    {"chatglm-bpe", re_llama3, PLAIN},
    {"glm4", re_llama3, WHOLE},
    {"glm5", re_llama3, WHOLE},
    {"jais-2", re_jais2, PLAIN},
    {"minicpm5", re_minicpm5, WHOLE},
    {"qwen2", re_qwen2, PLAIN},
    {"deepseek-r1-qwen", re_qwen2, PLAIN},
    {"kormo", re_qwen2, PLAIN},
    {"f2llmv2", re_qwen2, PLAIN},
    {"megrez", re_qwen2, PLAIN},
    {"stablelm2", re_qwen2, PLAIN},
    {"hunyuan", re_qwen2, PLAIN},
    {"solar-open", re_qwen2, PLAIN},
    {"grok-2", re_qwen2, PLAIN},
    {"qwen35", re_qwen35, PLAIN},
    {"ufakzeka", re_ufakzeka, PLAIN},
    {"laguna", re_laguna, PLAIN},
    {"bailingmoe", re_bailingmoe, PLAIN},
    {"bailingmoe2", re_bailingmoe, PLAIN},
    {"llada-moe", re_bailingmoe, PLAIN},
    {"seed-coder", re_seed_coder, PLAIN},
    {"exaone-moe", re_exaone_moe, PLAIN},
    {"starcoder", re_starcoder, PLAIN},
    {"refact", re_starcoder, PLAIN},
    {"command-r", re_starcoder, PLAIN},
    {"smollm", re_starcoder, PLAIN},
    {"codeshell", re_starcoder, PLAIN},
    {"exaone", re_starcoder, PLAIN},
    {"minerva-7b", re_starcoder, PLAIN},
    {"mellum2", re_starcoder, PLAIN},
    {"falcon", re_falcon, PLAIN},
    {"deepseek-llm", re_deepseek_llm, PLAIN},
    {"deepseek-coder", re_deepseek_coder, PLAIN},
    {"deepseek-v3", re_deepseek3, PLAIN},
    {"hunyuan-dense", re_deepseek3, PLAIN},
    {"hy_v4", re_deepseek3, PLAIN},
    {"joyai-llm", re_deepseek3, PLAIN},
    {"spark2_5", re_spark2_5, PLAIN},
    {"youtu", re_youtu, WHOLE},
    {"tekken", re_tekken, WHOLE_BOS},
    {"gpt-4o", re_gpt4o, PLAIN},
    {"llama4", re_gpt4o, PLAIN},
    {"kanana2", re_gpt4o, PLAIN},
    {"talkie", re_gpt4o, PLAIN},
    {"minimax-m2", re_gpt4o, PLAIN},
    {"granite-embed-multi-97m", re_granite_multi, WHOLE},
    {"tiny_aya", re_tiny_aya, PLAIN},
    {"cohere2moe", re_tiny_aya, PLAIN},
    {"kimi-k2", re_kimi_k2, PLAIN},
    {"superbpe", re_superbpe, PLAIN},
    {"afmoe", re_afmoe, PLAIN},
    {"chameleon", re_chameleon, T(false, false, false, false, YES)},
    {"poro-chat", re_bloom, PLAIN},
    {"bloom", re_bloom, PLAIN},
    {"gpt3-finnish", re_bloom, PLAIN},
    {"viking", re_viking, PLAIN},
    {"gemma4", re_lines, T(false, true, true, true, ALWAYS)},
    {"granite-embed-multi-311m", re_lines, T(false, true, true, true, ALWAYS)},
    {"sarvam-moe", re_lines, T(false, true, true, false, NO)},
    {"whitespace", re_whitespace, T(false, true, false, false, NO)},
};

const size_t tok_pretok_n_families = sizeof tok_pretok_families / sizeof tok_pretok_families[0];
