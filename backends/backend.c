/* Functions shared by every backend. */
#include <stdlib.h>

#include "backend.h"

void backend_free(clinfer_backend *backend) {
    if (!backend) return;
    if (backend->i && backend->i->destroy) backend->i->destroy(backend->ctx);
    free(backend);
}
