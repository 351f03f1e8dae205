/*
 * plan_agree.c - the plan-time exchange every collective plan creation goes
 * through, and the agreement on the outcome of a step that can fail on some
 * ranks only (an allocation). A rank that fails must still take part in the
 * exchanges the others make, or they wait for the timeout or run into the
 * next collective alone: so nothing here allocates.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

tpla_status_t tpla_plan_exchange(tpla_ctx_t ctx, const char *fn, void *recv, const void *send,
                                 size_t bytes) {
  if (ctx->backend->exchange == NULL)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the %s executor has no plan-time exchange",
                     ctx->backend->name);
  return ctx->backend->exchange(ctx, recv, send, bytes);
}

tpla_status_t tpla_plan_agree(tpla_ctx_t ctx, const char *fn, tpla_status_t mine,
                              const char *what) {
  char saved[256];
  snprintf(saved, sizeof saved, "%s", tpla_last_error());
  int32_t me = (int32_t)mine, all[TPLA_MAX_RANKS];
  tpla_status_t st = tpla_plan_exchange(ctx, fn, all, &me, sizeof me);
  for (int r = 0; st == TPLA_SUCCESS && r < ctx->nranks; r++)
    if (all[r] != 0 && r != ctx->rank)
      st = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d could not %s (%s)", r, what,
                     tpla_status_string((tpla_status_t)all[r]));
  if (mine == TPLA_SUCCESS)
    return st;
  size_t len = strlen(fn); /* own failure first; its message already names the function */
  const char *text = strncmp(saved, fn, len) == 0 && strncmp(saved + len, ": ", 2) == 0
                         ? saved + len + 2
                         : saved;
  return tpla_fail(mine, fn, "%s", text);
}

tpla_status_t tpla_plan_agree_memory(tpla_ctx_t ctx, const char *fn, bool allocated) {
  return tpla_plan_agree(
      ctx, fn,
      allocated ? TPLA_SUCCESS : tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory"),
      "allocate its plan");
}
