/* A chat's messages (an optional system message first, then user and assistant turns), and
 * their JSON file for chat's /save and /load:
 *   {"system": "..." or null, "messages": [{"role": "user", "content": "..."}, ...]} */
#ifndef CLINFER_CONVERSATION_H
#define CLINFER_CONVERSATION_H

#include <stdbool.h>
#include <stddef.h>

#include "clinfer.h"

typedef struct {
    clinfer_chat_message *m; /* roles are string literals; contents are owned (strdup) */
    size_t n, cap;
} conversation;

/* role: "system", "user" or "assistant"; false when out of memory. */
bool conversation_add(conversation *c, const char *role, const char *content);
/* Drops messages from index keep on. */
void conversation_truncate(conversation *c, size_t keep);
/* 1 when the first message is a system message, else 0: the messages a restart keeps. */
size_t conversation_base(const conversation *c);
void conversation_free(conversation *c);

/* Writes the conversation to path (through path.tmp, renamed when complete); 0, or 1 with the
 * error printed. */
int conversation_save(const conversation *c, const char *path);
/* Reads a conversation that conversation_save wrote into *out (empty before); 0, or 1 with the
 * error printed, naming what in the file is wrong, and *out left empty. */
int conversation_load(const char *path, conversation *out);

#endif
