/*
 * ns_batch.c - batched Newton-Schulz: many differently shaped sharded
 * matrices in one call (an optimizer step over all layers).
 *
 * Each matrix gets a prepared plan (the collective agreement runs once per
 * matrix). Then the batch decides, for the matrices left to AUTO, between
 *   distributed: each matrix's own plan in turn (its cost-model algorithm);
 *   owners:      whole matrices assigned to ranks, largest first to the
 *                least loaded rank (balance by the cost model's time), one
 *                all-to-all to move every shard to its matrix's owner, local
 *                Newton-Schulz there, one all-to-all back.
 * Owners win for many small matrices (no per-step collectives, no
 * per-matrix latency); distributed wins for large ones (FLOPs / P).
 * Both phases run one after the other, so they share one workspace.
 * The matrices a rank orthogonalizes whole (every one on one rank, its
 * owned ones on more) that share shape and iteration run together in
 * groups (ns_group.c).
 */
#include "ns.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_ALIGN 16

typedef struct {
  uintptr_t lo, hi;
  int index;
} span_t;

struct tpla_ns_batch_plan {
  tpla_ctx_t ctx;
  int count;
  tpla_ns_plan_t *plans;
  int *owner;       /* per matrix: owner rank, or -1 (its own plan) */
  size_t *send_off; /* per owner-mode matrix: this rank's shard in the send buffer */
  size_t *full_off; /* per matrix owned here: the whole matrix */
  ns_iter_t *iters; /* per matrix owned here */
  size_t *a2a;      /* bytes: send counts, send displs, recv counts, recv displs */
  span_t *spans;    /* execute's overlap check, sorted by start */
  ns_groups_t *groups;
  tpla_matrix_t *whole; /* per grouped matrix: where it is whole during a call */
  size_t off_send, off_stage, off_gram, off_sumsq, off_groups, stage_bytes;
  size_t ws_bytes;
  void *ws;
};

static size_t pad(size_t b) { return (b + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN; }

/* a + b, SIZE_MAX where it would wrap: a batch's sums can, each matrix alone cannot */
static size_t add_bytes(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

/* Bytes of rank q's shard of matrix i. */
static size_t shard_bytes(tpla_ns_plan_t p, int q) {
  return (size_t)(ns_part(p->offs, q) * p->N) * tpla_dtype_size(p->desc.dtype);
}
/* Rank q's shard inside the whole matrix X (m x n, row-major). */
static tpla_matrix_t shard_in(tpla_ns_plan_t p, tpla_matrix_t X, int q) {
  int64_t o = p->offs[q], k = ns_part(p->offs, q);
  return p->trans ? ns_sub(X, 0, p->m, o, k) : ns_sub(X, o, k, 0, p->n);
}
static tpla_matrix_t dense_shard(tpla_ns_plan_t p, void *data, int q) {
  int64_t k = ns_part(p->offs, q);
  return p->trans ? ns_dense(data, p->m, k, p->desc.dtype) : ns_dense(data, k, p->n, p->desc.dtype);
}
typedef struct {
  double cost;
  int index;
} job_t;
static int by_cost_desc(const void *a, const void *b) {
  const job_t *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? 1 : -1;
  return x->index - y->index;
}

/* Assign the matrices with want[i] to owners (others -1); returns the
 * estimated seconds: the most loaded rank plus two all-to-alls. */
static double assign(struct tpla_ns_batch_plan *b, const bool *want, int *owner, job_t *jobs,
                     double *load) {
  int P = b->ctx->nranks, n = 0;
  for (int i = 0; i < b->count; i++) {
    owner[i] = -1;
    if (want[i])
      jobs[n++] = (job_t){b->plans[i]->whole_cost, i};
  }
  if (n == 0)
    return 0.0;
  qsort(jobs, (size_t)n, sizeof *jobs, by_cost_desc);
  for (int q = 0; q < P; q++)
    load[q] = 0.0;
  for (int j = 0; j < n; j++) {
    int best = 0;
    for (int q = 1; q < P; q++)
      best = load[q] < load[best] ? q : best;
    owner[jobs[j].index] = best;
    load[best] += jobs[j].cost;
  }
  double most = 0.0, moved = 0.0;
  for (int q = 0; q < P; q++) {
    most = load[q] > most ? load[q] : most;
    double out = 0.0, in = 0.0;
    for (int i = 0; i < b->count; i++) {
      if (owner[i] < 0)
        continue;
      tpla_ns_plan_t p = b->plans[i];
      if (owner[i] != q)
        out += (double)shard_bytes(p, q);
      else
        in += (double)(p->M * p->N) * (double)tpla_dtype_size(p->desc.dtype) - shard_bytes(p, q);
    }
    moved = out > moved ? out : moved;
    moved = in > moved ? in : moved;
  }
  const ns_machine_t *mach = ns_machine(b->ctx);
  return most + 2.0 * (mach->latency + moved / mach->alltoall_bw);
}

static tpla_status_t decide(struct tpla_ns_batch_plan *b) {
  int P = b->ctx->nranks, C = b->count;
  bool *forced = calloc((size_t)C, sizeof *forced), *all = calloc((size_t)C, sizeof *all);
  int *alt = malloc(sizeof(int) * (size_t)C);
  job_t *jobs = malloc(sizeof(job_t) * (size_t)C);
  double *load = malloc(sizeof(double) * (size_t)P);
  tpla_status_t st = TPLA_SUCCESS;
  if (!forced || !all || !alt || !jobs || !load) {
    st = tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "tpla_ns_batch_plan_create", "out of host memory");
  } else if (P > 1) {
    double dist = 0.0;
    for (int i = 0; i < C; i++) {
      tpla_ns_algorithm_t want = b->plans[i]->desc.algorithm;
      forced[i] = want == TPLA_NS_ALGO_LOCAL;
      all[i] = forced[i] || want == TPLA_NS_ALGO_AUTO;
      if (want == TPLA_NS_ALGO_AUTO)
        dist += b->plans[i]->cost;
    }
    double keep = dist + assign(b, forced, b->owner, jobs, load);
    double move = assign(b, all, alt, jobs, load);
    if (move < keep) /* else b->owner keeps the forced assignment */
      memcpy(b->owner, alt, sizeof(int) * (size_t)C);
  } else {
    for (int i = 0; i < C; i++)
      b->owner[i] = -1;
  }
  free(forced);
  free(all);
  free(alt);
  free(jobs);
  free(load);
  return st;
}

/* The matrices this rank orthogonalizes whole: its owned ones, or every
 * one on a single rank. */
static tpla_status_t make_groups(struct tpla_ns_batch_plan *b, const char *fn) {
  bool *whole = malloc(sizeof *whole * (size_t)b->count);
  if (whole == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  for (int i = 0; i < b->count; i++)
    whole[i] = b->ctx->nranks == 1 || b->owner[i] == b->ctx->rank;
  tpla_status_t st = ns_groups_create(&b->groups, b->ctx, b->plans, whole, b->count, fn);
  free(whole);
  return st;
}

/* Workspace of the owner phase, from offset 0 of the shared base. */
static void layout_owners(struct tpla_ns_batch_plan *b, ns_layout_t *L) {
  tpla_ctx_t ctx = b->ctx;
  int P = ctx->nranks, me = ctx->rank, C = b->count;
  size_t *sc = b->a2a, *sd = sc + P, *rc = sd + P, *rd = rc + P;
  size_t off = 0;
  for (int q = 0; q < P; q++) { /* send: segments by destination */
    sd[q] = off;
    for (int i = 0; i < C; i++)
      if (b->owner[i] == q) {
        b->send_off[i] = off;
        off = add_bytes(off, pad(shard_bytes(b->plans[i], me)));
      }
    sc[q] = off - sd[q];
  }
  b->off_send = ns_layout_take(L, off);
  off = 0;
  for (int q = 0; q < P; q++) { /* stage: segments by source, my matrices */
    rd[q] = off;
    for (int i = 0; i < C; i++)
      if (b->owner[i] == me)
        off = add_bytes(off, pad(shard_bytes(b->plans[i], q)));
    rc[q] = off - rd[q];
  }
  b->stage_bytes = off;
  b->off_stage = ns_layout_take(L, off);
  size_t full = 0, gram = 0;
  const ns_machine_t *mach = ns_machine(ctx);
  for (int i = 0; i < C; i++) {
    if (b->owner[i] != me)
      continue;
    tpla_ns_plan_t p = b->plans[i];
    size_t e = tpla_dtype_size(p->desc.dtype);
    b->full_off[i] = full;
    full = add_bytes(full, pad((size_t)(p->M * p->N) * e));
    if (ns_groups_has(b->groups, i))
      continue; /* iterated in its group's slots */
    int64_t s = p->M < p->N ? p->M : p->N, l = p->M < p->N ? p->N : p->M;
    ns_layout_t g = {0};
    ns_iter_setup(&b->iters[i], mach, s, l, p->desc.dtype, p->desc.gram_dtype, NS_SUM_NONE,
                  p->whole_gram_iter, (int64_t)(b->stage_bytes / e), &g);
    gram = g.bytes > gram ? g.bytes : gram;
  }
  size_t base = ns_layout_take(L, full);
  for (int i = 0; i < C; i++)
    if (b->owner[i] == me)
      b->full_off[i] += base;
  b->off_gram = ns_layout_take(L, gram);
  b->off_sumsq = ns_layout_take(L, sizeof(double));
}

static void batch_free(struct tpla_ns_batch_plan *b) {
  if (b == NULL)
    return;
  for (int i = 0; b->plans && i < b->count; i++)
    ns_plan_free(b->plans[i]);
  if (b->ws)
    b->ctx->backend->mem_free(b->ctx, b->ws);
  free(b->plans);
  free(b->owner);
  free(b->send_off);
  free(b->full_off);
  free(b->iters);
  free(b->a2a);
  free(b->spans);
  ns_groups_free(b->groups);
  free(b->whole);
  free(b);
}

/* The count and pointers, agreed like a descriptor. */
static tpla_status_t agree_header(tpla_ctx_t ctx, const char *fn, tpla_ns_batch_plan_t *plan,
                                  int count, const tpla_ns_desc_t *descs) {
  typedef struct {
    int32_t status, count;
    char message[120];
  } header_t;
  header_t mine = {0, count, ""}, *all = calloc((size_t)ctx->nranks, sizeof *all);
  if (plan == NULL)
    snprintf(mine.message, sizeof mine.message, "argument 'plan' is NULL");
  else if (count < 1 || count > NS_MAX_BATCH)
    snprintf(mine.message, sizeof mine.message, "argument 'count': %d is not in [1, %d]", count,
             NS_MAX_BATCH);
  else if (descs == NULL)
    snprintf(mine.message, sizeof mine.message, "argument 'descs' is NULL");
  mine.status = mine.message[0] ? TPLA_ERROR_INVALID_ARGUMENT : 0;
  tpla_status_t st = tpla_plan_agree_memory(ctx, fn, all != NULL);
  if (st == TPLA_SUCCESS)
    st = tpla_plan_exchange(ctx, fn, all, &mine, sizeof mine);
  if (st == TPLA_SUCCESS && mine.status)
    st = tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "%s", mine.message);
  for (int r = 0; st == TPLA_SUCCESS && r < ctx->nranks; r++) {
    if (all[r].status)
      st = tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d rejected its arguments: %s", r,
                     all[r].message);
    else if (all[r].count != all[0].count)
      st = tpla_fail(TPLA_ERROR_REMOTE, fn, "ranks disagree: rank %d has count = %d, rank 0 "
                     "has %d", r, all[r].count, all[0].count);
  }
  free(all);
  return st;
}

/* The collective part of tpla_ns_batch_plan_create. */
static tpla_status_t create_batch(tpla_ns_batch_plan_t *plan, tpla_ctx_t ctx, int count,
                                  const tpla_ns_desc_t *descs, const char *fn) {
  TPLA_TRY(agree_header(ctx, fn, plan, count, descs));
  *plan = NULL;
  int P = ctx->nranks;
  struct tpla_ns_batch_plan *b = calloc(1, sizeof *b);
  if (b == NULL)
    return tpla_plan_agree_memory(ctx, fn, false);
  b->ctx = ctx;
  b->count = count;
  b->plans = calloc((size_t)count, sizeof *b->plans);
  b->owner = calloc((size_t)count, sizeof *b->owner);
  b->send_off = calloc((size_t)count, sizeof *b->send_off);
  b->full_off = calloc((size_t)count, sizeof *b->full_off);
  b->iters = calloc((size_t)count, sizeof *b->iters);
  b->a2a = calloc(4 * (size_t)P, sizeof *b->a2a);
  b->spans = calloc((size_t)count, sizeof *b->spans);
  b->whole = calloc((size_t)count, sizeof *b->whole);
  tpla_status_t st = TPLA_SUCCESS;
  if (!b->plans || !b->owner || !b->send_off || !b->full_off || !b->iters || !b->a2a ||
      !b->spans || !b->whole)
    st = tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  /* Every rank takes part in every exchange: each step's failures are
   * agreed (a matrix's inside ns_plan_prepare) before the next exchange. */
  st = tpla_plan_agree(ctx, fn, st, "allocate its batch tables");
  char arg[48];
  for (int i = 0; st == TPLA_SUCCESS && i < count; i++) {
    snprintf(arg, sizeof arg, "argument 'descs[%d]'", i);
    st = ns_plan_prepare(&b->plans[i], ctx, &descs[i], fn, arg, true, false);
  }
  bool prepared = st == TPLA_SUCCESS; /* else every rank failed at the same matrix */
  if (st == TPLA_SUCCESS)
    st = decide(b);
  if (st == TPLA_SUCCESS)
    st = make_groups(b, fn);
  const char *what = "assign its matrices"; /* decide, make_groups: host memory */
  if (st == TPLA_SUCCESS) {
    what = "allocate its workspace";
    ns_layout_t owners = {0};
    layout_owners(b, &owners);
    b->off_groups = ns_layout_take(&owners, ns_groups_bytes(b->groups));
    b->ws_bytes = owners.bytes;
    for (int i = 0; i < count; i++)
      if (b->owner[i] < 0 && b->plans[i]->layout.bytes > b->ws_bytes)
        b->ws_bytes = b->plans[i]->layout.bytes;
    st = b->ws_bytes == SIZE_MAX
             ? tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "the batch's workspace on rank %d "
                         "exceeds the address space", ctx->rank)
             : ctx->backend->mem_alloc(ctx, b->ws_bytes, &b->ws);
  }
  if (prepared)
    st = tpla_plan_agree(ctx, fn, st, what);
  if (st != TPLA_SUCCESS) {
    batch_free(b);
    return st;
  }
  for (int i = 0; i < count; i++) {
    if (b->owner[i] < 0)
      ns_plan_bind(b->plans[i], b->ws);
    else if (b->owner[i] == ctx->rank)
      ns_iter_bind(&b->iters[i], ns_at(b->ws, b->off_gram), ns_at(b->ws, b->off_stage));
    if (b->owner[i] == ctx->rank && ns_groups_has(b->groups, i)) /* where it is unpacked */
      b->whole[i] = ns_dense(ns_at(b->ws, b->full_off[i]), b->plans[i]->m, b->plans[i]->n,
                             b->plans[i]->desc.dtype);
  }
  ns_groups_bind(b->groups, ns_at(b->ws, b->off_groups));
  *plan = b;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_batch_plan_create(tpla_ns_batch_plan_t *plan, tpla_ctx_t ctx, int count,
                                        const tpla_ns_desc_t *descs) {
  static const char fn[] = "tpla_ns_batch_plan_create";
  tpla_clear_error();
  if (plan != NULL)
    *plan = NULL; /* on every error, a NULL ctx and a failed context included */
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");
  TPLA_TRY(tpla_call_begin(ctx, fn, false, NULL));
  tpla_status_t st = create_batch(plan, ctx, count, descs, fn);
  tpla_call_end(ctx, false, NULL);
  return st;
}

tpla_status_t tpla_ns_batch_plan_destroy(tpla_ns_batch_plan_t plan) {
  tpla_clear_error();
  batch_free(plan);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_batch_plan_workspace_bytes(tpla_ns_batch_plan_t plan, size_t *bytes) {
  static const char fn[] = "tpla_ns_batch_plan_workspace_bytes";
  tpla_clear_error();
  if (plan == NULL || bytes == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     plan == NULL ? "plan" : "bytes");
  *bytes = plan->ws_bytes;
  return TPLA_SUCCESS;
}

/* The arguments of a per-matrix query: plan, index and the output `what`. */
static tpla_status_t check_query(const char *fn, tpla_ns_batch_plan_t plan, int index,
                                 const void *out, const char *what) {
  tpla_clear_error();
  if (plan == NULL || out == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL",
                     plan == NULL ? "plan" : what);
  if (index < 0 || index >= plan->count)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'index': %d is not in [0, %d)",
                     index, plan->count);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_batch_plan_owner(tpla_ns_batch_plan_t plan, int index, int *owner) {
  TPLA_TRY(check_query("tpla_ns_batch_plan_owner", plan, index, owner, "owner"));
  *owner = plan->owner[index];
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_batch_plan_iteration(tpla_ns_batch_plan_t plan, int index,
                                           tpla_ns_iteration_t *iteration) {
  TPLA_TRY(check_query("tpla_ns_batch_plan_iteration", plan, index, iteration, "iteration"));
  const tpla_ns_plan_t p = plan->plans[index];
  bool gram = plan->owner[index] >= 0 ? p->whole_gram_iter : p->gram_iter;
  *iteration = gram ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
  return TPLA_SUCCESS;
}

/* Move every owner-mode shard to its owner, orthogonalize the owned
 * matrices whole, move the results back. */
static tpla_status_t run_owners(struct tpla_ns_batch_plan *b, const tpla_matrix_t *xs,
                                void *stream) {
  tpla_ctx_t ctx = b->ctx;
  int P = ctx->nranks, me = ctx->rank, C = b->count;
  const size_t *sc = b->a2a, *sd = sc + P, *rc = sd + P, *rd = rc + P;
  void *send = ns_at(b->ws, b->off_send), *stage = ns_at(b->ws, b->off_stage);
  bool any = false;
  for (int i = 0; i < C; i++) {
    if (b->owner[i] < 0)
      continue;
    any = true;
    TPLA_TRY(ns_axpby(ctx, dense_shard(b->plans[i], ns_at(send, b->send_off[i]), me), xs[i],
                      1.0f, 0.0f, stream));
  }
  if (!any)
    return TPLA_SUCCESS;
  TPLA_TRY(ctx->backend->alltoallv(ctx, stage, rc, rd, send, sc, sd, TPLA_UINT8, stream));
  for (int pass = 0; pass < 2; pass++) { /* 0: unpack the blocks, 1: pack the results */
    if (pass == 1) {
      TPLA_TRY(ns_groups_run(b->groups, b->whole, stream));
      for (int i = 0; i < C; i++) {
        if (b->owner[i] != me || ns_groups_has(b->groups, i))
          continue;
        tpla_ns_plan_t p = b->plans[i];
        tpla_matrix_t X = ns_dense(ns_at(b->ws, b->full_off[i]), p->m, p->n, p->desc.dtype);
        ns_opmat_t op = {X, p->m > p->n};
        /* into the temp (the stage, unpacked by now) when the steps then end in X */
        ns_where_t start = ns_iter_end(&b->iters[i], p->desc.steps, NS_IN_X);
        tpla_matrix_t first = start == NS_IN_X ? X : ns_iter_temp(&b->iters[i], op).v;
        TPLA_TRY(ns_normalize(ctx, first, X, ns_at(b->ws, b->off_sumsq), false, p->safety,
                              p->eps, stream));
        TPLA_TRY(ns_iterate(ctx, &b->iters[i], op, start, NS_IN_X, p->table, p->desc.steps,
                            1.0 / p->safety, stream));
      }
    }
    for (int q = 0; q < P; q++) {
      size_t off = rd[q];
      for (int i = 0; i < C; i++) {
        if (b->owner[i] != me)
          continue;
        tpla_ns_plan_t p = b->plans[i];
        tpla_matrix_t X = ns_dense(ns_at(b->ws, b->full_off[i]), p->m, p->n, p->desc.dtype);
        tpla_matrix_t blk = dense_shard(p, ns_at(stage, off), q), part = shard_in(p, X, q);
        TPLA_TRY(pass == 0 ? ns_axpby(ctx, part, blk, 1.0f, 0.0f, stream)
                           : ns_axpby(ctx, blk, part, 1.0f, 0.0f, stream));
        off += pad(shard_bytes(p, q));
      }
    }
  }
  TPLA_TRY(ctx->backend->alltoallv(ctx, send, sc, sd, stage, rc, rd, TPLA_UINT8, stream));
  for (int i = 0; i < C; i++)
    if (b->owner[i] >= 0)
      TPLA_TRY(ns_axpby(ctx, xs[i], dense_shard(b->plans[i], ns_at(send, b->send_off[i]), me),
                        1.0f, 0.0f, stream));
  return TPLA_SUCCESS;
}

static int by_start(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->index - y->index;
}

/* No two views may share memory: sort by start, test neighbours whose byte
 * ranges meet (exactly, so column blocks of one buffer pass). */
static tpla_status_t check_overlaps(const char *fn, struct tpla_ns_batch_plan *b,
                                    const tpla_matrix_t *xs) {
  int n = 0;
  for (int i = 0; i < b->count; i++) {
    size_t bytes = tpla_matrix_extent_bytes(&xs[i]);
    if (bytes > 0)
      b->spans[n++] = (span_t){(uintptr_t)xs[i].data, (uintptr_t)xs[i].data + bytes, i};
  }
  qsort(b->spans, (size_t)n, sizeof *b->spans, by_start);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n && b->spans[j].lo < b->spans[i].hi; j++) {
      int x = b->spans[i].index, y = b->spans[j].index;
      if (tpla_matrices_overlap(&xs[x], &xs[y]))
        return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'xs[%d]' overlaps xs[%d]",
                         x > y ? x : y, x < y ? x : y);
    }
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_batch_execute(tpla_ns_batch_plan_t plan, const tpla_matrix_t *xs,
                                    void *stream) {
  static const char fn[] = "tpla_ns_batch_execute";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  if (xs == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'xs' is NULL");
  char arg[32];
  for (int i = 0; i < plan->count; i++) {
    snprintf(arg, sizeof arg, "xs[%d]", i);
    TPLA_TRY(ns_check_x(fn, arg, plan->plans[i], &xs[i]));
    TPLA_TRY(ns_check_call(fn, plan->plans[i], stream));
  }
  TPLA_TRY(check_overlaps(fn, plan, xs));
  TPLA_TRY(tpla_call_begin(plan->ctx, fn, true, stream));
  tpla_status_t st = run_owners(plan, xs, stream);
  if (st == TPLA_SUCCESS && plan->ctx->nranks == 1) /* the caller's matrices are whole */
    st = ns_groups_run(plan->groups, xs, stream);
  for (int i = 0; st == TPLA_SUCCESS && i < plan->count; i++)
    if (plan->owner[i] < 0 && !ns_groups_has(plan->groups, i))
      st = ns_plan_run(plan->plans[i], xs[i], xs[i], stream);
  tpla_call_end(plan->ctx, true, stream);
  return st;
}
