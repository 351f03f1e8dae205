/*
 * ctx_fail.c - how a context stops working: tpla_ctx_abort and
 * tpla_ctx_get_async_error, the failure record that every later call
 * reports, and the bracket (tpla_call_begin/end) that public calls which
 * enqueue work go through. The executor does the stopping (backend->abort).
 */
#include "internal.h"

#include <sched.h>
#include <stdio.h>

enum { HEALTHY = 0, RECORDING = 1, FAILED = 2 };

bool tpla_ctx_fail(tpla_ctx_t ctx, tpla_status_t status, const char *fmt, ...) {
  int expected = HEALTHY;
  if (!atomic_compare_exchange_strong(&ctx->failure.state, &expected, RECORDING))
    return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->failure.why, sizeof ctx->failure.why, fmt, ap);
  va_end(ap);
  ctx->failure.status = status;
  atomic_store(&ctx->failure.state, FAILED);
  if (ctx->backend->abort != NULL)
    ctx->backend->abort(ctx);
  return true;
}

tpla_status_t tpla_ctx_check(tpla_ctx_t ctx, const char *fn) {
  int state = atomic_load(&ctx->failure.state);
  if (state == HEALTHY && ctx->backend->poll_failure != NULL) {
    ctx->backend->poll_failure(ctx);
    state = atomic_load(&ctx->failure.state);
  }
  if (state == HEALTHY)
    return TPLA_SUCCESS;
  while (state == RECORDING) { /* a few microseconds: another thread is writing the record */
    sched_yield();
    state = atomic_load(&ctx->failure.state);
  }
  return tpla_fail(ctx->failure.status, fn,
                   "the context (rank %d of %d) has stopped: %s; destroy its plans and the "
                   "context",
                   ctx->rank, ctx->nranks, ctx->failure.why);
}

tpla_status_t tpla_call_begin(tpla_ctx_t ctx, const char *fn, bool on_device, void *stream) {
  TPLA_TRY(tpla_ctx_check(ctx, fn));
  if (ctx->backend->call_begin == NULL)
    return TPLA_SUCCESS;
  return ctx->backend->call_begin(ctx, fn, on_device, stream);
}

void tpla_call_end(tpla_ctx_t ctx, bool on_device, void *stream) {
  if (ctx->backend->call_end != NULL)
    ctx->backend->call_end(ctx, on_device, stream);
}

tpla_status_t tpla_ctx_abort(tpla_ctx_t ctx) {
  tpla_clear_error();
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_ctx_abort", "argument 'ctx' is NULL");
  (void)tpla_ctx_fail(ctx, TPLA_ERROR_ABORTED, "tpla_ctx_abort was called on rank %d", ctx->rank);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ctx_get_async_error(tpla_ctx_t ctx) {
  tpla_clear_error();
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_ctx_get_async_error",
                     "argument 'ctx' is NULL");
  return tpla_ctx_check(ctx, "tpla_ctx_get_async_error");
}
