/* Pre-tokenizers: every family of tok_pretok_table.c compiles, its words cover the text byte
 * for byte (invalid UTF-8 too), and known splits come out as llama.cpp splits them. Needs no
 * files. */
#include <string.h>

#include "check.h"
#include "tok_internal.h"
#include "tok_pretok_table.h"

/* Splits text with family and compares with the expected words, given as one string with
 * '|' between words. */
static void expect_split(const char *family, const char *text, const char *expected) {
    tok_pretok *p = NULL;
    tok_pretok_traits traits;
    EXPECT_OK(tok_pretok_create(family, strlen(family), &p, &traits));
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
    tok_pretok_traits traits;
    EXPECT_OK(tok_pretok_create(family, strlen(family), &p, &traits));
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
    for (size_t i = 0; i < tok_pretok_n_families; i++)
        check_cover(tok_pretok_families[i].name, mixed, sizeof mixed - 1);

    tok_pretok *p = NULL;
    tok_pretok_traits traits = {0};
    EXPECT(tok_pretok_create("no-such-family", 14, &p, &traits) == CLINFER_ERR_UNSUPPORTED,
           "unknown family");
    EXPECT(tok_pretok_create("gpt2", 4, &p, &traits) == CLINFER_ERR_UNSUPPORTED,
           "'gpt2' is a tokenizer model, not a pre-tokenizer llama.cpp knows");
    EXPECT_OK(tok_pretok_create("llama-bpe", 9, &p, &traits));
    EXPECT(traits.ignore_merges && traits.add_bos == TOK_BOS_YES,
           "llama3 takes whole-word tokens without merging, prompts start with BOS");
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
