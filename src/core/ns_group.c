/*
 * ns_group.c - a batched plan's matrices that one rank orthogonalizes whole
 * (all of them on one rank, its owned ones past that), iterated together
 * when they share the iteration: strided-batched GEMMs and one launch per
 * copy or mirror for several matrices at once.
 *
 * A small matrix's products leave most of a GPU idle and its step is a
 * dozen launches; a Muon step has many matrices of a few shapes. Matrices
 * with the same shape, dtypes, steps, coefficients and iteration form a
 * group, run `per` members at a time. Each member of a run has a slot (X,
 * the update temp, the Gram buffers), all slots one stride apart, so the
 * engine (ns_iter.c) runs on slot 0 with ctx->ns_batch = {members, stride}
 * and every backend call covers the run. The members are normalized into
 * their slots (each with its own safety and eps) and copied back after the
 * steps by one list operation each (normalize_list, store_list), not one
 * launch per member.
 *
 * `per` fills the GPU and bounds memory: members until one batched Gram has
 * GROUP_WORK multiply-adds, at most GROUP_BYTES of slots, at most
 * TPLA_NS_BATCH_GROUP (environment; 1 turns grouping off). Groups of large
 * matrices (per < 2) are not formed: their matrices run alone, as before.
 * Groups run one after another, so they share one region. On the GPU a
 * matrix's bits depend on its run's size (cuBLASLt's batched algorithm, the
 * sums' grid), so they are reproducible for one batch, not across batches.
 */
#include "ns.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_WORK 17179869184.0 /* 2^34: s^2 l of the run's Gram */
#define GROUP_BYTES ((size_t)512 << 20)
#define GROUP_MAX TPLA_LIST_MAX
#define SUMS_BYTES (TPLA_LIST_MAX * sizeof(double)) /* the members' sums of squares */

typedef struct {
  int first, count, per; /* members[first .. first + count), run per at a time */
  ns_iter_t iter;        /* bound to slot 0 */
  size_t off_x, off_temp, slot_bytes;
} group_t;

struct ns_groups {
  tpla_ctx_t ctx;
  tpla_ns_plan_t *plans;
  int ngroups;
  group_t *groups;
  int *members;   /* matrix indices, grouped */
  int *group_of;  /* per matrix: its group, or -1 */
  size_t bytes;   /* the sums and the largest run's slots */
  double *sums;   /* where they are (ns_groups_bind) */
  void *slots;
};

typedef struct {
  uint64_t hash;
  int index;
} keyed_t;

/* Whether a member's matrix (m x n as stored) is iterated transposed, as
 * its plan alone would: one rank runs LOCAL on the caller's view, oriented by
 * the plan's canonical form (a square column-sharded matrix transposed);
 * an owner of a whole matrix by m > n. Same result either way up to
 * rounding, but a group must give its members' own bits. */
static bool member_transposed(tpla_ns_plan_t p) {
  return p->ctx->nranks == 1 ? p->trans != (p->M > p->N) : p->m > p->n;
}

static uint64_t iteration_hash(tpla_ns_plan_t p) {
  const int64_t shape[2] = {p->m, p->n};
  const int32_t kind[5] = {(int32_t)p->desc.dtype, (int32_t)p->desc.gram_dtype, p->desc.steps,
                           p->whole_gram_iter, member_transposed(p)};
  uint64_t h = ns_hash_bytes(NS_HASH_INIT, shape, sizeof shape);
  h = ns_hash_bytes(h, kind, sizeof kind);
  return ns_hash_bytes(h, p->table, sizeof(float) * 3 * (size_t)p->desc.steps);
}

/* The same iteration: every X step and every coefficient alike. */
static bool same_iteration(tpla_ns_plan_t p, tpla_ns_plan_t q) {
  return p->m == q->m && p->n == q->n && member_transposed(p) == member_transposed(q) &&
         p->desc.dtype == q->desc.dtype &&
         p->desc.gram_dtype == q->desc.gram_dtype && p->desc.steps == q->desc.steps &&
         p->whole_gram_iter == q->whole_gram_iter &&
         memcmp(p->table, q->table, sizeof(float) * 3 * (size_t)p->desc.steps) == 0;
}

static int by_hash(const void *a, const void *b) {
  const keyed_t *x = a, *y = b;
  if (x->hash != y->hash)
    return x->hash < y->hash ? -1 : 1;
  return x->index - y->index;
}

/* The environment's cap on members per run: GROUP_MAX unless it is set
 * to a number (not a number: GROUP_MAX too). */
static int group_cap(void) {
  const char *v = getenv("TPLA_NS_BATCH_GROUP");
  char *end = NULL;
  long n = v != NULL ? strtol(v, &end, 10) : GROUP_MAX;
  if (v != NULL && (end == v || *end != '\0'))
    n = GROUP_MAX;
  return n < 1 ? 1 : n > GROUP_MAX ? GROUP_MAX : (int)n;
}

/* Slot layout and members per run of a group whose first member is p. */
static void shape_group(group_t *g, tpla_ctx_t ctx, tpla_ns_plan_t p, int cap) {
  int64_t s = p->m < p->n ? p->m : p->n, l = p->m < p->n ? p->n : p->m;
  size_t xb = (size_t)(p->m * p->n) * tpla_dtype_size(p->desc.dtype);
  ns_layout_t L = {0};
  ns_iter_setup(&g->iter, ns_machine(ctx), s, l, p->desc.dtype, p->desc.gram_dtype, NS_SUM_NONE,
                p->whole_gram_iter, s * l, &L); /* the temp holds X: ping-pong */
  g->off_x = ns_layout_take(&L, xb);
  g->off_temp = ns_layout_take(&L, xb);
  g->slot_bytes = (L.bytes + NS_ALIGN - 1) / NS_ALIGN * NS_ALIGN;
  double by_work = GROUP_WORK / ((double)s * (double)s * (double)l);
  size_t by_bytes = GROUP_BYTES / g->slot_bytes;
  double per = by_work < (double)by_bytes ? by_work : (double)by_bytes;
  per = per < (double)cap ? per : (double)cap;
  g->per = per < (double)g->count ? (int)per : g->count;
}

void ns_groups_free(ns_groups_t *gs) {
  if (gs == NULL)
    return;
  free(gs->groups);
  free(gs->members);
  free(gs->group_of);
  free(gs);
}

tpla_status_t ns_groups_create(ns_groups_t **out, tpla_ctx_t ctx, tpla_ns_plan_t *plans,
                               const bool *whole, int count, const char *fn) {
  *out = NULL;
  ns_groups_t *gs = calloc(1, sizeof *gs);
  keyed_t *keys = malloc(sizeof *keys * (size_t)count);
  if (gs != NULL) {
    gs->groups = malloc(sizeof *gs->groups * (size_t)count);
    gs->members = malloc(sizeof *gs->members * (size_t)count);
    gs->group_of = malloc(sizeof *gs->group_of * (size_t)count);
  }
  if (gs == NULL || keys == NULL || !gs->groups || !gs->members || !gs->group_of) {
    ns_groups_free(gs);
    free(keys);
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  gs->ctx = ctx;
  gs->plans = plans;
  int n = 0, cap = group_cap(), used = 0;
  for (int i = 0; i < count; i++) {
    gs->group_of[i] = -1;
    if (whole[i] && plans[i]->m > 0 && plans[i]->n > 0)
      keys[n++] = (keyed_t){iteration_hash(plans[i]), i};
  }
  qsort(keys, (size_t)n, sizeof *keys, by_hash);
  /* Runs of equal hashes; inside one, members equal to the run's first
   * (a hash collision leaves the others for a later pass of the loop). */
  for (int a = 0; a < n; a++) {
    if (keys[a].index < 0)
      continue;
    tpla_ns_plan_t lead = plans[keys[a].index];
    group_t *g = &gs->groups[gs->ngroups];
    *g = (group_t){.first = used};
    for (int b = a; b < n && keys[b].hash == keys[a].hash; b++)
      if (keys[b].index >= 0 && same_iteration(lead, plans[keys[b].index])) {
        gs->members[used + g->count++] = keys[b].index;
        keys[b].index = -1;
      }
    if (g->count < 2 || cap < 2)
      continue;
    shape_group(g, ctx, lead, cap);
    if (g->per < 2)
      continue;
    for (int j = 0; j < g->count; j++)
      gs->group_of[gs->members[used + j]] = gs->ngroups;
    size_t run = SUMS_BYTES + (size_t)g->per * g->slot_bytes;
    gs->bytes = run > gs->bytes ? run : gs->bytes;
    used += g->count;
    gs->ngroups++;
  }
  free(keys);
  *out = gs;
  return TPLA_SUCCESS;
}

size_t ns_groups_bytes(const ns_groups_t *gs) { return gs->bytes; }

bool ns_groups_has(const ns_groups_t *gs, int i) { return gs->group_of[i] >= 0; }

void ns_groups_bind(ns_groups_t *gs, void *base) {
  _Static_assert(SUMS_BYTES % NS_ALIGN == 0, "the slots stay aligned");
  gs->sums = base;
  gs->slots = ns_at(base, SUMS_BYTES);
  for (int k = 0; k < gs->ngroups; k++)
    ns_iter_bind(&gs->groups[k].iter, gs->slots, ns_at(gs->slots, gs->groups[k].off_temp));
}

/* Members [j0, j0 + n) of group g: normalize them into their slots,
 * iterate all at once, copy them back to their views. */
static tpla_status_t run_members(ns_groups_t *gs, const group_t *g, int j0, int n,
                                 const tpla_matrix_t *views, void *stream) {
  tpla_ctx_t ctx = gs->ctx;
  tpla_ns_plan_t lead = gs->plans[gs->members[g->first]];
  tpla_dtype_t dt = lead->desc.dtype;
  int steps = lead->desc.steps;
  tpla_matrix_t mine[TPLA_LIST_MAX];
  float safety[TPLA_LIST_MAX], eps[TPLA_LIST_MAX];
  double sigma0 = 0.0; /* the members' safeties may differ */
  for (int j = 0; j < n; j++) {
    tpla_ns_plan_t p = gs->plans[gs->members[g->first + j0 + j]];
    mine[j] = views[gs->members[g->first + j0 + j]];
    safety[j] = p->safety;
    eps[j] = p->eps;
    sigma0 = fmax(sigma0, 1.0 / p->safety);
  }
  const tpla_batch_t run = {n, g->slot_bytes};
  /* into the temp when the steps then end in X */
  ns_where_t start = ns_iter_end(&g->iter, steps, NS_IN_X);
  tpla_matrix_t first = ns_dense(ns_at(gs->slots, start == NS_IN_X ? g->off_x : g->off_temp),
                                 lead->m, lead->n, dt);
  TPLA_TRY(ctx->backend->normalize_list(ctx, first, run, mine, safety, eps, gs->sums, stream));
  ns_opmat_t X = {ns_dense(ns_at(gs->slots, g->off_x), lead->m, lead->n, dt),
                  member_transposed(lead)};
  ctx->ns_batch = run;
  tpla_status_t st = ns_iterate(ctx, &g->iter, X, start, NS_IN_X, lead->table, steps, sigma0,
                                stream);
  ctx->ns_batch = (tpla_batch_t){0};
  TPLA_TRY(st);
  return ctx->backend->store_list(ctx, mine, X.v, run, stream);
}

tpla_status_t ns_groups_run(ns_groups_t *gs, const tpla_matrix_t *views, void *stream) {
  for (int k = 0; k < gs->ngroups; k++) {
    const group_t *g = &gs->groups[k];
    for (int j0 = 0; j0 < g->count; j0 += g->per)
      TPLA_TRY(run_members(gs, g, j0, g->count - j0 < g->per ? g->count - j0 : g->per, views,
                           stream));
  }
  return TPLA_SUCCESS;
}
