/* Chat formats of the reasoning families, laid out as their reference templates write a
 * conversation of system, user and assistant messages (tool calls are not rendered):
 *   Qwen3    ChatML turns. An answer written as '<think>reasoning</think>answer' keeps its
 *            reasoning only after the last user message, as
 *            '<think>\n' + reasoning + '\n</think>\n\n' + answer (the final answer always
 *            so, with an empty block when it has none); earlier answers lose it. Thinking is on
 *            (the template's enable_thinking default); "qwen3-nothink" opens the generation
 *            prompt with an empty '<think>\n\n</think>\n\n', as enable_thinking=false does.
 *   gpt-oss  harmony: '<|start|>system<|message|>' + the template's model identity, knowledge
 *            cutoff, today's date (UTC), 'Reasoning: medium' and the channel list + '<|end|>',
 *            a system (or developer) message as the developer's '# Instructions', then
 *            '<|start|>user<|message|>' + content + '<|end|>' and answers in the final
 *            channel: '<|start|>assistant<|channel|>final<|message|>' + content + '<|end|>'
 *            ('<|return|>' closes a last answer when no generation prompt follows). */
#include <string.h>

#include "chat.h"
#include "error.h"

/* s[0..n) without the newlines at its start (lstrip) and/or end (rstrip). */
static void strip_newlines(const char **s, size_t *n, bool left, bool right) {
    while (left && *n > 0 && **s == '\n') {
        (*s)++;
        (*n)--;
    }
    while (right && *n > 0 && (*s)[*n - 1] == '\n')
        (*n)--;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *needle) {
    const char *last = NULL;
    for (const char *p = s; (p = chat_find(p, n - (size_t)(p - s), needle)); p++)
        last = p;
    return last;
}

static bool is_tool_response(const char *s) {
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    size_t n = strlen(s);
    return n >= sizeof open - 1 && !memcmp(s, open, sizeof open - 1) && n >= sizeof close - 1 &&
           !memcmp(s + n - (sizeof close - 1), close, sizeof close - 1);
}

static void qwen3_answer(strbuf *b, const char *content, bool keep_reasoning, bool last) {
    const char *answer = content, *reasoning = "";
    size_t answer_n = strlen(content), reasoning_n = 0;
    const char *first_close = chat_find(content, answer_n, "</think>");
    if (first_close) {
        const char *last_close = find_last(content, answer_n, "</think>");
        answer = last_close + strlen("</think>");
        answer_n = strlen(answer);
        strip_newlines(&answer, &answer_n, true, false);
        reasoning = content;
        reasoning_n = (size_t)(first_close - content);
        strip_newlines(&reasoning, &reasoning_n, false, true);
        const char *open = find_last(reasoning, reasoning_n, "<think>");
        if (open) {
            reasoning_n -= (size_t)(open + strlen("<think>") - reasoning);
            reasoning = open + strlen("<think>");
        }
        strip_newlines(&reasoning, &reasoning_n, true, false);
    }
    sb_puts(b, "<|im_start|>assistant\n");
    if (keep_reasoning && (last || reasoning_n > 0)) {
        strip_newlines(&reasoning, &reasoning_n, true, true);
        sb_puts(b, "<think>\n");
        sb_append(b, reasoning, reasoning_n);
        sb_puts(b, "\n</think>\n\n");
        strip_newlines(&answer, &answer_n, true, false);
    }
    sb_append(b, answer, answer_n);
    sb_puts(b, "<|im_end|>\n");
}

void chat_render_qwen3(strbuf *b, const clinfer_chat_message *m, size_t n, bool add_assistant,
                       bool thinking) {
    size_t last_query = n > 0 ? n - 1 : 0;
    for (size_t i = n; i-- > 0;)
        if (!strcmp(m[i].role, "user") && !is_tool_response(m[i].content)) {
            last_query = i;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "assistant")) {
            qwen3_answer(b, m[i].content, i > last_query, i == n - 1);
            continue;
        }
        sb_puts(b, "<|im_start|>");
        sb_puts(b, m[i].role);
        sb_puts(b, "\n");
        sb_puts(b, m[i].content);
        sb_puts(b, "<|im_end|>\n");
    }
    if (add_assistant) {
        sb_puts(b, "<|im_start|>assistant\n");
        if (!thinking) sb_puts(b, "<think>\n\n</think>\n\n");
    }
}

clinfer_status chat_render_gpt_oss(strbuf *b, const clinfer_chat_message *m, size_t n,
                                   bool add_assistant) {
    char today[32];
    chat_today("%Y-%m-%d", today, sizeof today);
    sb_puts(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
               "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
    sb_puts(b, today);
    sb_puts(b, "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel "
               "must be included for every message.<|end|>");
    size_t first = 0;
    if (n > 0 && (!strcmp(m[0].role, "system") || !strcmp(m[0].role, "developer"))) {
        first = 1;
        if (m[0].content[0]) {
            sb_puts(b, "<|start|>developer<|message|># Instructions\n\n");
            sb_puts(b, m[0].content);
            sb_puts(b, "\n\n<|end|>");
        }
    }
    for (size_t i = first; i < n; i++) {
        if (!strcmp(m[i].role, "user")) {
            sb_puts(b, "<|start|>user<|message|>");
            sb_puts(b, m[i].content);
            sb_puts(b, "<|end|>");
        } else if (!strcmp(m[i].role, "assistant")) {
            if (strstr(m[i].content, "<|channel|>analysis<|message|>") ||
                strstr(m[i].content, "<|channel|>final<|message|>"))
                return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                                "chat: gpt-oss template: message %zu carries <|channel|> "
                                "tags; pass the final answer's text alone",
                                i);
            sb_puts(b, "<|start|>assistant<|channel|>final<|message|>");
            sb_puts(b, m[i].content);
            sb_puts(b, i == n - 1 && !add_assistant ? "<|return|>" : "<|end|>");
        } /* a later system or developer message: the template writes nothing for it */
    }
    if (add_assistant) sb_puts(b, "<|start|>assistant");
    return CLINFER_OK;
}
