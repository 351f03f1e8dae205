/*
 * test_ns_dist.c - distributed Newton-Schulz on the host executor: for 1..8
 * ranks, even and uneven shards (one rank empty), rows and columns sharded,
 * tall, wide and square matrices, every algorithm and every preset, the
 * result equals the single-rank result to fp32 rounding, and the single-rank
 * result equals a float64 reference iteration. GRAM_SHARDED also in bf16,
 * its split of the Gram polynomial, the Gram iteration (TPLA_NS_ITERATE_GRAM,
 * against the same float64 X iteration), and that AUTO runs what the cost
 * model picks (the model itself: test_ns_cost.c).
 *
 *   ./test_ns_dist        (CTest: test_ns_dist)
 */
#include "test_ns_common.h"

#include "ns.h" /* plans' iteration setup */

static uint64_t seed;
/* What check_config's plans iterate on (test_gram_iteration sets GRAM). */
static tpla_ns_iteration_t iteration = TPLA_NS_ITERATE_X;

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
  run.desc.iteration = iteration;
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
    bool forced = iteration != TPLA_NS_ITERATE_AUTO;
    if (run.iter[r] != run.iter[0] || (forced && run.iter[r] != iteration)) {
      fprintf(stderr, "  rank %d runs iteration %d, expected %d\n", r, run.iter[r], iteration);
      bad = 1;
    }
  }
  /* DESIGN.md budget: two shard copies + three Gram matrices (the Gram of
   * the non-sharded dimension for a forced GRAM_ALLREDUCE; the Gram
   * iteration: five), or the gathered matrix. Checked for even shards, where
   * "the shard" is well defined. */
  for (int r = 0; r < P && !bad && !uneven; r++) {
    int64_t g = shard == TPLA_SHARD_ROWS ? m : n, k = shard == TPLA_SHARD_ROWS ? n : m;
    int64_t shard_elems = (g + P - 1) / P * k, moved = g * ((k + P - 1) / P);
    int64_t big = m > n ? m : n, most = shard_elems > moved ? shard_elems : moved;
    int grams = iteration == TPLA_NS_ITERATE_GRAM ? 5 : 3;
    size_t allowed = (size_t)(2 * most + grams * big * big) * 4 + 4096;
    if (run.algo[r] == TPLA_NS_ALGO_GATHER)
      allowed += (size_t)(m * n) * 4;
    if (run.ws[r] > allowed) {
      fprintf(stderr, "  rank %d: workspace %zu bytes > budget %zu\n", r, run.ws[r], allowed);
      bad = 1;
    }
  }
  float table[3 * 64];
  double safety = ref_preset_table(preset, steps, table);
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

/* The algorithms a caller can force on several ranks. */
static const tpla_ns_algorithm_t forced[] = {TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                             TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                             TPLA_NS_ALGO_GRAM_SHARDED};
#define NFORCED ((int)(sizeof forced / sizeof forced[0]))

/* Every algorithm x sharding x shape x shard pattern, on 2, 3, 5 and 8 ranks. */
static void test_every_algorithm(void) {
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  static const int ranks[] = {2, 3, 5, 8};
  double worst[2] = {0, 0};
  int failures = 0, variant = 0;
  for (int a = 0; a < 5; a++)
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
    for (int a = 0; a < NFORCED; a++)
      for (int s = 0; s < 2; s++)
        failures += check_config(3, s ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, shapes[s][0],
                                 shapes[s][1], true, forced[a], presets[p],
                                 p == TPLA_NS_POLAR_EXPRESS ? 10 : 6, p + a + s, worst);
  ASSERT_EQ_INT(failures, 0);
}

/* A non-sharded dimension smaller than the rank count: some ranks get no
 * columns after the redistribution. */
static void test_tiny_dims(void) {
  double worst[2] = {0, 0};
  int failures = 0;
  for (int a = 0; a < NFORCED; a++) {
    failures += check_config(8, TPLA_SHARD_ROWS, 30, 5, false, forced[a], TPLA_NS_MUON, 5, a,
                             worst);
    failures += check_config(7, TPLA_SHARD_COLS, 3, 29, true, forced[a], TPLA_NS_MUON, 5, a + 1,
                             worst);
    failures += check_config(6, TPLA_SHARD_ROWS, 1, 17, false, forced[a], TPLA_NS_CUBIC, 3, a,
                             worst);
  }
  ASSERT_EQ_INT(failures, 0);
}

/* TPLA_NS_ITERATE_GRAM: on 1..8 ranks, every algorithm,
 * both shardings, tall, wide and square (several symmetric blocks), uneven
 * shards, presets with an odd and an even number of steps (a one-step last
 * segment, or none) and the cubic one (c = 0): the distributed result equals
 * one rank's, and one rank's equals the float64 X iteration, to fp32
 * rounding; it is the same polynomial map. */
static void test_gram_iteration(void) {
  static const int64_t dims[][2] = {{52, 20}, {20, 52}, {32, 32}, {160, 70}};
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_AUTO, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  static const struct {
    tpla_ns_preset_t preset;
    int steps;
  } sched[] = {{TPLA_NS_MUON, 5}, {TPLA_NS_POLAR_EXPRESS, 8}, {TPLA_NS_CUBIC, 3},
               {TPLA_NS_MUON_SCHEDULE5, 6}, {TPLA_NS_MUON, 1}};
  static const int ranks[] = {1, 2, 3, 5, 8};
  double worst[2] = {0, 0};
  int failures = 0, variant = 0;
  iteration = TPLA_NS_ITERATE_GRAM;
  for (int d = 0; d < 4; d++)
    for (int a = 0; a < (int)(sizeof algos / sizeof algos[0]); a++)
      for (int sh = 0; sh < 2; sh++, variant++) {
        int P = ranks[variant % 5], k = variant % 5;
        failures += check_config(P, sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, dims[d][0],
                                 dims[d][1], variant % 2 == 0, algos[a], sched[k].preset,
                                 sched[k].steps, variant, worst);
      }
  iteration = TPLA_NS_ITERATE_X;
  printf("  worst: distributed vs 1 rank %.2e, 1 rank vs float64 %.2e\n", worst[0], worst[1]);
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
  /* GRAM_SHARDED with two pairs of block rows per rank (s >= 4 P 16) */
  failures += check_config(2, TPLA_SHARD_ROWS, 160, 136, false, TPLA_NS_ALGO_GRAM_SHARDED,
                           TPLA_NS_MUON, 5, 3, worst);
  failures += check_config(3, TPLA_SHARD_ROWS, 260, 200, true, TPLA_NS_ALGO_GRAM_SHARDED,
                           TPLA_NS_MUON_SCHEDULE5, 5, 4, worst);
  failures += check_config(4, TPLA_SHARD_COLS, 150, 140, true, TPLA_NS_ALGO_GRAM_SHARDED,
                           TPLA_NS_POLAR_EXPRESS, 6, 5, worst);
  ASSERT_EQ_INT(failures, 0);
}

/* GRAM_SHARDED forced on 1..8 ranks (1: runs as LOCAL), rows and columns
 * sharded, tall, wide and square, even and uneven shards (rank 1 empty),
 * with the X iteration (the polynomial split) and the Gram iteration (every
 * s x s product split): equals one rank to fp32 rounding, and the plan
 * reports GRAM_SHARDED and the iteration. */
static void test_gram_sharded_everywhere(void) {
  static const int64_t dims[][2] = {{44, 18}, {18, 44}, {30, 30}, {70, 66}};
  for (int g = 0; g < 2; g++) {
    double worst[2] = {0, 0};
    int failures = 0, variant = 0;
    iteration = g ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
    for (int P = 1; P <= 8; P++)
      for (int sh = 0; sh < 2; sh++)
        for (int d = 0; d < 4; d++)
          for (int uneven = 0; uneven < 2; uneven++, variant++)
            failures += check_config(P, sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, dims[d][0],
                                     dims[d][1], uneven, TPLA_NS_ALGO_GRAM_SHARDED,
                                     g ? (tpla_ns_preset_t)(variant % 2 ? TPLA_NS_MUON
                                                                         : TPLA_NS_CUBIC)
                                       : TPLA_NS_MUON,
                                     5, variant, worst);
    /* odd Gram sizes on two ranks, where the Gram iteration's products are split by halves
     * of rows (ns_rowsplit.c): neither half may miss the middle row */
    static const int64_t odd[][2] = {{37, 23}, {23, 37}};
    for (int sh = 0; sh < 2; sh++)
      for (int d = 0; d < 2; d++)
        for (int uneven = 0; uneven < 2; uneven++, variant++)
          failures += check_config(2, sh ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, odd[d][0],
                                   odd[d][1], uneven, TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_MUON, 5,
                                   variant, worst);
    iteration = TPLA_NS_ITERATE_X;
    printf("  %s iteration: worst distributed vs 1 rank %.2e, 1 rank vs float64 %.2e\n",
           g ? "Gram" : "X", worst[0], worst[1]);
    ASSERT_EQ_INT(failures, 0);
  }
}

/* Runs x (m x n) on P ranks (rows sharded, uneven) with run's options;
 * returns the result or NULL. */
static double *run_with(ns_run_t run, const double *x, int64_t m, int64_t n, int P) {
  double *out = calloc((size_t)(m * n), sizeof(double));
  run.P = P;
  run.m = m;
  run.n = n;
  run.x = x;
  run.out = out;
  split(run.desc.shard == TPLA_SHARD_ROWS ? m : n, P, true, run.sizes);
  if (ns_run(&run) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* Two ranks sum the distributed Gram by pulls on the overlap transport
 * (ns_pull.c; the default, through two windows used in turn or, with
 * TPLA_NS_PULL_WINDOWS=1, one) or, with TPLA_NS_GRAM_SUM=nccl, by the executor's
 * all-reduce: both sums are fp32 sums of the two partials rounded once, so
 * the results are the same bits, for every algorithm that all-reduces the
 * Gram, both iterations, even shards and a rank with no rows, except
 * GRAM_SHARDED's Gram iteration, whose pulled products are split by rows
 * (ns_rowsplit.c) and agree to bf16 rounding; one window or two, the same
 * bits; the pulls' windows show in the workspace (GRAM_SHARDED's X
 * iteration computes P in them). One rank's desc.gram_sum COLLECTIVE makes
 * both plans those of TPLA_NS_GRAM_SUM=nccl. */
static void test_gram_sum_by_pulls(void) {
  enum { M = 72, N = 56 }; /* a Gram of three block rows on the host executor */
  static const tpla_ns_algorithm_t algos[] = {TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  double *x = random_matrix(M, N, TPLA_BFLOAT16, seed + 29);
  const char *env = getenv("TPLA_NS_GRAM_SUM"), *env2 = getenv("TPLA_NS_PULL_WINDOWS");
  char *was = env != NULL ? strdup(env) : NULL, *was2 = env2 != NULL ? strdup(env2) : NULL;
  unsetenv("TPLA_NS_PULL_WINDOWS"); /* both restored at the end */
  int runs = 0;
  for (int a = 0; a < 2; a++)
    for (int it = 0; it < 2; it++)
      for (int uneven = 0; uneven < 2; uneven++) {
        ns_run_t run = {.desc = TPLA_NS_DESC_INIT, .P = 2, .m = M, .n = N, .x = x};
        run.desc.dtype = run.desc.gram_dtype = TPLA_BFLOAT16;
        run.desc.algorithm = algos[a];
        run.desc.iteration = it ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
        split(M, 2, uneven, run.sizes);
        double *two = calloc(M * N, sizeof(double)), *nccl = calloc(M * N, sizeof(double));
        double *one = calloc(M * N, sizeof(double));
        ASSERT_TRUE(two && nccl && one);
        unsetenv("TPLA_NS_GRAM_SUM"); /* the default: pulls, two windows */
        run.out = two;
        ASSERT_EQ_INT(ns_run(&run), 0);
        size_t ws_two = run.ws[0];
        setenv("TPLA_NS_PULL_WINDOWS", "1", 1);
        run.out = one;
        int failed = ns_run(&run);
        unsetenv("TPLA_NS_PULL_WINDOWS");
        ASSERT_EQ_INT(failed, 0);
        size_t ws_one = run.ws[0];
        setenv("TPLA_NS_GRAM_SUM", "nccl", 1);
        run.out = nccl;
        failed = ns_run(&run);
        unsetenv("TPLA_NS_GRAM_SUM");
        ASSERT_EQ_INT(failed, 0);
        /* desc.gram_sum COLLECTIVE on rank 1 alone: the same plans as the environment's */
        double *collective = calloc(M * N, sizeof(double));
        ASSERT_TRUE(collective != NULL);
        size_t ws_nccl[2] = {run.ws[0], run.ws[1]};
        run.out = collective;
        run.collective_rank = 1;
        failed = ns_run(&run);
        run.collective_rank = 0;
        int same = memcmp(collective, nccl, sizeof(double) * M * N) == 0;
        free(collective);
        ASSERT_EQ_INT(failed, 0);
        ASSERT_TRUE(same && run.ws[0] == ws_nccl[0] && run.ws[1] == ws_nccl[1]);
        ASSERT_TRUE(run.algo[0] == algos[a] && run.algo[1] == algos[a]);
        ASSERT_TRUE(ws_two > ws_one);
        if (a == 1 && !it) /* a window holds the whole N x N P, which needs no g3 then */
          ASSERT_TRUE(ws_two - ws_one >= N * N * 2);
        else
          ASSERT_TRUE(ws_one > run.ws[0]);
        ASSERT_TRUE(memcmp(one, two, sizeof(double) * M * N) == 0);
        if (a == 1 && it) /* pulled: products by halves of rows, not mirrored triangles */
          ASSERT_TRUE(rel_diff(two, nccl, M * N) < 6e-2);
        else
          ASSERT_TRUE(memcmp(two, nccl, sizeof(double) * M * N) == 0);
        free(one);
        free(nccl);
        free(two);
        runs++;
      }
  printf("  %d configurations: pulls (one or two windows) and NCCL give the same bits\n", runs);
  if (was != NULL)
    setenv("TPLA_NS_GRAM_SUM", was, 1);
  if (was2 != NULL)
    setenv("TPLA_NS_PULL_WINDOWS", was2, 1);
  free(was);
  free(was2);
  free(x);
}

/* A rank passing the preset's own table as TPLA_NS_USER agrees with the
 * others (the ranks compare tables, not names) and changes nothing: every
 * preset, run for more steps than it has triples, so the table (typed in
 * again in ns_presets_ref.h) is checked bit for bit, its last triple
 * repeated, and for Polar Express deflated by the safety factor in every
 * triple but the last. */
static void test_user_table_equals_preset(void) {
  static const struct {
    tpla_ns_preset_t preset;
    int steps;
  } cases[] = {{TPLA_NS_MUON_SCHEDULE5, 6}, {TPLA_NS_POLAR_EXPRESS, 10}, {TPLA_NS_MUON, 3},
               {TPLA_NS_CUBIC, 4}};
  double *x = random_matrix(30, 18, TPLA_FLOAT32, seed + 11);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float table[3 * 10];
    double safety = ref_preset_table(cases[i].preset, cases[i].steps, table);
    ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
    run.desc.preset = cases[i].preset;
    run.desc.steps = cases[i].steps;
    run.desc.safety = (float)safety; /* the preset's default, which TPLA_NS_USER lacks */
    double *a = run_with(run, x, 30, 18, 3);
    run.user_rank = 2;
    run.user_table = table;
    double *b = run_with(run, x, 30, 18, 3);
    if (!(a && b))
      printf("  preset %d, %d steps: a run failed\n", (int)cases[i].preset, cases[i].steps);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(memcmp(a, b, sizeof(double) * 30 * 18) == 0);
    free(a);
    free(b);
  }
  free(x);
}

/* safety and eps as given, against the float64 reference. */
static void test_custom_safety_and_eps(void) {
  double *x = random_matrix(26, 40, TPLA_FLOAT32, seed + 12);
  ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
  run.desc.safety = 2.5f;
  run.desc.eps = 1e-2f;
  run.desc.preset = TPLA_NS_POLAR_EXPRESS;
  run.desc.steps = 6;
  run.desc.shard = TPLA_SHARD_COLS;
  double *got = run_with(run, x, 26, 40, 3);
  ASSERT_TRUE(got != NULL);
  float table[18], rescaled[18];
  ref_preset_table(TPLA_NS_POLAR_EXPRESS, 6, table);
  /* Polar Express divides its triples by powers of the safety factor: redo
   * it for 2.5 from the 1.01 table. */
  double r = 1.01f / 2.5f;
  for (int k = 0; k < 6; k++) {
    rescaled[3 * k] = (float)(table[3 * k] * r);
    rescaled[3 * k + 1] = (float)(table[3 * k + 1] * r * r * r);
    rescaled[3 * k + 2] = (float)(table[3 * k + 2] * r * r * r * r * r);
  }
  double *ref = malloc(sizeof(double) * 26 * 40);
  memcpy(ref, x, sizeof(double) * 26 * 40);
  ref_ns(ref, 26, 40, rescaled, 6, 2.5f, 1e-2f);
  double e = rel_diff(got, ref, 26 * 40);
  printf("  safety 2.5, eps 1e-2: vs float64 %.2e\n", e);
  ASSERT_LE(e, 1e-4);
  free(x);
  free(got);
  free(ref);
}

/* Newton-Schulz is scale-invariant: x 2^100 (entries ~1e30, squares far past
 * fp32) gives what x gives, on one rank and summed over three, rows and
 * columns sharded. An fp32 sum of squares overflowed to inf and made the
 * result zeros. 2^100 is exact, so the normalized inputs agree to the
 * rounding of the norm. */
static void test_huge_entries(void) {
  double *x = random_matrix(30, 44, TPLA_FLOAT32, seed + 16);
  double *big = malloc(sizeof(double) * 30 * 44);
  for (int i = 0; i < 30 * 44; i++)
    big[i] = x[i] * 0x1p100;
  for (int c = 0; c < 4; c++) {
    ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
    run.desc.shard = c & 1 ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS;
    int P = c & 2 ? 3 : 1;
    double *want = run_with(run, x, 30, 44, P), *got = run_with(run, big, 30, 44, P);
    ASSERT_TRUE(want != NULL && got != NULL);
    double e = rel_diff(got, want, 30 * 44);
    free(want);
    free(got);
    ASSERT_LE(e, 1e-5);
  }
  free(x);
  free(big);
}

/* gram_dtype = the input dtype: within bf16 rounding of the fp32 Gram, and
 * distributed equals one rank to bf16 rounding. */
static void test_half_gram(void) {
  double *x = random_matrix(36, 20, TPLA_BFLOAT16, seed + 13);
  ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
  run.desc.dtype = TPLA_BFLOAT16;
  double *f32gram = run_with(run, x, 36, 20, 1);
  run.desc.gram_dtype = TPLA_BFLOAT16;
  double *one = run_with(run, x, 36, 20, 1);
  run.desc.algorithm = TPLA_NS_ALGO_GRAM_ALLREDUCE;
  double *dist = run_with(run, x, 36, 20, 3);
  run.desc.shard = TPLA_SHARD_COLS;
  run.desc.algorithm = TPLA_NS_ALGO_REDISTRIBUTE;
  double *redist = run_with(run, x, 36, 20, 4);
  ASSERT_TRUE(f32gram && one && dist && redist);
  double e1 = rel_diff(one, f32gram, 720), e2 = rel_diff(dist, one, 720);
  double e3 = rel_diff(redist, one, 720);
  printf("  bf16 Gram vs fp32 Gram %.2e; distributed vs 1 rank %.2e, %.2e\n", e1, e2, e3);
  ASSERT_LE(e1, 6e-2); /* ~15 bf16 units: Muon's steps amplify rounding */
  ASSERT_LE(e2, 6e-2);
  ASSERT_LE(e3, 6e-2);
  ASSERT_TRUE(e1 > 0.0); /* the bf16 Gram really was used */
  free(x);
  free(f32gram);
  free(one);
  free(dist);
  free(redist);
}

/* GRAM_SHARDED in bf16, with an fp32 and a bf16 Gram, on 2, 3, 5 and 8
 * ranks, rows and columns, tall, wide and square, uneven shards: equals one
 * rank (same dtypes) to bf16 rounding, and is as close to the fp32 result as
 * one rank is. */
/* A half input with an fp32 Gram: the Gram iteration rounds its update
 * operand to the input dtype once per segment. Rounded as W, whose
 * eigenvalues are near -alpha where the result is O(1), it lost about twice
 * the X iteration's accuracy on a well-conditioned input; rounded as
 * M = W + alpha I it is as close to the float64 iteration as the X
 * iteration (ns_gram_iter.c). One rank, and GRAM_SHARDED on two (its products
 * by halves of rows, each rank adding alpha to its own rows). */
static void test_gram_iteration_half_update(void) {
  const int64_t m = 48, n = 256;
  static const struct {
    tpla_ns_preset_t preset;
    int steps;
  } sched[] = {{TPLA_NS_MUON, 5}, {TPLA_NS_POLAR_EXPRESS, 5}, {TPLA_NS_MUON, 3}};
  double *x = random_matrix(m, n, TPLA_BFLOAT16, seed + 17);
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  double sum[3] = {0, 0, 0}; /* X iteration, Gram iteration, GRAM_SHARDED */
  bool ran = true;
  for (int k = 0; k < 3 && ran; k++) {
    float table[3 * 8];
    double safety = ref_preset_table(sched[k].preset, sched[k].steps, table);
    memcpy(ref, x, sizeof(double) * (size_t)(m * n));
    ref_ns(ref, m, n, table, sched[k].steps, safety, 1e-7);
    ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
    run.desc.dtype = TPLA_BFLOAT16;
    run.desc.preset = sched[k].preset;
    run.desc.steps = sched[k].steps;
    double *y[3];
    run.desc.iteration = TPLA_NS_ITERATE_X;
    y[0] = run_with(run, x, m, n, 1);
    run.desc.iteration = TPLA_NS_ITERATE_GRAM;
    y[1] = run_with(run, x, m, n, 1);
    run.desc.algorithm = TPLA_NS_ALGO_GRAM_SHARDED;
    y[2] = run_with(run, x, m, n, 2);
    double e[3] = {0, 0, 0};
    for (int v = 0; v < 3; v++) {
      ran = ran && y[v] != NULL;
      e[v] = y[v] != NULL ? rel_diff(y[v], ref, (size_t)(m * n)) : 0.0;
      sum[v] += e[v];
      free(y[v]);
    }
    printf("  preset %d, %d steps: vs float64: X iteration %.2e, Gram iteration %.2e, "
           "GRAM_SHARDED on 2 %.2e\n", (int)sched[k].preset, sched[k].steps, e[0], e[1], e[2]);
  }
  free(x);
  free(ref);
  ASSERT_TRUE(ran);
  /* rounded as W the sums were ~2x the X iteration's */
  ASSERT_LE(sum[1], 1.3 * sum[0]);
  ASSERT_LE(sum[2], 1.3 * sum[0]);
}

static void test_gram_sharded_half(void) {
  static const int64_t dims[][2] = {{40, 22}, {22, 40}, {28, 28}};
  static const int ranks[] = {2, 3, 5, 8};
  double worst[3] = {0, 0, 0};
  int failures = 0;
  for (int g = 0; g < 2; g++)
    for (int d = 0; d < 3; d++)
      for (int p = 0; p < 4; p++) {
        int64_t m = dims[d][0], n = dims[d][1];
        double *x = random_matrix(m, n, TPLA_BFLOAT16, seed + (uint64_t)(20 + 7 * d + p));
        ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
        double *f32 = run_with(run, x, m, n, 1);
        run.desc.dtype = TPLA_BFLOAT16;
        run.desc.gram_dtype = g ? TPLA_BFLOAT16 : TPLA_FLOAT32;
        double *one = run_with(run, x, m, n, 1);
        run.desc.algorithm = TPLA_NS_ALGO_GRAM_SHARDED;
        run.desc.shard = (d + p) % 2 ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS;
        /* run_with, keeping the algorithm the ranks report */
        double *dist = calloc((size_t)(m * n), sizeof(double));
        run.P = ranks[p], run.m = m, run.n = n, run.x = x, run.out = dist;
        split(run.desc.shard == TPLA_SHARD_ROWS ? m : n, ranks[p], true, run.sizes);
        int bad = !f32 || !one || ns_run(&run) != 0;
        for (int r = 0; r < ranks[p] && !bad; r++)
          bad = run.algo[r] != TPLA_NS_ALGO_GRAM_SHARDED;
        double e[3] = {1, 1, 1};
        if (!bad) {
          e[0] = rel_diff(dist, one, (size_t)(m * n));
          e[1] = rel_diff(one, f32, (size_t)(m * n));
          e[2] = rel_diff(dist, f32, (size_t)(m * n));
        }
        for (int k = 0; k < 3; k++)
          worst[k] = e[k] > worst[k] ? e[k] : worst[k];
        /* ~15 bf16 units (Muon's steps amplify rounding), as for the others */
        if (bad || e[0] > 6e-2 || e[2] > 6e-2 || e[2] > 2.0 * e[1] + 1e-2) {
          fprintf(stderr, "  P=%d %" PRId64 "x%" PRId64 " %s gram %s: dist/one %.2e, one/f32 "
                  "%.2e, dist/f32 %.2e%s\n", ranks[p], m, n,
                  run.desc.shard == TPLA_SHARD_ROWS ? "rows" : "cols", g ? "bf16" : "fp32", e[0],
                  e[1], e[2], bad ? " (run failed or wrong algorithm)" : "");
          failures++;
        }
        free(x);
        free(f32);
        free(one);
        free(dist);
      }
  printf("  bf16: distributed vs 1 rank %.2e; vs fp32: 1 rank %.2e, distributed %.2e\n",
         worst[0], worst[1], worst[2]);
  ASSERT_EQ_INT(failures, 0);
}

/* execute_out with out == x is in place. */
static void test_execute_out_in_place(void) {
  double *x = random_matrix(24, 24, TPLA_FLOAT32, seed + 14);
  ns_run_t run = {.desc = TPLA_NS_DESC_INIT};
  double *a = run_with(run, x, 24, 24, 2);
  run.alias_out = true;
  double *b = run_with(run, x, 24, 24, 2);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(memcmp(a, b, sizeof(double) * 24 * 24) == 0);
  free(x);
  free(a);
  free(b);
}

/* TPLA_NS_ITERATE_AUTO (the default) runs what the model picks for the
 * host executor's constants: the Gram iteration for a tall or wide matrix,
 * X for a square one; with a forced GRAM_SHARDED, its split Gram iteration
 * only where the products are pulled (two ranks, not TPLA_NS_GRAM_SUM=nccl).
 * The plan reports it, and the result is bit for bit the forced iteration's. */
static void test_auto_iteration(void) {
  static const struct {
    int P;
    int64_t m, n;
    tpla_ns_algorithm_t algo;
    tpla_ns_iteration_t want;
    const char *gram_sum; /* TPLA_NS_GRAM_SUM; NULL: unset */
  } cases[] = {{1, 160, 40, TPLA_NS_ALGO_AUTO, TPLA_NS_ITERATE_GRAM, NULL},
               {1, 40, 160, TPLA_NS_ALGO_AUTO, TPLA_NS_ITERATE_GRAM, NULL},
               {1, 48, 48, TPLA_NS_ALGO_AUTO, TPLA_NS_ITERATE_X, NULL},
               {3, 240, 40, TPLA_NS_ALGO_GRAM_ALLREDUCE, TPLA_NS_ITERATE_GRAM, NULL},
               {3, 240, 40, TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_ITERATE_X, NULL},
               {2, 48, 48, TPLA_NS_ALGO_AUTO, TPLA_NS_ITERATE_X, NULL},
               {2, 240, 40, TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_ITERATE_GRAM, NULL},
               {2, 240, 40, TPLA_NS_ALGO_GRAM_SHARDED, TPLA_NS_ITERATE_X, "nccl"}};
  const char *env = getenv("TPLA_NS_GRAM_SUM"); /* restored at the end */
  char *was = env != NULL ? strdup(env) : NULL;
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    if (cases[i].gram_sum != NULL)
      setenv("TPLA_NS_GRAM_SUM", cases[i].gram_sum, 1);
    else
      unsetenv("TPLA_NS_GRAM_SUM");
    int64_t m = cases[i].m, n = cases[i].n;
    double *x = random_matrix(m, n, TPLA_FLOAT32, seed + (uint64_t)i);
    double *out[2] = {malloc(sizeof(double) * (size_t)(m * n)),
                      malloc(sizeof(double) * (size_t)(m * n))};
    ns_run_t run[2];
    for (int k = 0; k < 2; k++) { /* AUTO, then the iteration it should pick */
      run[k] = (ns_run_t){.P = cases[i].P, .desc = TPLA_NS_DESC_INIT, .m = m, .n = n, .x = x,
                          .out = out[k]};
      run[k].desc.algorithm = cases[i].algo;
      run[k].desc.iteration = k == 0 ? TPLA_NS_ITERATE_AUTO : cases[i].want;
      split(m, cases[i].P, false, run[k].sizes);
      ASSERT_EQ_INT(ns_run(&run[k]), 0);
    }
    for (int r = 0; r < cases[i].P; r++) {
      ASSERT_EQ_INT(run[0].iter[r], cases[i].want);
      ASSERT_EQ_INT(run[0].algo[r], run[1].algo[r]);
    }
    ASSERT_TRUE(memcmp(out[0], out[1], sizeof(double) * (size_t)(m * n)) == 0);
    free(x);
    free(out[0]);
    free(out[1]);
  }
  if (was != NULL)
    setenv("TPLA_NS_GRAM_SUM", was, 1);
  else
    unsetenv("TPLA_NS_GRAM_SUM");
  free(was);
}

int main(void) {
  seed = fresh_seed("test_ns_dist");
  TEST(test_every_algorithm);
  TEST(test_rank_counts);
  TEST(test_every_preset);
  TEST(test_tiny_dims);
  TEST(test_larger);
  TEST(test_gram_sharded_everywhere);
  TEST(test_user_table_equals_preset);
  TEST(test_custom_safety_and_eps);
  TEST(test_huge_entries);
  TEST(test_half_gram);
  TEST(test_gram_sharded_half);
  TEST(test_gram_sum_by_pulls);
  TEST(test_execute_out_in_place);
  TEST(test_gram_iteration);
  TEST(test_gram_iteration_half_update);
  TEST(test_auto_iteration);
  return test_summary();
}
