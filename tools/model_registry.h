/* The models `clinfer pull` fetches, from tools/models.txt (built into the binary; the first
 * is the default model), and the cache folder they are stored in. */
#ifndef CLINFER_MODEL_REGISTRY_H
#define CLINFER_MODEL_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char name[64], file[256], description[256];
} cli_registry_model;

/* The index-th model of the table (from 0: the default model); false past the last. */
bool cli_registry_at(size_t index, cli_registry_model *out);
/* The model named name, or whose file is named so with by_file; false for none. */
bool cli_registry_find(const char *name, bool by_file, cli_registry_model *out);
/* The names, ", "-separated (truncated to size). */
void cli_registry_names(char *buf, size_t size);

/* $XDG_CACHE_HOME/clinfer/models, else ~/.cache/clinfer/models (where tools/fetch_model.sh
 * stores); false when neither variable is set. */
bool cli_models_dir(char *buf, size_t size);

#endif
