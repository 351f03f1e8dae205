/*
 * ns_share.c - workspace groups: Newton-Schulz plans of one context that
 * share one workspace (tpla_ns_desc_t.workspace_group > 0).
 *
 * A plan's workspace (the normalized shard, the update temp, the Gram-sized
 * matrices, the all-reduce staging) holds nothing from one call to the
 * next, and the plans of a layer stack run one after another, so one
 * workspace at the largest member's size serves them all. The group knows
 * its members so that one needing more can move all of them to a larger
 * workspace. A member joins once the device has finished the calls in
 * flight, which may still use the workspace. A pulled plan's windows are
 * not shared: the peer maps them (ns_pull.c).
 */
#include "ns.h"

#include <stdlib.h>

struct ns_share {
  struct ns_share *next;
  int id;
  void *ws;
  size_t bytes;
  int count, cap;
  tpla_ns_plan_t *members;
};

static tpla_status_t no_memory(const char *fn) {
  return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
}

/* The group's workspace at least `bytes`, its members rebound to a new one. */
static tpla_status_t fit(tpla_ctx_t ctx, struct ns_share *g, size_t bytes) {
  if (g->ws != NULL && bytes <= g->bytes)
    return TPLA_SUCCESS;
  void *ws = NULL;
  tpla_status_t st = ctx->backend->mem_alloc(ctx, bytes, &ws);
  if (st != TPLA_SUCCESS)
    return st;
  if (g->ws != NULL)
    ctx->backend->mem_free(ctx, g->ws);
  g->ws = ws;
  g->bytes = bytes;
  for (int i = 0; i < g->count; i++)
    ns_plan_bind(g->members[i], ws);
  return TPLA_SUCCESS;
}

tpla_status_t ns_share_join(tpla_ns_plan_t p, int id, const char *fn) {
  tpla_ctx_t ctx = p->ctx;
  struct ns_share *g = ctx->ns_shares;
  while (g != NULL && g->id != id)
    g = g->next;
  bool fresh = g == NULL;
  if (fresh) {
    g = calloc(1, sizeof *g);
    if (g == NULL)
      return no_memory(fn);
    g->id = id;
  }
  /* the members' calls may still use the workspace, which this plan's
   * rehearsal (ns_pull_rehearse) writes and a larger one replaces */
  tpla_status_t st = !fresh && ctx->backend->quiesce != NULL ? ctx->backend->quiesce(ctx)
                                                             : TPLA_SUCCESS;
  if (st == TPLA_SUCCESS && g->count == g->cap) {
    int cap = g->cap > 0 ? 2 * g->cap : 4;
    tpla_ns_plan_t *m = realloc(g->members, (size_t)cap * sizeof *m);
    if (m == NULL)
      st = no_memory(fn);
    else {
      g->members = m;
      g->cap = cap;
    }
  }
  if (st == TPLA_SUCCESS)
    st = fit(ctx, g, p->layout.bytes);
  if (st != TPLA_SUCCESS) {
    if (fresh) {
      free(g->members);
      free(g);
    }
    return st;
  }
  if (fresh) {
    g->next = ctx->ns_shares;
    ctx->ns_shares = g;
  }
  g->members[g->count++] = p;
  p->share = g;
  p->owns_ws = false;
  ns_plan_bind(p, g->ws);
  return TPLA_SUCCESS;
}

void ns_share_leave(tpla_ns_plan_t p) {
  struct ns_share *g = p->share;
  if (g == NULL)
    return;
  p->share = NULL;
  for (int i = 0; i < g->count; i++)
    if (g->members[i] == p) {
      g->members[i] = g->members[--g->count];
      break;
    }
  if (g->count > 0)
    return;
  struct ns_share **at = &p->ctx->ns_shares;
  while (*at != g)
    at = &(*at)->next;
  *at = g->next;
  p->ctx->backend->mem_free(p->ctx, g->ws);
  free(g->members);
  free(g);
}

size_t ns_share_bytes(const struct ns_share *g) { return g->bytes; }
