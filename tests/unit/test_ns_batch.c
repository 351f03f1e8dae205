/*
 * test_ns_batch.c - batched Newton-Schulz on the host executor: a list of
 * differently shaped, sharded, typed matrices gives the same results as
 * each matrix alone on one rank, whether the batch moves whole matrices to
 * owners or runs each distributed, also with the Gram iteration; the cost
 * model sends many small matrices to owners and a large one alone to its
 * distributed plan; matrices of one shape and iteration, run together in
 * groups (ns_group.c), equal themselves run one by one, bit for bit; and
 * 1000 calls do not grow the context's or the plan's memory.
 *
 *   ./test_ns_batch       (CTest: test_ns_batch)
 */
#include "test_ns_common.h"

#define MAXM 20

typedef struct {
  int64_t m, n;
  tpla_shard_t shard;
  tpla_dtype_t dtype;
  tpla_ns_preset_t preset;
  int steps;
} mat_t;

typedef struct {
  int P, count;
  mat_t mats[MAXM];
  tpla_ns_algorithm_t algo; /* for every matrix */
  tpla_ns_iteration_t iteration;
  float safety[MAXM], eps[MAXM]; /* both 0: the descriptor's defaults */
  int64_t sizes[MAXM][8];
  double *x[MAXM], *out[MAXM];
  int owner[8][MAXM]; /* per rank (each rank's answer; run_batch checks they agree) */
  tpla_ns_iteration_t iter[8][MAXM]; /* the same for the iteration each matrix runs */
  int loops;            /* execute this many times (memory test) */
  size_t ctx_ws[8][2], plan_ws[8][2]; /* per rank: after the first and the last call */
} batch_t;

static int batch_body(tpla_ctx_t ctx, int rank, int nranks, void *arg) {
  batch_t *b = arg;
  tpla_ns_desc_t d[MAXM];
  tpla_matrix_t xs[MAXM];
  int64_t off[MAXM];
  for (int i = 0; i < b->count; i++) {
    mat_t *mt = &b->mats[i];
    bool rows = mt->shard == TPLA_SHARD_ROWS;
    off[i] = 0;
    for (int r = 0; r < rank; r++)
      off[i] += b->sizes[i][r];
    d[i] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    d[i].shard = mt->shard;
    d[i].local_rows = rows ? b->sizes[i][rank] : mt->m;
    d[i].local_cols = rows ? mt->n : b->sizes[i][rank];
    d[i].dtype = mt->dtype;
    d[i].preset = mt->preset;
    d[i].steps = mt->steps;
    d[i].algorithm = b->algo;
    d[i].iteration = b->iteration;
    if (b->safety[i] > 0.0f || b->eps[i] > 0.0f)
      d[i].safety = b->safety[i], d[i].eps = b->eps[i];
    int64_t ld = d[i].local_cols + 2;
    xs[i] = (tpla_matrix_t){calloc((size_t)((d[i].local_rows + 1) * ld), 4), d[i].local_rows,
                            d[i].local_cols, ld, mt->dtype};
    for (int64_t r = 0; r < xs[i].rows; r++)
      for (int64_t c = 0; c < xs[i].cols; c++)
        tpla_store_elem(xs[i].data, mt->dtype, (size_t)(r * ld + c),
                        b->x[i][(rows ? off[i] + r : r) * mt->n + (rows ? c : off[i] + c)]);
  }
  tpla_ns_batch_plan_t plan = NULL;
  tpla_status_t s = tpla_ns_batch_plan_create(&plan, ctx, b->count, d);
  for (int i = 0; i < b->count && s == TPLA_SUCCESS; i++)
    s = tpla_ns_batch_plan_owner(plan, i, &b->owner[rank][i]);
  for (int i = 0; i < b->count && s == TPLA_SUCCESS; i++)
    s = tpla_ns_batch_plan_iteration(plan, i, &b->iter[rank][i]);
  int loops = b->loops > 0 ? b->loops : 1;
  for (int k = 0; k < loops && s == TPLA_SUCCESS; k++) {
    s = tpla_ns_batch_execute(plan, xs, NULL);
    if (k == 0 || k == loops - 1) {
      int at = k == 0 ? 0 : 1;
      tpla_ctx_workspace_bytes(ctx, &b->ctx_ws[rank][at]);
      tpla_ns_batch_plan_workspace_bytes(plan, &b->plan_ws[rank][at]);
    }
  }
  if (s != TPLA_SUCCESS)
    fprintf(stderr, "  rank %d: %s: %s\n", rank, tpla_status_string(s), tpla_last_error());
  for (int i = 0; i < b->count; i++) {
    bool rows = b->mats[i].shard == TPLA_SHARD_ROWS;
    for (int64_t r = 0; r < xs[i].rows && s == TPLA_SUCCESS; r++)
      for (int64_t c = 0; c < xs[i].cols; c++)
        b->out[i][(rows ? off[i] + r : r) * b->mats[i].n + (rows ? c : off[i] + c)] =
            tpla_load_elem(xs[i].data, b->mats[i].dtype, (size_t)(r * xs[i].ld + c));
    free(xs[i].data);
  }
  tpla_ns_batch_plan_destroy(plan);
  return s != TPLA_SUCCESS;
}

/* The ranks' batch bodies; every rank must report the same owners and
 * iterations, and a forced iteration is the one reported. */
static int run_batch(int P, batch_t *b) {
  int failed = run_host_ranks(P, batch_body, b);
  for (int r = 0; r < P && !failed; r++)
    for (int i = 0; i < b->count; i++)
      if (b->owner[r][i] != b->owner[0][i] || b->iter[r][i] != b->iter[0][i] ||
          (b->iteration != TPLA_NS_ITERATE_AUTO && b->iter[r][i] != b->iteration)) {
        fprintf(stderr, "  matrix %d: rank %d says owner %d, iteration %d; rank 0 %d, %d; "
                "asked %d\n", i, r, b->owner[r][i], (int)b->iter[r][i], b->owner[0][i],
                (int)b->iter[0][i], (int)b->iteration);
        failed = 1;
      }
  return failed;
}

static uint64_t seed;

static void setup(batch_t *b, int P, int count, const mat_t *mats) {
  memset(b, 0, sizeof *b);
  b->P = P;
  b->count = count;
  for (int i = 0; i < count; i++) {
    b->mats[i] = mats[i];
    split(mats[i].shard == TPLA_SHARD_ROWS ? mats[i].m : mats[i].n, P, i % 2 == 0, b->sizes[i]);
    b->x[i] = random_matrix(mats[i].m, mats[i].n, mats[i].dtype, seed + (uint64_t)i);
    b->out[i] = calloc((size_t)(mats[i].m * mats[i].n), sizeof(double));
  }
}

static void teardown(batch_t *b) {
  for (int i = 0; i < b->count; i++) {
    free(b->x[i]);
    free(b->out[i]);
  }
}

/* Largest relative difference to each matrix alone on one rank. */
static double worst_vs_single(batch_t *b, double *worst_half) {
  double worst = 0.0;
  *worst_half = 0.0;
  for (int i = 0; i < b->count; i++) {
    mat_t *mt = &b->mats[i];
    double *one = calloc((size_t)(mt->m * mt->n), sizeof(double));
    ns_run_t run = {.P = 1, .desc = TPLA_NS_DESC_INIT, .m = mt->m, .n = mt->n, .x = b->x[i],
                    .out = one};
    run.desc.dtype = mt->dtype;
    run.desc.preset = mt->preset;
    run.desc.steps = mt->steps;
    if (b->safety[i] > 0.0f || b->eps[i] > 0.0f)
      run.desc.safety = b->safety[i], run.desc.eps = b->eps[i];
    run.sizes[0] = mt->m;
    double e = ns_run(&run) == 0 ? rel_diff(b->out[i], one, (size_t)(mt->m * mt->n)) : 1.0;
    if (mt->dtype == TPLA_FLOAT32)
      worst = e > worst ? e : worst;
    else
      *worst_half = e > *worst_half ? e : *worst_half;
    free(one);
  }
  return worst;
}

static const mat_t mixed[] = {
    {20, 12, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5},
    {12, 30, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_MUON_SCHEDULE5, 5},
    {16, 16, TPLA_SHARD_ROWS, TPLA_BFLOAT16, TPLA_NS_MUON, 5},
    {40, 8, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_POLAR_EXPRESS, 8},
    {9, 9, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_CUBIC, 12},
    {10, 44, TPLA_SHARD_ROWS, TPLA_FLOAT16, TPLA_NS_MUON, 4},
    {33, 17, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_MUON, 5}};

/* Owners (LOCAL forced), per-matrix distributed (each algorithm forced) and
 * AUTO all equal each matrix alone. */
static void test_batch_matches_single_rank(void) {
  static const tpla_ns_algorithm_t modes[] = {TPLA_NS_ALGO_LOCAL, TPLA_NS_ALGO_AUTO,
                                              TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_REDISTRIBUTE, TPLA_NS_ALGO_GATHER,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  for (int P = 1; P <= 4; P += 3)
    for (int mode = 0; mode < 6; mode++) {
      batch_t b;
      setup(&b, P, 7, mixed);
      b.algo = modes[mode];
      ASSERT_EQ_INT(run_batch(P, &b), 0);
      for (int i = 0; i < b.count; i++) { /* LOCAL: whole matrices on ranks */
        bool owned = modes[mode] == TPLA_NS_ALGO_LOCAL && P > 1;
        if (owned ? b.owner[0][i] < 0 || b.owner[0][i] >= P
                  : modes[mode] != TPLA_NS_ALGO_AUTO && b.owner[0][i] != -1)
          ASSERT_TRUE(!"unexpected owner");
      }
      double half, e = worst_vs_single(&b, &half);
      printf("  P=%d mode %d: fp32 %.2e, half %.2e\n", P, modes[mode], e, half);
      teardown(&b);
      ASSERT_LE(e, 2e-5);
      ASSERT_LE(half, 5e-2);
    }
}

/* The Gram iteration in a batch (owners, AUTO, GRAM_ALLREDUCE): each matrix
 * equals itself alone on one rank with the X iteration, to rounding. */
static void test_batch_gram_iteration(void) {
  static const tpla_ns_algorithm_t modes[] = {TPLA_NS_ALGO_LOCAL, TPLA_NS_ALGO_AUTO,
                                              TPLA_NS_ALGO_GRAM_ALLREDUCE};
  for (int P = 1; P <= 3; P += 2)
    for (int mode = 0; mode < 3; mode++) {
      batch_t b;
      setup(&b, P, 7, mixed);
      b.algo = modes[mode];
      b.iteration = TPLA_NS_ITERATE_GRAM;
      ASSERT_EQ_INT(run_batch(P, &b), 0);
      double half, e = worst_vs_single(&b, &half);
      printf("  P=%d mode %d, Gram iteration: fp32 %.2e, half %.2e\n", P, modes[mode], e, half);
      teardown(&b);
      ASSERT_LE(e, 2e-5);
      ASSERT_LE(half, 5e-2);
    }
}

/* Many small matrices go to owners, balanced; one large one stays
 * distributed. */
static void test_batch_auto_choice(void) {
  mat_t small[12];
  for (int i = 0; i < 12; i++)
    small[i] = (mat_t){8 + i, 20 - i, i % 2 ? TPLA_SHARD_COLS : TPLA_SHARD_ROWS, TPLA_FLOAT32,
                       TPLA_NS_MUON, 5};
  batch_t b;
  setup(&b, 4, 12, small);
  ASSERT_EQ_INT(run_batch(4, &b), 0);
  int per_rank[4] = {0};
  for (int i = 0; i < 12; i++) {
    ASSERT_TRUE(b.owner[0][i] >= 0 && b.owner[0][i] < 4);
    per_rank[b.owner[0][i]]++;
  }
  for (int q = 0; q < 4; q++)
    ASSERT_TRUE(per_rank[q] >= 2);
  double half, e = worst_vs_single(&b, &half);
  teardown(&b);
  ASSERT_LE(e, 2e-5);
  mat_t big = {96, 96, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5};
  setup(&b, 2, 1, &big);
  ASSERT_EQ_INT(run_batch(2, &b), 0);
  ASSERT_EQ_INT(b.owner[0][0], -1);
  e = worst_vs_single(&b, &half);
  teardown(&b);
  ASSERT_LE(e, 2e-5);
}

/* Repeated shapes (X and Gram iteration, SQUARE and cubic updates, odd and
 * even steps, a different step count that must not join its shape's
 * group): on one rank, and on three with whole matrices at owners, the
 * groups' results equal the same batch with grouping off
 * (TPLA_NS_BATCH_GROUP=1) bit for bit (a square matrix sharded by rows or by
 * columns too), also when runs hold two members
 * (=2, runs of 2, 2, 1) and with a value that is no number (the default);
 * grouping is seen in the workspace, which holds the groups' slots. */
static void test_batch_groups_equal_one_by_one(void) {
  static const mat_t reps[] = {{16, 24, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5},
                               {24, 16, TPLA_SHARD_COLS, TPLA_BFLOAT16, TPLA_NS_MUON, 4},
                               {12, 12, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_CUBIC, 3},
                               {30, 10, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_POLAR_EXPRESS, 7},
                               /* square and column-sharded: alone, one rank iterates it
                                * transposed (review 90: its group did not) */
                               {12, 12, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_CUBIC, 3}};
  static const int copies[] = {5, 3, 3, 2, 2};
  mat_t list[MAXM];
  int count = 0;
  for (int k = 0; k < 5; k++)
    for (int c = 0; c < copies[k]; c++)
      list[count++] = reps[k];
  list[count] = reps[0];
  list[count++].steps = 6; /* alone: a group is one step count */
  /* "on" is no number: the default cap, as unset */
  static const char *const caps[] = {"1", "64", "2", "on"};
  for (int P = 1; P <= 3; P += 2)
    for (int iter = 0; iter < 2; iter++) {
      double *ref[MAXM];
      size_t ws_off = 0;
      for (int cap = 0; cap < 4; cap++) {
        setenv("TPLA_NS_BATCH_GROUP", caps[cap], 1);
        batch_t b;
        setup(&b, P, count, list);
        b.algo = P > 1 ? TPLA_NS_ALGO_LOCAL : TPLA_NS_ALGO_AUTO;
        b.iteration = iter ? TPLA_NS_ITERATE_GRAM : TPLA_NS_ITERATE_X;
        int failed = run_batch(P, &b);
        unsetenv("TPLA_NS_BATCH_GROUP"); /* read at plan creation: done */
        ASSERT_EQ_INT(failed, 0);
        size_t ws = b.plan_ws[0][0];
        for (int r = 1; r < P; r++)
          ws = b.plan_ws[r][0] > ws ? b.plan_ws[r][0] : ws;
        double half, e = worst_vs_single(&b, &half);
        printf("  P=%d %s iteration, TPLA_NS_BATCH_GROUP=%s: workspace %zu bytes, fp32 %.2e, "
               "half %.2e\n", P, iter ? "Gram" : "X", caps[cap], ws, e, half);
        ASSERT_LE(e, 2e-5);
        ASSERT_LE(half, 5e-2);
        for (int i = 0; i < count; i++) {
          size_t n = (size_t)(list[i].m * list[i].n);
          if (cap == 0) {
            ref[i] = b.out[i];
            b.out[i] = NULL;
          } else {
            ASSERT_TRUE(memcmp(ref[i], b.out[i], n * sizeof(double)) == 0);
          }
        }
        if (cap == 0)
          ws_off = ws;
        else
          ASSERT_TRUE(ws > ws_off);
        teardown(&b);
      }
      for (int i = 0; i < count; i++)
        free(ref[i]);
    }
}

/* One shape in six copies, each with its own safety and eps (ns_group.c normalizes each
 * member with its own): grouped (the workspace holds the groups' slots) on one rank and at
 * owners on three, every matrix equals itself alone on one rank. */
static void test_batch_groups_keep_each_safety_and_eps(void) {
  /* (1, 0): the default safety with eps 0; (0, 4): the default safety with eps 4 */
  static const float safety[6] = {1.0f, 2.0f, 0.5f, 1.5f, 0.0f, 3.0f};
  static const float eps[6] = {0.0f, 0.0f, 1.0f, 0.25f, 4.0f, 0.5f};
  mat_t list[6];
  for (int i = 0; i < 6; i++)
    list[i] = (mat_t){16, 24, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5};
  for (int P = 1; P <= 3; P += 2) {
    size_t ws[2];
    for (int cap = 0; cap < 2; cap++) { /* grouping off, then the default */
      if (cap == 0)
        setenv("TPLA_NS_BATCH_GROUP", "1", 1);
      batch_t b;
      setup(&b, P, 6, list);
      memcpy(b.safety, safety, sizeof safety);
      memcpy(b.eps, eps, sizeof eps);
      b.algo = P > 1 ? TPLA_NS_ALGO_LOCAL : TPLA_NS_ALGO_AUTO;
      int failed = run_batch(P, &b);
      unsetenv("TPLA_NS_BATCH_GROUP");
      ASSERT_EQ_INT(failed, 0);
      ws[cap] = b.plan_ws[0][0];
      for (int r = 1; r < P; r++)
        ws[cap] = b.plan_ws[r][0] > ws[cap] ? b.plan_ws[r][0] : ws[cap];
      double half, e = worst_vs_single(&b, &half);
      printf("  P=%d, TPLA_NS_BATCH_GROUP=%s: fp32 %.2e\n", P, cap ? "(unset)" : "1", e);
      teardown(&b);
      ASSERT_LE(e, 2e-5);
    }
    ASSERT_TRUE(ws[1] > ws[0]); /* the default formed groups */
  }
}

/* Owners are assigned largest first, each to the least loaded rank: on two ranks, a matrix
 * costlier than two small ones together gets a rank of its own, wherever it is listed. */
static void test_batch_owners_largest_first(void) {
  static const mat_t mats[] = {{8, 8, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5},
                               {96, 96, TPLA_SHARD_ROWS, TPLA_FLOAT32, TPLA_NS_MUON, 5},
                               {8, 8, TPLA_SHARD_COLS, TPLA_FLOAT32, TPLA_NS_MUON, 5}};
  batch_t b;
  setup(&b, 2, 3, mats);
  b.algo = TPLA_NS_ALGO_LOCAL;
  ASSERT_EQ_INT(run_batch(2, &b), 0);
  printf("  owners: small %d, large %d, small %d\n", b.owner[0][0], b.owner[0][1],
         b.owner[0][2]);
  ASSERT_TRUE(b.owner[0][1] >= 0 && b.owner[0][1] < 2);
  ASSERT_EQ_INT(b.owner[0][0], 1 - b.owner[0][1]);
  ASSERT_EQ_INT(b.owner[0][2], 1 - b.owner[0][1]);
  double half, e = worst_vs_single(&b, &half);
  teardown(&b);
  ASSERT_LE(e, 2e-5);
}

/* 1000 calls: the context's scratch and the plan's workspace do not grow. */
static void test_batch_memory_is_stable(void) {
  static const tpla_ns_algorithm_t modes[] = {TPLA_NS_ALGO_LOCAL, TPLA_NS_ALGO_GRAM_ALLREDUCE,
                                              TPLA_NS_ALGO_GRAM_SHARDED};
  for (int mode = 0; mode < 3; mode++) {
    batch_t b;
    setup(&b, 2, 3, mixed);
    b.algo = modes[mode];
    b.loops = 1000;
    ASSERT_EQ_INT(run_batch(2, &b), 0);
    teardown(&b);
    for (int r = 0; r < 2; r++) {
      printf("  mode %d rank %d: context scratch %zu -> %zu bytes, plan workspace %zu -> %zu "
             "bytes\n", modes[mode], r, b.ctx_ws[r][0], b.ctx_ws[r][1], b.plan_ws[r][0],
             b.plan_ws[r][1]);
      ASSERT_TRUE(b.ctx_ws[r][0] == b.ctx_ws[r][1]);
      ASSERT_TRUE(b.plan_ws[r][0] == b.plan_ws[r][1] && b.plan_ws[r][0] > 0);
    }
  }
}

int main(void) {
  seed = fresh_seed("test_ns_batch");
  TEST(test_batch_matches_single_rank);
  TEST(test_batch_gram_iteration);
  TEST(test_batch_auto_choice);
  TEST(test_batch_groups_equal_one_by_one);
  TEST(test_batch_groups_keep_each_safety_and_eps);
  TEST(test_batch_owners_largest_first);
  TEST(test_batch_memory_is_stable);
  return test_summary();
}
