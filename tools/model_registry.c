/* See model_registry.h. The table's text is tools/models.txt, which CMake writes into
 * cli_models_table; tools/fetch_model.sh reads the same file. */
#include "model_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char cli_models_table[];

/* Copies the next whitespace-separated field of *s (or, with rest, the rest of the line) into
 * out; false when the line has none. */
static bool field(const char **s, bool rest, char *out, size_t size) {
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = rest ? strcspn(p, "\n") : strcspn(p, " \t\n");
    while (rest && n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
        n--;
    snprintf(out, size, "%.*s", (int)n, p);
    *s = p + n;
    return n > 0;
}

bool cli_registry_at(size_t index, cli_registry_model *out) {
    for (const char *line = cli_models_table; *line;) {
        const char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        char skip[16];
        const char *s = line;
        /* NAME FILE SHA256 SOURCES DESCRIPTION... (the last three are fetch_model.sh's) */
        if (*line != '#' && field(&s, false, out->name, sizeof out->name) && index-- == 0) {
            field(&s, false, out->file, sizeof out->file);
            field(&s, false, skip, sizeof skip);
            field(&s, false, skip, sizeof skip);
            field(&s, true, out->description, sizeof out->description);
            return true;
        }
        line = next;
    }
    return false;
}

bool cli_registry_find(const char *name, bool by_file, cli_registry_model *out) {
    for (size_t i = 0; cli_registry_at(i, out); i++)
        if (!strcmp(name, by_file ? out->file : out->name)) return true;
    return false;
}

void cli_registry_names(char *buf, size_t size) {
    cli_registry_model m;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; used < size && cli_registry_at(i, &m); i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", m.name);
        used += n > 0 ? (size_t)n : 0;
    }
}

bool cli_models_dir(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, size, "%s/clinfer/models", xdg);
    else if (home && *home)
        snprintf(buf, size, "%s/.cache/clinfer/models", home);
    else
        return false;
    return true;
}
