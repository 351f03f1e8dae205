/*
 * test_gpu_abort.c - a CUDA-executor context stops instead of hanging
 * (tpla_ctx_abort, tpla_ctx_get_async_error; src/cuda/watchdog.h), on 2 GPUs
 * with one thread per rank:
 *  - a GEMM+AllReduce (PEER transport) whose peer never makes the call waits
 *    on the device; the watchdog (cfg.timeout_ms 2 s on that rank) aborts
 *    the context (TIMEOUT; the message gives the flag words it waited on) and
 *    the stream drains; the peer's next calls, which wait for the aborted
 *    rank, end with REMOTE (its mark), long before the peer's own 60 s
 *    timeout;
 *  - the bound on calls in flight (src/cuda/transport.c): a rank whose peer
 *    never calls enqueues its first `bound` calls at once, and the next one
 *    waits on the host until the watchdog ends it with TIMEOUT;
 *  - a Newton-Schulz call (GRAM_SHARDED, whose exchanges are pulls through a
 *    transport's flags) whose peer never calls: the watchdog ends it likewise;
 *  - an NCCL all-reduce whose peer never comes is stuck until tpla_ctx_abort
 *    (ABORTED) aborts the communicator;
 *  - on 1 GPU: after tpla_ctx_abort every call fails with ABORTED, queries
 *    and destroy still work.
 *
 * Run: build/tests/test_gpu_abort (exits 77 without a GPU). TPLA_TEST_ABORT_MS sets the short
 * timeout (default 2000 ms; larger under compute-sanitizer, whose slower plan creations and calls
 * would otherwise run into it).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_team.h"

enum { M = 512, K = 256, N = 256 };
static int64_t short_ms = 2000; /* the timeout of the rank whose peer stays away */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The async error is `want` and its message contains `needle`. */
static int expect_async(rank_env_t *e, tpla_status_t want, const char *needle) {
  tpla_status_t s = tpla_ctx_get_async_error(e->ctx);
  if (s == want && strstr(tpla_last_error(), needle) != NULL)
    return 0;
  fprintf(stderr, "  rank %d: tpla_ctx_get_async_error gave %s (%s), expected %s with '%s'\n",
          e->rank, tpla_status_string(s), tpla_last_error(), tpla_status_string(want), needle);
  return 1;
}

/* Waits for the rank's stream; 1 (with a message) unless it drained after
 * lo .. hi seconds from t0. */
static int drained_within(rank_env_t *e, double t0, double lo, double hi, const char *what) {
  if (sync_stream_timeout(e->stream, (int)hi + 30, what))
    return 1;
  double took = now_s() - t0;
  if (took >= lo && took <= hi)
    return 0;
  fprintf(stderr, "  rank %d: %s: the stream drained after %.2f s, expected %.1f .. %.1f s\n",
          e->rank, what, took, lo, hi);
  return 1;
}

static int status_is(rank_env_t *e, tpla_status_t got, tpla_status_t want, const char *call) {
  if (got == want)
    return 0;
  fprintf(stderr, "  rank %d: %s gave %s (%s), expected %s\n", e->rank, call,
          tpla_status_string(got), tpla_last_error(), tpla_status_string(want));
  return 1;
}

/* ---- a GEMM+AllReduce over PEER, as the first two cases use it ------------------------ */

typedef struct {
  tpla_gemm_ar_plan_t plan;
  void *a, *b, *d;
  tpla_matrix_t va, vb, vd;
  tpla_overlap_args_t args;
  cudaStream_t stream;
} ar_case_t;

static tpla_status_t ar_call(ar_case_t *c) {
  return tpla_gemm_ar(c->plan, c->vd, c->va, c->vb, &c->args, c->stream);
}

/* Creates the plan and its operands and makes one call on both ranks (call 1); 0 when all
 * went well on every rank. */
static int ar_case_start(rank_env_t *e, ar_case_t *c) {
  int failures = 0;
  bool oom = false;
  memset(c, 0, sizeof *c);
  tpla_gemm_ar_desc_t desc = TPLA_GEMM_AR_DESC_INIT;
  desc.m = M, desc.k = K, desc.n = N;
  desc.dtype = desc.d_dtype = TPLA_BFLOAT16;
  desc.mode = TPLA_OVERLAP_OVERLAP;
  desc.transport = TPLA_TRANSPORT_PEER;
  failures += TPLA_FAILED(tpla_gemm_ar_plan_create(&c->plan, e->ctx, &desc));
  c->a = team_alloc(e, (size_t)M * K * 2, &oom), c->b = team_alloc(e, (size_t)K * N * 2, &oom);
  c->d = team_alloc(e, (size_t)M * N * 2, &oom);
  if (team_sync(e, failures || oom))
    return failures + oom + 1;
  failures += team_fill(e, c->a, 0x3c, (size_t)M * K * 2);
  failures += team_fill(e, c->b, 0x3c, (size_t)K * N * 2);
  c->va = (tpla_matrix_t){c->a, M, K, K, TPLA_BFLOAT16};
  c->vb = (tpla_matrix_t){c->b, K, N, N, TPLA_BFLOAT16};
  c->vd = (tpla_matrix_t){c->d, M, N, N, TPLA_BFLOAT16};
  c->args = (tpla_overlap_args_t)TPLA_OVERLAP_ARGS_INIT;
  c->stream = e->stream;
  failures += TPLA_FAILED(ar_call(c));
  failures += team_drain(e, "the first call");
  return team_sync(e, failures) ? failures + 1 : 0;
}

static int ar_case_end(rank_env_t *e, ar_case_t *c) {
  int failures = TPLA_FAILED(tpla_gemm_ar_plan_destroy(c->plan));
  team_free(e, c->a), team_free(e, c->b), team_free(e, c->d);
  return failures;
}

/* ---- the watchdog: a peer that never makes its call ---------------------------------- */

static int body_watchdog(rank_env_t *e, void *arg) {
  (void)arg;
  ar_case_t c;
  int failures = ar_case_start(e, &c);
  if (failures)
    goto out;
  if (e->rank == 0) { /* rank 1 is not calling: the watchdog must end this call */
    double t0 = now_s();
    failures += TPLA_FAILED(ar_call(&c));
    failures += drained_within(e, t0, 0.75e-3 * (double)short_ms, 1e-3 * (double)short_ms + 13.0,
                               "a call whose peer never came");
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "tpla_gemm_ar");
    /* the message says what the call waited for: rank 1 never announced call 2 */
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "(last call begun: 2): ready from rank 1: 1;");
    printf("  rank 0's message: %s\n", tpla_last_error());
    failures += status_is(e, ar_call(&c), TPLA_ERROR_TIMEOUT, "tpla_gemm_ar after the abort");
    failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "a second tpla_ctx_abort");
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "watchdog");
  }
  team_sync(e, 0);
  if (e->rank == 1) { /* the first call meets rank 0's released one; the next waits in vain */
    double t0 = now_s();
    for (int i = 0; i < 2; i++)
      failures += TPLA_FAILED(ar_call(&c));
    failures += drained_within(e, t0, 0.0, 15.0, "calls after the peer's abort");
    failures += expect_async(e, TPLA_ERROR_REMOTE, "rank 0 aborted");
  }
  team_sync(e, 0);
out:
  return failures + ar_case_end(e, &c);
}

/* ---- the bound on calls in flight: a rank that runs ahead waits on the host ------------ */

/* The transport's bound (src/cuda/transport_map.c: 16 unless TPLA_XPORT_MAX_IN_FLIGHT). */
static int in_flight_bound(void) {
  const char *v = getenv("TPLA_XPORT_MAX_IN_FLIGHT");
  return v != NULL ? atoi(v) : 16;
}

/* Rank 0 calls on alone. Calls 2 .. bound + 1 are enqueued at once (each waits for call
 * seq - bound, which has ended or never was); call bound + 2 waits on the host for call 2,
 * stuck on the device, until the watchdog aborts the context, and returns TIMEOUT. */
static int body_bound(rank_env_t *e, void *arg) {
  (void)arg;
  const int bound = in_flight_bound();
  ar_case_t c;
  int failures = ar_case_start(e, &c);
  if (failures)
    goto out;
  if (e->rank == 0) {
    double t0 = now_s(), enqueued = -1, stopped = -1;
    int first_failed = -1;
    tpla_status_t s = TPLA_SUCCESS;
    for (int i = 0; i < bound + 4 && first_failed < 0; i++) {
      s = ar_call(&c);
      if (s != TPLA_SUCCESS)
        first_failed = i, stopped = now_s() - t0;
      else if (i == bound - 1)
        enqueued = now_s() - t0;
    }
    if (first_failed != bound || s != TPLA_ERROR_TIMEOUT) {
      fprintf(stderr, "  rank 0: the first failed call was #%d of the loop with %s (%s); "
              "expected #%d with TIMEOUT\n", first_failed, tpla_status_string(s),
              tpla_last_error(), bound);
      failures++;
    }
    if (!(enqueued >= 0 && enqueued < 0.5e-3 * (double)short_ms)) {
      fprintf(stderr, "  rank 0: the %d calls within the bound took %.2f s to enqueue\n", bound,
              enqueued);
      failures++;
    }
    if (!(stopped >= 0.75e-3 * (double)short_ms && stopped <= 1e-3 * (double)short_ms + 13.0)) {
      fprintf(stderr, "  rank 0: the call past the bound returned after %.2f s, expected the "
              "watchdog's %.1f s\n", stopped, 1e-3 * (double)short_ms);
      failures++;
    }
    failures += drained_within(e, t0, 0.0, 1e-3 * (double)short_ms + 13.0,
                               "the calls enqueued without the peer");
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "tpla_gemm_ar");
  }
  team_sync(e, 0);
  if (e->rank == 1) /* its partner's context is gone: end this one too */
    failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "tpla_ctx_abort (rank 1)");
out:
  return failures + ar_case_end(e, &c);
}

/* ---- the watchdog: a Newton-Schulz call whose peer never comes ----------------------- */

static int body_ns(rank_env_t *e, void *arg) {
  (void)arg;
  enum { ROWS = 1024, COLS = 512 };
  int failures = 0;
  bool oom = false;
  tpla_ns_desc_t desc = TPLA_NS_DESC_INIT;
  desc.local_rows = ROWS, desc.local_cols = COLS, desc.dtype = TPLA_BFLOAT16;
  desc.algorithm = TPLA_NS_ALGO_GRAM_SHARDED;
  tpla_ns_plan_t plan = NULL;
  failures += TPLA_FAILED(tpla_ns_plan_create(&plan, e->ctx, &desc));
  void *x = team_alloc(e, (size_t)ROWS * COLS * 2, &oom);
  if (team_sync(e, failures || oom)) {
    failures += oom;
    goto out;
  }
  tpla_matrix_t vx = {x, ROWS, COLS, COLS, TPLA_BFLOAT16};
  for (int i = 0; i < 2; i++) { /* both ranks: the plan works */
    failures += team_fill(e, x, 0x3c + i, (size_t)ROWS * COLS * 2);
    failures += TPLA_FAILED(tpla_ns_execute(plan, vx, e->stream));
    failures += team_drain(e, "a Newton-Schulz call");
  }
  if (team_sync(e, failures))
    goto out;
  if (e->rank == 0) {
    double t0 = now_s();
    failures += TPLA_FAILED(tpla_ns_execute(plan, vx, e->stream));
    failures += drained_within(e, t0, 0.75e-3 * (double)short_ms, 1e-3 * (double)short_ms + 13.0,
                               "a Newton-Schulz call whose peer never came");
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "tpla_ns_execute");
    failures += expect_async(e, TPLA_ERROR_TIMEOUT, "at the stop (last call begun: ");
    failures += status_is(e, tpla_ns_execute(plan, vx, e->stream), TPLA_ERROR_TIMEOUT,
                          "tpla_ns_execute after the abort");
  }
  team_sync(e, 0);
  if (e->rank == 1) /* its partner's communicator is gone: end this one too */
    failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "tpla_ctx_abort (rank 1)");
out:
  failures += TPLA_FAILED(tpla_ns_plan_destroy(plan));
  team_free(e, x);
  return failures;
}

/* ---- tpla_ctx_abort: an NCCL collective whose peer never comes ------------------------ */

static int body_nccl(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0;
  bool oom = false;
  const size_t count = (size_t)1 << 20;
  float *buf = team_alloc(e, count * sizeof(float), &oom);
  if (team_sync(e, oom))
    goto out;
  failures += team_fill(e, buf, 0, count * sizeof(float));
  /* both ranks: NCCL connects the pair at its first collective */
  failures += TPLA_FAILED(tpla_allreduce(e->ctx, buf, buf, count, TPLA_FLOAT32, e->stream));
  failures += team_drain(e, "the first all-reduce");
  if (team_sync(e, failures))
    goto out;
  if (e->rank == 0) {
    failures += TPLA_FAILED(tpla_allreduce(e->ctx, buf, buf, count, TPLA_FLOAT32, e->stream));
    usleep(300 * 1000);
    if (cudaStreamQuery(e->stream) != cudaErrorNotReady) {
      fprintf(stderr, "  rank 0: the all-reduce without its peer was not waiting\n");
      failures++;
    }
    double t0 = now_s();
    failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "tpla_ctx_abort");
    failures += drained_within(e, t0, 0.0, 10.0, "an all-reduce after tpla_ctx_abort");
    failures += expect_async(e, TPLA_ERROR_ABORTED, "tpla_ctx_abort");
    failures += status_is(e, tpla_allreduce(e->ctx, buf, buf, count, TPLA_FLOAT32, e->stream),
                          TPLA_ERROR_ABORTED, "tpla_allreduce after the abort");
  }
  team_sync(e, 0);
  if (e->rank == 1) /* its partner's communicator is gone: end this one too */
    failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "tpla_ctx_abort (rank 1)");
out:
  team_free(e, buf);
  return failures;
}

/* ---- one GPU: every call after the abort fails, queries and destroy work -------------- */

static int body_single(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = expect_async(e, TPLA_SUCCESS, "");
  failures += status_is(e, tpla_ctx_abort(e->ctx), TPLA_SUCCESS, "tpla_ctx_abort");
  failures += expect_async(e, TPLA_ERROR_ABORTED, "tpla_ctx_abort");
  float one = 1.0f, *x = NULL;
  if (CUDA_FAILED(cudaMalloc((void **)&x, sizeof one)) ||
      CUDA_FAILED(cudaMemcpy(x, &one, sizeof one, cudaMemcpyHostToDevice)))
    return failures + 1;
  failures += status_is(e, tpla_allreduce(e->ctx, x, x, 1, TPLA_FLOAT32, e->stream),
                        TPLA_ERROR_ABORTED, "tpla_allreduce");
  tpla_matrix_t m = {x, 1, 1, 1, TPLA_FLOAT32};
  tpla_matrix_t out = {NULL, 1, 1, 1, TPLA_FLOAT32};
  failures += CUDA_FAILED(cudaMalloc(&out.data, sizeof(float)));
  failures += status_is(e, tpla_gemm(e->ctx, out, m, TPLA_OP_N, m, TPLA_OP_N, NULL, e->stream),
                        TPLA_ERROR_ABORTED, "tpla_gemm");
  tpla_gemm_ar_desc_t desc = TPLA_GEMM_AR_DESC_INIT;
  desc.m = desc.k = desc.n = 64;
  tpla_gemm_ar_plan_t plan = (tpla_gemm_ar_plan_t)&one; /* must come back NULL */
  failures += status_is(e, tpla_gemm_ar_plan_create(&plan, e->ctx, &desc), TPLA_ERROR_ABORTED,
                        "tpla_gemm_ar_plan_create");
  if (plan != NULL) {
    fprintf(stderr, "  a refused plan creation left *plan set\n");
    failures++;
  }
  int rank = -1;
  failures += TPLA_FAILED(tpla_ctx_get_info(e->ctx, &rank, NULL, NULL, NULL));
  failures += rank != 0;
  cudaFree(x), cudaFree(out.data);
  return failures;
}

static void test_watchdog_2gpus(void) {
  REQUIRE_GPUS(2, gpu_count());
  int64_t timeouts[2] = {short_ms, 60000};
  ASSERT_EQ_INT(team_run_timeouts(2, false, body_watchdog, NULL, timeouts), 0);
}

static void test_bound_2gpus(void) {
  REQUIRE_GPUS(2, gpu_count());
  if (in_flight_bound() <= 0)
    SKIP("TPLA_XPORT_MAX_IN_FLIGHT=0: no bound");
  int64_t timeouts[2] = {short_ms, 60000};
  ASSERT_EQ_INT(team_run_timeouts(2, false, body_bound, NULL, timeouts), 0);
}

static void test_watchdog_ns_2gpus(void) {
  REQUIRE_GPUS(2, gpu_count());
  int64_t timeouts[2] = {short_ms, 60000};
  ASSERT_EQ_INT(team_run_timeouts(2, false, body_ns, NULL, timeouts), 0);
}

static void test_abort_nccl_2gpus(void) {
  REQUIRE_GPUS(2, gpu_count());
  ASSERT_EQ_INT(team_run(2, false, body_nccl, NULL), 0);
}

static void test_abort_1gpu(void) { ASSERT_EQ_INT(team_run(1, false, body_single, NULL), 0); }

int main(void) {
  gpu_eager_loading();
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  if (getenv("TPLA_TEST_ABORT_MS") != NULL)
    short_ms = atoll(getenv("TPLA_TEST_ABORT_MS"));
  watchdog_arm("test_gpu_abort", 300);
  TEST(test_abort_1gpu);
  TEST(test_watchdog_2gpus);
  TEST(test_bound_2gpus);
  TEST(test_watchdog_ns_2gpus);
  TEST(test_abort_nccl_2gpus);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
