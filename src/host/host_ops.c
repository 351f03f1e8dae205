/*
 * host_ops.c - the host executor's plan-time exchange: every rank's small
 * record (a plan descriptor's summary) to every rank, blocking. On the host
 * executor plan memory is host memory, so this is the group's all-gather of
 * bytes; it inherits its timeout and broken-group handling (no rank hangs).
 */
#include "host_ops.h"

#include <stdlib.h>

tpla_status_t tpla_host_exchange(tpla_ctx_t ctx, void *recv, const void *send, size_t bytes) {
  size_t counts[TPLA_MAX_RANKS]; /* not allocated: out of memory, a rank still takes part */
  for (int q = 0; q < ctx->nranks; q++)
    counts[q] = bytes;
  return bytes > 0 ? ctx->backend->allgatherv(ctx, recv, send, counts, TPLA_UINT8, NULL)
                   : TPLA_SUCCESS;
}
