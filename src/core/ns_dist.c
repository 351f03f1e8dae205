/*
 * ns_dist.c - the Newton-Schulz algorithms of a plan: their workspace
 * layout (at plan time) and their run on this rank's normalized shard, in
 * place (at execute time).
 *
 * Canonical form: Y = X (rows sharded) or Y = X^T (columns sharded, the
 * stored shard is then Y_p^T: no copy, only transpose flags). Y is M x N and
 * rank p holds rows offs[p]..offs[p+1] of it.
 *   LOCAL           one rank: iterate on Y or Y^T, whichever is short-wide.
 *   GRAM_ALLREDUCE  iterate on Y_p^T (N x M_p); the N x N Gram is the sum
 *                   of the ranks' Grams: one all-reduce per step.
 *   GRAM_SHARDED    the same, but each rank computes only its block rows of
 *                   the Gram polynomial, all-gathered (ns_shard.c); when
 *                   the sharded dimension is the short one (N > M), after
 *                   REDISTRIBUTE's all-to-all, on the M x M Gram.
 *   REDISTRIBUTE    one all-to-all turns the row sharding into a column
 *                   sharding (rank q gets Y[:, part_q], M x N_q), the Gram
 *                   all-reduce over M runs there, one all-to-all back.
 *   GATHER          all ranks gather Y, iterate redundantly on all of it,
 *                   and keep their own rows.
 */
#include "ns.h"

#include <stdlib.h>

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* REDISTRIBUTE, and GRAM_SHARDED on a matrix whose sharded dimension is
 * the short one, iterate on columns of Y after an all-to-all. */
static bool redistributes(tpla_ns_plan_t p) {
  return p->algo == TPLA_NS_ALGO_REDISTRIBUTE ||
         (p->algo == TPLA_NS_ALGO_GRAM_SHARDED && p->N > p->M);
}

/* The all-to-all counts and buffers of a redistribution, and the iteration
 * on Y[:, part_r] (M x N_r): split polynomial or not. */
/* How the plan's distributed Gram is summed (pulls: no all-reduce staging). */
static ns_sum_t sum_of(tpla_ns_plan_t p) {
  return p->pulls_planned ? NS_SUM_PULLED : NS_SUM_ALLREDUCE;
}

static tpla_status_t setup_redistribute(tpla_ns_plan_t p, const ns_machine_t *mach, bool split) {
  static const char fn[] = "tpla_ns_plan_create";
  int P = p->nranks, r = p->rank;
  int64_t M = p->M, N = p->N, Mp = ns_part(p->offs, r);
  tpla_dtype_t dt = p->desc.dtype, gdt = p->desc.gram_dtype;
  size_t e = tpla_dtype_size(dt);
  ns_layout_t *L = &p->layout;
  p->part = malloc(sizeof(int64_t) * (size_t)(P + 1));
  p->a2a = malloc(sizeof(size_t) * 4 * (size_t)P);
  if (!p->part || !p->a2a)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  p->part[0] = 0;
  for (int q = 0; q < P; q++)
    p->part[q + 1] = p->part[q] + N / P + (q < N % P);
  int64_t Nr = ns_part(p->part, r);
  /* Forward move, in elements: rank p sends its M_p x N_q block to q and
   * receives M_q x N_r from q. Both layouts place block q at q's offset
   * times the other block dimension, so the received blocks stack. */
  size_t *sc = p->a2a, *sd = sc + P, *rc = sd + P, *rd = rc + P;
  for (int q = 0; q < P; q++) {
    sc[q] = (size_t)(Mp * ns_part(p->part, q));
    sd[q] = (size_t)(Mp * p->part[q]);
    rc[q] = (size_t)(ns_part(p->offs, q) * Nr);
    rd[q] = (size_t)(p->offs[q] * Nr);
  }
  p->buf_elems = max64(Mp * N, M * Nr);
  if (split)
    TPLA_TRY(ns_iter_setup_sharded(&p->iter, mach, M, Nr, dt, gdt, sum_of(p), p->gram_iter, r,
                                   P, p->buf_elems, L, fn));
  else
    ns_iter_setup(&p->iter, mach, M, Nr, dt, gdt, sum_of(p), p->gram_iter, p->buf_elems, L);
  p->off_w1 = ns_layout_take(L, (size_t)p->buf_elems * e);
  p->off_w2 = ns_layout_take(L, (size_t)p->buf_elems * e);
  return TPLA_SUCCESS;
}

tpla_status_t ns_dist_setup(tpla_ns_plan_t p) {
  const ns_machine_t *mach = ns_machine(p->ctx);
  int P = p->nranks, r = p->rank;
  int64_t M = p->M, N = p->N, Mp = ns_part(p->offs, r);
  int64_t s = min64(M, N), l = max64(M, N);
  tpla_dtype_t dt = p->desc.dtype, gdt = p->desc.gram_dtype;
  size_t e = tpla_dtype_size(dt);
  ns_layout_t *L = &p->layout;
  p->off_sumsq = ns_layout_take(L, sizeof(double));
  switch (p->algo) {
  case TPLA_NS_ALGO_LOCAL:
    p->buf_elems = s * l;
    ns_iter_setup(&p->iter, mach, s, l, dt, gdt, NS_SUM_NONE, p->gram_iter, p->buf_elems, L);
    p->off_w1 = ns_layout_take(L, (size_t)p->buf_elems * e);
    break;
  case TPLA_NS_ALGO_GRAM_ALLREDUCE:
    p->buf_elems = N * Mp;
    ns_iter_setup(&p->iter, mach, N, Mp, dt, gdt, sum_of(p), p->gram_iter, p->buf_elems, L);
    p->off_w1 = ns_layout_take(L, (size_t)p->buf_elems * e);
    break;
  case TPLA_NS_ALGO_GRAM_SHARDED:
    if (redistributes(p))
      return setup_redistribute(p, mach, true);
    p->buf_elems = N * Mp;
    TPLA_TRY(ns_iter_setup_sharded(&p->iter, mach, N, Mp, dt, gdt, sum_of(p), p->gram_iter, r,
                                   P, p->buf_elems, L, "tpla_ns_plan_create"));
    p->off_w1 = ns_layout_take(L, (size_t)p->buf_elems * e);
    break;
  case TPLA_NS_ALGO_REDISTRIBUTE:
    return setup_redistribute(p, mach, false);
  case TPLA_NS_ALGO_GATHER: {
    int64_t most = 0;
    p->a2a = malloc(sizeof(size_t) * (size_t)P);
    if (!p->a2a)
      return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, "tpla_ns_plan_create", "out of host memory");
    for (int q = 0; q < P; q++) {
      most = max64(most, ns_part(p->offs, q));
      p->a2a[q] = (size_t)(ns_part(p->offs, q) * N); /* allgatherv counts */
    }
    p->buf_elems = most * N; /* one shard: the update temp, ring blocks */
    ns_iter_setup(&p->iter, mach, s, l, dt, gdt, NS_SUM_NONE, p->gram_iter, p->buf_elems, L);
    p->off_wg = ns_layout_take(L, (size_t)(M * N) * e);
    p->off_w1 = ns_layout_take(L, (size_t)p->buf_elems * e);
    if (p->trans) /* the column ring needs a second block */
      p->off_w2 = ns_layout_take(L, (size_t)p->buf_elems * e);
    break;
  }
  case TPLA_NS_ALGO_AUTO:
    return tpla_fail(TPLA_ERROR_INTERNAL, "tpla_ns_plan_create", "algorithm not chosen");
  }
  return TPLA_SUCCESS;
}

void ns_dist_bind(tpla_ns_plan_t p) {
  p->sumsq = ns_at(p->ws, p->off_sumsq);
  p->w1 = ns_at(p->ws, p->off_w1);
  p->w2 = ns_at(p->ws, p->off_w2);
  p->wg = ns_at(p->ws, p->off_wg);
  /* REDISTRIBUTE iterates in w2 (rows sharded) or w1 (columns sharded);
   * the other buffer is the update temp. */
  bool temp_w2 = redistributes(p) && p->trans;
  ns_iter_bind(&p->iter, p->ws, temp_w2 ? p->w2 : p->w1);
}

static size_t bytes_of(tpla_ns_plan_t p, size_t elems) {
  return elems * tpla_dtype_size(p->desc.dtype);
}
static void *elem_at(tpla_ns_plan_t p, void *base, size_t elems) {
  return (char *)base + bytes_of(p, elems);
}
static bool contiguous(tpla_matrix_t x) { return x.rows <= 1 || x.cols == x.ld; }

static tpla_status_t alltoallv(tpla_ns_plan_t p, void *recv, const size_t *rc, const size_t *rd,
                               const void *send, const size_t *sc, const size_t *sd,
                               void *stream) {
  tpla_ctx_t ctx = p->ctx;
  return ctx->backend->alltoallv(ctx, recv, rc, rd, send, sc, sd, p->desc.dtype, stream);
}

static tpla_status_t run_redistribute(tpla_ns_plan_t p, tpla_matrix_t x, void *stream) {
  tpla_ctx_t ctx = p->ctx;
  tpla_dtype_t dt = p->desc.dtype;
  int P = p->nranks, r = p->rank;
  int64_t M = p->M, N = p->N, Mp = ns_part(p->offs, r), Nr = ns_part(p->part, r);
  const size_t *sc = p->a2a, *sd = sc + P, *rc = sd + P, *rd = rc + P;
  if (!p->trans) {
    /* x = Y_p (M_p x N): pack column block q of it for rank q into w1. */
    for (int q = 0; q < P; q++)
      TPLA_TRY(ns_axpby(ctx, ns_dense(elem_at(p, p->w1, sd[q]), Mp, ns_part(p->part, q), dt),
                        ns_sub(x, 0, Mp, p->part[q], ns_part(p->part, q)), 1.0f, 0.0f, stream));
    TPLA_TRY(alltoallv(p, p->w2, rc, rd, p->w1, sc, sd, stream));
    /* w2 = Y[:, part_r] (M x N_r), rows in rank order; the temp is w1. The
     * result is in w2 or, after an odd number of ping-pong steps, in w1;
     * it moves back through the other one. */
    ns_opmat_t R = {ns_dense(p->w2, M, Nr, dt), false};
    ns_where_t end = ns_iter_end(&p->iter, p->desc.steps, NS_IN_X);
    TPLA_TRY(ns_iterate(ctx, &p->iter, R, NS_IN_X, end, p->table, p->desc.steps, 1.0 / p->safety,
                        stream));
    void *res = end == NS_IN_X ? p->w2 : p->w1, *back = end == NS_IN_X ? p->w1 : p->w2;
    TPLA_TRY(alltoallv(p, back, sc, sd, res, rc, rd, stream));
    for (int q = 0; q < P; q++)
      TPLA_TRY(ns_axpby(ctx, ns_sub(x, 0, Mp, p->part[q], ns_part(p->part, q)),
                        ns_dense(elem_at(p, back, sd[q]), Mp, ns_part(p->part, q), dt), 1.0f,
                        0.0f, stream));
    return TPLA_SUCCESS;
  }
  /* x = Y_p^T (N x M_p): its row block part_q is what rank q needs, already
   * contiguous when x is; received blocks are column blocks of
   * R^T = Y[:, part_r]^T (N_r x M), so they land in w2 and move into w1. */
  bool direct = contiguous(x);
  const void *send = x.data;
  if (!direct) {
    TPLA_TRY(ns_axpby(ctx, ns_dense(p->w1, N, Mp, dt), x, 1.0f, 0.0f, stream));
    send = p->w1;
  }
  TPLA_TRY(alltoallv(p, p->w2, rc, rd, send, sc, sd, stream));
  tpla_matrix_t Rt = ns_dense(p->w1, Nr, M, dt);
  for (int q = 0; q < P; q++)
    TPLA_TRY(ns_axpby(ctx, ns_sub(Rt, 0, Nr, p->offs[q], ns_part(p->offs, q)),
                      ns_dense(elem_at(p, p->w2, rd[q]), Nr, ns_part(p->offs, q), dt), 1.0f,
                      0.0f, stream));
  /* The temp is w2: the result is in w1 or, after an odd number of
   * ping-pong steps, in w2 (laid out as Rt); its blocks are packed into the
   * other buffer, and the result's buffer is free to receive. */
  ns_where_t end = ns_iter_end(&p->iter, p->desc.steps, NS_IN_X);
  TPLA_TRY(ns_iterate(ctx, &p->iter, (ns_opmat_t){Rt, true}, NS_IN_X, end, p->table,
                      p->desc.steps, 1.0 / p->safety, stream));
  void *res = end == NS_IN_X ? p->w1 : p->w2, *blocks = end == NS_IN_X ? p->w2 : p->w1;
  tpla_matrix_t Rr = ns_dense(res, Nr, M, dt);
  for (int q = 0; q < P; q++)
    TPLA_TRY(ns_axpby(ctx, ns_dense(elem_at(p, blocks, rd[q]), Nr, ns_part(p->offs, q), dt),
                      ns_sub(Rr, 0, Nr, p->offs[q], ns_part(p->offs, q)), 1.0f, 0.0f, stream));
  void *recv = direct ? x.data : res;
  TPLA_TRY(alltoallv(p, recv, sc, sd, blocks, rc, rd, stream));
  if (!direct)
    TPLA_TRY(ns_axpby(ctx, x, ns_dense(res, N, Mp, dt), 1.0f, 0.0f, stream));
  return TPLA_SUCCESS;
}

/* Columns sharded: gather the N x M_q blocks of Y^T around a ring (each
 * rank forwards what it received), unpacking each into its columns of W. */
static tpla_status_t gather_ring(tpla_ns_plan_t p, tpla_matrix_t W, tpla_matrix_t x,
                                 void *stream) {
  tpla_ctx_t ctx = p->ctx;
  tpla_dtype_t dt = p->desc.dtype;
  int P = p->nranks, r = p->rank;
  int64_t N = p->N;
  void *blk[2] = {p->w1, p->w2};
  TPLA_TRY(ns_axpby(ctx, ns_dense(blk[0], N, ns_part(p->offs, r), dt), x, 1.0f, 0.0f, stream));
  for (int k = 1; k < P; k++) {
    int have = (r - k + 1 + P) % P, get = (r - k + P) % P;
    size_t sn = (size_t)(N * ns_part(p->offs, have)), rn = (size_t)(N * ns_part(p->offs, get));
    int dst = sn ? (r + 1) % P : -1, src = rn ? (r - 1 + P) % P : -1;
    if (dst >= 0 || src >= 0)
      TPLA_TRY(ctx->backend->sendrecv(ctx, blk[(k - 1) % 2], sn, dst, blk[k % 2], rn, src, dt,
                                      stream));
    TPLA_TRY(ns_axpby(ctx, ns_sub(W, 0, N, p->offs[get], ns_part(p->offs, get)),
                      ns_dense(blk[k % 2], N, ns_part(p->offs, get), dt), 1.0f, 0.0f, stream));
  }
  return TPLA_SUCCESS;
}

static tpla_status_t run_gather(tpla_ns_plan_t p, tpla_matrix_t x, void *stream) {
  tpla_ctx_t ctx = p->ctx;
  int r = p->rank;
  int64_t M = p->M, N = p->N, Mp = ns_part(p->offs, r);
  /* W = Y (rows sharded) or Y^T = X (columns sharded), both dense. */
  tpla_matrix_t W = p->trans ? ns_dense(p->wg, N, M, p->desc.dtype)
                             : ns_dense(p->wg, M, N, p->desc.dtype);
  tpla_matrix_t own = p->trans ? ns_sub(W, 0, N, p->offs[r], Mp) : ns_sub(W, p->offs[r], Mp, 0, N);
  TPLA_TRY(ns_axpby(ctx, own, x, 1.0f, 0.0f, stream));
  if (p->trans) {
    TPLA_TRY(gather_ring(p, W, x, stream));
  } else {
    void *mine = elem_at(p, p->wg, (size_t)(p->offs[r] * N));
    TPLA_TRY(ctx->backend->allgatherv(ctx, p->wg, mine, p->a2a, p->desc.dtype, stream));
  }
  ns_opmat_t X = {W, p->trans != (M > N)};
  ns_where_t end = ns_iter_end(&p->iter, p->desc.steps, NS_IN_X);
  TPLA_TRY(ns_iterate(ctx, &p->iter, X, NS_IN_X, end, p->table, p->desc.steps, 1.0 / p->safety,
                      stream));
  if (end == NS_IN_TEMP) { /* an odd number of ping-pong steps: W is in the temp */
    tpla_matrix_t T = ns_iter_temp(&p->iter, X).v;
    own = p->trans ? ns_sub(T, 0, N, p->offs[r], Mp) : ns_sub(T, p->offs[r], Mp, 0, N);
  }
  return ns_axpby(ctx, x, own, 1.0f, 0.0f, stream);
}

/* LOCAL and the Gram algorithms without a redistribution iterate on the
 * shard itself. */
static bool iterates_shard(tpla_ns_plan_t p) {
  return p->algo == TPLA_NS_ALGO_LOCAL || p->algo == TPLA_NS_ALGO_GRAM_ALLREDUCE ||
         (p->algo == TPLA_NS_ALGO_GRAM_SHARDED && !redistributes(p));
}

ns_where_t ns_dist_start(tpla_ns_plan_t p) {
  return iterates_shard(p) ? ns_iter_end(&p->iter, p->desc.steps, NS_IN_X) : NS_IN_X;
}

tpla_status_t ns_dist_run(tpla_ns_plan_t p, tpla_matrix_t x, ns_where_t start, void *stream) {
  if (start != NS_IN_X && !iterates_shard(p))
    return tpla_fail(TPLA_ERROR_INTERNAL, "tpla_ns_execute", "%s starts from its shard only",
                     ns_algorithm_name(p->algo));
  switch (p->algo) {
  case TPLA_NS_ALGO_LOCAL: {
    ns_opmat_t X = {x, p->trans != (p->M > p->N)};
    return ns_iterate(p->ctx, &p->iter, X, start, NS_IN_X, p->table, p->desc.steps,
                      1.0 / p->safety, stream);
  }
  case TPLA_NS_ALGO_GRAM_ALLREDUCE:
  case TPLA_NS_ALGO_GRAM_SHARDED: {
    if (redistributes(p))
      return run_redistribute(p, x, stream);
    ns_opmat_t X = {x, !p->trans}; /* Y_p^T */
    return ns_iterate(p->ctx, &p->iter, X, start, NS_IN_X, p->table, p->desc.steps,
                      1.0 / p->safety, stream);
  }
  case TPLA_NS_ALGO_REDISTRIBUTE: return run_redistribute(p, x, stream);
  case TPLA_NS_ALGO_GATHER: return run_gather(p, x, stream);
  case TPLA_NS_ALGO_AUTO: break;
  }
  return tpla_fail(TPLA_ERROR_INTERNAL, "tpla_ns_execute", "plan has no algorithm");
}
