/*
 * overlap_group.c - window groups: overlap plans of one context that share
 * their buffers (tpla_*_desc_t.window_group > 0).
 *
 * A plan's buffers are its transport (the peer-visible window, the flags,
 * the lanes) and its local staging. The plans of a layer stack run one
 * after another, so one set, at the largest plan's size, serves them all.
 * Sharing the transport object itself keeps the peer protocol unchanged:
 * calls are numbered per group instead of per plan (the group is one
 * ordered sequence of calls on every rank, as the API requires), so the
 * "ready for seq" announcements and the step flags mean what they meant for
 * one plan, but for one thing: a member's peers may read its window after
 * its call (GEMM+AllReduce's published slice, until they start their next
 * call), and the next member may write there at once, so a call that
 * follows another member's first waits, on every lane, for every peer to
 * announce it. A plan that needs more than the group holds replaces the
 * group's buffers with larger ones for every member; ranks decide that
 * together (their windows may differ in size), so they create the new
 * transport collectively or not at all.
 */
#include "overlap.h"

#include <stdlib.h>
#include <string.h>

struct ovl_group {
  int id;
  int users;
  tpla_overlap_mode_t mode;
  ovl_xport_kind_t xkind;
  tpla_xport_t *xp;
  size_t window_bytes;
  int nflags;
  void *staging;
  size_t staging_bytes;
  uint32_t seq;              /* calls of the group's plans */
  const ovl_plan_t *last;    /* the member whose call last used the buffers (NULL: none since
                                a member joined) */
  bool broken;               /* a call failed after it started: every member is unusable */
  bool in_graph;             /* a member's call was captured (ovl_plan_t.bt_in_graph) */
  bool listed;               /* in the context's list: since its first member's creation */
  struct {                   /* larger buffers made for the plan being created (`by`): the
                                group's once its creation succeeds (ovl_group_commit) */
    const ovl_plan_t *by;
    tpla_xport_t *xp;
    void *staging;
    size_t staging_bytes, window_bytes;
    int nflags;
  } grown;
  struct ovl_group *next;
};

static const char *xkind_name(ovl_xport_kind_t k) {
  return k == OVL_XPORT_PEER       ? "the PEER transport"
         : k == OVL_XPORT_SENDRECV ? "the SENDRECV transport"
                                   : "an automatic transport";
}

/* What one rank knows of the group, exchanged when a member joins: plans
 * are destroyed rank by rank, so a rank may hold the group and another
 * not, and the buffers every rank creates must agree (kind, flag count). */
typedef struct {
  int32_t grow;   /* needs new buffers: no group here, or larger ones */
  int32_t holds;  /* holds the group */
  int32_t xkind;  /* its transport's kind (if it holds it) */
  int32_t nflags; /* flags the group or the new plan needs, the larger */
  int32_t in_graph; /* a call of the group's plans was captured (its graph uses the buffers) */
} join_view_t;

/* The view every rank acts on: grows if any rank must; the kind of the
 * ranks that hold the group (they must agree), else the plan's; the most
 * flags any rank needs. Every rank reaches the same verdict. */
static tpla_status_t agree_view(tpla_ctx_t ctx, int id, const char *fn, join_view_t *v) {
  join_view_t all[TPLA_MAX_RANKS]; /* 16 KiB, not allocated: every rank takes part */
  tpla_status_t st = tpla_plan_exchange(ctx, fn, all, v, sizeof *v);
  int holder = -1;
  for (int r = 0; st == TPLA_SUCCESS && r < ctx->nranks; r++) {
    v->grow |= all[r].grow;
    v->in_graph |= all[r].in_graph;
    v->nflags = all[r].nflags > v->nflags ? all[r].nflags : v->nflags;
    if (!all[r].holds)
      continue;
    if (holder >= 0 && all[r].xkind != all[holder].xkind)
      st = tpla_fail(TPLA_ERROR_INTERNAL, fn, "window_group %d holds %s on rank %d and %s on "
                     "rank %d", id, xkind_name((ovl_xport_kind_t)all[holder].xkind), holder,
                     xkind_name((ovl_xport_kind_t)all[r].xkind), r);
    else if (holder < 0)
      holder = r;
  }
  if (st == TPLA_SUCCESS && holder >= 0)
    v->xkind = all[holder].xkind;
  return st;
}

static void release(tpla_ctx_t ctx, const struct tpla_xport_ops *ops, tpla_xport_t *xp,
                    void *staging) {
  ops->destroy(xp);
  if (staging != NULL)
    ctx->backend->mem_free(ctx, staging);
}

tpla_status_t ovl_group_join(ovl_plan_t *p, int id, const ovl_xport_desc_t *xd,
                             const char *fn) {
  tpla_ctx_t ctx = p->ctx;
  ovl_group_t *g = ctx->ovl_groups;
  while (g != NULL && g->id != id)
    g = g->next;
  /* Groups change only at collective plan creation, but plan destruction is not collective:
   * a group may still hold plans on one rank and none on another. So a mismatch is this
   * rank's verdict, which the agreement below passes on (REMOTE on the others).
   * Otherwise the members' calls may still run here, and peers may still read this rank's
   * window for theirs: the host waits for its lanes, and the agreement returns once every
   * rank's have finished, so the window can be zeroed (the rehearsal) or freed (a larger
   * one). */
  tpla_status_t mine = TPLA_SUCCESS;
  if (g != NULL && g->mode != p->mode)
    mine = tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'desc': window_group %d holds "
                     "%s plans; this plan is %s", id,
                     g->mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP",
                     p->mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP");
  else if (g != NULL && g->mode == TPLA_OVERLAP_OVERLAP && xd->kind != OVL_XPORT_AUTO &&
           xd->kind != g->xkind)
    mine = tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'desc': window_group %d holds "
                     "OVERLAP plans over %s; this plan asks for %s", id, xkind_name(g->xkind),
                     xkind_name(xd->kind));
  else if (g != NULL && g->broken) /* every rank learns it here, not at the first call */
    mine = tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "window_group %d: a call of one of its plans "
                     "failed after it started; destroy the group's plans", id);
  else if (g != NULL)
    mine = p->ops->quiesce(g->xp);
  TPLA_TRY(tpla_plan_agree(ctx, fn, mine, "join its window group"));
  join_view_t view = {g == NULL || xd->window_bytes > g->window_bytes || xd->nflags > g->nflags ||
                          p->staging_bytes > g->staging_bytes,
                      g != NULL, g != NULL ? (int32_t)g->xkind : (int32_t)xd->kind,
                      g != NULL && g->nflags > xd->nflags ? g->nflags : xd->nflags,
                      g != NULL && g->in_graph};
  TPLA_TRY(agree_view(ctx, id, fn, &view)); /* ranks' windows may differ in size */
  if (view.grow && view.in_graph) /* every rank: from the agreed view */
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "argument 'desc': window_group %d would move "
                     "to larger buffers for this plan and free its current ones, which a CUDA "
                     "graph captured from one of its plans still uses; create every member of "
                     "a group before capturing its calls, or use another window_group", id);
  if (view.grow) { /* new buffers on every rank, or none: the old ones stay until all have them */
    ovl_xport_desc_t bigger = *xd;
    size_t staging_bytes = p->staging_bytes;
    if (p->mode == TPLA_OVERLAP_OVERLAP) { /* as every rank: a holder's kind, the most flags */
      bigger.kind = (ovl_xport_kind_t)view.xkind;
      bigger.nflags = view.nflags;
    }
    if (g != NULL) {
      bigger.window_bytes = g->window_bytes > xd->window_bytes ? g->window_bytes
                                                                : xd->window_bytes;
      staging_bytes = g->staging_bytes > staging_bytes ? g->staging_bytes : staging_bytes;
    }
    void *staging = NULL;
    ovl_group_t *fresh = g == NULL ? calloc(1, sizeof *fresh) : NULL;
    tpla_status_t st = g == NULL && fresh == NULL
                           ? tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory")
                           : ctx->backend->mem_alloc(ctx, staging_bytes, &staging);
    st = tpla_plan_agree(ctx, fn, st, "allocate its window group's staging");
    tpla_xport_t *xp = NULL;
    if (st == TPLA_SUCCESS)
      st = p->ops->create(ctx, &bigger, &xp); /* collective, one verdict */
    if (st != TPLA_SUCCESS) {
      if (staging != NULL)
        ctx->backend->mem_free(ctx, staging);
      free(fresh);
      return st;
    }
    if (g == NULL) {
      g = fresh;
      g->id = id;
      g->mode = p->mode;
    }
    g->grown.by = p;
    g->grown.xp = xp;
    g->grown.staging = staging;
    g->grown.staging_bytes = staging_bytes;
    g->grown.window_bytes = bigger.window_bytes;
    g->grown.nflags = bigger.nflags;
    p->xp = xp; /* the members keep the group's buffers until the commit */
    p->staging = staging;
    p->seq = 0; /* fresh flags on every rank, whatever calls this rank's group counted */
  } else {
    p->xp = g->xp;
    p->staging = g->staging;
    p->seq = g->seq;
    g->last = NULL; /* the rehearsal that follows zeroes the window: every member's next
                       call starts afresh, and fenced */
  }
  p->group = g;
  p->group_joined = false;
  return TPLA_SUCCESS;
}

void ovl_group_commit(ovl_plan_t *p) {
  ovl_group_t *g = p->group;
  tpla_ctx_t ctx = p->ctx;
  if (g->grown.by == p) {
    if (g->xp != NULL)
      release(ctx, p->ops, g->xp, g->staging);
    g->xp = g->grown.xp;
    g->xkind = p->ops->kind(g->xp);
    g->staging = g->grown.staging;
    g->staging_bytes = g->grown.staging_bytes;
    g->window_bytes = g->grown.window_bytes;
    g->nflags = g->grown.nflags;
    g->seq = 0;
    g->last = NULL; /* every member's next call starts afresh on the new buffers */
    memset(&g->grown, 0, sizeof g->grown);
  }
  if (!g->listed) {
    g->next = ctx->ovl_groups;
    ctx->ovl_groups = g;
    g->listed = true;
  }
  g->users++;
  p->group_joined = true;
}

void ovl_group_leave(ovl_plan_t *p) {
  ovl_group_t *g = p->group;
  p->group = NULL;
  p->xp = NULL;
  p->staging = NULL;
  if (g != NULL && !p->group_joined) { /* its creation failed: the group as it was */
    if (g->grown.by == p) {
      release(p->ctx, p->ops, g->grown.xp, g->grown.staging);
      memset(&g->grown, 0, sizeof g->grown);
    }
    if (!g->listed)
      free(g);
    return;
  }
  if (g == NULL || --g->users > 0) {
    if (g != NULL && g->last == p)
      g->last = NULL;
    return;
  }
  ovl_group_t **at = &p->ctx->ovl_groups;
  while (*at != g)
    at = &(*at)->next;
  *at = g->next;
  release(p->ctx, p->ops, g->xp, g->staging);
  free(g);
}

tpla_status_t ovl_group_enter(ovl_plan_t *p, const char *fn) {
  ovl_group_t *g = p->group;
  if (g == NULL)
    return TPLA_SUCCESS;
  if (g->broken)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "a call of another plan of window_group %d "
                     "failed after it started; destroy the group's plans", g->id);
  p->xp = g->xp; /* a later member may have replaced the buffers with larger ones */
  p->staging = g->staging;
  p->seq = g->seq;
  if (g->last != p) { /* another member wrote the window and the staging */
    p->has_gathered = false;
    p->bt_of.b_version = 0;
    /* and peers may still read what it published (GEMM+AllReduce's slice) */
    p->fence_peers = g->xkind == OVL_XPORT_PEER;
  }
  g->last = p;
  return TPLA_SUCCESS;
}

void ovl_group_exit(ovl_plan_t *p, bool failed) {
  ovl_group_t *g = p->group;
  if (g == NULL)
    return;
  g->seq = p->seq;
  g->broken |= failed;
}

bool ovl_group_holds(const ovl_plan_t *p) { return p->group == NULL || p->group->last == p; }

void ovl_group_mark_graph(ovl_plan_t *p) {
  if (p->group != NULL)
    p->group->in_graph = true;
  p->bt_in_graph = true;
}

bool ovl_group_in_graph(const ovl_plan_t *p) {
  return p->bt_in_graph || (p->group != NULL && p->group->in_graph);
}

tpla_xport_t *ovl_group_xport(const ovl_plan_t *p) {
  return p->group != NULL ? p->group->xp : p->xp;
}

void ovl_plan_memory(const ovl_plan_t *p, tpla_matrix_t *window, tpla_matrix_t *staging) {
  const ovl_group_t *g = p->group;
  tpla_xport_t *xp = ovl_group_xport(p);
  size_t wb = g != NULL ? g->window_bytes : p->window_bytes;
  size_t sb = g != NULL ? g->staging_bytes : p->staging_bytes;
  void *w = xp != NULL && wb > 0 ? p->ops->window(xp) : NULL;
  void *s = g != NULL ? g->staging : p->staging;
  *window = (tpla_matrix_t){w, w != NULL, (int64_t)wb, (int64_t)(wb > 0 ? wb : 1), TPLA_UINT8};
  *staging = (tpla_matrix_t){s, s != NULL, (int64_t)sb, (int64_t)(sb > 0 ? sb : 1), TPLA_UINT8};
}

size_t ovl_group_bytes(const ovl_plan_t *p) {
  const ovl_group_t *g = p->group;
  return g->staging_bytes + p->ops->bytes(g->xp);
}
