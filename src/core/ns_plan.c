/*
 * ns_plan.c - the public Newton-Schulz plan API: descriptor validation, the
 * collective agreement (every rank learns every rank's shard and checks
 * that the rest matches), algorithm choice, workspace, and execute.
 *
 * Agreement protocol: every rank with a context, even one whose arguments
 * are bad, sends a fixed-size summary of its descriptor (with its own
 * status and message) through the backend's plan-time exchange. So no rank
 * is left waiting, and all ranks reach the same verdict from the same data:
 * a rank with bad arguments returns its own status; the others return
 * REMOTE naming it; a disagreement gives REMOTE with the same message on
 * every rank.
 */
#include "ns.h"
#include "overlap.h" /* OVL_LANE_COMPUTE0: the pulls' lane a call runs on */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_LEN 200

typedef struct {
  int32_t status; /* 0 or this rank's own tpla_status_t */
  int32_t shard, dtype, gram_dtype, algorithm, steps, iteration;
  int32_t pull; /* ns_pull_wish, 0 for gram_sum COLLECTIVE: the least over the ranks counts */
  int64_t local_rows, local_cols;
  uint64_t coef_hash;
  float eps, safety;
  char message[MSG_LEN];
} summary_t;

/* msg (MSG_LEN) = the formatted text; evaluates to st. */
#define bad(msg, st, ...) tpla_msg((msg), MSG_LEN, (st), __VA_ARGS__)

static bool ns_dtype(tpla_dtype_t t) {
  return t == TPLA_FLOAT32 || t == TPLA_FLOAT16 || t == TPLA_BFLOAT16;
}

/* This rank's checks; `arg` names the descriptor ("argument 'desc'"). */
static tpla_status_t check_desc(char *msg, const char *arg, const tpla_ns_desc_t *d, int nranks,
                                bool in_batch) {
  const tpla_status_t IA = TPLA_ERROR_INVALID_ARGUMENT;
  if (d == NULL)
    return bad(msg, IA, "%s is NULL", arg);
  if (d->size != sizeof(tpla_ns_desc_t))
    return bad(msg, IA, "%s: size field is %zu, expected %zu (initialize with TPLA_NS_DESC_INIT)",
               arg, d->size, sizeof(tpla_ns_desc_t));
  if (d->shard != TPLA_SHARD_ROWS && d->shard != TPLA_SHARD_COLS)
    return bad(msg, IA, "%s: shard %d is neither TPLA_SHARD_ROWS nor TPLA_SHARD_COLS", arg,
               (int)d->shard);
  if (d->local_rows < 0 || d->local_cols < 0)
    return bad(msg, IA, "%s: negative shard size %" PRId64 "x%" PRId64, arg, d->local_rows,
               d->local_cols);
  if (d->local_rows > INT32_MAX || d->local_cols > INT32_MAX)
    return bad(msg, TPLA_ERROR_NOT_SUPPORTED, "%s: shard %" PRId64 "x%" PRId64 " exceeds 2^31-1",
               arg, d->local_rows, d->local_cols);
  if ((d->shard == TPLA_SHARD_ROWS ? d->local_cols : d->local_rows) == 0)
    return bad(msg, IA, "%s: shard %" PRId64 "x%" PRId64 " has 0 %s, the dimension that is not "
               "sharded: the global matrix would be empty", arg, d->local_rows, d->local_cols,
               d->shard == TPLA_SHARD_ROWS ? "columns" : "rows");
  if (!ns_dtype(d->dtype))
    return bad(msg, IA, "%s: dtype %s (%d) is not supported (fp32, fp16 or bf16)", arg,
               tpla_dtype_name(d->dtype), (int)d->dtype);
  if (d->gram_dtype != TPLA_FLOAT32 && d->gram_dtype != d->dtype)
    return bad(msg, IA, "%s: gram_dtype %s must be fp32 or the input dtype (%s)", arg,
               tpla_dtype_name(d->gram_dtype), tpla_dtype_name(d->dtype));
  if (d->steps < 1 || d->steps > NS_MAX_STEPS)
    return bad(msg, IA, "%s: steps %d is not in [1, %d]", arg, d->steps, NS_MAX_STEPS);
  if (d->preset < TPLA_NS_MUON || d->preset > TPLA_NS_USER)
    return bad(msg, IA, "%s: unknown coefficient preset %d", arg, (int)d->preset);
  if (d->preset == TPLA_NS_USER) {
    if (d->ncoefficients != 3 * (size_t)d->steps)
      return bad(msg, IA, "%s: ncoefficients is %zu, expected 3 * steps = %d (one a, b, c "
                 "triple per step)", arg, d->ncoefficients, 3 * d->steps);
    if (d->coefficients == NULL)
      return bad(msg, IA, "%s: coefficients is NULL with TPLA_NS_USER", arg);
    for (size_t i = 0; i < d->ncoefficients; i++)
      if (!isfinite(d->coefficients[i]))
        return bad(msg, IA, "%s: coefficients[%zu] is not finite", arg, i);
  } else if (d->coefficients != NULL || d->ncoefficients != 0) {
    return bad(msg, IA, "%s: coefficients given (%zu) with a preset; use TPLA_NS_USER", arg,
               d->ncoefficients);
  }
  if (!(d->eps >= 0.0f) || !isfinite(d->eps))
    return bad(msg, IA, "%s: eps %g must be finite and >= 0", arg, (double)d->eps);
  if (!(d->safety >= 0.0f) || !isfinite(d->safety))
    return bad(msg, IA, "%s: safety %g must be finite and >= 0 (0: the preset's default)", arg,
               (double)d->safety);
  if (d->algorithm < TPLA_NS_ALGO_AUTO || d->algorithm > TPLA_NS_ALGO_GRAM_SHARDED)
    return bad(msg, IA, "%s: unknown algorithm %d", arg, (int)d->algorithm);
  if (d->iteration < TPLA_NS_ITERATE_X || d->iteration > TPLA_NS_ITERATE_AUTO)
    return bad(msg, IA, "%s: iteration %d is none of TPLA_NS_ITERATE_AUTO, _X, _GRAM", arg,
               (int)d->iteration);
  if (d->algorithm == TPLA_NS_ALGO_LOCAL && nranks > 1 && !in_batch)
    return bad(msg, IA, "%s: algorithm LOCAL needs 1 rank, the context has %d (the batched "
               "API orthogonalizes whole matrices on one rank)", arg, nranks);
  if (d->gram_sum != TPLA_NS_GRAM_SUM_AUTO && d->gram_sum != TPLA_NS_GRAM_SUM_COLLECTIVE)
    return bad(msg, IA, "%s: gram_sum %d is neither TPLA_NS_GRAM_SUM_AUTO nor _COLLECTIVE", arg,
               (int)d->gram_sum);
  if (d->workspace_group < 0)
    return bad(msg, IA, "%s: workspace_group %d is negative (0: a workspace of the plan's own)",
               arg, d->workspace_group);
  if (d->workspace_group != 0 && in_batch)
    return bad(msg, IA, "%s: workspace_group %d in a batch, whose matrices share the batch's "
               "workspace: 0 here", arg, d->workspace_group);
  /* read by ns_pull_wish; a misspelt opt-out must not pass for the default */
  const char *sum = getenv("TPLA_NS_GRAM_SUM"), *windows = getenv("TPLA_NS_PULL_WINDOWS");
  if (sum != NULL && *sum != '\0' && strcmp(sum, "pull") != 0 && strcmp(sum, "nccl") != 0)
    return bad(msg, IA, "environment TPLA_NS_GRAM_SUM=%.40s is neither pull (the default at 2 "
               "ranks) nor nccl", sum);
  if (windows != NULL && *windows != '\0' && strcmp(windows, "1") != 0 &&
      strcmp(windows, "2") != 0)
    return bad(msg, IA, "environment TPLA_NS_PULL_WINDOWS=%.40s is neither 1 nor 2 (the default)",
               windows);
  return TPLA_SUCCESS;
}

static void fill_summary(summary_t *s, const tpla_ns_desc_t *d, const float *table) {
  s->shard = d->shard;
  s->dtype = d->dtype;
  s->gram_dtype = d->gram_dtype;
  s->algorithm = d->algorithm;
  s->steps = d->steps;
  s->iteration = d->iteration;
  s->local_rows = d->local_rows;
  s->local_cols = d->local_cols;
  s->coef_hash = ns_hash_bytes(NS_HASH_INIT, table, sizeof(float) * 3 * (size_t)d->steps);
  s->eps = d->eps;
  s->safety = ns_effective_safety(d);
  s->pull = d->gram_sum == TPLA_NS_GRAM_SUM_COLLECTIVE ? 0 : ns_pull_wish();
}

/* The first field in which rank r differs from rank 0, described in msg. */
static bool differs(char *msg, const summary_t *s0, const summary_t *s, int r) {
  const char *what = NULL;
  char v[32] = "", v0[32] = ""; /* the longest: "table hash " and 16 hex digits */
  int64_t keep = s->shard == TPLA_SHARD_ROWS ? s->local_cols : s->local_rows;
  int64_t keep0 = s0->shard == TPLA_SHARD_ROWS ? s0->local_cols : s0->local_rows;
  if (s->shard != s0->shard) {
    what = "shard";
    snprintf(v, sizeof v, "%s", s->shard == TPLA_SHARD_ROWS ? "ROWS" : "COLS");
    snprintf(v0, sizeof v0, "%s", s0->shard == TPLA_SHARD_ROWS ? "ROWS" : "COLS");
  } else if (keep != keep0) {
    what = s->shard == TPLA_SHARD_ROWS ? "local_cols (not sharded)" : "local_rows (not sharded)";
    snprintf(v, sizeof v, "%" PRId64, keep);
    snprintf(v0, sizeof v0, "%" PRId64, keep0);
  } else if (s->dtype != s0->dtype || s->gram_dtype != s0->gram_dtype) {
    bool g = s->dtype == s0->dtype;
    what = g ? "gram_dtype" : "dtype";
    snprintf(v, sizeof v, "%s", tpla_dtype_name(g ? s->gram_dtype : s->dtype));
    snprintf(v0, sizeof v0, "%s", tpla_dtype_name(g ? s0->gram_dtype : s0->dtype));
  } else if (s->steps != s0->steps) {
    what = "steps";
    snprintf(v, sizeof v, "%d", s->steps);
    snprintf(v0, sizeof v0, "%d", s0->steps);
  } else if (s->coef_hash != s0->coef_hash) {
    what = "coefficients";
    snprintf(v, sizeof v, "table hash %016" PRIx64, s->coef_hash);
    snprintf(v0, sizeof v0, "table hash %016" PRIx64, s0->coef_hash);
  } else if (s->eps != s0->eps || s->safety != s0->safety) {
    bool e = s->eps != s0->eps;
    what = e ? "eps" : "safety";
    snprintf(v, sizeof v, "%.9g", (double)(e ? s->eps : s->safety)); /* every float apart */
    snprintf(v0, sizeof v0, "%.9g", (double)(e ? s0->eps : s0->safety));
  } else if (s->iteration != s0->iteration) {
    what = "iteration";
    snprintf(v, sizeof v, "%s", ns_iteration_name((tpla_ns_iteration_t)s->iteration));
    snprintf(v0, sizeof v0, "%s", ns_iteration_name((tpla_ns_iteration_t)s0->iteration));
  } else if (s->algorithm != s0->algorithm) {
    what = "algorithm";
    snprintf(v, sizeof v, "%s", ns_algorithm_name((tpla_ns_algorithm_t)s->algorithm));
    snprintf(v0, sizeof v0, "%s", ns_algorithm_name((tpla_ns_algorithm_t)s0->algorithm));
  }
  if (what == NULL)
    return false;
  snprintf(msg, MSG_LEN, "ranks disagree: rank %d has %s = %s, rank 0 has %s", r, what, v, v0);
  return true;
}

/* Exchange summaries; on success all[] holds every rank's. A disagreement
 * names `arg`, the descriptor ("descs[3]" in a batch). */
static tpla_status_t agree(tpla_ctx_t ctx, const char *fn, const char *arg, const summary_t *mine,
                           summary_t *all) {
  TPLA_TRY(tpla_plan_exchange(ctx, fn, all, mine, sizeof *mine));
  if (mine->status != 0)
    return tpla_fail((tpla_status_t)mine->status, fn, "%s", mine->message);
  for (int r = 0; r < ctx->nranks; r++)
    if (all[r].status != 0)
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "rank %d rejected its arguments: %s", r,
                       all[r].message);
  char msg[MSG_LEN];
  for (int r = 1; r < ctx->nranks; r++)
    if (differs(msg, &all[0], &all[r], r))
      return tpla_fail(TPLA_ERROR_REMOTE, fn, "%s: %s", arg, msg);
  return TPLA_SUCCESS;
}

/* Shapes, partition and algorithm from the agreed summaries. */
static tpla_status_t plan_shapes(tpla_ns_plan_t p, const summary_t *all, const char *fn,
                                 const char *arg, bool in_batch, bool pulls) {
  int P = p->nranks;
  bool rows = p->desc.shard == TPLA_SHARD_ROWS;
  int64_t total = 0;
  p->offs[0] = 0;
  for (int r = 0; r < P; r++) {
    total += rows ? all[r].local_rows : all[r].local_cols;
    p->offs[r + 1] = total;
  }
  int64_t keep = rows ? p->desc.local_cols : p->desc.local_rows;
  p->m = rows ? total : keep;
  p->n = rows ? keep : total;
  if (total == 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "%s: the global matrix is %" PRId64 "x%" PRId64 ": every rank's shard is "
                     "empty", arg, p->m, p->n);
  size_t e = tpla_dtype_size(p->desc.dtype);
  if (total > INT32_MAX || (double)p->m * (double)p->n * (double)e > 0x1p60)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                     "%s: the global matrix %" PRId64 "x%" PRId64 " is too large", arg, p->m, p->n);
  p->trans = !rows;
  p->M = total;
  p->N = keep;
  const ns_machine_t *mach = ns_machine(p->ctx);
  int windows = pulls && !in_batch && P == 2 && p->ctx->backend->xport != NULL ? 2 : 0;
  int64_t parts[TPLA_MAX_RANKS];
  for (int r = 0; r < P; r++) {
    parts[r] = ns_part(p->offs, r);
    windows = all[r].pull < windows ? all[r].pull : windows;
  }
  bool pulled = windows > 0;
  bool steep = p->desc.gram_dtype != TPLA_FLOAT32 &&
               ns_steep_for_half_gram(p->table, p->desc.steps);
  ns_shape_t sh = {P,     p->M, p->N, parts, p->desc.dtype, p->desc.gram_dtype, p->desc.steps,
                   false, pulled, p->trans, steep};
  ns_shape_t one = sh;
  one.nranks = 1;
  ns_resolve(mach, &one, TPLA_NS_ALGO_LOCAL, p->desc.iteration, &p->whole_gram_iter,
             &p->whole_cost);
  tpla_ns_algorithm_t want = P == 1 ? TPLA_NS_ALGO_LOCAL : p->desc.algorithm;
  if (want == TPLA_NS_ALGO_LOCAL) { /* one rank, or a batch's whole-matrix entry */
    p->algo = TPLA_NS_ALGO_LOCAL;
    p->gram_iter = p->whole_gram_iter;
    p->cost = p->whole_cost;
    if (P > 1)
      return in_batch ? TPLA_SUCCESS : tpla_fail(TPLA_ERROR_INTERNAL, fn, "LOCAL on %d ranks", P);
  } else {
    p->algo = ns_resolve(mach, &sh, want, p->desc.iteration, &p->gram_iter, &p->cost);
    /* GATHER sums no Gram: nothing to pull */
    p->pulls_planned = pulled && p->algo != TPLA_NS_ALGO_GATHER;
    p->pull_windows = windows;
  }
  return ns_dist_setup(p);
}

tpla_status_t ns_plan_prepare(tpla_ns_plan_t *out, tpla_ctx_t ctx, const tpla_ns_desc_t *desc,
                              const char *fn, const char *arg, bool in_batch, bool pulls) {
  if (out != NULL)
    *out = NULL;
  summary_t mine;
  memset(&mine, 0, sizeof mine);
  tpla_ns_plan_t p = calloc(1, sizeof *p);
  summary_t *all = calloc((size_t)ctx->nranks, sizeof *all);
  tpla_status_t st = tpla_plan_agree_memory(ctx, fn, p && all);
  if (st != TPLA_SUCCESS) {
    free(all);
    free(p);
    return st;
  }
  st = out == NULL ? bad(mine.message, TPLA_ERROR_INVALID_ARGUMENT, "argument 'plan' is NULL")
                   : check_desc(mine.message, arg, desc, ctx->nranks, in_batch);
  if (st == TPLA_SUCCESS) {
    p->table = malloc(sizeof(float) * 3 * (size_t)desc->steps);
    p->offs = malloc(sizeof(int64_t) * (size_t)(ctx->nranks + 1));
    if (p->table == NULL || p->offs == NULL)
      st = bad(mine.message, TPLA_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  if (st == TPLA_SUCCESS) {
    ns_fill_coefficients(desc, p->table);
    /* a preset divided by a tiny safety can overflow float */
    for (int i = 0; i < 3 * desc->steps && st == TPLA_SUCCESS; i++)
      if (!isfinite(p->table[i]))
        st = bad(mine.message, TPLA_ERROR_INVALID_ARGUMENT,
                 "%s: safety %g makes the preset's coefficient %d (step %d) non-finite", arg,
                 (double)desc->safety, i, i / 3);
  }
  if (st == TPLA_SUCCESS)
    fill_summary(&mine, desc, p->table);
  mine.status = (int32_t)st;
  st = agree(ctx, fn, arg, &mine, all);
  if (st == TPLA_SUCCESS) {
    p->ctx = ctx;
    p->rank = ctx->rank;
    p->nranks = ctx->nranks;
    p->desc = *desc;
    p->desc.coefficients = p->table; /* the caller's pointer may not live on */
    p->desc.ncoefficients = 3 * (size_t)desc->steps;
    p->safety = ns_effective_safety(desc);
    p->eps = desc->eps;
    st = plan_shapes(p, all, fn, arg, in_batch, pulls);
    /* its host allocations can fail on one rank alone: the others must not
     * go on into the next exchange */
    st = tpla_plan_agree(ctx, fn, st, "set up its plan");
  }
  free(all);
  if (st != TPLA_SUCCESS) {
    ns_plan_free(p);
    return st;
  }
  *out = p;
  return TPLA_SUCCESS;
}

void ns_plan_bind(tpla_ns_plan_t p, void *base) {
  p->ws = base;
  if (p->algo != TPLA_NS_ALGO_LOCAL || p->nranks == 1)
    ns_dist_bind(p);
}

void ns_plan_free(tpla_ns_plan_t p) {
  if (p == NULL)
    return;
  ns_pull_destroy(p->iter.pull); /* waits for its lanes, which write the workspace's Gram */
  if (p->owns_ws && p->ws != NULL)
    p->ctx->backend->mem_free(p->ctx, p->ws);
  ns_share_leave(p);
  ns_iter_free(&p->iter);
  free(p->table);
  free(p->offs);
  free(p->part);
  free(p->a2a);
  free(p);
}

/* ---- public API ------------------------------------------------------------ */

/* One attempt at a plan. *again: the plan counted on pulls (its choice, and
 * a workspace without the all-reduce's staging) and the transport cannot map
 * the peers; *plan is NULL then, and the caller prepares again without pulls
 * (every rank: the transport's verdict is the same everywhere). */
static tpla_status_t create_plan(tpla_ns_plan_t *plan, tpla_ctx_t ctx, const tpla_ns_desc_t *desc,
                                 const char *fn, bool pulls, bool *again) {
  *again = false;
  /* A NULL plan pointer still takes part in the agreement, as a failure,
   * so that the other ranks do not wait. */
  TPLA_TRY(ns_plan_prepare(plan, ctx, desc, fn, "argument 'desc'", false, pulls));
  tpla_ns_plan_t p = *plan;
  void *ws = NULL;
  tpla_status_t st = TPLA_SUCCESS;
  if (desc->workspace_group > 0) {
    st = ns_share_reserve(p, desc->workspace_group, fn);
  } else {
    st = ctx->backend->mem_alloc(ctx, p->layout.bytes, &ws);
    if (st == TPLA_SUCCESS) {
      p->owns_ws = true;
      ns_plan_bind(p, ws);
    } else if (ws != NULL) {
      ctx->backend->mem_free(ctx, ws);
    }
  }
  st = tpla_plan_agree(ctx, fn, st, desc->workspace_group > 0 ? "join its workspace group"
                                                               : "allocate its workspace");
  if (st != TPLA_SUCCESS) {
    ns_plan_free(p);
    *plan = NULL;
    return st;
  }
  if (p->pulls_planned) /* collective; NULL: NCCL sums */
    st = ns_pull_create(ctx, &p->iter, p->pull_windows, fn, &p->iter.pull);
  if (st == TPLA_SUCCESS && p->iter.pull != NULL)
    ns_plan_bind(p, p->ws); /* again: some matrices may live in the pulls' memory */
  *again = st == TPLA_SUCCESS && p->pulls_planned && p->iter.pull == NULL;
  if (st == TPLA_SUCCESS && p->iter.pull != NULL)
    st = ns_pull_rehearse(p, fn);
  if (st != TPLA_SUCCESS || *again) {
    ns_plan_free(p); /* a group it reserved stays as it was */
    *plan = NULL;
  } else if (p->share != NULL) {
    ns_share_commit(p);
  }
  return st;
}

tpla_status_t tpla_ns_plan_create(tpla_ns_plan_t *plan, tpla_ctx_t ctx,
                                  const tpla_ns_desc_t *desc) {
  static const char fn[] = "tpla_ns_plan_create";
  tpla_clear_error();
  if (plan != NULL)
    *plan = NULL; /* on every error, a NULL ctx and a failed context included */
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");
  TPLA_TRY(tpla_call_begin(ctx, fn, false, NULL));
  bool again = false;
  tpla_status_t st = create_plan(plan, ctx, desc, fn, true, &again);
  if (st == TPLA_SUCCESS && again)
    st = create_plan(plan, ctx, desc, fn, false, &again);
  tpla_call_end(ctx, false, NULL);
  return st;
}

tpla_status_t tpla_ns_plan_destroy(tpla_ns_plan_t plan) {
  tpla_clear_error();
  ns_plan_free(plan);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_plan_workspace_bytes(tpla_ns_plan_t plan, size_t *bytes) {
  static const char fn[] = "tpla_ns_plan_workspace_bytes";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  if (bytes == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'bytes' is NULL");
  *bytes = (plan->share != NULL ? ns_share_bytes(plan->share) : plan->layout.bytes) +
           ns_pull_bytes(plan->iter.pull);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_plan_algorithm(tpla_ns_plan_t plan, tpla_ns_algorithm_t *algorithm) {
  static const char fn[] = "tpla_ns_plan_algorithm";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  if (algorithm == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'algorithm' is NULL");
  *algorithm = plan->algo;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ns_plan_iteration(tpla_ns_plan_t plan, tpla_ns_iteration_t *iteration) {
  static const char fn[] = "tpla_ns_plan_iteration";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  if (iteration == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'iteration' is NULL");
  *iteration = plan->gram_iter ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
  return TPLA_SUCCESS;
}

tpla_status_t ns_check_x(const char *fn, const char *arg, tpla_ns_plan_t p,
                         const tpla_matrix_t *x) {
  TPLA_TRY(tpla_check_matrix(fn, arg, x));
  if (x->dtype != p->desc.dtype)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': dtype %s, the plan's is %s",
                     arg, tpla_dtype_name(x->dtype), tpla_dtype_name(p->desc.dtype));
  if (x->rows != p->desc.local_rows || x->cols != p->desc.local_cols)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument '%s': %" PRId64 "x%" PRId64 ", the plan's shard is %" PRId64
                     "x%" PRId64, arg, x->rows, x->cols, p->desc.local_rows, p->desc.local_cols);
  return TPLA_SUCCESS;
}

static tpla_status_t run_on(tpla_ns_plan_t p, tpla_matrix_t out, tpla_matrix_t x, void *stream) {
  /* Into the update temp when the iteration then ends in out without a copy. */
  ns_where_t start = ns_dist_start(p);
  tpla_matrix_t first =
      start == NS_IN_X ? out : ns_iter_temp(&p->iter, (ns_opmat_t){out, false}).v;
  TPLA_TRY(ns_normalize(p->ctx, first, x, p->sumsq, p->nranks > 1, p->safety, p->eps, stream));
  TPLA_TRY(ns_dist_run(p, out, start, stream));
  return ns_pull_settle(p->ctx, p->iter.pull, stream);
}

/* With pulls the whole call runs on the transport's compute lane 0, which
 * follows the caller's stream once and which the caller's stream follows
 * once: each exchange (up to 14 a call) then begins and ends on its own
 * lane, instead of forking from the caller's stream and joining into it. */
tpla_status_t ns_plan_run(tpla_ns_plan_t p, tpla_matrix_t out, tpla_matrix_t x, void *stream) {
  void *home = p->iter.pull != NULL ? ns_pull_lane(p->iter.pull, OVL_LANE_COMPUTE0) : stream;
  if (home == stream)
    return run_on(p, out, x, stream);
  tpla_ctx_t ctx = p->ctx;
  TPLA_TRY(ctx->backend->stream_wait(ctx, home, stream));
  tpla_status_t st = run_on(p, out, x, home);
  tpla_status_t joined = ctx->backend->stream_wait(ctx, stream, home); /* also after a failure */
  return st != TPLA_SUCCESS ? st : joined;
}

tpla_status_t ns_check_call(const char *fn, tpla_ns_plan_t p, void *stream) {
  if (p->iter.pull == NULL)
    return TPLA_SUCCESS;
  TPLA_TRY(ns_pull_check(p->ctx, p->iter.pull, fn));
  if (!ns_pull_cannot_capture(p->iter.pull, stream))
    return TPLA_SUCCESS;
  return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                   "argument 'stream' is being captured into a CUDA graph, but the plan sums "
                   "its Grams by copy-engine pulls, whose flags number the calls, and a graph "
                   "would replay one number; for captured calls create the plan with gram_sum "
                   "TPLA_NS_GRAM_SUM_COLLECTIVE (docs/API.md, \"CUDA graphs\")");
}

/* A public call: inside the context's call bracket (ctx_fail.c). */
static tpla_status_t ns_plan_run_public(tpla_ns_plan_t p, tpla_matrix_t out, tpla_matrix_t x,
                                        void *stream, const char *fn) {
  TPLA_TRY(ns_check_call(fn, p, stream));
  TPLA_TRY(tpla_call_begin(p->ctx, fn, true, stream));
  tpla_status_t st = ns_plan_run(p, out, x, stream);
  tpla_call_end(p->ctx, true, stream);
  return st;
}

tpla_status_t tpla_ns_execute_out(tpla_ns_plan_t plan, tpla_matrix_t out, tpla_matrix_t x,
                                  void *stream) {
  static const char fn[] = "tpla_ns_execute_out";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  TPLA_TRY(ns_check_x(fn, "x", plan, &x));
  TPLA_TRY(ns_check_x(fn, "out", plan, &out));
  bool same = out.data == x.data && out.ld == x.ld;
  if (!same && tpla_matrices_overlap(&out, &x))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'out' overlaps 'x' (pass the same view for in place)");
  return ns_plan_run_public(plan, out, x, stream, fn);
}

tpla_status_t tpla_ns_execute(tpla_ns_plan_t plan, tpla_matrix_t x, void *stream) {
  static const char fn[] = "tpla_ns_execute";
  tpla_clear_error();
  if (plan == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'plan' is NULL");
  TPLA_TRY(ns_check_x(fn, "x", plan, &x));
  return ns_plan_run_public(plan, x, x, stream, fn);
}
