/* Graph launches (graph_cl.c): a run of decode ops in one launch of cl/graph.cl on CPU devices.
 * cl_graph_run enqueues ops[0 .. *taken) that way, *taken 0 where it takes none (the caller runs
 * ops[0]). */
#ifndef CLINFER_CL_GRAPH_H
#define CLINFER_CL_GRAPH_H

#include "cl_backend.h"

clinfer_status cl_graph_init(cl_backend_ctx *b);
void cl_graph_free(cl_backend_ctx *b);
clinfer_status cl_graph_run(cl_backend_ctx *b, const clinfer_op *ops, size_t n, size_t *taken);
/* Builds the program of the run cl_graph_run would take at the head of ops[0 .. n) (even while
 * graph launches are off), and returns its length; 0: no run there. */
size_t cl_graph_prepare(cl_backend_ctx *b, const clinfer_op *ops, size_t n);
/* Once the queue has finished the launches: CLINFER_ERR_UNSUPPORTED where one stalled (a wait
 * past graph.cl's bound: the device does not run the work-groups at once), whose results are
 * then lost, and graph launches are off for good; else CLINFER_OK. */
clinfer_status cl_graph_check(cl_backend_ctx *b);
/* Turns graph launches on or off for the cl_graph_run calls after it (a decode step's route) and
 * returns true; false, changing nothing, where there is no choice: CLINFER_GRAPH=1 forces them,
 * or there are none (=0, not a CPU device). */
bool cl_graph_route(cl_backend_ctx *b, bool on);

#endif
