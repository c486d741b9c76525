/* Chat templates: recognise the format by markers that only it uses, then write that format's
 * layout out in C. Each writer follows the reference template of its family:
 *   ChatML  (SmolLM2, Qwen2)  '<|im_start|>' + role + '\n' + content + '<|im_end|>\n'
 *   Llama-3                  '<|start_header_id|>' + role + '<|end_header_id|>\n\n'
 *                             + content|trim + '<|eot_id|>'
 *   Llama-2                  '[INST] ' + (<<SYS>> block) + content.strip() + ' [/INST]',
 *                             assistant ' ' + content.strip() + ' </s>', later turns open '<s>'
 *   Gemma                    '<start_of_turn>' + (user|model) + '\n' + content|trim
 *                             + '<end_of_turn>\n'; a system prompt is prepended to the first
 *                             user turn, as Gemma has no system role (Gemma 2's own
 *                             template refuses a system message).
 * Llama 3.1-3.3, Phi-3/3.5, Phi-4(-mini) and Mistral are written in chat_formats.c, Qwen3 and
 * gpt-oss in chat_reasoning.c; tests/test_chat_jinja.py compares them with the real templates. */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "chat_text.h"
#include "error.h"
#include "model.h"
#include "names.h"

/* In the order they are tried: a family's template is recognised by all of its markers (a
 * string only that family's templates contain; "" stands for none) and none of its
 * exclusions, so the more specific variants come before the general ones. */
static const struct {
    const char *name;
    chat_format format;
    const char *marker, *marker2, *unless;
} formats[] = {
    {"gpt-oss", CHAT_FORMAT_GPT_OSS, "<|start|>", "<|channel|>", NULL},
    {"phi4", CHAT_FORMAT_PHI4, "<|im_sep|>", "", NULL},
    {"qwen3", CHAT_FORMAT_QWEN3, "<|im_start|>", "last_query_index", NULL},
    {"qwen3-nothink", CHAT_FORMAT_QWEN3_NOTHINK, NULL, NULL, NULL}, /* by name only */
    {"chatml", CHAT_FORMAT_CHATML, "<|im_start|>", "", NULL},
    {"llama3.1", CHAT_FORMAT_LLAMA31, "<|start_header_id|>", "Cutting Knowledge Date", NULL},
    {"llama3", CHAT_FORMAT_LLAMA3, "<|start_header_id|>", "", NULL},
    {"phi4-mini", CHAT_FORMAT_PHI4_MINI, "'<|' + message['role'] + '|>'", "<|end|>", NULL},
    {"phi3", CHAT_FORMAT_PHI3, "<|assistant|>", "<|end|>", NULL},
    {"gemma", CHAT_FORMAT_GEMMA, "<start_of_turn>", "", NULL},
    {"mistral-v7", CHAT_FORMAT_MISTRAL_V7, "[SYSTEM_PROMPT] ", "[/INST]", NULL},
    {"mistral-v7-tek", CHAT_FORMAT_MISTRAL_V7T, "[SYSTEM_PROMPT]", "[/INST]", NULL},
    {"mistral-v3", CHAT_FORMAT_MISTRAL_V3, "[AVAILABLE_TOOLS]", "\"[INST] \"", NULL},
    {"mistral-tekken", CHAT_FORMAT_MISTRAL_V3T, "[AVAILABLE_TOOLS]", "[/INST]", "[INST] "},
    {"llama2", CHAT_FORMAT_LLAMA2, "[INST]", "", NULL},
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

const char *chat_format_name(chat_format format) {
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].format == format) return formats[i].name;
    return "unknown";
}

const char *chat_format_name_at(size_t index) {
    return index < N_FORMATS ? formats[index].name : NULL;
}

clinfer_status chat_detect(const char *tmpl, size_t tmpl_len, const char *name,
                           chat_format *format) {
    char names[256];
    names_list(chat_format_name_at, names, sizeof names);
    if (name && *name) {
        for (size_t i = 0; i < N_FORMATS; i++)
            if (!strcmp(name, formats[i].name)) {
                *format = formats[i].format;
                return CLINFER_OK;
            }
        const char *closest = names_closest(chat_format_name_at, name, strlen(name));
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                        "chat: unknown template name '%s' (known: %s)%s%s", name, names,
                        closest ? "; closest: " : "", closest ? closest : "");
    }
    if (!tmpl)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "chat: the model has no tokenizer.chat_template; name one with "
                        "--chat-template (%s)",
                        names);
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].marker && chat_find(tmpl, tmpl_len, formats[i].marker) &&
            chat_find(tmpl, tmpl_len, formats[i].marker2) &&
            !(formats[i].unless && chat_find(tmpl, tmpl_len, formats[i].unless))) {
            *format = formats[i].format;
            return CLINFER_OK;
        }
    return err_fail(CLINFER_ERR_UNSUPPORTED,
                    "chat: the model's chat template (%zu bytes) is not one of the known "
                    "formats; name one with --chat-template (%s)",
                    tmpl_len, names);
}

/* The literal default system prompt of a ChatML template, written there as
 * '<|im_start|>system\n<text><|im_end|>' (with a real newline or a Jinja "\n" escape). An
 * occurrence whose text holds template syntax (quotes, braces, escapes) is an expression such
 * as messages[0]['content'], not a literal, and is skipped. */
static bool chatml_default_system(const char *tmpl, size_t len, const char **text,
                                  size_t *text_len) {
    if (!tmpl) return false;
    static const char *openers[] = {"<|im_start|>system\n", "<|im_start|>system\\n"};
    for (size_t o = 0; o < 2; o++) {
        const char *p = tmpl, *end = tmpl + len;
        while (p && (p = chat_find(p, (size_t)(end - p), openers[o]))) {
            const char *start = p + strlen(openers[o]);
            const char *stop = chat_find(start, (size_t)(end - start), "<|im_end|>");
            if (!stop) break;
            size_t n = (size_t)(stop - start);
            bool literal = n > 0;
            for (size_t i = 0; i < n && literal; i++)
                literal = !strchr("'\"{}\\", start[i]);
            if (literal) {
                *text = start;
                *text_len = n;
                return true;
            }
            p = start;
        }
    }
    return false;
}

static clinfer_status check_role(const char *role, chat_format f, size_t i) {
    if (f == CHAT_FORMAT_CHATML || f == CHAT_FORMAT_LLAMA3 || f == CHAT_FORMAT_LLAMA31)
        return CLINFER_OK; /* these formats write any role name into the header */
    if (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant"))
        return CLINFER_OK;
    if (f == CHAT_FORMAT_GPT_OSS && !strcmp(role, "developer")) return CLINFER_OK;
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                    "chat: message %zu has role '%s'; this template knows only system, "
                    "user and assistant",
                    i, role);
}

/* ChatML and Llama-3 write every turn as open + role + sep + content + close, the generation
 * prompt as open + "assistant" + sep. */
typedef struct {
    const char *open, *sep, *close;
    bool trim; /* content|trim */
} turn_markers;

static const turn_markers chatml_turns = {"<|im_start|>", "\n", "<|im_end|>\n", false};
static const turn_markers llama3_turns = {"<|start_header_id|>", "<|end_header_id|>\n\n",
                                          "<|eot_id|>", true};

static void turn_head(strbuf *b, const turn_markers *t, const char *role) {
    sb_puts(b, t->open);
    sb_puts(b, role);
    sb_puts(b, t->sep);
}

static void render_turns(strbuf *b, const turn_markers *t, const clinfer_chat_message *m, size_t n,
                         bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        turn_head(b, t, m[i].role);
        if (t->trim)
            sb_trimmed(b, m[i].content);
        else
            sb_puts(b, m[i].content);
        sb_puts(b, t->close);
    }
    if (add_assistant) turn_head(b, t, "assistant");
}

static void render_chatml(strbuf *b, const char *tmpl, size_t tmpl_len,
                          const clinfer_chat_message *m, size_t n, bool add_assistant) {
    const char *sys;
    size_t sys_len;
    if ((n == 0 || strcmp(m[0].role, "system")) &&
        chatml_default_system(tmpl, tmpl_len, &sys, &sys_len)) {
        turn_head(b, &chatml_turns, "system");
        sb_append(b, sys, sys_len);
        sb_puts(b, chatml_turns.close);
    }
    render_turns(b, &chatml_turns, m, n, add_assistant);
}

/* Llama-2 and Gemma fold the system prompt into the first user turn: only message 0 may be one. */
static clinfer_status system_not_first(const char *format, size_t i) {
    return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                    "chat: %s template: the system message is message %zu; it must be the first",
                    format, i);
}

/* Opens a Llama-2 [INST] turn, with the system prompt's <<SYS>> block when one is pending. */
static void llama2_open_turn(strbuf *b, bool first_turn, const char **system) {
    sb_puts(b, first_turn ? "[INST] " : "<s>[INST] ");
    if (*system) {
        sb_puts(b, "<<SYS>>\n");
        sb_trimmed(b, *system);
        sb_puts(b, "\n<</SYS>>\n\n");
        *system = NULL;
    }
}

/* Llama-2 has no generation prompt: the model answers right after ' [/INST]'. A system
 * message is folded into the next user turn; later turns re-open the sequence with '<s>'. */
static clinfer_status render_llama2(strbuf *b, const clinfer_chat_message *m, size_t n) {
    const char *system = NULL;
    bool first_turn = true;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            if (i != 0) return system_not_first("llama2", i);
            system = m[i].content;
        } else if (!strcmp(m[i].role, "user")) {
            llama2_open_turn(b, first_turn, &system);
            sb_trimmed(b, m[i].content);
            sb_puts(b, " [/INST]");
        } else {
            sb_puts(b, " ");
            sb_trimmed(b, m[i].content);
            sb_puts(b, " </s>");
        }
        first_turn = first_turn && i == 0 && system;
    }
    if (system) { /* a system prompt with no user turn after it still reaches the model */
        llama2_open_turn(b, first_turn, &system);
        sb_puts(b, " [/INST]");
    }
    return CLINFER_OK;
}

static clinfer_status render_gemma(strbuf *b, const clinfer_chat_message *m, size_t n,
                                   bool add_assistant) {
    const char *system = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            if (i != 0) return system_not_first("gemma", i);
            system = m[i].content;
            continue;
        }
        bool user = !strcmp(m[i].role, "user");
        sb_puts(b, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (user && system) {
            sb_trimmed(b, system);
            sb_puts(b, "\n\n");
            system = NULL;
        }
        sb_trimmed(b, m[i].content);
        sb_puts(b, "<end_of_turn>\n");
    }
    if (system) { /* a system prompt with no user turn after it becomes that turn */
        sb_puts(b, "<start_of_turn>user\n");
        sb_trimmed(b, system);
        sb_puts(b, "<end_of_turn>\n");
    }
    if (add_assistant) sb_puts(b, "<start_of_turn>model\n");
    return CLINFER_OK;
}

clinfer_status chat_render(const char *tmpl, size_t tmpl_len, const char *name,
                           const clinfer_chat_message *messages, size_t n, bool add_assistant,
                           char **out) {
    clinfer_status st = CLINFER_OK;
    strbuf b = {0};
    chat_format f;
    if (!out || (n > 0 && !messages))
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "chat: NULL %s", out ? "messages" : "out");
    *out = NULL;
    CHECK(chat_detect(tmpl, tmpl_len, name, &f));
    for (size_t i = 0; i < n; i++) {
        if (!messages[i].role || !messages[i].content) {
            st = err_fail(CLINFER_ERR_INVALID_ARGUMENT, "chat: message %zu has a NULL %s", i,
                          messages[i].role ? "content" : "role");
            goto cleanup;
        }
        CHECK(check_role(messages[i].role, f, i));
    }
    sb_puts(&b, ""); /* an empty conversation still renders to a valid string */
    switch (f) {
    case CHAT_FORMAT_CHATML:
        render_chatml(&b, tmpl, tmpl_len, messages, n, add_assistant);
        break;
    case CHAT_FORMAT_LLAMA3:
        render_turns(&b, &llama3_turns, messages, n, add_assistant);
        break;
    case CHAT_FORMAT_LLAMA2:
        CHECK(render_llama2(&b, messages, n));
        break;
    case CHAT_FORMAT_GEMMA:
        CHECK(render_gemma(&b, messages, n, add_assistant));
        break;
    case CHAT_FORMAT_LLAMA31:
        chat_render_llama31(&b, tmpl, tmpl_len, messages, n, add_assistant);
        break;
    case CHAT_FORMAT_PHI3:
    case CHAT_FORMAT_PHI4:
    case CHAT_FORMAT_PHI4_MINI:
        chat_render_phi(&b, f, messages, n, add_assistant);
        break;
    case CHAT_FORMAT_MISTRAL_V3:
    case CHAT_FORMAT_MISTRAL_V3T:
    case CHAT_FORMAT_MISTRAL_V7:
    case CHAT_FORMAT_MISTRAL_V7T:
        CHECK(chat_render_mistral(&b, f, tmpl, tmpl_len, messages, n));
        break;
    case CHAT_FORMAT_QWEN3:
    case CHAT_FORMAT_QWEN3_NOTHINK:
        chat_render_qwen3(&b, messages, n, add_assistant, f == CHAT_FORMAT_QWEN3);
        break;
    case CHAT_FORMAT_GPT_OSS:
        CHECK(chat_render_gpt_oss(&b, messages, n, add_assistant));
        break;
    }
    if (b.failed) {
        st = err_fail(CLINFER_ERR_OUT_OF_MEMORY, "chat: no memory for a %zu-byte rendering", b.len);
        goto cleanup;
    }
    *out = b.s;
    b.s = NULL;
cleanup:
    free(b.s);
    return st;
}

clinfer_status clinfer_chat_apply_template(const clinfer_model *model, const char *template_name,
                                           const clinfer_chat_message *messages, size_t n,
                                           bool add_assistant, char **out) {
    gguf_str tmpl = {NULL, 0};
    if (!model) return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "chat_apply_template: NULL model");
    /* An absent or non-string template is not an error yet: template_name may stand in. */
    if (gguf_find_kv(model->gguf, "tokenizer.chat_template") &&
        gguf_get_str(model->gguf, "tokenizer.chat_template", &tmpl) != CLINFER_OK)
        tmpl = (gguf_str){NULL, 0};
    /* a file without a template chats in its architecture's format, if it has one */
    if (!tmpl.ptr && (!template_name || !*template_name) && model->hp.arch)
        template_name = model->hp.arch->chat_format;
    return chat_render(tmpl.ptr, (size_t)tmpl.len, template_name, messages, n, add_assistant, out);
}

void clinfer_free(void *p) {
    free(p);
}
