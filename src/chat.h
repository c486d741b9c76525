/* Chat templates rendered in C, without a Jinja engine: the format is recognised from
 * distinctive markers in the model's tokenizer.chat_template (or named explicitly) and each
 * format's documented layout is written out directly. */
#ifndef CLINFER_CHAT_H
#define CLINFER_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "clinfer.h"

typedef enum {
    CHAT_FORMAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2-Instruct, Qwen2) */
    CHAT_FORMAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_FORMAT_LLAMA2, /* [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    CHAT_FORMAT_GEMMA,  /* <start_of_turn>user\n...<end_of_turn>\n */
} chat_format;

/* The format for name ("chatml", "llama3", "llama2", "gemma") if given, else the one the
 * template (tmpl_len bytes, not NUL-terminated; may be NULL) is written for.
 * CLINFER_ERR_INVALID_ARGUMENT for an unknown name, CLINFER_ERR_UNSUPPORTED when the template
 * is absent or not recognised. */
clinfer_status chat_detect(const char *tmpl, size_t tmpl_len, const char *name,
                           chat_format *format);

/* "chatml", "llama3", "llama2" or "gemma". */
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

#endif
