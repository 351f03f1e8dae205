/*
 * ns_cost.c - the Newton-Schulz cost model: a few machine constants per
 * executor, FLOP counts of one step, collective times, and the choice of
 * algorithm and update variant. docs/ALGORITHMS.md explains the formulas.
 *
 * Every input is global (known identically on all ranks after the plan's
 * agreement), so every rank makes the same choice without communicating.
 */
#include "ns.h"

#include <math.h>

/* H200-class GPU on NVLink: ~650 TFLOP/s bf16 GEMM at these sizes, fp32
 * without tensor cores ~8x slower, TF32 ~2x; NCCL all-reduce bus bandwidth
 * ~250 GB/s, all-to-all ~350 GB/s per rank (copy-engine pulls too), ~20 us
 * per collective, ~10 us of flags per pulled product, a mirror at ~2 TB/s
 * (run 50: ~17 us for 4096^2 bf16). The symmetric products use block rows
 * of >= 1024 so each GEMM stays large. */
static const ns_machine_t cuda_machine = {650e12, 8.0, 2.0, 250e9, 350e9, 20e-6, 1024, 10e-6,
                                          2e12};

/* The most block rows of a symmetric product: more save FLOPs (nb(nb+1)/2 of
 * nb^2 blocks), fewer keep each GEMM's waves full. A build-time constant
 * (-DTPLA_NS_SYM_MAX_BLOCKS=n), not a run-time one: every rank must split
 * the same way, since the packed Gram all-reduce is sized by it. Eight
 * measured faster than four at 8192^2 and 16384^2 (run 55). */
#ifndef TPLA_NS_SYM_MAX_BLOCKS
#define TPLA_NS_SYM_MAX_BLOCKS 8
#endif

/* The host executor (BLAS on a few cores, shared-memory collectives). Small
 * blocks, so that the blocked symmetric code runs in the tests. */
static const ns_machine_t host_machine = {5e9, 1.0, 1.0, 2e9, 4e9, 5e-6, 16, 5e-6, 4e9};

const ns_machine_t *ns_machine(const tpla_ctx_t ctx) {
  return ctx->executor == TPLA_EXECUTOR_CUDA ? &cuda_machine : &host_machine;
}

int ns_sym_blocks(const ns_machine_t *mach, int64_t s) {
  int64_t nb = s / mach->sym_min_block;
  return nb < 1 ? 1 : nb > TPLA_NS_SYM_MAX_BLOCKS ? TPLA_NS_SYM_MAX_BLOCKS : (int)nb;
}

/* Upper block rows of an s x s symmetric product with inner size k: block
 * row i (height t = s/nb) times columns i*t..s, so nb(nb+1)/2 of the nb^2
 * blocks: 2 k s^2 (nb+1)/(2 nb) FLOPs instead of 2 k s^2. */
static double sym_flops(int64_t s, int64_t k, int nb) {
  return (double)s * (double)s * (double)k * (nb + 1) / nb;
}

double ns_step_flops(int64_t s, int64_t l, int nblocks, ns_update_t update) {
  double gram = sym_flops(s, l, nblocks);
  double sl2 = 2.0 * (double)s * (double)s * (double)l; /* one s x s times s x l */
  if (update == NS_UPDATE_SQUARE)
    return gram + sym_flops(s, s, nblocks) + sl2; /* A X X^T, A^2, P X */
  return gram + 2.0 * sl2;                        /* A X X^T, Y = A X, A Y */
}

/* Seconds of `flops` at the rate of a GEMM reading `in` and, for the Gram
 * products, the rate ns_products gives them. */
static double in_weight(const ns_machine_t *mach, tpla_dtype_t in) {
  return in == TPLA_FLOAT32 ? mach->fp32_factor : 1.0;
}
static double square_weight(const ns_machine_t *mach, tpla_dtype_t in, tpla_dtype_t gram,
                            int64_t s, bool whole) {
  if (gram != TPLA_FLOAT32)
    return 1.0;
  switch (ns_products(in, gram, s, whole)) {
  case NS_PRODUCTS_HALF: return 1.0;
  case NS_PRODUCTS_TF32: return mach->tf32_factor;
  case NS_PRODUCTS_PLAIN: break;
  }
  return mach->fp32_factor;
}

static double esize(tpla_dtype_t t) { return (double)tpla_dtype_size(t); }

/* Seconds of one mirror of an s x s symmetric product (the lower triangle
 * written from the upper), a memory-bound pass after every product. */
static double mirror_time(const ns_machine_t *mach, int64_t s, tpla_dtype_t t) {
  return (double)s * (double)s * esize(t) / mach->mirror_bw;
}

/* The same past the diagonal blocks of nb block rows, which the product's
 * GEMMs computed whole: (nb - 1) / nb of the lower triangle (the X
 * iteration's Gram and square). */
static double blocked_mirror_time(const ns_machine_t *mach, int64_t s, int nb, tpla_dtype_t t) {
  return mirror_time(mach, s, t) * (nb - 1) / nb;
}

/* Seconds of one ns_sym_copy of HALF products (src/core/ns_iter.c): the
 * upper block rows read in fp32 and written in a half dtype, then mirrored
 * there; about 1.5 fp32 mirrors. HALF iterations mirror nothing in place:
 * one copy replaces each mirror. */
static double sym_copy_time(const ns_machine_t *mach, int64_t s) {
  return mirror_time(mach, s, TPLA_FLOAT32) * 1.5;
}

double ns_step_time(const ns_machine_t *mach, int64_t s, int64_t l, tpla_dtype_t dtype,
                    tpla_dtype_t gram_dtype, bool whole, ns_update_t *update) {
  int nb = ns_sym_blocks(mach, s);
  double wi = in_weight(mach, dtype), ws = square_weight(mach, dtype, gram_dtype, s, whole);
  double gram = sym_flops(s, l, nb) * wi;
  double sl2 = 2.0 * (double)s * (double)s * (double)l * wi;
  double square = gram + sym_flops(s, s, nb) * ws + sl2;
  double chain = gram + 2.0 * sl2;
  /* A rank without rows does no update work: CHAIN skips the square. */
  ns_update_t u = (l == 0 || chain < square) ? NS_UPDATE_CHAIN : NS_UPDATE_SQUARE;
  if (update)
    *update = u;
  /* the Gram's mirror, and the square's (P in the Gram dtype), past their
   * diagonal blocks: none where one block row is the whole product */
  int mirrored = u == NS_UPDATE_CHAIN ? 1 : 2;
  double mirrors = mirrored * blocked_mirror_time(mach, s, nb, gram_dtype);
  if (u == NS_UPDATE_SQUARE && ns_products(dtype, gram_dtype, s, whole) == NS_PRODUCTS_HALF)
    mirrors = 2 * sym_copy_time(mach, s); /* A's fp16 copy, P's in the input dtype */
  return (u == NS_UPDATE_CHAIN ? chain : square) / mach->flops + mirrors;
}

/* Per segment: the Gram of X and the update of X (one each), and in the s x s
 * space per two-step segment five symmetric products (Z1 = b G + c G^2, G Z1,
 * Z1 (G Z1), Z2, Z1 Z2), per one-step segment one (ns_gram_iter.c). */
static int gram_products(int steps) {
  return (steps / NS_GRAM_SEGMENT) * 5 + (steps % NS_GRAM_SEGMENT);
}

double ns_gram_iter_time(const ns_machine_t *mach, int64_t s, int64_t l, int steps,
                         tpla_dtype_t dtype, tpla_dtype_t gram_dtype, bool whole) {
  int nb = ns_sym_blocks(mach, s), seg = ns_gram_segments(steps);
  int products = gram_products(steps);
  double wi = in_weight(mach, dtype), ws = square_weight(mach, dtype, gram_dtype, s, whole);
  double x_side = seg * (sym_flops(s, l, nb) + 2.0 * (double)s * (double)s * (double)l) * wi;
  /* a mirror per Gram and per product; HALF: a copy per product and per update operand */
  double passes = ns_products(dtype, gram_dtype, s, whole) == NS_PRODUCTS_HALF
                      ? sym_copy_time(mach, s)
                      : mirror_time(mach, s, gram_dtype);
  return (x_side + products * sym_flops(s, s, nb) * ws) / mach->flops + (seg + products) * passes;
}

/* All steps on an s x l matrix (a rank's part, or the whole matrix), per the
 * shape's iteration. */
static double iterate_time(const ns_machine_t *mach, const ns_shape_t *sh, int64_t s, int64_t l,
                           bool whole) {
  if (sh->gram_iter)
    return ns_gram_iter_time(mach, s, l, sh->steps, sh->dtype, sh->gram_dtype, whole);
  return sh->steps * ns_step_time(mach, s, l, sh->dtype, sh->gram_dtype, whole, NULL);
}

/* Gram matrices formed (and all-reduced when distributed) per execute. */
static int grams_formed(const ns_shape_t *sh) {
  return sh->gram_iter ? ns_gram_segments(sh->steps) : sh->steps;
}

/* ---- collectives ---------------------------------------------------------- */

static double allreduce_time(const ns_machine_t *mach, int P, double bytes) {
  if (P <= 1)
    return 0.0;
  return mach->latency + 2.0 * (P - 1) / P * bytes / mach->allreduce_bw;
}

/* Personalized exchange; `bytes` is the most any rank sends or receives. */
static double alltoall_time(const ns_machine_t *mach, int P, double bytes) {
  if (P <= 1)
    return 0.0;
  return mach->latency + bytes / mach->alltoall_bw;
}

/* ---- algorithms ------------------------------------------------------------ */

/* The sum of a g x g Gram: its packed upper block rows, all-reduced. By
 * pulls (two ranks, ns_pull.c) each block row's partial travels while the
 * later rows' GEMMs run: only the last row (the smallest), what outlasts the
 * Gram's GEMMs (`hide`: the least loaded rank's seconds) and the flags show. */
static double gram_sum_time(const ns_machine_t *mach, const ns_shape_t *sh, int64_t g,
                            double hide) {
  int nb = ns_sym_blocks(mach, g);
  double bytes = (double)ns_iter_allreduce_bytes(g, nb, sh->gram_dtype);
  if (!sh->pulled || sh->nranks != 2)
    return allreduce_time(mach, sh->nranks, bytes);
  double t = (double)g / nb, last = t * t * esize(sh->gram_dtype);
  return mach->pull_latency + fmax(last, bytes - hide * mach->alltoall_bw) / mach->alltoall_bw;
}

/* Seconds of the least loaded rank's Gram GEMMs (g x g over l_q). */
static double least_gram_time(const ns_machine_t *mach, const ns_shape_t *sh, int64_t g,
                              const int64_t *l) {
  double least = HUGE_VAL;
  for (int q = 0; q < sh->nranks; q++)
    least = fmin(least, sym_flops(g, l[q], ns_sym_blocks(mach, g)) *
                            in_weight(mach, sh->dtype) / mach->flops);
  return least;
}

/* Gram all-reduce over the non-sharded dimension g; rank q holds l_q. */
static double gram_allreduce_cost(const ns_machine_t *mach, const ns_shape_t *sh, int64_t g,
                                  const int64_t *l) {
  double most = 0.0;
  for (int q = 0; q < sh->nranks; q++) {
    double t = iterate_time(mach, sh, g, l[q], false);
    most = t > most ? t : most;
  }
  return allreduce_time(mach, sh->nranks, 4.0) + most +
         grams_formed(sh) * gram_sum_time(mach, sh, g, least_gram_time(mach, sh, g, l));
}

static double most_of(const double *v, int n) {
  double most = 0.0;
  for (int q = 0; q < n; q++)
    most = v[q] > most ? v[q] : most;
  return most;
}

/* One split s x s product of GRAM_SHARDED, rounds as in ns_shard.c: gemm[r][q]
 * seconds of rank q's block rows of round r, in[r][q] seconds of the rows of
 * round r that it receives. By NCCL, two all-gathers after the GEMMs (each
 * costed by the most any rank receives). By pulls (two ranks) round 0's
 * pull could hide behind round 1's GEMMs, but on 2 H200s (run 49) the
 * products took as long as GEMMs, all their bytes and the flags in a row. */
static double split_product_time(const ns_machine_t *mach, const ns_shape_t *sh,
                                 double gemm[2][TPLA_MAX_RANKS], double in[2][TPLA_MAX_RANKS]) {
  int P = sh->nranks;
  bool pulled = sh->pulled && P == 2;
  double own[TPLA_MAX_RANKS], both[TPLA_MAX_RANKS];
  for (int q = 0; q < P; q++) {
    own[q] = gemm[0][q] + gemm[1][q];
    both[q] = in[0][q] + in[1][q];
  }
  double t = most_of(own, P);
  if (pulled)
    return t + most_of(both, P) + mach->pull_latency;
  for (int r = 0; r < 2; r++)
    t += most_of(in[r], P) > 0.0 ? mach->latency + most_of(in[r], P) : 0.0;
  return t;
}

/* One s x s product of the Gram iteration split by halves of rows on two
 * ranks with pulls (ns_rowsplit.c): the larger half's GEMMs, no mirror, and
 * the flags; the pulls hide behind the next GEMM (G_1's in part; runs 75 and
 * 77, 16384x4096 bf16: ~100-112 us a product). */
static double row_split_product_time(const ns_machine_t *mach, int64_t s, double ws) {
  double rows = (double)(s - s / 2);
  return 2.0 * rows * (double)s * (double)s * ws / mach->flops + mach->pull_latency;
}

/* GRAM_SHARDED: per Gram formed, rank q's Gram and X update on its l_q
 * columns and the Gram all-reduce; per s x s product (the X iteration's
 * polynomial, or the Gram iteration's products), the block rows (ns_shard.c)
 * and their exchange in the product's dtype (split_product_time). */
static double gram_sharded_cost(const ns_machine_t *mach, const ns_shape_t *sh, int64_t g,
                                const int64_t *l) {
  int P = sh->nranks, nb = ns_sym_blocks(mach, g), nbk = ns_shard_blocks(mach, g, P);
  double wi = in_weight(mach, sh->dtype);
  double ws = square_weight(mach, sh->dtype, sh->gram_dtype, g, false);
  double local[TPLA_MAX_RANKS];
  for (int q = 0; q < P; q++)
    local[q] = (sym_flops(g, l[q], nb) + 2.0 * (double)g * (double)g * (double)l[q]) * wi;
  double gemm[2][TPLA_MAX_RANKS] = {{0}}, sent[2][TPLA_MAX_RANKS] = {{0}}, total[2] = {0, 0};
  for (int i = 0; i < nbk; i++) {
    int q = ns_shard_owner(i, nbk, P), r = ns_shard_round(i, nbk);
    double o = (double)ns_shard_row(i, nbk, g), h = (double)ns_shard_row(i + 1, nbk, g) - o;
    gemm[r][q] += 2.0 * h * (double)g * ((double)g - o) * ws / mach->flops;
    sent[r][q] += h * ((double)g - o);
    total[r] += h * ((double)g - o);
  }
  double in[2][TPLA_MAX_RANKS], e = esize(sh->gram_iter ? sh->gram_dtype : sh->dtype);
  for (int r = 0; r < 2; r++)
    for (int q = 0; q < P; q++)
      in[r][q] = (total[r] - sent[r][q]) * e / mach->alltoall_bw;
  int products = sh->gram_iter ? gram_products(sh->steps) : sh->steps;
  double gram_mirror = sh->gram_iter ? mirror_time(mach, g, sh->gram_dtype)
                                     : blocked_mirror_time(mach, g, nb, sh->gram_dtype);
  double per_gram = most_of(local, P) / mach->flops + gram_mirror +
                    gram_sum_time(mach, sh, g, least_gram_time(mach, sh, g, l));
  tpla_dtype_t product_dtype = sh->gram_iter ? sh->gram_dtype : sh->dtype;
  bool row_split = sh->gram_iter && sh->pulled && P == 2 && ns_rowsplit_fits(g);
  double per_product = row_split ? row_split_product_time(mach, g, ws)
                                 : split_product_time(mach, sh, gemm, in) +
                                       mirror_time(mach, g, product_dtype);
  return allreduce_time(mach, P, 4.0) + grams_formed(sh) * per_gram + products * per_product;
}

double ns_cost(const ns_machine_t *mach, const ns_shape_t *sh, tpla_ns_algorithm_t a) {
  int P = sh->nranks;
  double e = esize(sh->dtype);
  switch (a) {
  case TPLA_NS_ALGO_LOCAL: {
    int64_t s = sh->M < sh->N ? sh->M : sh->N, l = sh->M < sh->N ? sh->N : sh->M;
    return iterate_time(mach, sh, s, l, true);
  }
  case TPLA_NS_ALGO_GRAM_ALLREDUCE:
    return gram_allreduce_cost(mach, sh, sh->N, sh->rows);
  case TPLA_NS_ALGO_GRAM_SHARDED:
  case TPLA_NS_ALGO_REDISTRIBUTE: {
    bool split = a == TPLA_NS_ALGO_GRAM_SHARDED;
    if (split && sh->N <= sh->M) /* the sharded dimension is the long one */
      return gram_sharded_cost(mach, sh, sh->N, sh->rows);
    /* Columns of Y split evenly; then the Gram over M. */
    int64_t cols[TPLA_MAX_RANKS];
    double moved = 0.0;
    for (int q = 0; q < P; q++) {
      cols[q] = sh->N / P + (q < sh->N % P);
      double own = (double)sh->rows[q] * (double)cols[q];
      double out = (double)sh->rows[q] * (double)sh->N - own;
      double in = (double)sh->M * (double)cols[q] - own;
      moved = out > moved ? out : moved;
      moved = in > moved ? in : moved;
    }
    return 2.0 * alltoall_time(mach, P, moved * e) +
           (split ? gram_sharded_cost(mach, sh, sh->M, cols)
                  : gram_allreduce_cost(mach, sh, sh->M, cols));
  }
  case TPLA_NS_ALGO_GATHER: {
    int64_t least = sh->rows[0], most = sh->rows[0];
    for (int q = 1; q < P; q++) {
      least = sh->rows[q] < least ? sh->rows[q] : least;
      most = sh->rows[q] > most ? sh->rows[q] : most;
    }
    /* one all-gather; or P - 1 hops, each as long as the largest block (every block
     * travels P - 1 hops, so some hop carries it at every step) */
    double gather = sh->ring ? (P - 1) * alltoall_time(mach, P, (double)most * sh->N * e)
                             : alltoall_time(mach, P, ((double)sh->M - least) * sh->N * e);
    int64_t s = sh->M < sh->N ? sh->M : sh->N, l = sh->M < sh->N ? sh->N : sh->M;
    return allreduce_time(mach, P, 4.0) + gather + iterate_time(mach, sh, s, l, true);
  }
  case TPLA_NS_ALGO_AUTO: break;
  }
  return 0.0;
}

/* GRAM_SHARDED's split of the Gram iteration's products is left to AUTO
 * (algorithm or iteration) only when the products are pulled: on 2 H200s it
 * won by 7% with pulls (run 47, 16384x4096: 3.81 ms against GRAM_ALLREDUCE's
 * Gram iteration, 4.12) and lost by 24% with NCCL's all-gathers (5.12 ms,
 * whose kernels stall the GEMMs beside them, which this model does not
 * describe; run 36 too). Past two ranks (never pulled) the X iteration's
 * split polynomial fares as badly: on 4 H200s (run 80, bf16) 5.19 ms at
 * 14336x4096 and 5.34 at 4096x14336, ~1.7x the model's 2.99 / 3.16 and no
 * faster than one GPU, where GRAM_ALLREDUCE's Gram iteration at 16384x4096
 * measured 3.30 against 3.18 predicted. At two ranks by NCCL it measured
 * the fastest at 8192^2 (run 23), so it stays there. */
static bool auto_excludes(tpla_ns_algorithm_t a, const ns_shape_t *sh, bool gram_iter) {
  return a == TPLA_NS_ALGO_GRAM_SHARDED && !sh->pulled && (gram_iter || sh->nranks > 2);
}

tpla_ns_algorithm_t ns_choose(const ns_machine_t *mach, const ns_shape_t *sh, double *cost) {
  /* Ties go to the first: fewer collectives per call come later. */
  static const tpla_ns_algorithm_t order[] = {
      TPLA_NS_ALGO_GRAM_ALLREDUCE, TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
      TPLA_NS_ALGO_GRAM_SHARDED};
  tpla_ns_algorithm_t best = order[0];
  double best_cost = ns_cost(mach, sh, best);
  for (int i = 1; i < (int)(sizeof order / sizeof order[0]); i++) {
    if (auto_excludes(order[i], sh, sh->gram_iter))
      continue;
    double c = ns_cost(mach, sh, order[i]);
    if (c < best_cost) {
      best = order[i];
      best_cost = c;
    }
  }
  if (cost)
    *cost = best_cost;
  return best;
}

tpla_ns_algorithm_t ns_resolve(const ns_machine_t *mach, const ns_shape_t *sh,
                               tpla_ns_algorithm_t algo, tpla_ns_iteration_t iter,
                               bool *gram_iter, double *cost) {
  tpla_ns_algorithm_t best = algo;
  double best_cost = HUGE_VAL;
  *gram_iter = iter == TPLA_NS_ITERATE_GRAM;
  for (int g = 0; g < 2; g++) {
    if (iter != TPLA_NS_ITERATE_AUTO && g != (iter == TPLA_NS_ITERATE_GRAM))
      continue;
    bool excluded = auto_excludes(algo, sh, g) || (g && sh->half_gram_steep);
    if (iter == TPLA_NS_ITERATE_AUTO && excluded)
      continue;
    ns_shape_t s = *sh;
    s.gram_iter = g;
    double c;
    tpla_ns_algorithm_t a = algo;
    if (algo == TPLA_NS_ALGO_AUTO)
      a = ns_choose(mach, &s, &c);
    else
      c = ns_cost(mach, &s, a);
    if (c < best_cost) {
      best = a;
      best_cost = c;
      *gram_iter = g;
    }
  }
  if (cost)
    *cost = best_cost;
  return best;
}
