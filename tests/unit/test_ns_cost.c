/*
 * test_ns_cost.c - the Newton-Schulz cost model and GRAM_SHARDED's split,
 * without running a plan: the split's block rows and every rank's packed
 * layout, the model's choices with the CUDA executor's constants against the
 * pairs measured fastest on H200 (by NCCL and with pulled sums and products),
 * the predictions docs/ALGORITHMS.md quotes (printed), and two costs pinned
 * where no choice depends on them: GRAM_ALLREDUCE's formula and GRAM_SHARDED
 * of a square matrix (no redistribution).
 *
 *   ./test_ns_cost        (CTest: test_ns_cost)
 */
#include "test.h"

#include "internal.h"
#include "ns.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

/* The split of GRAM_SHARDED's polynomial: nbk = 2 P k block rows covering
 * [0, s); every rank's share of the upper triangle is equal when nbk divides
 * s and within one row per block row otherwise; the packed layout of every
 * rank's plan places each block row once, round by round, rank by rank. */
static void test_shard_partition(void) {
  struct tpla_ctx host = {0}, cuda = {0};
  host.executor = TPLA_EXECUTOR_HOST;
  cuda.executor = TPLA_EXECUTOR_CUDA;
  static const int64_t sizes[] = {1, 5, 17, 64, 100, 136, 1000, 4096, 8192};
  int failures = 0;
  for (int mc = 0; mc < 2; mc++)
    for (int si = 0; si < 9; si++)
      for (int P = 1; P <= 8; P++) {
        const ns_machine_t *mach = ns_machine(mc ? &cuda : &host);
        int64_t s = sizes[si];
        int nbk = ns_shard_blocks(mach, s, P);
        double area[8] = {0}, lo = 1e300, hi = 0.0;
        bool ok = nbk % (2 * P) == 0 && ns_shard_row(0, nbk, s) == 0 &&
                  ns_shard_row(nbk, nbk, s) == s;
        for (int i = 0; i < nbk; i++) {
          int64_t o = ns_shard_row(i, nbk, s), h = ns_shard_row(i + 1, nbk, s) - o;
          ok = ok && h >= 0;
          area[ns_shard_owner(i, nbk, P)] += (double)(h * (s - o));
        }
        for (int q = 0; q < P; q++) {
          lo = area[q] < lo ? area[q] : lo;
          hi = area[q] > hi ? area[q] : hi;
        }
        ok = ok && (s % nbk == 0 ? hi == lo : hi - lo <= 2.0 * (double)s * nbk / P);
        /* the packed layouts of all ranks' plans */
        size_t seen_total = 0;
        for (int r = 0; r < P && ok; r++) {
          ns_iter_t it;
          ns_layout_t L = {0};
          ok = ns_iter_setup_sharded(&it, mach, s, 3, TPLA_BFLOAT16, TPLA_FLOAT32,
                                     NS_SUM_ALLREDUCE, false, r, P, 3 * s, &L,
                                     "test") == TPLA_SUCCESS;
          if (!ok)
            break;
          const ns_split_t *sh = &it.split;
          size_t own = 0, at = 0;
          for (int k = 0; k < 2; k++) {
            ok = ok && sh->round_at[k] == at;
            for (int q = 0; q < P; q++) {
              /* rank q's rows of round k, ascending, are contiguous at `at` */
              size_t start = at;
              for (int i = 0; i < nbk; i++) {
                if (ns_shard_round(i, nbk) != k || ns_shard_owner(i, nbk, P) != q)
                  continue;
                int64_t o = ns_shard_row(i, nbk, s), h = ns_shard_row(i + 1, nbk, s) - o;
                ok = ok && sh->row_at[i] == (int64_t)at;
                at += (size_t)(h * (s - o));
                own += q == r ? (size_t)(h * (s - o)) : 0;
              }
              ok = ok && sh->counts[k * P + q] == at - start;
            }
          }
          ok = ok && sh->total == at && sh->own == own && area[r] == (double)own;
          seen_total = at;
          ns_iter_free(&it);
        }
        ok = ok && (double)seen_total >= (double)s * (double)(s + 1) / 2.0;
        if (!ok) {
          fprintf(stderr, "  %s s=%" PRId64 " P=%d nbk=%d: bad split (areas %.0f..%.0f)\n",
                  mc ? "cuda" : "host", s, P, nbk, lo, hi);
          failures++;
        }
      }
  ASSERT_EQ_INT(failures, 0);
}

/* What AUTO picks with the CUDA executor's constants, against the fastest
 * pair measured on H200 (bench/results/2026-11-30-run23, bf16 input, 5
 * steps, rows sharded evenly): the Gram iteration wherever it measured
 * faster, the X iteration elsewhere, and the algorithm measured fastest
 * (comments: the measured ms of the Gram iteration vs the X iteration).
 * With pulled sums and products (runs 47 and 49, same-run comparisons). */
static void test_auto_iteration_choices(void) {
  struct tpla_ctx cuda = {0};
  cuda.executor = TPLA_EXECUTOR_CUDA;
  const ns_machine_t *mach = ns_machine(&cuda);
  static const struct {
    int P;
    int64_t m, n;
    tpla_dtype_t gram;
    tpla_ns_algorithm_t algo;
    bool gram_iter; /* the Gram iteration measured faster */
    bool pulled;
  } cases[] = {
      {1, 4096, 14336, TPLA_BFLOAT16, TPLA_NS_ALGO_LOCAL, true, false},       /* 5.08 vs 6.35 ms */
      {1, 16384, 4096, TPLA_BFLOAT16, TPLA_NS_ALGO_LOCAL, true, false},       /* 5.59 vs 6.91 */
      {1, 8192, 8192, TPLA_BFLOAT16, TPLA_NS_ALGO_LOCAL, false, false},       /* 19.09 vs 20.34 */
      {1, 16384, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_LOCAL, true, false},        /* 7.70 vs 8.56 */
      {1, 8192, 8192, TPLA_FLOAT32, TPLA_NS_ALGO_LOCAL, false, false},        /* 22.64 vs 31.01 */
      {2, 16384, 4096, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_ALLREDUCE, true, false}, /* 4.11 vs 4.77 */
      {2, 14336, 4096, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_ALLREDUCE, true, false}, /* 3.96 vs 4.33 */
      {2, 4096, 14336, TPLA_BFLOAT16, TPLA_NS_ALGO_REDISTRIBUTE, true, false}, /* 4.26 vs 4.72 */
      {2, 8192, 8192, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_SHARDED, false, false}, /* 11.97 vs 17.43 */
      {2, 16384, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED, false, false}, /* 5.77 vs 6.16 */
      {2, 4096, 14336, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED, false, false}, /* 5.76 vs 6.31 */
      /* pulled: GRAM_SHARDED's Gram iteration vs GRAM_ALLREDUCE's (run 47; run 49: 3.90 vs
       * 3.96), vs REDISTRIBUTE's 4.13 (run 49); its X iteration vs its Gram (run 49) */
      {2, 16384, 4096, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_SHARDED, true, true}, /* 3.81 vs 4.12 */
      {2, 4096, 14336, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_SHARDED, true, true}, /* 4.01 vs X 4.32 */
      {2, 8192, 8192, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_SHARDED, false, true}, /* 11.26 vs 10.42 */
      /* pulled, fp32 Gram: the fastest pair of runs 57 and 59 (bench/ns_auto_check.py; the
       * Gram iteration's fp32 products and mirrors outweigh its FLOPs) */
      {2, 16384, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED, false, true}, /* 4.72 vs 4.98 */
      {2, 14336, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED, false, true}, /* 4.54 vs 5.01 */
      {2, 4096, 14336, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED, false, true}, /* 4.94 vs 5.35 */
      {2, 8192, 8192, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_ALLREDUCE, false, true}, /* 12.83, GS 13.74 */
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    int64_t rows[2] = {cases[i].m / cases[i].P, cases[i].m / cases[i].P};
    ns_shape_t sh = {cases[i].P, cases[i].m, cases[i].n, rows, TPLA_BFLOAT16, cases[i].gram,
                     5, false, cases[i].pulled, false, false};
    tpla_ns_algorithm_t want = cases[i].P == 1 ? TPLA_NS_ALGO_LOCAL : TPLA_NS_ALGO_AUTO;
    bool gram_iter = !cases[i].gram_iter; /* must be set */
    tpla_ns_algorithm_t a = ns_resolve(mach, &sh, want, TPLA_NS_ITERATE_AUTO, &gram_iter, NULL);
    if (a != cases[i].algo || gram_iter != cases[i].gram_iter)
      fprintf(stderr, "  case %d (P=%d %" PRId64 "x%" PRId64 "): %s %s\n", i, cases[i].P,
              cases[i].m, cases[i].n, ns_algorithm_name(a), gram_iter ? "GRAM" : "X");
    ASSERT_EQ_INT(a, cases[i].algo);
    ASSERT_EQ_INT(gram_iter, cases[i].gram_iter);
  }
}

/* The cost model with the CUDA executor's constants on the DESIGN.md 2-GPU
 * shapes (rows sharded, bf16, 5 steps): the long-dimension Gram all-reduce
 * of a wide matrix is never chosen; tall matrices split the polynomial
 * (GRAM_SHARDED); 8192^2 keeps GRAM_ALLREDUCE's CHAIN update with an fp32
 * Gram (a TF32 square costs twice as much) and splits with a bf16 Gram.
 * Prints the predictions docs/ALGORITHMS.md quotes. */
static void test_cost_model_choices(void) {
  struct tpla_ctx cuda = {0};
  cuda.executor = TPLA_EXECUTOR_CUDA;
  const ns_machine_t *mach = ns_machine(&cuda);
  struct {
    int64_t m, n;
    tpla_dtype_t gram;
    tpla_ns_algorithm_t want;
  } cases[] = {{16384, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED},
               {14336, 4096, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED},
               {4096, 14336, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_SHARDED},
               {8192, 8192, TPLA_FLOAT32, TPLA_NS_ALGO_GRAM_ALLREDUCE},
               {8192, 8192, TPLA_BFLOAT16, TPLA_NS_ALGO_GRAM_SHARDED},
               {4096, 14336, TPLA_BFLOAT16, TPLA_NS_ALGO_REDISTRIBUTE}};
  for (int i = 0; i < 6; i++) {
    int64_t rows[2] = {cases[i].m / 2, cases[i].m / 2};
    ns_shape_t sh = {2, cases[i].m, cases[i].n, rows, TPLA_BFLOAT16, cases[i].gram, 5, false,
                     false, false, false};
    ASSERT_EQ_INT(ns_choose(mach, &sh, NULL), cases[i].want);
  }
  int64_t rows[2] = {4096, 4096};
  ns_shape_t sq = {2, 8192, 8192, rows, TPLA_BFLOAT16, TPLA_FLOAT32, 5, false, false, false, false};
  ASSERT_TRUE(ns_choose(mach, &sq, NULL) != TPLA_NS_ALGO_GATHER);
  /* the split polynomial costs 1/P of the triangle, not the whole square */
  ns_shape_t tall = {2,     16384,        4096, (int64_t[]){8192, 8192},
                     TPLA_BFLOAT16, TPLA_FLOAT32, 5, false, false, false, false};
  ASSERT_TRUE(ns_cost(mach, &tall, TPLA_NS_ALGO_GRAM_SHARDED) <
              ns_cost(mach, &tall, TPLA_NS_ALGO_GRAM_ALLREDUCE));
  static const int64_t dims[][2] = {{8192, 8192}, {16384, 4096}, {4096, 14336}, {14336, 4096}};
  static const tpla_ns_algorithm_t cols[] = {TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                             TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_ALGO_REDISTRIBUTE,
                                             TPLA_NS_ALGO_GATHER};
  printf("  predicted ms (CUDA constants, bf16, rows even, 5 steps; P=2 pulled: sums and "
         "products by pulls): LOCAL GRAM_ALLREDUCE GRAM_SHARDED REDISTRIBUTE GATHER -> AUTO | "
         "Gram iteration: LOCAL, AUTO\n");
  for (int g = 0; g < 2; g++)
    for (int P = 2; P <= 8; P *= 2)
      for (int d = 0; d < 4 * (P == 2 ? 2 : 1); d++) { /* P = 2: by NCCL, then pulled */
        int64_t parts[8], m = dims[d % 4][0], n = dims[d % 4][1];
        for (int q = 0; q < P; q++)
          parts[q] = m / P + (q < m % P);
        ns_shape_t sh = {P, m, n, parts, TPLA_BFLOAT16, g ? TPLA_BFLOAT16 : TPLA_FLOAT32, 5, false,
                         d >= 4, false, false};
        ns_shape_t one = sh;
        one.nranks = 1;
        printf("  %s Gram P=%d%s %5" PRId64 "x%-5" PRId64 " %7.2f", g ? "bf16" : "fp32", P,
               sh.pulled ? " pulled" : "", m, n, 1e3 * ns_cost(mach, &one, TPLA_NS_ALGO_LOCAL));
        for (int a = 0; a < 4; a++)
          printf(" %7.2f", 1e3 * ns_cost(mach, &sh, cols[a]));
        printf(" -> %s", ns_algorithm_name(ns_choose(mach, &sh, NULL)));
        ns_shape_t gi = sh, gi_one = one;
        gi.gram_iter = gi_one.gram_iter = true;
        double best;
        tpla_ns_algorithm_t pick = ns_choose(mach, &gi, &best);
        printf(" | %7.2f %7.2f %s\n", 1e3 * ns_cost(mach, &gi_one, TPLA_NS_ALGO_LOCAL),
               1e3 * best, ns_algorithm_name(pick));
      }
  /* past two ranks (no pulls) AUTO leaves GRAM_SHARDED out: on 4 H200s it ran
   * ~1.7x its modelled time, no faster than one GPU (run 80) */
  for (int P = 4; P <= 8; P *= 2)
    for (int d = 0; d < 4; d++)
      for (int g = 0; g < 2; g++) {
        int64_t parts[8], m = dims[d][0];
        for (int q = 0; q < P; q++)
          parts[q] = m / P + (q < m % P);
        ns_shape_t sh = {P, m, dims[d][1], parts, TPLA_BFLOAT16,
                         g ? TPLA_BFLOAT16 : TPLA_FLOAT32, 5, false, false, false, false};
        ASSERT_TRUE(ns_choose(mach, &sh, NULL) != TPLA_NS_ALGO_GRAM_SHARDED);
        sh.gram_iter = true;
        ASSERT_TRUE(ns_choose(mach, &sh, NULL) != TPLA_NS_ALGO_GRAM_SHARDED);
      }
  /* GATHER of a columns-sharded input passes blocks around a ring, P - 1 hops each as long as
   * the largest block (review 94: costed as one all-gather, AUTO took it at 8 ranks where it
   * ran ~2x GRAM_ALLREDUCE's time): a small matrix one rank holds whole, X 256 x 4096
   * columns sharded (Y = X^T: M = 4096 sharded, N = 256) */
  int64_t one_holds[8] = {4096, 0, 0, 0, 0, 0, 0, 0};
  ns_shape_t ring = {8, 4096, 256, one_holds, TPLA_BFLOAT16,
                     TPLA_FLOAT32, 5, true, false, true, false};
  ns_shape_t allg = ring;
  allg.ring = false;
  ASSERT_TRUE(ns_cost(mach, &ring, TPLA_NS_ALGO_GATHER) >
              ns_cost(mach, &allg, TPLA_NS_ALGO_GATHER) + 6 * mach->latency);
  ASSERT_TRUE(ns_choose(mach, &allg, NULL) == TPLA_NS_ALGO_GATHER); /* as one all-gather */
  ASSERT_TRUE(ns_choose(mach, &ring, NULL) != TPLA_NS_ALGO_GATHER);
  int64_t halves[2] = {3000, 1096}; /* two ranks: one hop, the same as one all-gather */
  ns_shape_t ring2 = {2, 4096, 256, halves, TPLA_BFLOAT16,
                      TPLA_FLOAT32, 5, false, false, true, false};
  ns_shape_t allg2 = ring2;
  allg2.ring = false;
  ASSERT_NEAR(ns_cost(mach, &ring2, TPLA_NS_ALGO_GATHER),
              ns_cost(mach, &allg2, TPLA_NS_ALGO_GATHER), 1e-12);
  /* the update that avoids the redundant square on a short shard */
  ns_update_t u;
  ns_step_time(mach, 8192, 4096, TPLA_BFLOAT16, TPLA_FLOAT32, false, &u);
  ASSERT_EQ_INT(u, NS_UPDATE_CHAIN);
  ns_step_time(mach, 4096, 8192, TPLA_BFLOAT16, TPLA_FLOAT32, false, &u);
  ASSERT_EQ_INT(u, NS_UPDATE_SQUARE);
}

/* The ring all-reduce's bus traffic, 2 (P - 1) / P of its bytes (docs/ALGORITHMS.md's AR(b)). */
static double ring_allreduce(const ns_machine_t *m, int P, double bytes) {
  return P <= 1 ? 0.0 : m->latency + 2.0 * (P - 1) / P * bytes / m->allreduce_bw;
}

/* GRAM_ALLREDUCE (X iteration, no pulls) costs what docs/ALGORITHMS.md writes:
 * AR(4) + k (max_p T(N, M_p) + AR(U(N) g)). The choices above all survive the
 * all-reduce's bus factor halved (review 102, NC03), so the formula itself is
 * pinned, at 2, 4 and 8 ranks. */
static void test_cost_gram_allreduce_formula(void) {
  struct tpla_ctx cuda = {0};
  cuda.executor = TPLA_EXECUTOR_CUDA;
  const ns_machine_t *mach = ns_machine(&cuda);
  for (int P = 2; P <= 8; P *= 2) {
    int64_t rows[8], N = 4096;
    for (int q = 0; q < P; q++)
      rows[q] = 4096;
    ns_shape_t sh = {P, 4096 * P, N, rows, TPLA_BFLOAT16,
                     TPLA_FLOAT32, 5, false, false, false, false};
    double gram = (double)ns_iter_allreduce_bytes(N, ns_sym_blocks(mach, N), TPLA_FLOAT32);
    double want = ring_allreduce(mach, P, 4.0) +
                  5 * ns_step_time(mach, N, 4096, TPLA_BFLOAT16, TPLA_FLOAT32, false, NULL) +
                  5 * ring_allreduce(mach, P, gram);
    ASSERT_NEAR(ns_cost(mach, &sh, TPLA_NS_ALGO_GRAM_ALLREDUCE), want, 1e-9 * want);
  }
}

/* GRAM_SHARDED of a square matrix (N <= M) shards the dimension it already has,
 * with no redistribution: its cost is continuous from 8192 x 8192 to 8193 x 8192
 * (rows sharded, N unchanged). Costing the square as redistributed (N < M; review
 * 102, NC08) adds two all-to-alls and flips no pinned choice, only this. */
static void test_cost_gram_sharded_square_not_redistributed(void) {
  struct tpla_ctx cuda = {0};
  cuda.executor = TPLA_EXECUTOR_CUDA;
  const ns_machine_t *mach = ns_machine(&cuda);
  int64_t sq_rows[2] = {4096, 4096}, tall_rows[2] = {4097, 4096};
  ns_shape_t sq = {2, 8192, 8192, sq_rows, TPLA_BFLOAT16,
                   TPLA_BFLOAT16, 5, false, false, false, false};
  ns_shape_t tall = sq;
  tall.M = 8193;
  tall.rows = tall_rows;
  double c_sq = ns_cost(mach, &sq, TPLA_NS_ALGO_GRAM_SHARDED);
  double c_tall = ns_cost(mach, &tall, TPLA_NS_ALGO_GRAM_SHARDED);
  ASSERT_LE(fabs(c_sq - c_tall), 0.005 * c_tall);
}

int main(void) {
  TEST(test_shard_partition);
  TEST(test_cost_model_choices);
  TEST(test_auto_iteration_choices);
  TEST(test_cost_gram_allreduce_formula);
  TEST(test_cost_gram_sharded_square_not_redistributed);
  return test_summary();
}
