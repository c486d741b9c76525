/* Chat templates: every format renders a conversation exactly as its reference template lays
 * it out, formats are recognised from real templates' markers, and bad input fails cleanly. */
#include <string.h>

#include "chat.h"
#include "check.h"

/* Excerpts of the families' published templates: the parts that carry their markers. */
static const char smollm2_tmpl[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";
/* Qwen2.5: the first system opener is followed by an expression, the literal comes later,
 * and newlines are Jinja escapes. */
static const char qwen25_tmpl[] =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
    "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are "
    "Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}";
static const char llama3_tmpl[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{{ content }}{% endfor %}";
static const char llama2_tmpl[] =
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' "
    "}}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}";
static const char gemma_tmpl[] =
    "{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | "
    "trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{'<start_of_turn>model\n'}}{% endif %}";

static const clinfer_chat_message conv[] = {
    {"system", "You are terse."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "Capital of France?"},
};
#define N_CONV (sizeof conv / sizeof conv[0])

static void expect_render(const char *tmpl, const char *name, const clinfer_chat_message *m,
                          size_t n, bool add_assistant, const char *want) {
    char *out = NULL;
    clinfer_status st = chat_render(tmpl, tmpl ? strlen(tmpl) : 0, name, m, n, add_assistant, &out);
    EXPECT(st == CLINFER_OK, "render (%s) failed: %s", name ? name : "detected",
           clinfer_last_error());
    if (out)
        EXPECT(!strcmp(out, want), "render (%s):\n got: [%s]\nwant: [%s]", name ? name : "detected",
               out, want);
    free(out);
}

static void test_formats(void) {
    expect_render(NULL, "chatml", conv, N_CONV, true,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi!<|im_end|>\n"
                  "<|im_start|>assistant\nHello.<|im_end|>\n"
                  "<|im_start|>user\nCapital of France?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(NULL, "llama3", conv, N_CONV, true,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nCapital of France?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Llama-2 answers straight after [/INST]: add_assistant adds nothing. */
    expect_render(NULL, "llama2", conv, N_CONV, true,
                  "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
                  "<s>[INST] Capital of France? [/INST]");
    expect_render(NULL, "gemma", conv, N_CONV, true,
                  "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
                  "<start_of_turn>model\nHello.<end_of_turn>\n"
                  "<start_of_turn>user\nCapital of France?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    /* Without the generation prompt the conversation simply ends. */
    expect_render(NULL, "chatml", conv + 1, 1, false, "<|im_start|>user\nHi!<|im_end|>\n");
    expect_render(NULL, "gemma", conv + 1, 1, false, "<start_of_turn>user\nHi!<end_of_turn>\n");
}

static void test_trim(void) {
    const clinfer_chat_message m[] = {{"user", "  \n Hi there \t\n"}};
    /* Llama-3, Llama-2 and Gemma trim contents; ChatML keeps them verbatim. */
    expect_render(NULL, "llama3", m, 1, false,
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>");
    expect_render(NULL, "llama2", m, 1, false, "[INST] Hi there [/INST]");
    expect_render(NULL, "gemma", m, 1, false, "<start_of_turn>user\nHi there<end_of_turn>\n");
    expect_render(NULL, "chatml", m, 1, false, "<|im_start|>user\n  \n Hi there \t\n<|im_end|>\n");
}

static void test_detect(void) {
    const struct {
        const char *tmpl;
        chat_format want;
    } cases[] = {
        {smollm2_tmpl, CHAT_FORMAT_CHATML}, {qwen25_tmpl, CHAT_FORMAT_CHATML},
        {llama3_tmpl, CHAT_FORMAT_LLAMA3},  {llama2_tmpl, CHAT_FORMAT_LLAMA2},
        {gemma_tmpl, CHAT_FORMAT_GEMMA},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chat_format f = (chat_format)-1;
        EXPECT_OK(chat_detect(cases[i].tmpl, strlen(cases[i].tmpl), NULL, &f));
        EXPECT(f == cases[i].want, "template %zu detected as %d, want %d", i, (int)f,
               (int)cases[i].want);
    }
    /* The name wins over the template. */
    chat_format f;
    EXPECT_OK(chat_detect(smollm2_tmpl, strlen(smollm2_tmpl), "gemma", &f));
    EXPECT(f == CHAT_FORMAT_GEMMA, "name override ignored: %d", (int)f);

    /* The detected format renders with the template's default system prompt. */
    const clinfer_chat_message user[] = {{"user", "Hi"}};
    expect_render(smollm2_tmpl, NULL, user, 1, true,
                  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                  "Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(qwen25_tmpl, NULL, user, 1, false,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                  "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* A conversation with its own system message does not get the default. */
    expect_render(smollm2_tmpl, NULL, conv, 2, false,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi!<|im_end|>\n");
    /* An override to chatml on a llama3 template has no default to take. */
    expect_render(llama3_tmpl, "chatml", user, 1, false, "<|im_start|>user\nHi<|im_end|>\n");
}

static void test_errors(void) {
    char *out = (char *)1;
    const char unknown[] = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
    EXPECT(chat_render(unknown, strlen(unknown), NULL, conv, N_CONV, true, &out) ==
               CLINFER_ERR_UNSUPPORTED,
           "an unknown template is unsupported");
    EXPECT(out == NULL, "no output on failure");
    EXPECT(strstr(clinfer_last_error(), "--chat-template") != NULL,
           "the message suggests --chat-template: %s", clinfer_last_error());
    EXPECT(chat_render(NULL, 0, NULL, conv, N_CONV, true, &out) == CLINFER_ERR_UNSUPPORTED,
           "no template and no name");
    EXPECT(chat_render(NULL, 0, "jinja", conv, N_CONV, true, &out) == CLINFER_ERR_INVALID_ARGUMENT,
           "an unknown name");
    EXPECT(strstr(clinfer_last_error(), "jinja") != NULL, "names the bad name: %s",
           clinfer_last_error());

    const clinfer_chat_message tool[] = {{"user", "x"}, {"tool", "y"}};
    EXPECT(chat_render(NULL, 0, "gemma", tool, 2, true, &out) == CLINFER_ERR_INVALID_ARGUMENT,
           "gemma has no 'tool' role");
    expect_render(NULL, "chatml", tool, 2, false,
                  "<|im_start|>user\nx<|im_end|>\n<|im_start|>tool\ny<|im_end|>\n");
    const clinfer_chat_message late_system[] = {{"user", "x"}, {"system", "y"}};
    EXPECT(chat_render(NULL, 0, "llama2", late_system, 2, true, &out) ==
               CLINFER_ERR_INVALID_ARGUMENT,
           "llama2 needs the system message first");
    const clinfer_chat_message null_content[] = {{"user", NULL}};
    EXPECT(chat_render(NULL, 0, "chatml", null_content, 1, true, &out) ==
               CLINFER_ERR_INVALID_ARGUMENT,
           "NULL content");
    expect_render(NULL, "llama3", NULL, 0, false, "");
}

/* The families tests/test_chat_jinja.py does not compare with a real template (Mistral v3 and
 * v7, Qwen3 without thinking), recognition by the newer families' markers, and their errors. */
static void test_families(void) {
    expect_render(NULL, "mistral-v3", conv, N_CONV, true,
                  "[INST] Hi![/INST] Hello.</s>[INST] You are terse.\n\nCapital of France?[/INST]");
    expect_render(NULL, "mistral-v7", conv, N_CONV, true,
                  "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hi![/INST] Hello.</s>"
                  "[INST] Capital of France?[/INST]");
    /* v7 Tekken without a default system prompt in the template: no system block. */
    expect_render(NULL, "mistral-v7-tek", conv + 1, 1, true, "[INST]Hi![/INST]");
    expect_render(
        NULL, "qwen3-nothink", conv + 1, 1, true,
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect_render(NULL, "llama3.1", conv + 1, 1, false,
                  "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                  "December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");

    const struct {
        const char *tmpl;
        chat_format want;
    } cases[] = {
        {"{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}",
         CHAT_FORMAT_MISTRAL_V3},
        {"{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}",
         CHAT_FORMAT_MISTRAL_V3T},
        {"{{- '[SYSTEM_PROMPT] ' + system_message + '[/SYSTEM_PROMPT]' }}{{ '[/INST]' }}",
         CHAT_FORMAT_MISTRAL_V7},
        {"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{ '[/INST]' }}",
         CHAT_FORMAT_MISTRAL_V7T},
        {"{{'<|im_start|>' + message['role'] + '<|im_sep|>'}}", CHAT_FORMAT_PHI4},
        {"{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}",
         CHAT_FORMAT_PHI4_MINI},
        {"{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}", CHAT_FORMAT_PHI3},
        {"<|im_start|>{%- set ns = namespace(last_query_index=0) %}", CHAT_FORMAT_QWEN3},
        /* QwQ and SmolLM3 have enable_thinking but not Qwen3's handling of past reasoning */
        {"<|im_start|>{%- if enable_thinking is defined %}", CHAT_FORMAT_CHATML},
        {"{{- \"<|start|>assistant<|channel|>final<|message|>\" }}", CHAT_FORMAT_GPT_OSS},
        {"<|start_header_id|>{{- \"Cutting Knowledge Date: December 2023\\n\" }}",
         CHAT_FORMAT_LLAMA31},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chat_format f = (chat_format)-1;
        EXPECT_OK(chat_detect(cases[i].tmpl, strlen(cases[i].tmpl), NULL, &f));
        EXPECT(f == cases[i].want, "family template %zu detected as %s, want %s", i,
               chat_format_name(f), chat_format_name(cases[i].want));
    }

    char *out = (char *)1;
    const clinfer_chat_message twice[] = {{"user", "x"}, {"user", "y"}};
    EXPECT(chat_render(NULL, 0, "mistral-tekken", twice, 2, true, &out) ==
               CLINFER_ERR_INVALID_ARGUMENT,
           "Mistral turns alternate");
    EXPECT(strstr(clinfer_last_error(), "message 1") != NULL, "names the message: %s",
           clinfer_last_error());
    const clinfer_chat_message tagged[] = {{"user", "x"},
                                           {"assistant", "<|channel|>final<|message|>y"}};
    EXPECT(chat_render(NULL, 0, "gpt-oss", tagged, 2, true, &out) == CLINFER_ERR_INVALID_ARGUMENT,
           "gpt-oss answers carry no channel tags");
    EXPECT(out == NULL, "no output on failure");
    const clinfer_chat_message tool[] = {{"user", "x"}, {"tool", "y"}};
    EXPECT(chat_render(NULL, 0, "qwen3", tool, 2, true, &out) == CLINFER_ERR_INVALID_ARGUMENT,
           "tool messages are not rendered");
}

int main(void) {
    test_families();
    test_formats();
    test_trim();
    test_detect();
    test_errors();
    return finish("test_chat");
}
