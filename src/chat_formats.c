/* Chat formats of Llama 3.1-3.3, Phi-3/3.5, Phi-4, Phi-4-mini and Mistral (v3, v7 and their
 * Tekken variants), each laid out as its family's reference template writes a conversation of
 * system, user and assistant messages (tool calls are not rendered):
 *   Llama 3.1-3.3  a system header always: "Cutting Knowledge Date: <cutoff>\nToday Date:
 *                  <date>\n\n" + system|trim, then Llama-3 turns. The cutoff is the
 *                  template's literal (December 2023 when absent); the date is today's (UTC,
 *                  as "02 Dec 2026") where the template asks strftime_now for it (3.2), else
 *                  the template's default date_string (3.1, 3.3: 26 Jul 2024, also when absent).
 *   Phi-3/3.5      '<|' + role + '|>\n' + content + '<|end|>\n'; no generation prompt: eos.
 *                  An empty system message is left out.
 *   Phi-4          '<|im_start|>' + role + '<|im_sep|>' + content + '<|im_end|>'
 *   Phi-4-mini     '<|' + role + '|>' + content + '<|end|>'; no generation prompt: eos.
 *   Mistral v3     '[INST] ' + content + '[/INST]', ' ' + answer|trim + '</s>'; the system
 *                  prompt goes into the last user turn, if the conversation ends with one.
 *   Mistral Tekken '[INST]' + content + '[/INST]', answer + '</s>' (Nemo, v3 Tekken).
 *   Mistral v7     '[SYSTEM_PROMPT] ' + system + '[/SYSTEM_PROMPT]' where it stands, then v3's
 *                  turns; v7 Tekken writes them without the spaces and, with no system
 *                  message, the template's default system prompt (today's date in it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "error.h"

/* Appends the template's literal that follows key up to the first of stops (a Jinja
 * escape, a quote, a newline), or fallback when the template has no such literal. */
static void sb_literal_after(strbuf *b, const char *tmpl, size_t len, const char *key,
                             const char *fallback) {
    const char *p = chat_find(tmpl, len, key);
    if (!p) {
        sb_puts(b, fallback);
        return;
    }
    p += strlen(key);
    size_t n = 0;
    while (p + n < tmpl + len && !strchr("\\\"'\n{}", p[n]))
        n++;
    if (n == 0 || n > 64)
        sb_puts(b, fallback);
    else
        sb_append(b, p, n);
}

static void llama3_head(strbuf *b, const char *role) {
    sb_puts(b, "<|start_header_id|>");
    sb_puts(b, role);
    sb_puts(b, "<|end_header_id|>\n\n");
}

void chat_render_llama31(strbuf *b, const char *tmpl, size_t tmpl_len,
                         const clinfer_chat_message *m, size_t n, bool add_assistant) {
    size_t first = n > 0 && !strcmp(m[0].role, "system") ? 1 : 0;
    llama3_head(b, "system");
    sb_puts(b, "Cutting Knowledge Date: ");
    sb_literal_after(b, tmpl, tmpl_len, "Cutting Knowledge Date: ", "December 2023");
    sb_puts(b, "\nToday Date: ");
    if (chat_find(tmpl, tmpl_len, "strftime_now(\"%d %b %Y\")")) { /* Llama 3.2 */
        char today[32];
        chat_today("%d %b %Y", today, sizeof today);
        sb_puts(b, today);
    } else {
        sb_literal_after(b, tmpl, tmpl_len, "set date_string = \"", "26 Jul 2024");
    }
    sb_puts(b, "\n\n");
    if (first) sb_trimmed(b, m[0].content);
    sb_puts(b, "<|eot_id|>");
    for (size_t i = first; i < n; i++) {
        llama3_head(b, m[i].role);
        sb_trimmed(b, m[i].content);
        sb_puts(b, "<|eot_id|>");
    }
    if (add_assistant) llama3_head(b, "assistant");
}

void chat_render_phi(strbuf *b, chat_format f, const clinfer_chat_message *m, size_t n,
                     bool add_assistant) {
    bool phi4 = f == CHAT_FORMAT_PHI4, mini = f == CHAT_FORMAT_PHI4_MINI;
    const char *open = phi4 ? "<|im_start|>" : "<|";
    const char *sep = phi4 ? "<|im_sep|>" : mini ? "|>" : "|>\n";
    const char *close = phi4 ? "<|im_end|>" : mini ? "<|end|>" : "<|end|>\n";
    for (size_t i = 0; i < n; i++) {
        if (f == CHAT_FORMAT_PHI3 && !strcmp(m[i].role, "system") && !m[i].content[0]) continue;
        sb_puts(b, open);
        sb_puts(b, m[i].role);
        sb_puts(b, sep);
        sb_puts(b, m[i].content);
        sb_puts(b, close);
    }
    if (add_assistant) {
        sb_puts(b, open);
        sb_puts(b, "assistant");
        sb_puts(b, sep);
    } else if (!phi4) {
        sb_puts(b, "<|endoftext|>"); /* the Phi-3 and Phi-4-mini end-of-sequence token */
    }
}

/* Appends a Jinja string literal's text (the quote at *p opens it), escapes resolved;
 * returns the position after the closing quote, or NULL when the literal does not close. */
static const char *jinja_string(strbuf *b, const char *p, const char *end) {
    char q = *p++;
    for (; p < end && *p != q; p++) {
        if (*p != '\\') {
            sb_append(b, p, 1);
            continue;
        }
        if (++p == end) return NULL;
        sb_append(b, *p == 'n' ? "\n" : *p == 't' ? "\t" : p, 1);
    }
    return p < end ? p + 1 : NULL;
}

static const char *skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t'))
        p++;
    return p;
}

/* The default system prompt of a Mistral v7 Tekken template, written there as
 * set default_system_message = "..." + today + "..." with today strftime_now("%Y-%m-%d").
 * Appends nothing and returns false when the template has none. */
static bool mistral_default_system(strbuf *b, const char *tmpl, size_t len) {
    static const char key[] = "set default_system_message =";
    const char *p = chat_find(tmpl, len, key), *end = tmpl + len;
    if (!p) return false;
    strbuf text = {0};
    char today[32];
    chat_today("%Y-%m-%d", today, sizeof today);
    for (p = skip_space(p + strlen(key), end);;) {
        if (p < end && (*p == '"' || *p == '\'')) {
            p = jinja_string(&text, p, end);
        } else if (p && (size_t)(end - p) >= 5 && !memcmp(p, "today", 5)) {
            sb_puts(&text, today);
            p += 5;
        } else {
            p = NULL;
        }
        if (p) p = skip_space(p, end);
        if (!p || p == end || *p != '+') break;
        p = skip_space(p + 1, end);
    }
    bool ok = p && p + 1 < end && p[0] == '%' && p[1] == '}' && !text.failed && text.len;
    if (ok) sb_append(b, text.s, text.len);
    free(text.s);
    return ok;
}

static clinfer_status mistral_roles(const clinfer_chat_message *m, size_t n, bool v7) {
    size_t turn = 0;
    for (size_t i = 0; i < n; i++) {
        bool system = !strcmp(m[i].role, "system");
        if (system && (v7 || i == 0)) continue;
        if (system || (!strcmp(m[i].role, "user") != (turn % 2 == 0)))
            return err_fail(CLINFER_ERR_INVALID_ARGUMENT,
                            "chat: Mistral template: message %zu is %s; after an optional "
                            "system message, turns alternate user, assistant, user, ...",
                            i, m[i].role);
        turn++;
    }
    return CLINFER_OK;
}

static void mistral_system(strbuf *b, const char *space, const char *text) {
    sb_puts(b, "[SYSTEM_PROMPT]");
    sb_puts(b, space);
    sb_puts(b, text);
    sb_puts(b, "[/SYSTEM_PROMPT]");
}

clinfer_status chat_render_mistral(strbuf *b, chat_format f, const char *tmpl, size_t tmpl_len,
                                   const clinfer_chat_message *m, size_t n) {
    bool v7 = f == CHAT_FORMAT_MISTRAL_V7 || f == CHAT_FORMAT_MISTRAL_V7T;
    bool tekken = f == CHAT_FORMAT_MISTRAL_V3T || f == CHAT_FORMAT_MISTRAL_V7T;
    const char *space = tekken ? "" : " ";
    clinfer_status st = mistral_roles(m, n, v7);
    if (st != CLINFER_OK) return st;
    const char *system = n > 0 && !strcmp(m[0].role, "system") ? m[0].content : NULL;
    size_t first = system ? 1 : 0;
    if (system && v7) {
        mistral_system(b, space, system);
    } else if (v7 && tekken) {
        size_t mark = b->len;
        sb_puts(b, "[SYSTEM_PROMPT]");
        if (mistral_default_system(b, tmpl, tmpl_len)) {
            sb_puts(b, "[/SYSTEM_PROMPT]");
        } else if (!b->failed) { /* no default prompt in the template: no system block */
            b->len = mark;
            b->s[mark] = '\0';
        }
    }
    for (size_t i = first; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            mistral_system(b, space, m[i].content);
        } else if (!strcmp(m[i].role, "user")) {
            sb_puts(b, "[INST]");
            sb_puts(b, space);
            if (system && !v7 && i == n - 1) { /* v3 folds the system prompt in here */
                sb_puts(b, system);
                sb_puts(b, "\n\n");
            }
            sb_puts(b, m[i].content);
            sb_puts(b, "[/INST]");
        } else {
            sb_puts(b, space);
            if (tekken)
                sb_puts(b, m[i].content);
            else
                sb_trimmed(b, m[i].content);
            sb_puts(b, "</s>");
        }
    }
    return CLINFER_OK;
}
