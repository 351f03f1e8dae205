/*
 * host_ops.h - building blocks of the algorithms on the host executor that
 * the rest of src/host does not provide: the plan-time exchange
 * (tpla_backend_t.exchange, see internal.h). host_ctx.c puts it in the
 * host backend table.
 */
#ifndef TPLA_HOST_OPS_H
#define TPLA_HOST_OPS_H

#include "internal.h"

/* recv (nranks * bytes) = every rank's `bytes` at send, in rank order: an
 * all-gather of bytes over the group (host memory is the executor's). */
tpla_status_t tpla_host_exchange(tpla_ctx_t ctx, void *recv, const void *send, size_t bytes);

#endif /* TPLA_HOST_OPS_H */
