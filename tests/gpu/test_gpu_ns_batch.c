/*
 * test_gpu_ns_batch.c - batched Newton-Schulz (tpla_ns_batch_*) on the CUDA
 * executor, where matrices of one shape and iteration run together
 * (src/core/ns_group.c: strided-batched cuBLASLt GEMMs, batched copies and
 * mirrors): one GPU (every matrix whole on it) and two GPUs (rows sharded,
 * LOCAL asked for: whole matrices at owners).
 *   - every result against a float64 host reference of the same iteration
 *     on the same rounded input (ns_ref.h), within the bounds test_gpu_ns.c
 *     uses;
 *   - the same batch with grouping off (TPLA_NS_BATCH_GROUP=1: one matrix
 *     at a time, as before groups) agrees to the same bound, and its
 *     workspace is smaller: the grouped run did form groups; so does the
 *     batch with runs of at most 4 members (=4: 6 as 4 + 2, 5 as 4 + 1);
 *   - padding past each row (ld > cols) is left untouched.
 * The batch: six wide and four tall bf16 Muon matrices (one shape each),
 * three fp32 cubic ones with three steps (an odd count: the iteration
 * starts in the temp; c = 0: no square), five bf16 ones with the Gram
 * iteration, and one of the wide shape with four steps, which joins no
 * group.
 *
 * Run: build-gpu/tests/test_gpu_ns_batch (exits 77 without a GPU; the
 * 2-GPU test skips on one). TPLA_NS_TEST_HOST=1 runs it on the host
 * executor (threads as ranks), to check the test where there is no GPU.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_ref.h"
#include "ns_team.h"

#define EPS 1e-7f
#define TOL_FP32 1e-4
#define TOL_BF16 6e-2      /* test_gpu_ns.c's bound for bf16 with an fp32 Gram */
#define TOL_BF16_GRAM 8e-2 /* the Gram iteration against the X iteration's reference */
#define PAD_BYTE 0x5a
#define MAXM 24

typedef struct {
  int64_t m, n, pad; /* ld = n + pad */
  tpla_dtype_t dtype;
  tpla_ns_preset_t preset;
  int steps;
  tpla_ns_iteration_t iteration;
  int copies;
} kind_t;

static const kind_t kinds[] = {
    {256, 384, 0, TPLA_BFLOAT16, TPLA_NS_MUON, 5, TPLA_NS_ITERATE_AUTO, 6},
    {384, 256, 8, TPLA_BFLOAT16, TPLA_NS_MUON, 5, TPLA_NS_ITERATE_AUTO, 4},
    {200, 200, 3, TPLA_FLOAT32, TPLA_NS_CUBIC, 3, TPLA_NS_ITERATE_AUTO, 3},
    {128, 512, 0, TPLA_BFLOAT16, TPLA_NS_MUON, 5, TPLA_NS_ITERATE_GRAM, 5},
    {256, 384, 0, TPLA_BFLOAT16, TPLA_NS_MUON, 4, TPLA_NS_ITERATE_AUTO, 1}};
#define NKINDS 5

static struct {
  bool host;
  int count;
  int kind[MAXM];
  double *x[MAXM];   /* inputs rounded to their dtype */
  double *ref[MAXM]; /* float64 Newton-Schulz of x */
} fx;

typedef struct {
  int nranks;
  double *out[MAXM];           /* the assembled results */
  size_t ws[TEAM_MAX_RANKS];   /* each rank's batch workspace */
  int padding_bad;
} run_t;

static int64_t rows_of(int64_t m, int nranks, int rank) { /* even rows; the first get extra */
  return m / nranks + (rank < m % nranks);
}
static int64_t first_row(int64_t m, int nranks, int rank) {
  int64_t r0 = 0;
  for (int q = 0; q < rank; q++)
    r0 += rows_of(m, nranks, q);
  return r0;
}

static int batch_body(rank_env_t *e, void *arg) {
  run_t *run = arg;
  int C = fx.count, failures = 0;
  bool oom = false;
  tpla_ns_desc_t d[MAXM];
  tpla_matrix_t xs[MAXM];
  void *host[MAXM] = {0};
  size_t bytes[MAXM];
  for (int i = 0; i < C; i++) {
    const kind_t *k = &kinds[fx.kind[i]];
    int64_t rows = rows_of(k->m, e->nranks, e->rank), r0 = first_row(k->m, e->nranks, e->rank);
    int64_t ld = k->n + k->pad;
    size_t es = tpla_dtype_size(k->dtype);
    bytes[i] = (size_t)(rows * ld) * es;
    d[i] = (tpla_ns_desc_t)TPLA_NS_DESC_INIT;
    d[i].shard = TPLA_SHARD_ROWS;
    d[i].local_rows = rows;
    d[i].local_cols = k->n;
    d[i].dtype = k->dtype;
    d[i].preset = k->preset;
    d[i].steps = k->steps;
    d[i].eps = EPS;
    d[i].iteration = k->iteration;
    d[i].algorithm = e->nranks > 1 ? TPLA_NS_ALGO_LOCAL : TPLA_NS_ALGO_AUTO;
    host[i] = malloc(bytes[i] ? bytes[i] : 1);
    xs[i] = (tpla_matrix_t){team_alloc(e, bytes[i], &oom), rows, k->n, ld, k->dtype};
    if (host[i] == NULL)
      oom = true;
    if (oom)
      break;
    memset(host[i], PAD_BYTE, bytes[i]);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < k->n; c++)
        tpla_store_elem(host[i], k->dtype, (size_t)(r * ld + c), fx.x[i][(r0 + r) * k->n + c]);
    failures += team_copy(e, xs[i].data, host[i], bytes[i], cudaMemcpyHostToDevice);
  }
  tpla_ns_batch_plan_t plan = NULL;
  if (team_sync(e, oom || failures))
    goto done;
  if (TPLA_FAILED(tpla_ns_batch_plan_create(&plan, e->ctx, C, d)) ||
      TPLA_FAILED(tpla_ns_batch_plan_workspace_bytes(plan, &run->ws[e->rank])) ||
      TPLA_FAILED(tpla_ns_batch_execute(plan, xs, e->host ? NULL : e->stream)))
    failures++;
  failures += team_drain(e, "batch");
  for (int i = 0; i < C && !failures; i++) {
    const kind_t *k = &kinds[fx.kind[i]];
    int64_t r0 = first_row(k->m, e->nranks, e->rank), ld = k->n + k->pad;
    failures += team_copy(e, host[i], xs[i].data, bytes[i], cudaMemcpyDeviceToHost);
    size_t es = tpla_dtype_size(k->dtype);
    for (int64_t r = 0; r < xs[i].rows; r++) {
      for (int64_t c = 0; c < k->n; c++)
        run->out[i][(r0 + r) * k->n + c] = tpla_load_elem(host[i], k->dtype, (size_t)(r * ld + c));
      if (!all_bytes((unsigned char *)host[i] + (size_t)(r * ld + k->n) * es,
                     (size_t)k->pad * es, PAD_BYTE))
        run->padding_bad = 1;
    }
  }
  tpla_ns_batch_plan_destroy(plan);
done:
  for (int i = 0; i < C; i++) {
    team_free(e, xs[i].data);
    free(host[i]);
  }
  return failures + (oom ? 1 : 0);
}

static int make_fixtures(uint64_t seed) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, seed);
  fx.count = 0;
  for (int k = 0; k < NKINDS; k++)
    for (int c = 0; c < kinds[k].copies; c++) {
      const kind_t *kd = &kinds[k];
      int i = fx.count++;
      size_t mn = (size_t)(kd->m * kd->n);
      fx.kind[i] = k;
      fx.x[i] = malloc(sizeof(double) * mn);
      fx.ref[i] = malloc(sizeof(double) * mn);
      if (fx.x[i] == NULL || fx.ref[i] == NULL)
        return 1;
      for (size_t j = 0; j < mn; j++) {
        float f;
        tpla_store_elem(&f, kd->dtype, 0, gpu_rng_uniform(&rng));
        fx.x[i][j] = tpla_load_elem(&f, kd->dtype, 0);
      }
      float table[3 * 16];
      double safety = ref_preset_table(kd->preset, kd->steps, table);
      memcpy(fx.ref[i], fx.x[i], sizeof(double) * mn);
      if (!ref_ns_f64(fx.ref[i], kd->m, kd->n, table, kd->steps, safety, (double)EPS))
        return 1;
    }
  return 0;
}

static double tolerance(const kind_t *k) {
  if (k->dtype == TPLA_FLOAT32)
    return TOL_FP32;
  return k->iteration == TPLA_NS_ITERATE_GRAM ? TOL_BF16_GRAM : TOL_BF16;
}

/* One batch with grouping on (the default), one with it off, one with runs
 * of at most 4 members. */
static void run_grouped_and_alone(int nranks) {
  REQUIRE_GPUS(nranks, team_gpus(fx.host));
  enum { GROUPED, ALONE, RUNS_OF_4, NRUNS };
  run_t runs[NRUNS];
  static const char *const group_env[NRUNS] = {NULL, "1", "4"};
  for (int g = 0; g < NRUNS; g++) {
    memset(&runs[g], 0, sizeof runs[g]);
    runs[g].nranks = nranks;
    for (int i = 0; i < fx.count; i++) {
      const kind_t *k = &kinds[fx.kind[i]];
      runs[g].out[i] = calloc((size_t)(k->m * k->n), sizeof(double));
      ASSERT_TRUE(runs[g].out[i] != NULL);
    }
    if (group_env[g] != NULL)
      setenv("TPLA_NS_BATCH_GROUP", group_env[g], 1);
    int failed = team_run(nranks, fx.host, batch_body, &runs[g]);
    unsetenv("TPLA_NS_BATCH_GROUP"); /* read at plan creation: done */
    ASSERT_EQ_INT(failed, 0);
    ASSERT_EQ_INT(runs[g].padding_bad, 0);
  }
  double worst[NRUNS] = {0}, ratio = 0;
  for (int i = 0; i < fx.count; i++) {
    const kind_t *k = &kinds[fx.kind[i]];
    size_t mn = (size_t)(k->m * k->n);
    double tol = tolerance(k);
    for (int g = 0; g < NRUNS; g++) {
      double e = ref_rel_diff(runs[g].out[i], fx.ref[i], mn);
      worst[g] = e / tol > worst[g] ? e / tol : worst[g];
      ASSERT_LE(e, tol);
      double apart = ref_rel_diff(runs[g].out[i], runs[ALONE].out[i], mn);
      ratio = apart / tol > ratio ? apart / tol : ratio;
      ASSERT_LE(apart, tol);
    }
  }
  size_t ws[NRUNS] = {0};
  for (int g = 0; g < NRUNS; g++)
    for (int r = 0; r < nranks; r++)
      ws[g] += runs[g].ws[r];
  printf("  %d rank(s): worst error / bound %.2f grouped, %.2f alone, %.2f in runs of 4; "
         "against alone %.2f of the bound; workspace %zu bytes grouped, %zu alone, %zu in runs "
         "of 4\n", nranks, worst[GROUPED], worst[ALONE], worst[RUNS_OF_4], ratio, ws[GROUPED],
         ws[ALONE], ws[RUNS_OF_4]);
  ASSERT_TRUE(ws[GROUPED] >= ws[RUNS_OF_4] && ws[RUNS_OF_4] > ws[ALONE]); /* owners hold fewer */
  for (int g = 0; g < NRUNS; g++)
    for (int i = 0; i < fx.count; i++)
      free(runs[g].out[i]);
}

static void test_batch_groups_one_gpu(void) { run_grouped_and_alone(1); }
static void test_batch_groups_two_gpus(void) { run_grouped_and_alone(2); }

int main(void) {
  fx.host = gpu_env_on("TPLA_NS_TEST_HOST");
  GPU_TEST_MAIN_SKIP_WITHOUT(team_gpus(fx.host));
  watchdog_arm("test_gpu_ns_batch", 600);
  uint64_t seed = gpu_fresh_seed("test_gpu_ns_batch");
  if (make_fixtures(seed) != 0) {
    fprintf(stderr, "test_gpu_ns_batch: out of host memory for the fixtures\n");
    return 1;
  }
  TEST(test_batch_groups_one_gpu);
  TEST(test_batch_groups_two_gpus);
  for (int i = 0; i < fx.count; i++) {
    free(fx.x[i]);
    free(fx.ref[i]);
  }
  return test_summary();
}

#else
int main(void) {
  printf("test_gpu_ns_batch: built without CUDA, skipped\n");
  return 77;
}
#endif
