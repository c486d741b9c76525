/* libFuzzer harness for the chat templates: the input is split at '\n\n' into messages whose
 * first byte picks the role; the conversation is rendered with every named format and with
 * the input itself as the model's template (detected). Renders must succeed or fail cleanly, and a
 * success must contain every message's content for ChatML, which never trims. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"

#define MAX_MESSAGES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *roles[] = {"system", "user", "assistant", "tool", "developer"};
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* contents end at the first NUL, as C strings do */

    clinfer_chat_message m[MAX_MESSAGES];
    size_t n = 0;
    char *p = text;
    while (n < MAX_MESSAGES && *p) {
        char *end = strstr(p, "\n\n");
        if (end) *end = '\0';
        m[n].role = roles[(unsigned char)p[0] % 5];
        m[n].content = p + 1;
        n++;
        if (!end) break;
        p = end + 2;
    }
    bool add_assistant = size > 0 && (data[size - 1] & 1);
    for (size_t i = 0;; i++) { /* every named format, then (name NULL) the detected one */
        const char *name = chat_format_name_at(i);
        char *out = NULL;
        clinfer_status st = chat_render((const char *)data, size, name, m, n, add_assistant, &out);
        if ((st == CLINFER_OK) != (out != NULL)) abort();
        if (st == CLINFER_OK && name && !strcmp(name, "chatml"))
            for (size_t j = 0; j < n; j++)
                if (!strstr(out, m[j].content)) abort();
        free(out);
        if (!name) break;
    }
    free(text);
    return 0;
}
