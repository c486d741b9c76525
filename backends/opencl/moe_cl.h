/* The mixture-of-experts ops (moe_cl.c, cl/moe.cl): routing, the expert-indexed matmul (each
 * expert's tokens grouped into one matmul of the matmul family, reading only that expert's rows)
 * and the gated sum. Run one by one: graph launches end at them. */
#ifndef CLINFER_CL_MOE_H
#define CLINFER_CL_MOE_H

#include "cl_backend.h"

clinfer_status cl_moe_init(cl_backend_ctx *b);
void cl_moe_free(cl_backend_ctx *b);
/* MOE_ROUTE, MATMUL_ID, MOE_SUM ops (checked). */
clinfer_status cl_op_moe(cl_backend_ctx *b, const clinfer_op *op);
/* That op (NULL: none) or a host transfer into buf (NULL: none; a buffer freed counts) wrote
 * there: MATMUL_ID reads its ids back again where they may have changed. */
void cl_moe_wrote(cl_backend_ctx *b, const clinfer_buffer *buf, const clinfer_op *op);
/* This backend's limits on a valid MATMUL_ID (the matmuls it runs): CLINFER_OK for other ops. */
clinfer_status cl_moe_limits(const clinfer_op *op);

#endif
