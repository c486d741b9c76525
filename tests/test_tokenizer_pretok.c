/* Pre-tokenizers: every family named in tok_pretok.c compiles, its words cover the text byte
 * for byte (invalid UTF-8 too), and known splits come out as the families' own tokenizers
 * (Hugging Face tokenizers) split them. Needs no files. */
#include <string.h>

#include "check.h"
#include "tok_internal.h"

static const char *const families[] = {
    "default",      "gpt-2",          "gpt2",        "mpt",       "olmo",
    "jais",         "phi-2",          "roberta-bpe", "llama3",    "llama-v3",
    "llama-bpe",    "falcon3",        "dbrx",        "smaug-bpe", "chatglm-bpe",
    "smollm",       "starcoder",      "refact",      "command-r", "codeshell",
    "exaone",       "minerva-7b",     "qwen2",       "stablelm2", "deepseek-r1-qwen",
    "deepseek-llm", "deepseek-coder", "falcon",      "poro-chat", "bloom",
    "gpt3-finnish", "viking",
};

/* Splits text with family and compares with the expected words, given as one string with
 * '|' between words. */
static void expect_split(const char *family, const char *text, const char *expected) {
    tok_pretok *p = NULL;
    bool ignore_merges;
    EXPECT_OK(tok_pretok_create(family, strlen(family), &p, &ignore_merges));
    if (!p) return;
    tok_span *spans = NULL;
    size_t n = 0;
    EXPECT_OK(tok_pretok_split(p, text, strlen(text), &spans, &n));
    char got[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len + spans[i].len + 2 < sizeof got; i++) {
        if (i) got[len++] = '|';
        memcpy(got + len, text + spans[i].off, spans[i].len);
        len += spans[i].len;
        got[len] = '\0';
    }
    EXPECT(strcmp(got, expected) == 0, "%s: '%s' split as '%s', expected '%s'", family, text, got,
           expected);
    free(spans);
    tok_pretok_free(p);
}

/* Words are contiguous, non-empty and cover the text, whatever the bytes. */
static void check_cover(const char *family, const char *text, size_t len) {
    tok_pretok *p = NULL;
    bool ignore_merges;
    EXPECT_OK(tok_pretok_create(family, strlen(family), &p, &ignore_merges));
    if (!p) return;
    tok_span *spans = NULL;
    size_t n = 0, end = 0;
    EXPECT_OK(tok_pretok_split(p, text, len, &spans, &n));
    for (size_t i = 0; i < n; i++) {
        EXPECT(spans[i].off == end && spans[i].len > 0, "%s: word %zu at %u+%u, expected at %zu",
               family, i, spans[i].off, spans[i].len, end);
        end = spans[i].off + spans[i].len;
    }
    EXPECT(end == len, "%s: words end at %zu of %zu bytes", family, end, len);
    free(spans);
    tok_pretok_free(p);
}

int main(void) {
    static const char mixed[] =
        "Hello world's   test\t\n\n 12345 ÄÖÜ 日本語 🦙!!! \xff\xc3 end\r\n";
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        check_cover(families[i], mixed, sizeof mixed - 1);

    tok_pretok *p = NULL;
    bool ignore_merges = false;
    EXPECT(tok_pretok_create("no-such-family", 14, &p, &ignore_merges) == CLINFER_ERR_UNSUPPORTED,
           "unknown family");
    EXPECT_OK(tok_pretok_create("llama-bpe", 9, &p, &ignore_merges));
    EXPECT(ignore_merges, "llama3 takes whole-word tokens without merging");
    tok_pretok_free(p);

    expect_split("gpt-2", "Hello world's   test", "Hello| world|'s|  | test");
    expect_split("gpt-2", "a\n\n b", "a|\n\n| b");
    expect_split("smollm", "x 12345 y", "x| |1|2|3|4|5| y");
    expect_split("llama-bpe", "I'M 1234567 ok!!\n\n", "I|'M| |123|456|7| ok|!!\n\n");
    expect_split("qwen2", "v1.25 :)", "v|1|.|2|5| :)");
    expect_split("deepseek-coder", "foo(bar)=1", "foo|(|bar|)|=|1");
    expect_split("deepseek-llm", "Hi 你好 2024", "Hi| |你好| |2024");
    expect_split("default", "a+b 1234", "a|+|b| |123|4");
    return finish("test_tokenizer_pretok");
}
