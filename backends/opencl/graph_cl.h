/* Graph launches (graph_cl.c): a run of decode ops in one launch of cl/graph.cl on CPU devices.
 * cl_graph_run enqueues ops[0 .. *taken) that way, *taken 0 where it takes none (the caller runs
 * ops[0]). */
#ifndef CLINFER_CL_GRAPH_H
#define CLINFER_CL_GRAPH_H

#include "cl_backend.h"

clinfer_status cl_graph_init(cl_backend_ctx *b);
void cl_graph_free(cl_backend_ctx *b);
clinfer_status cl_graph_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, size_t *taken);
/* The backend interface's graph_route (backend.h): false where CLINFER_GRAPH=1 forces graph
 * launches or they are off (=0, not a CPU device). */
bool cl_graph_route(void *ctx, bool on);

#endif
