/*
 * test_gpu_ns_api.c - the Newton-Schulz API on the CUDA executor, on 1 GPU
 * and on 2 GPUs (one thread per GPU, NCCL contexts), beyond the numbers that
 * test_gpu_ns.c checks:
 *   - 200 calls of tpla_ns_execute_out grow neither the plan's nor the
 *     context's workspace nor the device memory in use, and the result stays
 *     right (float64 reference, ns_ref.h);
 *   - rejected calls (NULL plan, wrong dtype or shape, ld < cols, NULL data,
 *     out overlapping x, bad descriptors, one rank's bad descriptor, ranks
 *     that disagree) return their status with a message naming the problem,
 *     leave x and out untouched on the device, and leave the plan and the
 *     communicator working.
 *
 * Run: build-gpu/tests/test_gpu_ns_api (exits 77 without a GPU; the 2-GPU
 * tests skip on one GPU). TPLA_NS_TEST_HOST=1 runs it on the host executor
 * (threads as ranks), which checks the test itself where there is no GPU.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_ref.h"
#include "ns_team.h"

/* 96 x 1000 bf16, rows sharded evenly, Muon, 5 steps (the library's defaults) */
#define M 96
#define N 1000
#define STEPS 5
/* Relative Frobenius error against float64 (see test_gpu_ns.c) */
#define TOL_BF16 6e-2

static struct {
  bool host;   /* TPLA_NS_TEST_HOST: the host executor stands in for the GPUs */
  double *x;   /* the input, rounded to bf16 */
  double *ref; /* its float64 Newton-Schulz */
} fx;


/* ---- this rank's shard ----------------------------------------------------------- */

typedef struct {
  int64_t rows, off;
  size_t bytes;
  unsigned char *host; /* the packed input */
  void *dx, *dout;
  tpla_ns_desc_t desc;
  tpla_matrix_t x, out;
} shard_t;

static int shard_open(rank_env_t *e, shard_t *s) {
  int P = e->nranks, r = e->rank;
  bool failed = false;
  memset(s, 0, sizeof *s);
  s->rows = M / P + (r < M % P);
  s->off = r * (M / P) + (r < M % P ? r : M % P);
  s->bytes = (size_t)(s->rows * N) * 2;
  s->host = malloc(s->bytes + 2);
  for (int64_t i = 0; s->host && i < s->rows * N; i++)
    tpla_store_elem(s->host, TPLA_BFLOAT16, (size_t)i, fx.x[s->off * N + i]);
  s->dx = team_alloc(e, s->bytes, &failed);
  s->dout = team_alloc(e, s->bytes, &failed);
  tpla_ns_desc_t d = TPLA_NS_DESC_INIT;
  d.local_rows = s->rows;
  d.local_cols = N;
  d.dtype = TPLA_BFLOAT16;
  s->desc = d;
  s->x = (tpla_matrix_t){s->dx, s->rows, N, N, TPLA_BFLOAT16};
  s->out = (tpla_matrix_t){s->dout, s->rows, N, N, TPLA_BFLOAT16};
  return failed || s->host == NULL ||
         team_copy(e, s->dx, s->host, s->bytes, cudaMemcpyHostToDevice) ||
         team_fill(e, s->dout, 0xFF, s->bytes);
}

static void shard_close(rank_env_t *e, shard_t *s) {
  team_free(e, s->dx);
  team_free(e, s->dout);
  free(s->host);
}

/* Relative Frobenius difference of this rank's result rows (bf16, on the
 * device) to the float64 Muon reference; -1 if the download fails. */
static double shard_error(rank_env_t *e, const shard_t *s, const void *dev) {
  int64_t n = N;
  unsigned char *h = malloc(s->bytes + 2);
  double *got = malloc(sizeof(double) * (size_t)(s->rows * n + 1)), err = -1.0;
  if (h && got && team_copy(e, h, dev, s->bytes, cudaMemcpyDeviceToHost) == 0) {
    unpack(got, h, TPLA_BFLOAT16, (size_t)(s->rows * n));
    err = ref_rel_diff(got, fx.ref + s->off * n, (size_t)(s->rows * n));
  }
  free(h);
  free(got);
  return err;
}

/* ---- 200 calls: no growth ------------------------------------------------------ */

static int loop_body(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0, r = e->rank;
  shard_t s;
  int failed = shard_open(e, &s);
  tpla_ns_plan_t plan = NULL;
  failed |= TPLA_FAILED(tpla_ns_plan_create(&plan, e->ctx, failed ? NULL : &s.desc));
  size_t ws0 = 0, ws1 = 0, pws0 = 0, pws1 = 0;
  tpla_status_t st = TPLA_SUCCESS;
  if (!failed) { /* the first call loads modules and GEMM plans */
    failed = TPLA_FAILED(tpla_ns_execute_out(plan, s.out, s.x, e->stream)) ||
             team_drain(e, "first call");
    double err = failed ? 0.0 : shard_error(e, &s, s.dout);
    CHECK(&failures, err >= 0 && err <= TOL_BF16, "rank %d: first call: error %.3e", r, err);
  }
  /* no rank starts the loop's collectives without the others */
  bool go = team_sync(e, failed) == 0, more = true;
  tpla_ctx_workspace_bytes(e->ctx, &ws0);
  tpla_ns_plan_workspace_bytes(plan, &pws0);
  /* no device allocation per call: windows of 200 calls while any rank needs one */
  gpu_steady_t g = {.verdict = e->host}; /* host memory: nothing to watch */
  while (go && more) {
    failed = !e->host && gpu_steady_begin(&g);
    for (int i = 0; i < 200 && st == TPLA_SUCCESS && !failed; i++)
      st = tpla_ns_execute_out(plan, s.out, s.x, e->stream);
    failed = TPLA_FAILED(st) || team_drain(e, "200 calls") || failed ||
             (!e->host && gpu_steady_end(&g, r));
    go = team_sync(e, failed) == 0;
    more = team_any(e, gpu_steady_more(&g));
  }
  if (go && !failed) {
    tpla_ctx_workspace_bytes(e->ctx, &ws1);
    tpla_ns_plan_workspace_bytes(plan, &pws1);
    CHECK(&failures, ws1 == ws0, "rank %d: context workspace %zu -> %zu bytes", r, ws0, ws1);
    CHECK(&failures, pws1 == pws0, "rank %d: plan workspace %zu -> %zu bytes", r, pws0, pws1);
    CHECK(&failures, gpu_steady_ok(&g, r), "rank %d: free device memory shrank over windows of "
          "200 calls (the last: %zu -> %zu bytes)", r, g.before, g.after);
    /* and one more into a poisoned output: the loop's last call rewrote what the first
     * one left there, so only this shows the calls still compute */
    int poisoned = team_fill(e, s.dout, 0xFF, s.bytes) == 0; /* the call is collective */
    failed = TPLA_FAILED(tpla_ns_execute_out(plan, s.out, s.x, e->stream)) ||
             team_drain(e, "the call after the loop") || !poisoned;
    double err = failed ? -1.0 : shard_error(e, &s, s.dout);
    CHECK(&failures, err >= 0 && err <= TOL_BF16, "rank %d: after 200 calls: error %.3e", r, err);
    if (r == 0)
      printf("# %d rank%s: 200 calls, workspace %zu bytes (context %zu), error %.2e\n",
             e->nranks, e->nranks > 1 ? "s" : "", pws1, ws1, err);
  }
  tpla_ns_plan_destroy(plan);
  shard_close(e, &s);
  return failures + failed;
}

static void run_loop(int P) {
  REQUIRE_GPUS(P, team_gpus(fx.host));
  ASSERT_EQ_INT(team_run(P, fx.host, loop_body, NULL), 0);
}
static void test_ns_loop_no_growth_one_gpu(void) { run_loop(1); }
static void test_ns_loop_no_growth_two_gpus(void) { run_loop(2); }

/* ---- rejected calls -------------------------------------------------------------- */

/* 0 if `got` is `want` and the last error mentions `needle` (when given). */
static int expect(rank_env_t *e, const char *what, tpla_status_t got, tpla_status_t want,
                  const char *needle) {
  const char *msg = tpla_last_error();
  if (got == want && (needle == NULL || strstr(msg, needle) != NULL))
    return 0;
  fprintf(stderr, "  rank %d: %s: %s (%s), expected %s%s%s\n", e->rank, what,
          tpla_status_string(got), msg, tpla_status_string(want), needle ? " mentioning " : "",
          needle ? needle : "");
  return 1;
}

/* Every rank passes the same bad descriptor: each rejects its own. */
static int bad_plans(rank_env_t *e, const tpla_ns_desc_t *good) {
  static const float coef[3 * 5 - 1] = {1.5f};
  int failures = 0;
  for (int i = 0; i < 8; i++) {
    tpla_ns_desc_t d = *good;
    const char *what = "", *needle = NULL;
    switch (i) {
    case 0: d.size = 0, what = "size field 0", needle = "size"; break;
    case 1: d.steps = 0, what = "steps 0", needle = "steps"; break;
    case 2:
      d.preset = TPLA_NS_USER, d.coefficients = coef, d.ncoefficients = 14;
      what = "14 coefficients for 5 steps", needle = "ncoefficients";
      break;
    case 3: d.gram_dtype = TPLA_FLOAT16, what = "fp16 Gram of bf16", needle = "gram_dtype"; break;
    case 4: d.dtype = TPLA_FLOAT64, d.gram_dtype = TPLA_FLOAT64, what = "fp64"; break;
    case 5: d.local_cols = 0, what = "0 columns (not sharded)", needle = "0 columns"; break;
    case 6: d.eps = -1.0f, what = "eps -1", needle = "eps"; break;
    case 7:
      if (e->nranks == 1)
        continue;
      d.algorithm = TPLA_NS_ALGO_LOCAL, what = "LOCAL on several ranks", needle = "LOCAL";
      break;
    }
    tpla_ns_plan_t plan = (tpla_ns_plan_t)&d; /* must come back NULL */
    failures += expect(e, what, tpla_ns_plan_create(&plan, e->ctx, &d),
                       TPLA_ERROR_INVALID_ARGUMENT, needle);
    CHECK(&failures, plan == NULL, "rank %d: %s: *plan not NULL", e->rank, what);
  }
  if (e->nranks == 1)
    return failures;
  /* one rank's bad argument or a disagreement: every rank fails, none hangs */
  for (int i = 0; i < 3; i++) {
    tpla_ns_desc_t d = *good;
    bool last = e->rank == e->nranks - 1;
    const char *what = i == 0 ? "last rank steps 0" : i == 1 ? "last rank steps 6"
                                                              : "last rank 999 columns";
    tpla_status_t want = i == 0 && last ? TPLA_ERROR_INVALID_ARGUMENT : TPLA_ERROR_REMOTE;
    if (last)
      i == 0 ? (d.steps = 0) : i == 1 ? (d.steps = 6) : (d.local_cols = 999);
    tpla_ns_plan_t plan = NULL;
    failures += expect(e, what, tpla_ns_plan_create(&plan, e->ctx, &d), want,
                       i == 0 ? "steps" : i == 1 ? "steps" : "local_cols");
    tpla_ns_plan_destroy(plan);
  }
  return failures;
}

static int bad_inputs_body(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0;
  shard_t s;
  int failed = shard_open(e, &s);
  tpla_ns_plan_t plan = NULL;
  failed |= TPLA_FAILED(tpla_ns_plan_create(&plan, e->ctx, failed ? NULL : &s.desc));
  if (failed) {
    shard_close(e, &s);
    return 1;
  }
  const tpla_status_t IA = TPLA_ERROR_INVALID_ARGUMENT;
  void *st = e->stream;
  tpla_matrix_t x = s.x, v;
  failures += expect(e, "NULL plan", tpla_ns_execute(NULL, x, st), IA, "plan");
  v = x, v.dtype = TPLA_FLOAT32;
  failures += expect(e, "fp32 view", tpla_ns_execute(plan, v, st), IA, "dtype");
  v = x, v.rows += 1;
  failures += expect(e, "one row more", tpla_ns_execute(plan, v, st), IA, "shard");
  v = x, v.cols -= 1;
  failures += expect(e, "one column less", tpla_ns_execute(plan, v, st), IA, "shard");
  v = x, v.ld = x.cols - 1;
  failures += expect(e, "ld < cols", tpla_ns_execute(plan, v, st), IA, "ld");
  v = x, v.data = NULL;
  failures += expect(e, "NULL data", tpla_ns_execute(plan, v, st), IA, NULL);
  v = s.out, v.data = (char *)s.dx + 2 * (size_t)x.ld, v.rows = x.rows;
  if (x.rows > 1) /* out shifted one row into x */
    failures += expect(e, "out overlaps x", tpla_ns_execute_out(plan, v, x, st), IA, "overlap");
  v = s.out, v.dtype = TPLA_FLOAT16;
  failures += expect(e, "fp16 out", tpla_ns_execute_out(plan, v, x, st), IA, "dtype");
  v = x, v.cols += 1, v.ld += 1;
  failures += expect(e, "bad x with out", tpla_ns_execute_out(plan, s.out, v, st), IA, "shard");
  failures += bad_plans(e, &s.desc);
  /* nothing was written: x and out hold exactly what they held */
  unsigned char *h = malloc(s.bytes + 2);
  failed = h == NULL || team_copy(e, h, s.dx, s.bytes, cudaMemcpyDeviceToHost);
  CHECK(&failures, !failed && memcmp(h, s.host, s.bytes) == 0, "rank %d: x was modified",
        e->rank);
  failed = failed || team_copy(e, h, s.dout, s.bytes, cudaMemcpyDeviceToHost);
  CHECK(&failures, !failed && all_bytes(h, s.bytes, 0xFF), "rank %d: out was written", e->rank);
  free(h);
  /* and the plan and communicator still work */
  int stop = failures > 0;
  if (team_sync(e, stop) == 0) {
    failed = TPLA_FAILED(tpla_ns_execute(plan, x, st)) || team_drain(e, "good call");
    double err = failed ? -1.0 : shard_error(e, &s, s.dx);
    CHECK(&failures, !failed && err >= 0 && err <= TOL_BF16,
          "rank %d: good call after the bad ones: error %.3e", e->rank, err);
  }
  tpla_ns_plan_destroy(plan);
  shard_close(e, &s);
  return failures;
}

static void run_bad_inputs(int P) {
  REQUIRE_GPUS(P, team_gpus(fx.host));
  ASSERT_EQ_INT(team_run(P, fx.host, bad_inputs_body, NULL), 0);
}
static void test_ns_bad_inputs_one_gpu(void) { run_bad_inputs(1); }
static void test_ns_bad_inputs_two_gpus(void) { run_bad_inputs(2); }

int main(void) {
  fx.host = gpu_env_on("TPLA_NS_TEST_HOST");
  GPU_TEST_MAIN_SKIP_WITHOUT(team_gpus(fx.host));
  watchdog_arm("test_gpu_ns_api", 850);
  gpu_rng_t rng;
  gpu_rng_seed(&rng, gpu_fresh_seed("test_gpu_ns_api"));
  fx.x = malloc(sizeof(double) * M * N);
  fx.ref = malloc(sizeof(double) * M * N);
  float table[3 * STEPS];
  ref_preset_table(TPLA_NS_MUON, STEPS, table);
  if (fx.x == NULL || fx.ref == NULL) {
    printf("FAIL setup: out of host memory\n0 passed, 1 failed\n");
    return 1;
  }
  for (int i = 0; i < M * N; i++) {
    uint16_t b;
    tpla_store_elem(&b, TPLA_BFLOAT16, 0, gpu_rng_uniform(&rng));
    fx.x[i] = fx.ref[i] = tpla_load_elem(&b, TPLA_BFLOAT16, 0);
  }
  if (!ref_ns_f64(fx.ref, M, N, table, STEPS, 1.0, (double)1e-7f)) {
    printf("FAIL setup: out of host memory\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_ns_loop_no_growth_one_gpu);
  TEST(test_ns_loop_no_growth_two_gpus);
  TEST(test_ns_bad_inputs_one_gpu);
  TEST(test_ns_bad_inputs_two_gpus);
  free(fx.x);
  free(fx.ref);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
