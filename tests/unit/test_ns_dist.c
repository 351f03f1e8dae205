/*
 * test_ns_dist.c - distributed Newton-Schulz on the host executor: for 1..8
 * ranks, even and uneven shards (one rank empty), rows and columns sharded,
 * tall, wide and square matrices, every algorithm and every preset, the
 * result equals the single-rank result to fp32 rounding, and the single-rank
 * result equals a float64 reference iteration.
 *
 *   ./test_ns_dist        (CTest: test_ns_dist)
 */
#include "test_ns_common.h"

static uint64_t seed;

/* Distributed vs single-rank (and single-rank vs float64) for one config. */
static int check_config(int P, tpla_shard_t shard, int64_t m, int64_t n, bool uneven,
                        tpla_ns_algorithm_t algo, tpla_ns_preset_t preset, int steps, int variant,
                        double *worst) {
  double *x = random_matrix(m, n, TPLA_FLOAT32, seed + (uint64_t)(m * 131 + n * 7 + P));
  double *one = malloc(sizeof(double) * (size_t)(m * n));
  double *dist = malloc(sizeof(double) * (size_t)(m * n));
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  ns_run_t run = {.P = 1, .desc = TPLA_NS_DESC_INIT, .m = m, .n = n, .x = x, .out = one};
  run.desc.shard = TPLA_SHARD_ROWS;
  run.desc.preset = preset;
  run.desc.steps = steps;
  run.sizes[0] = m;
  int bad = ns_run(&run) != 0 || run.algo[0] != TPLA_NS_ALGO_LOCAL;
  run = (ns_run_t){.P = P, .desc = run.desc, .m = m, .n = n, .x = x, .out = dist};
  run.desc.shard = shard;
  run.desc.algorithm = algo;
  run.ld_pad = variant % 2 ? 0 : 3; /* contiguous and padded rows */
  run.use_out = variant % 3 == 1;
  split(shard == TPLA_SHARD_ROWS ? m : n, P, uneven, run.sizes);
  bad = bad || ns_run(&run) != 0;
  for (int r = 0; r < P && !bad; r++) {
    tpla_ns_algorithm_t want = P == 1 ? TPLA_NS_ALGO_LOCAL : algo;
    if (run.algo[r] != run.algo[0] || (want != TPLA_NS_ALGO_AUTO && run.algo[r] != want)) {
      fprintf(stderr, "  rank %d runs algorithm %d, expected %d\n", r, run.algo[r], want);
      bad = 1;
    }
  }
  float table[3 * 64];
  double safety = preset_table(preset, steps, table);
  memcpy(ref, x, sizeof(double) * (size_t)(m * n));
  ref_ns(ref, m, n, table, steps, safety, 1e-7);
  double e1 = bad ? 1.0 : rel_diff(dist, one, (size_t)(m * n));
  double e2 = bad ? 1.0 : rel_diff(one, ref, (size_t)(m * n));
  if (e1 > worst[0])
    worst[0] = e1;
  if (e2 > worst[1])
    worst[1] = e2;
  if (e1 > 2e-5 || e2 > 2e-4) {
    fprintf(stderr, "  P=%d %s %" PRId64 "x%" PRId64 " %s algo %d preset %d: dist/one %.2e, "
            "one/f64 %.2e\n", P, shard == TPLA_SHARD_ROWS ? "rows" : "cols", m, n,
            uneven ? "uneven" : "even", algo, preset, e1, e2);
    bad = 1;
  }
  free(x);
  free(one);
  free(dist);
  free(ref);
  return bad;
}

static const int64_t shapes[][2] = {{52, 20}, {20, 52}, {32, 32}};

/* Every algorithm x sharding x shape x shard pattern, on 2, 3, 5 and 8 ranks. */
static void test_every_algorithm(void) {
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER};
  static const int ranks[] = {2, 3, 5, 8};
  double worst[2] = {0, 0};
  int failures = 0, variant = 0;
  for (int a = 0; a < 4; a++)
    for (int sh = 0; sh < 2; sh++)
      for (int s = 0; s < 3; s++)
        for (int p = 0; p < 4; p++, variant++)
          failures += check_config(ranks[p], sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, shapes[s][0],
                                   shapes[s][1], (variant + p) % 2 == 0, algos[a], TPLA_NS_MUON,
                                   5, variant, worst);
  printf("  worst: distributed vs 1 rank %.2e, 1 rank vs float64 %.2e\n", worst[0], worst[1]);
  ASSERT_EQ_INT(failures, 0);
}

/* Every rank count 1..8 (AUTO), both shardings, uneven shards. */
static void test_rank_counts(void) {
  double worst[2] = {0, 0};
  int failures = 0;
  for (int P = 1; P <= 8; P++)
    for (int sh = 0; sh < 2; sh++)
      failures += check_config(P, sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, 40, 24, true,
                               TPLA_NS_ALGO_AUTO, TPLA_NS_MUON_SCHEDULE5, 5, P + sh, worst);
  ASSERT_EQ_INT(failures, 0);
}

/* Every preset, on 3 ranks with every forced algorithm, tall and wide. */
static void test_every_preset(void) {
  static const tpla_ns_preset_t presets[] = {TPLA_NS_MUON, TPLA_NS_MUON_SCHEDULE5,
                                             TPLA_NS_POLAR_EXPRESS, TPLA_NS_CUBIC};
  double worst[2] = {0, 0};
  int failures = 0;
  for (int p = 0; p < 4; p++)
    for (int a = TPLA_NS_ALGO_GRAM_ALLREDUCE; a <= TPLA_NS_ALGO_GATHER; a++)
      for (int s = 0; s < 2; s++)
        failures += check_config(3, s ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, shapes[s][0],
                                 shapes[s][1], true, (tpla_ns_algorithm_t)a, presets[p],
                                 p == TPLA_NS_POLAR_EXPRESS ? 10 : 6, p + a + s, worst);
  ASSERT_EQ_INT(failures, 0);
}

/* Larger Gram dims (several symmetric blocks, both update variants). */
static void test_larger(void) {
  double worst[2] = {0, 0};
  int failures = 0;
  failures += check_config(2, TPLA_SHARD_ROWS, 96, 80, false, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                           TPLA_NS_MUON, 5, 0, worst);
  failures += check_config(4, TPLA_SHARD_ROWS, 96, 80, true, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                           TPLA_NS_MUON, 5, 1, worst);
  failures += check_config(3, TPLA_SHARD_COLS, 70, 96, true, TPLA_NS_ALGO_REDISTRIBUTE,
                           TPLA_NS_POLAR_EXPRESS, 5, 2, worst);
  ASSERT_EQ_INT(failures, 0);
}

int main(void) {
  seed = fresh_seed("test_ns_dist");
  TEST(test_every_algorithm);
  TEST(test_rank_counts);
  TEST(test_every_preset);
  TEST(test_larger);
  return test_summary();
}
