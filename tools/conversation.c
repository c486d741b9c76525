/* See conversation.h. */
#include "conversation.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"

bool conversation_add(conversation *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        clinfer_chat_message *m = realloc(c->m, cap * sizeof *m);
        if (!m) return false;
        c->m = m;
        c->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy) return false;
    c->m[c->n++] = (clinfer_chat_message){role, copy};
    return true;
}

void conversation_truncate(conversation *c, size_t keep) {
    while (c->n > keep)
        free((char *)c->m[--c->n].content);
}

size_t conversation_base(const conversation *c) {
    return c->n > 0 && !strcmp(c->m[0].role, "system");
}

void conversation_free(conversation *c) {
    conversation_truncate(c, 0);
    free(c->m);
    *c = (conversation){0};
}

static cJSON *to_json(const conversation *c) {
    cJSON *root = cJSON_CreateObject();
    size_t base = conversation_base(c);
    bool ok = root && (base ? cJSON_AddStringToObject(root, "system", c->m[0].content)
                            : cJSON_AddNullToObject(root, "system"));
    cJSON *list = ok ? cJSON_AddArrayToObject(root, "messages") : NULL;
    for (size_t i = base; list && i < c->n; i++) {
        cJSON *msg = cJSON_CreateObject();
        if (!msg || !cJSON_AddItemToArray(list, msg) ||
            !cJSON_AddStringToObject(msg, "role", c->m[i].role) ||
            !cJSON_AddStringToObject(msg, "content", c->m[i].content))
            list = NULL;
    }
    if (!list) cJSON_Delete(root);
    return list ? root : NULL;
}

int conversation_save(const conversation *c, const char *path) {
    cJSON *root = to_json(c);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return cli_error("/save: out of memory");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = f && fclose(f) == 0 && ok && rename(tmp, path) == 0;
    int err = errno;
    free(text);
    if (ok) return 0;
    if (f) remove(tmp);
    return cli_error("/save: cannot write '%s': %s", path, strerror(err ? err : EIO));
}

/* The role as the literal conversation keeps; NULL for any other. */
static const char *turn_role(const char *role) {
    return !strcmp(role, "user") ? "user" : !strcmp(role, "assistant") ? "assistant" : NULL;
}

/* Fills *out from the parsed file; 0, or 1 with the error printed. */
static int from_json(const cJSON *root, const char *path, conversation *out) {
    if (!cJSON_IsObject(root))
        return cli_error("/load: '%s' is not a JSON object with \"system\" and \"messages\"", path);
    const cJSON *system = cJSON_GetObjectItemCaseSensitive(root, "system");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (system && !cJSON_IsNull(system) && !cJSON_IsString(system))
        return cli_error("/load: '%s': \"system\" is not a string or null", path);
    if (!cJSON_IsArray(list))
        return cli_error("/load: '%s': \"messages\" is missing or not an array", path);
    if (cJSON_IsString(system) && !conversation_add(out, "system", system->valuestring))
        return cli_error("/load: out of memory");
    int i = 0;
    for (const cJSON *msg = list->child; msg; msg = msg->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        const char *r = cJSON_IsString(role) ? turn_role(role->valuestring) : NULL;
        if (!r)
            return cli_error("/load: '%s': messages[%d] has no \"role\" \"user\" or "
                             "\"assistant\"",
                             path, i);
        if (!cJSON_IsString(content))
            return cli_error("/load: '%s': messages[%d] has no string \"content\"", path, i);
        if (!conversation_add(out, r, content->valuestring))
            return cli_error("/load: out of memory");
    }
    return 0;
}

int conversation_load(const char *path, conversation *out) {
    size_t len;
    char *text = cli_read_file("/load", path, &len);
    if (!text) return 1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = root ? from_json(root, path, out)
                  : cli_error("/load: '%s' is not valid JSON (near byte %td)", path,
                              cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : (ptrdiff_t)0);
    cJSON_Delete(root);
    free(text);
    if (rc) conversation_truncate(out, 0);
    return rc;
}
