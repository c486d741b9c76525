/* Chat templates rendered in C, without a Jinja engine: the format is recognised from
 * distinctive markers in the model's tokenizer.chat_template (or named explicitly) and each
 * format's documented layout is written out directly. */
#ifndef CLINFER_CHAT_H
#define CLINFER_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "chat_text.h"
#include "clinfer.h"

typedef enum {
    CHAT_FORMAT_CHATML,        /* <|im_start|>role\n...<|im_end|>\n (SmolLM2-Instruct, Qwen2) */
    CHAT_FORMAT_LLAMA3,        /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_FORMAT_LLAMA2,        /* [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    CHAT_FORMAT_GEMMA,         /* <start_of_turn>user\n...<end_of_turn>\n (Gemma 2 and 3) */
    CHAT_FORMAT_LLAMA31,       /* Llama 3.1-3.3: llama3 turns after a system header with dates */
    CHAT_FORMAT_PHI3,          /* <|user|>\n...<|end|>\n (Phi-3, Phi-3.5) */
    CHAT_FORMAT_PHI4,          /* <|im_start|>user<|im_sep|>...<|im_end|> (Phi-4) */
    CHAT_FORMAT_PHI4_MINI,     /* <|user|>...<|end|> (Phi-4-mini) */
    CHAT_FORMAT_MISTRAL_V3,    /* [INST] ...[/INST] answer</s> (Mistral 7B v0.3) */
    CHAT_FORMAT_MISTRAL_V3T,   /* [INST]...[/INST]answer</s> (Tekken: Mistral Nemo) */
    CHAT_FORMAT_MISTRAL_V7,    /* [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST] */
    CHAT_FORMAT_MISTRAL_V7T,   /* the same without spaces (Tekken: Mistral Small 3.x) */
    CHAT_FORMAT_QWEN3,         /* ChatML with <think> blocks (Qwen3) */
    CHAT_FORMAT_QWEN3_NOTHINK, /* Qwen3 with enable_thinking false: an empty think block */
    CHAT_FORMAT_GPT_OSS,       /* harmony: <|start|>role<|message|>...<|end|> (gpt-oss) */
} chat_format;

/* The format for name (one of chat_format_name_at's) if given, else the one the
 * template (tmpl_len bytes, not NUL-terminated; may be NULL) is written for.
 * CLINFER_ERR_INVALID_ARGUMENT for an unknown name, CLINFER_ERR_UNSUPPORTED when the template
 * is absent or not recognised. */
clinfer_status chat_detect(const char *tmpl, size_t tmpl_len, const char *name,
                           chat_format *format);

/* The format's name: "chatml", "llama3", "llama3.1", "gpt-oss", ... */
const char *chat_format_name(chat_format format);
/* The index-th format's name (from 0), as --chat-template takes it; NULL past the last. */
const char *chat_format_name_at(size_t index);

/* Renders messages as chat_detect's format. The beginning-of-sequence token is left out: the
 * tokenizer adds it (add_bos). A ChatML template's built-in default system prompt is used when
 * the first message is not a system one, as the template itself would do.
 * *out is allocated with malloc. */
clinfer_status chat_render(const char *tmpl, size_t tmpl_len, const char *name,
                           const clinfer_chat_message *messages, size_t n, bool add_assistant,
                           char **out);

/* ---- the format writers of chat_formats.c and chat_reasoning.c ---- */

/* Llama 3.1-3.3, Phi-3/3.5, Phi-4, Phi-4-mini, Mistral v3/v7 (chat_formats.c); eos is the
 * end-of-sequence token's text the templates write after an answer. */
void chat_render_llama31(strbuf *b, const char *tmpl, size_t tmpl_len,
                         const clinfer_chat_message *m, size_t n, bool add_assistant);
void chat_render_phi(strbuf *b, chat_format f, const clinfer_chat_message *m, size_t n,
                     bool add_assistant);
clinfer_status chat_render_mistral(strbuf *b, chat_format f, const char *tmpl, size_t tmpl_len,
                                   const clinfer_chat_message *m, size_t n);
/* Qwen3 and gpt-oss (chat_reasoning.c). */
void chat_render_qwen3(strbuf *b, const clinfer_chat_message *m, size_t n, bool add_assistant,
                       bool thinking);
clinfer_status chat_render_gpt_oss(strbuf *b, const clinfer_chat_message *m, size_t n,
                                   bool add_assistant);

#endif
