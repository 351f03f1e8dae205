/*
 * ns_share.c - workspace groups: Newton-Schulz plans of one context that
 * share one workspace (tpla_ns_desc_t.workspace_group > 0).
 *
 * A plan's workspace (the normalized shard, the update temp, the Gram-sized
 * matrices, the all-reduce staging) holds nothing from one call to the
 * next, and the plans of a layer stack run one after another, so one
 * workspace at the largest size a member has needed serves them all. The
 * group knows its members so that one needing more can move all of them to
 * a larger workspace. Joining takes two steps, so that a creation that
 * fails on some rank after its workspace is allocated leaves the group as
 * it was: ns_share_reserve binds the new plan (to the group's workspace, or
 * to a larger one of its own), ns_share_commit makes it a member once the
 * creation has succeeded. A pulled plan's windows are not shared: the peer
 * maps them (ns_pull.c).
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

tpla_status_t ns_share_reserve(tpla_ns_plan_t p, int id, const char *fn) {
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
  bool grows = fresh || p->layout.bytes > g->bytes;
  /* The members' calls in flight use the workspace: a larger one replaces
   * it at the commit, and a pulled plan's rehearsal (ns_pull_rehearse)
   * writes the one it is bound to. */
  tpla_status_t st = TPLA_SUCCESS;
  if (!fresh && (grows || p->pulls_planned) && ctx->backend->quiesce != NULL)
    st = ctx->backend->quiesce(ctx);
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
  void *ws = NULL;
  if (st == TPLA_SUCCESS && grows)
    st = ctx->backend->mem_alloc(ctx, p->layout.bytes, &ws);
  if (st != TPLA_SUCCESS) {
    if (fresh) {
      free(g->members);
      free(g);
    }
    return st;
  }
  p->share = g;
  p->share_joined = false;
  p->share_grown = ws;
  p->owns_ws = false;
  ns_plan_bind(p, grows ? ws : g->ws);
  return TPLA_SUCCESS;
}

void ns_share_commit(tpla_ns_plan_t p) {
  struct ns_share *g = p->share;
  tpla_ctx_t ctx = p->ctx;
  if (g->count == 0) { /* new: a listed group always has a member */
    g->next = ctx->ns_shares;
    ctx->ns_shares = g;
  }
  if (p->share_grown != NULL) {
    if (g->ws != NULL)
      ctx->backend->mem_free(ctx, g->ws);
    g->ws = p->share_grown;
    g->bytes = p->layout.bytes;
    p->share_grown = NULL;
    for (int i = 0; i < g->count; i++)
      ns_plan_bind(g->members[i], g->ws);
  }
  g->members[g->count++] = p;
  p->share_joined = true;
}

void ns_share_leave(tpla_ns_plan_t p) {
  struct ns_share *g = p->share;
  if (g == NULL)
    return;
  p->share = NULL;
  if (!p->share_joined) { /* reserved only: the group is as it was */
    if (p->share_grown != NULL)
      p->ctx->backend->mem_free(p->ctx, p->share_grown);
    p->share_grown = NULL;
    if (g->count == 0) {
      free(g->members);
      free(g);
    }
    return;
  }
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
