/*
 * test_gpu_graphs.c - library calls captured into CUDA graphs, on 1 GPU
 * (global capture mode, PyTorch's default) and on 2 GPUs (one thread per
 * GPU, thread-local mode). Each replay runs on new inputs written into the
 * captured buffers, and its result must equal, bit for bit, the same call
 * made uncaptured on those inputs, and a float64 reference within rounding:
 *   - tpla_gemm, bf16 and FP8 with B staged (op N), captured on another
 *     stream than the context's last GEMM (run 151: the capture was
 *     invalidated), the FP8 GEMM again on a stream forked into the capture;
 *     uncaptured GEMMs on a third stream afterwards, and two that grow the
 *     FP8 scratch past what the graph captured (kept for the graph, and
 *     counted by tpla_ctx_workspace_bytes);
 *   - tpla_ns_execute_out (2 GPUs: a plan with gram_sum COLLECTIVE);
 *   - tpla_ag_gemm, tpla_gemm_rs and tpla_gemm_ar (2 GPUs: transport
 *     SENDRECV).
 * A capture in global mode on one thread while the context's watchdog
 * polls a call in flight (2 GPUs) still succeeds.
 * Plans whose calls travel over the PEER transport (2 GPUs: the overlap
 * plans with transport PEER, an NS plan that sums by pulls) refuse a
 * captured stream with INVALID_USAGE, capture nothing, and still work.
 *
 * Run: build-gpu/tests/test_gpu_graphs (exits 77 without a GPU; the 2-GPU
 * tests skip on one GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ns_ref.h"
#include "ns_team.h"

#define ROUNDS 3 /* replays, each on new inputs */

static uint64_t g_seed;

/* The whole matrix (rows x cols) of one round, the same on every rank. */
static double *round_matrix(int64_t rows, int64_t cols, int round, int tag) {
  double *m = malloc(sizeof(double) * (size_t)(rows * cols));
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 7919u * (uint64_t)round + (uint64_t)tag);
  for (int64_t i = 0; m != NULL && i < rows * cols; i++)
    m[i] = gpu_rng_uniform(&rng);
  return m;
}

/* Rows [row0, row0 + rows) of a round's matrix into device memory of `dtype`,
 * and the doubles they round to into *rounded (when not NULL). */
static int upload_rows(void *dev, tpla_dtype_t dtype, int64_t rows, int64_t cols, int64_t row0,
                       int round, int tag, double *rounded) {
  int64_t total = row0 + rows;
  double *m = round_matrix(total, cols, round, tag);
  size_t n = (size_t)(rows * cols), bytes = n * tpla_dtype_size(dtype);
  unsigned char *h = malloc(bytes + 1);
  int failed = m == NULL || h == NULL;
  if (!failed) {
    pack(h, dtype, m + row0 * cols, n);
    if (rounded != NULL)
      unpack(rounded, h, dtype, n);
    failed = CUDA_FAILED(gpu_upload(dev, h, bytes));
  }
  free(m);
  free(h);
  return failed;
}

/* v rounded to bf16. */
static double bf16(double v) {
  uint16_t h;
  tpla_store_elem(&h, TPLA_BFLOAT16, 0, v);
  return tpla_load_elem(&h, TPLA_BFLOAT16, 0);
}

/* Nonzero (with a message) unless `bytes` at a and b, device memory, are equal. */
static int differ(int rank, const char *what, const void *a, const void *b, size_t bytes) {
  unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
  int failed = ha == NULL || hb == NULL ||
               CUDA_FAILED(cudaMemcpy(ha, a, bytes, cudaMemcpyDefault)) ||
               CUDA_FAILED(cudaMemcpy(hb, b, bytes, cudaMemcpyDefault));
  size_t i = 0;
  while (!failed && i < bytes && ha[i] == hb[i])
    i++;
  if (!failed && i < bytes) {
    fprintf(stderr, "  rank %d: %s: replay and uncaptured call differ from byte %zu of %zu\n",
            rank, what, i, bytes);
    failed = 1;
  }
  free(ha);
  free(hb);
  return failed;
}

/* max |D - ref| / (|A||B| u + tiny) over an m x n bf16 result against float64. */
static double gemm_error(const void *dev_d, const double *ref, const double *absref,
                         int64_t m, int64_t n) {
  size_t count = (size_t)(m * n);
  unsigned char *h = malloc(count * 2);
  double *got = malloc(sizeof(double) * count), worst = -1.0;
  if (h && got && !CUDA_FAILED(cudaMemcpy(h, dev_d, count * 2, cudaMemcpyDeviceToHost))) {
    unpack(got, h, TPLA_BFLOAT16, count);
    worst = 0.0;
    for (size_t i = 0; i < count; i++) {
      double scale = (absref[i] + 1e-30) * unit_roundoff(TPLA_BFLOAT16);
      double e = fabs(got[i] - ref[i]) / scale;
      worst = e > worst ? e : worst;
    }
  }
  free(h);
  free(got);
  return worst;
}

/* ---- capture ------------------------------------------------------------------ */

static enum cudaStreamCaptureMode capture_mode(const rank_env_t *e) {
  return e->nranks == 1 ? cudaStreamCaptureModeGlobal : cudaStreamCaptureModeThreadLocal;
}

/* Ends the capture on `s` and instantiates it into *exec (NULL if the capture
 * or the instantiation failed; the message says which). */
static int capture_end(cudaStream_t s, cudaGraphExec_t *exec) {
  cudaGraph_t graph = NULL;
  *exec = NULL;
  int failed = CUDA_FAILED(cudaStreamEndCapture(s, &graph));
  if (!failed)
    failed = CUDA_FAILED(cudaGraphInstantiate(exec, graph, 0));
  if (graph != NULL)
    cudaGraphDestroy(graph);
  if (failed)
    *exec = NULL;
  return failed;
}

/* Nonzero unless a call refused a captured stream as the PEER paths must. */
static int refused(int rank, const char *what, tpla_status_t st) {
  if (st == TPLA_ERROR_INVALID_USAGE && strstr(tpla_last_error(), "CUDA graph") != NULL)
    return 0;
  fprintf(stderr, "  rank %d: %s under capture: %s (%s), expected INVALID_USAGE naming CUDA "
          "graphs\n", rank, what, tpla_status_string(st), tpla_last_error());
  return 1;
}

/* Capture on `s` a call that must be refused; the capture must stay empty. */
#define EXPECT_REFUSED(e, s, what, call)                                                     \
  do {                                                                                       \
    cudaGraph_t g_ = NULL;                                                                   \
    size_t nodes_ = 0;                                                                       \
    failures += CUDA_FAILED(cudaStreamBeginCapture(s, capture_mode(e)));                     \
    failures += refused((e)->rank, what, (call));                                            \
    failures += CUDA_FAILED(cudaStreamEndCapture(s, &g_));                                   \
    if (g_ != NULL) {                                                                        \
      failures += CUDA_FAILED(cudaGraphGetNodes(g_, NULL, &nodes_));                         \
      CHECK(&failures, nodes_ == 0, "rank %d: %s: the refused call captured %zu nodes",      \
            (e)->rank, what, nodes_);                                                        \
      cudaGraphDestroy(g_);                                                                  \
    }                                                                                        \
  } while (0)

/* ---- tpla_gemm ------------------------------------------------------------------- */

enum { GM = 256, GN = 192, GK = 320 };

typedef struct {
  void *a, *b, *a8, *b8, *d, *d8, *d8b, *de, *de8;
} gemm_bufs_t;

/* D8 = A8 B8 (E4M3, B8 k x n: staged as B8^T in the context's scratch). */
static tpla_status_t fp8_gemm(tpla_ctx_t ctx, const gemm_bufs_t *g, void *d8, cudaStream_t s) {
  tpla_matrix_t a8 = {g->a8, GM, GK, GK, TPLA_FLOAT8_E4M3};
  tpla_matrix_t b8 = {g->b8, GK, GN, GN, TPLA_FLOAT8_E4M3};
  tpla_matrix_t dm8 = {d8, GM, GN, GN, TPLA_BFLOAT16};
  return tpla_gemm(ctx, dm8, a8, TPLA_OP_N, b8, TPLA_OP_N, NULL, s);
}

/* That, and D = A B^T (bf16), into d8 and d. */
static tpla_status_t gemm_pair(tpla_ctx_t ctx, const gemm_bufs_t *g, void *d, void *d8,
                               cudaStream_t s) {
  tpla_matrix_t a = {g->a, GM, GK, GK, TPLA_BFLOAT16}, b = {g->b, GN, GK, GK, TPLA_BFLOAT16};
  tpla_matrix_t dm = {d, GM, GN, GN, TPLA_BFLOAT16};
  tpla_status_t st = fp8_gemm(ctx, g, d8, s);
  return st != TPLA_SUCCESS ? st : tpla_gemm(ctx, dm, a, TPLA_OP_N, b, TPLA_OP_T, NULL, s);
}

/* Inside the capture on `cap`: gemm_pair, then the FP8 GEMM again into d8b
 * on `side` forked into the capture, which must wait for the first one's
 * use of the shared scratch by an event of the same capture. */
static int captured_calls(tpla_ctx_t ctx, const gemm_bufs_t *g, cudaStream_t cap,
                          cudaStream_t side, cudaEvent_t fork, cudaEvent_t join) {
  return TPLA_FAILED(gemm_pair(ctx, g, g->d, g->d8, cap)) ||
         CUDA_FAILED(cudaEventRecord(fork, cap)) ||
         CUDA_FAILED(cudaStreamWaitEvent(side, fork, 0)) ||
         TPLA_FAILED(fp8_gemm(ctx, g, g->d8b, side)) || CUDA_FAILED(cudaEventRecord(join, side)) ||
         CUDA_FAILED(cudaStreamWaitEvent(cap, join, 0));
}

/* An uncaptured FP8 GEMM whose staged B^T (K x K bytes) outgrows the
 * scratch: after a capture the captured buffer must stay allocated for the
 * graph, through this growth and the next ones. */
static int grow_scratch(rank_env_t *e, int64_t K) {
  const int64_t N = K, M = 64;
  bool failed = false;
  void *a = team_alloc(e, (size_t)M * K, &failed), *b = team_alloc(e, (size_t)K * N, &failed);
  void *d = team_alloc(e, (size_t)M * N * 2, &failed);
  if (!failed) {
    tpla_matrix_t am = {a, M, K, K, TPLA_FLOAT8_E4M3}, bm = {b, K, N, N, TPLA_FLOAT8_E4M3};
    tpla_matrix_t dm = {d, M, N, N, TPLA_BFLOAT16};
    failed = team_fill(e, a, 0x38, (size_t)M * K) || team_fill(e, b, 0x38, (size_t)K * N) ||
             TPLA_FAILED(tpla_gemm(e->ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_N, NULL, e->stream)) ||
             team_drain(e, "the scratch's growth");
  }
  team_free(e, a), team_free(e, b), team_free(e, d);
  return failed;
}

static int gemm_body(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0, r = e->rank;
  bool failed = false;
  gemm_bufs_t g;
  size_t ab = (size_t)GM * GK * 2, bb = (size_t)GN * GK * 2, db = (size_t)GM * GN * 2;
  g.a = team_alloc(e, ab, &failed), g.b = team_alloc(e, bb, &failed);
  g.a8 = team_alloc(e, ab / 2, &failed), g.b8 = team_alloc(e, bb / 2, &failed);
  g.d = team_alloc(e, db, &failed), g.d8 = team_alloc(e, db, &failed);
  g.d8b = team_alloc(e, db, &failed);
  g.de = team_alloc(e, db, &failed), g.de8 = team_alloc(e, db, &failed);
  double *a = malloc(sizeof(double) * GM * GK), *b = malloc(sizeof(double) * GN * GK);
  double *ref = malloc(sizeof(double) * GM * GN), *absref = malloc(sizeof(double) * GM * GN);
  cudaStream_t cap = NULL, third = NULL;
  cudaEvent_t fork = NULL, join = NULL;
  failed = failed || !a || !b || !ref || !absref ||
           CUDA_FAILED(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking)) ||
           CUDA_FAILED(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking)) ||
           CUDA_FAILED(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming)) ||
           CUDA_FAILED(cudaEventCreateWithFlags(&join, cudaEventDisableTiming)) ||
           upload_rows(g.a, TPLA_BFLOAT16, GM, GK, 0, 0, 1 + r, NULL) ||
           upload_rows(g.b, TPLA_BFLOAT16, GN, GK, 0, 0, 11 + r, b) ||
           upload_rows(g.a8, TPLA_FLOAT8_E4M3, GM, GK, 0, 0, 21 + r, NULL) ||
           upload_rows(g.b8, TPLA_FLOAT8_E4M3, GK, GN, 0, 0, 31 + r, NULL);
  cudaGraphExec_t exec = NULL;
  if (!failed) {
    /* uncaptured first (the FP8 scratch grows here), left running on e->stream */
    failed = TPLA_FAILED(gemm_pair(e->ctx, &g, g.de, g.de8, e->stream));
    failed = failed || CUDA_FAILED(cudaStreamBeginCapture(cap, capture_mode(e)));
    if (!failed) {
      failures += captured_calls(e->ctx, &g, cap, third, fork, join);
      failed = capture_end(cap, &exec) || failures > 0;
    }
    /* an uncaptured GEMM after the capture, on a third stream; then the growths, the
     * captured buffer still counted in the context's bytes after the first */
    size_t before = 0, after = 0;
    failed = failed || TPLA_FAILED(gemm_pair(e->ctx, &g, g.de, g.de8, third)) ||
             sync_stream_timeout(third, TEAM_DRAIN_S, "third stream") || team_drain(e, "first") ||
             TPLA_FAILED(tpla_ctx_workspace_bytes(e->ctx, &before)) || grow_scratch(e, 2048) ||
             TPLA_FAILED(tpla_ctx_workspace_bytes(e->ctx, &after)) ||
             grow_scratch(e, 3072); /* 2 MiB captured, then 4, 9 */
    CHECK(&failures, failed || after >= before + (size_t)2048 * 2048,
          "rank %d: tpla_ctx_workspace_bytes %zu after the scratch grew past a captured buffer, "
          "%zu before", r, after, before);
  }
  for (int round = 1; round <= ROUNDS && !failed; round++) {
    failed = upload_rows(g.a, TPLA_BFLOAT16, GM, GK, 0, round, 1 + r, a) ||
             upload_rows(g.a8, TPLA_FLOAT8_E4M3, GM, GK, 0, round, 21 + r, NULL) ||
             CUDA_FAILED(cudaGraphLaunch(exec, cap)) ||
             sync_stream_timeout(cap, TEAM_DRAIN_S, "replay") ||
             TPLA_FAILED(gemm_pair(e->ctx, &g, g.de, g.de8, e->stream)) ||
             team_drain(e, "uncaptured");
    if (failed)
      break;
    failures += differ(r, "bf16 GEMM", g.d, g.de, db) + differ(r, "FP8 GEMM", g.d8, g.de8, db) +
                differ(r, "FP8 GEMM on a forked stream", g.d8b, g.de8, db);
    gemm_ref_f64(ref, absref, GN, GM, GN, GK, a, GK, TPLA_OP_N, b, GK, TPLA_OP_T);
    double err = gemm_error(g.d, ref, absref, GM, GN);
    CHECK(&failures, err >= 0 && err <= 2.0, "rank %d round %d: bf16 replay off the float64 "
          "product by %.2f units of |A||B| u", r, round, err);
  }
  if (exec != NULL)
    cudaGraphExecDestroy(exec);
  if (cap != NULL)
    cudaStreamDestroy(cap);
  if (third != NULL)
    cudaStreamDestroy(third);
  if (fork != NULL)
    cudaEventDestroy(fork);
  if (join != NULL)
    cudaEventDestroy(join);
  void *bufs[] = {g.a, g.b, g.a8, g.b8, g.d, g.d8, g.d8b, g.de, g.de8};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    team_free(e, bufs[i]);
  free(a), free(b), free(ref), free(absref);
  return failures + failed;
}

/* ---- a global capture beside a watched call ------------------------------------ */

/* Two ranks, a thread each. Rank 0 enqueues an all-reduce whose partner has
 * not come yet, so its context's watchdog thread polls that call's events,
 * and meanwhile captures a GEMM in global mode, which forbids such queries
 * from every thread not in relaxed mode (the watchdog's is); rank 1 waits
 * on the host and makes its all-reduce after the capture. A replay then
 * equals the uncaptured GEMM. (NCCL's own threads run beside it too.) */
static int watched_body(rank_env_t *e, void *arg) {
  (void)arg;
  int failures = 0, r = e->rank;
  bool failed = false;
  size_t ab = (size_t)GM * GK * 2, bb = (size_t)GN * GK * 2, db = (size_t)GM * GN * 2;
  void *da = team_alloc(e, ab, &failed), *dbm = team_alloc(e, bb, &failed);
  void *dg = team_alloc(e, db, &failed), *de = team_alloc(e, db, &failed);
  float *sum = team_alloc(e, sizeof(float) * 256, &failed);
  tpla_matrix_t a = {da, GM, GK, GK, TPLA_BFLOAT16}, b = {dbm, GN, GK, GK, TPLA_BFLOAT16};
  tpla_matrix_t dm = {dg, GM, GN, GN, TPLA_BFLOAT16}, em = {de, GM, GN, GN, TPLA_BFLOAT16};
  cudaStream_t cap = NULL;
  failed = failed || CUDA_FAILED(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking)) ||
           upload_rows(da, TPLA_BFLOAT16, GM, GK, 0, 0, 71, NULL) ||
           upload_rows(dbm, TPLA_BFLOAT16, GN, GK, 0, 0, 72, NULL) || team_fill(e, sum, 0, 1024) ||
           TPLA_FAILED(tpla_gemm(e->ctx, em, a, TPLA_OP_N, b, TPLA_OP_T, NULL, e->stream));
  failed = team_sync(e, failed) != 0 ||
           TPLA_FAILED(tpla_allreduce(e->ctx, sum, sum, 256, TPLA_FLOAT32, e->stream)) ||
           team_drain(e, "warm-up");
  failed = team_sync(e, failed) != 0;
  cudaGraphExec_t exec = NULL;
  if (!failed && r == 0) {
    failed = TPLA_FAILED(tpla_allreduce(e->ctx, sum, sum, 256, TPLA_FLOAT32, e->stream)) ||
             CUDA_FAILED(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal)) ||
             TPLA_FAILED(tpla_gemm(e->ctx, dm, a, TPLA_OP_N, b, TPLA_OP_T, NULL, cap));
    usleep(200 * 1000); /* ten and more polls of the watchdog */
    failed = capture_end(cap, &exec) || failed;
  }
  failed = team_sync(e, failed) != 0;
  if (!failed && r == 1)
    failed = TPLA_FAILED(tpla_allreduce(e->ctx, sum, sum, 256, TPLA_FLOAT32, e->stream));
  failed = team_drain(e, "all-reduce") || failed;
  if (!failed && exec != NULL)
    failed = CUDA_FAILED(cudaGraphLaunch(exec, cap)) ||
             sync_stream_timeout(cap, TEAM_DRAIN_S, "replay") || differ(r, "GEMM", dg, de, db);
  if (exec != NULL)
    cudaGraphExecDestroy(exec);
  if (cap != NULL)
    cudaStreamDestroy(cap);
  team_free(e, da), team_free(e, dbm), team_free(e, dg), team_free(e, de), team_free(e, sum);
  return failures + failed;
}

/* ---- Newton-Schulz -------------------------------------------------------------- */

enum { NM = 192, NN = 512 };
#define NS_TOL 6e-2 /* relative Frobenius error of bf16 against float64 (test_gpu_ns.c) */

/* arg: the plan's gram_sum; two ranks with AUTO sum by pulls, refused */
static int ns_body(rank_env_t *e, void *arg) {
  tpla_ns_gram_sum_t gram_sum = *(const tpla_ns_gram_sum_t *)arg;
  bool expect_refusal = e->nranks > 1 && gram_sum == TPLA_NS_GRAM_SUM_AUTO;
  int failures = 0, r = e->rank, P = e->nranks;
  int64_t rows = NM / P + (r < NM % P), row0 = r * (NM / P) + (r < NM % P ? r : NM % P);
  size_t bytes = (size_t)(rows * NN) * 2;
  bool failed = false;
  void *dx = team_alloc(e, bytes, &failed), *dg = team_alloc(e, bytes, &failed);
  void *de = team_alloc(e, bytes, &failed);
  double *ref = malloc(sizeof(double) * NM * NN);
  double *got = malloc(sizeof(double) * (size_t)(rows * NN));
  unsigned char *h = malloc(bytes);
  float table[3 * 5];
  ref_preset_table(TPLA_NS_MUON, 5, table);
  tpla_ns_desc_t desc = TPLA_NS_DESC_INIT;
  desc.local_rows = rows, desc.local_cols = NN, desc.dtype = TPLA_BFLOAT16;
  desc.gram_sum = gram_sum;
  if (P > 1) /* a Gram summed across the ranks */
    desc.algorithm = TPLA_NS_ALGO_GRAM_ALLREDUCE;
  tpla_ns_plan_t plan = NULL;
  tpla_matrix_t x = {dx, rows, NN, NN, TPLA_BFLOAT16}, out = {dg, rows, NN, NN, TPLA_BFLOAT16};
  tpla_matrix_t eager = {de, rows, NN, NN, TPLA_BFLOAT16};
  cudaStream_t cap = NULL;
  failed = failed || !ref || !got || !h ||
           CUDA_FAILED(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking)) ||
           TPLA_FAILED(tpla_ns_plan_create(&plan, e->ctx, &desc)) ||
           upload_rows(dx, TPLA_BFLOAT16, rows, NN, row0, 0, 41, NULL) ||
           TPLA_FAILED(tpla_ns_execute_out(plan, eager, x, e->stream)) || team_drain(e, "first");
  cudaGraphExec_t exec = NULL;
  if (!failed && expect_refusal) {
    EXPECT_REFUSED(e, cap, "tpla_ns_execute_out (pulls)", tpla_ns_execute_out(plan, out, x, cap));
  } else if (!failed) {
    failed = CUDA_FAILED(cudaStreamBeginCapture(cap, capture_mode(e))) ||
             TPLA_FAILED(tpla_ns_execute_out(plan, out, x, cap));
    failed = capture_end(cap, &exec) || failed;
  }
  failed = team_sync(e, failed) != 0;
  for (int round = 1; round <= ROUNDS && !failed; round++) {
    double *whole = round_matrix(NM, NN, round, 41);
    failed = whole == NULL || upload_rows(dx, TPLA_BFLOAT16, rows, NN, row0, round, 41, NULL);
    if (!failed) { /* the reference of the bf16-rounded whole matrix */
      for (int64_t i = 0; i < NM * NN; i++)
        ref[i] = bf16(whole[i]);
      failed = !ref_ns_f64(ref, NM, NN, table, 5, 1.0, (double)1e-7f);
    }
    free(whole);
    failed = team_sync(e, failed) != 0;
    if (!failed && exec != NULL) /* every rank launches its graph: NCCL's calls meet */
      failed = CUDA_FAILED(cudaGraphLaunch(exec, cap)) ||
               sync_stream_timeout(cap, TEAM_DRAIN_S, "replay");
    failed = team_sync(e, failed) != 0 ||
             TPLA_FAILED(tpla_ns_execute_out(plan, eager, x, e->stream)) ||
             team_drain(e, "uncaptured");
    failed = team_sync(e, failed) != 0;
    if (failed)
      break;
    if (exec != NULL)
      failures += differ(r, "tpla_ns_execute_out", dg, de, bytes);
    const void *checked = exec != NULL ? dg : de;
    double err = -1.0;
    if (!CUDA_FAILED(cudaMemcpy(h, checked, bytes, cudaMemcpyDeviceToHost))) {
      unpack(got, h, TPLA_BFLOAT16, (size_t)(rows * NN));
      err = ref_rel_diff(got, ref + row0 * NN, (size_t)(rows * NN));
    }
    CHECK(&failures, err >= 0 && err <= NS_TOL, "rank %d round %d: %s result off float64 "
          "by %.3e", r, round, exec != NULL ? "replayed" : "uncaptured", err);
  }
  if (exec != NULL)
    cudaGraphExecDestroy(exec);
  if (cap != NULL)
    cudaStreamDestroy(cap);
  tpla_ns_plan_destroy(plan);
  team_free(e, dx), team_free(e, dg), team_free(e, de);
  free(ref), free(got), free(h);
  return failures + failed;
}

/* ---- the overlapped GEMMs --------------------------------------------------------- */

/* AG+GEMM gathers OROWS rows of A per rank (m = OROWS P) and multiplies by
 * B^T (B: ON x OK); GEMM+RS and GEMM+AR multiply each rank's A (m x OK) by
 * its B^T and sum over the ranks (D_local: rows [r OROWS, (r+1) OROWS); D:
 * all m rows). B is fixed, A new in every round. */
enum { OROWS = 128, OK = 256, ON = 192 };
enum { OVL_AG, OVL_RS, OVL_AR };
static const char *const ovl_names[] = {"tpla_ag_gemm", "tpla_gemm_rs", "tpla_gemm_ar"};

typedef struct {
  int kind;
  tpla_transport_t transport;
} ovl_case_t;

typedef struct {
  int kind;
  void *plan;
  int64_t m, a_rows, a_row0, d_rows; /* A: a_rows x OK from row a_row0 of its matrix */
  int a_tag, b_tag;                  /* round_matrix tags of this rank's A and B */
} ovl_t;

static void ovl_init(ovl_t *o, int kind, int rank, int P) {
  bool ag = kind == OVL_AG;
  *o = (ovl_t){kind, NULL, (int64_t)OROWS * P, ag ? OROWS : (int64_t)OROWS * P,
               ag ? (int64_t)rank * OROWS : 0, kind == OVL_RS ? OROWS : (int64_t)OROWS * P,
               61 + (ag ? 0 : rank), 51 + (ag ? 0 : rank)};
}

static tpla_status_t ovl_create(ovl_t *o, tpla_ctx_t ctx, tpla_transport_t transport, int P) {
  tpla_overlap_mode_t mode = P > 1 ? TPLA_OVERLAP_OVERLAP : TPLA_OVERLAP_AUTO;
  if (o->kind == OVL_AG) {
    tpla_ag_gemm_desc_t d = TPLA_AG_GEMM_DESC_INIT;
    d.local_rows = OROWS, d.k = OK, d.n = ON, d.op_b = TPLA_OP_T;
    d.dtype = d.d_dtype = TPLA_BFLOAT16, d.mode = mode, d.transport = transport;
    return tpla_ag_gemm_plan_create((tpla_ag_gemm_plan_t *)&o->plan, ctx, &d);
  }
  if (o->kind == OVL_RS) {
    tpla_gemm_rs_desc_t d = TPLA_GEMM_RS_DESC_INIT;
    d.m = o->m, d.k = OK, d.n = ON, d.op_b = TPLA_OP_T;
    d.dtype = d.d_dtype = TPLA_BFLOAT16, d.mode = mode, d.transport = transport;
    return tpla_gemm_rs_plan_create((tpla_gemm_rs_plan_t *)&o->plan, ctx, &d);
  }
  tpla_gemm_ar_desc_t d = TPLA_GEMM_AR_DESC_INIT;
  d.m = o->m, d.k = OK, d.n = ON, d.op_b = TPLA_OP_T;
  d.dtype = d.d_dtype = TPLA_BFLOAT16, d.mode = mode, d.transport = transport;
  return tpla_gemm_ar_plan_create((tpla_gemm_ar_plan_t *)&o->plan, ctx, &d);
}

static tpla_status_t ovl_call(const ovl_t *o, void *d, void *a, void *b, cudaStream_t s) {
  tpla_matrix_t dm = {d, o->d_rows, ON, ON, TPLA_BFLOAT16};
  tpla_matrix_t am = {a, o->a_rows, OK, OK, TPLA_BFLOAT16}, bm = {b, ON, OK, OK, TPLA_BFLOAT16};
  switch (o->kind) {
  case OVL_AG: return tpla_ag_gemm(o->plan, dm, am, bm, NULL, s);
  case OVL_RS: return tpla_gemm_rs(o->plan, dm, am, bm, NULL, s);
  default: return tpla_gemm_ar(o->plan, dm, am, bm, NULL, s);
  }
}

static void ovl_destroy(ovl_t *o) {
  switch (o->kind) {
  case OVL_AG: tpla_ag_gemm_plan_destroy(o->plan); break;
  case OVL_RS: tpla_gemm_rs_plan_destroy(o->plan); break;
  default: tpla_gemm_ar_plan_destroy(o->plan);
  }
}

/* This rank's D of the round in float64 (d_rows x ON), and |A||B| beside it:
 * for RS and AR sum_q A_q B_q^T, the product of the ranks' A and B laid
 * side by side along K. */
static int ovl_reference(const ovl_t *o, int rank, int P, int round, double *ref,
                         double *absref) {
  int parts = o->kind == OVL_AG ? 1 : P;
  int64_t m = o->m, kk = (int64_t)OK * parts;
  double *a = malloc(sizeof(double) * (size_t)(m * kk));
  double *b = malloc(sizeof(double) * (size_t)(ON * kk));
  int failed = a == NULL || b == NULL;
  for (int q = 0; q < parts && !failed; q++) {
    int tag = parts > 1 ? q : 0;
    double *aq = round_matrix(m, OK, round, 61 + tag), *bq = round_matrix(ON, OK, 0, 51 + tag);
    failed = aq == NULL || bq == NULL;
    for (int64_t i = 0; !failed && i < m * OK; i++)
      a[(i / OK) * kk + q * OK + i % OK] = bf16(aq[i]);
    for (int64_t i = 0; !failed && i < (int64_t)ON * OK; i++)
      b[(i / OK) * kk + q * OK + i % OK] = bf16(bq[i]);
    free(aq), free(bq);
  }
  int64_t row0 = o->kind == OVL_RS ? (int64_t)rank * OROWS : 0;
  if (!failed)
    gemm_ref_f64(ref, absref, ON, o->d_rows, ON, kk, a + row0 * kk, kk, TPLA_OP_N, b, kk,
                 TPLA_OP_T);
  free(a), free(b);
  return failed;
}

static int ovl_body(rank_env_t *e, void *arg) {
  const ovl_case_t *c = arg;
  const char *name = ovl_names[c->kind];
  int failures = 0, r = e->rank, P = e->nranks;
  ovl_t o;
  ovl_init(&o, c->kind, r, P);
  size_t ab = (size_t)(o.a_rows * OK) * 2, bb = (size_t)ON * OK * 2;
  size_t db = (size_t)(o.d_rows * ON) * 2;
  bool failed = false;
  void *da = team_alloc(e, ab, &failed), *dbm = team_alloc(e, bb, &failed);
  void *dg = team_alloc(e, db, &failed), *de = team_alloc(e, db, &failed);
  double *ref = malloc(sizeof(double) * (size_t)(o.d_rows * ON));
  double *absref = malloc(sizeof(double) * (size_t)(o.d_rows * ON));
  cudaStream_t cap = NULL;
  failed = failed || !ref || !absref ||
           CUDA_FAILED(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking)) ||
           upload_rows(dbm, TPLA_BFLOAT16, ON, OK, 0, 0, o.b_tag, NULL) ||
           upload_rows(da, TPLA_BFLOAT16, o.a_rows, OK, o.a_row0, 0, o.a_tag, NULL);
  failed = team_sync(e, failed) != 0 || TPLA_FAILED(ovl_create(&o, e->ctx, c->transport, P));
  failed = team_sync(e, failed) != 0 || TPLA_FAILED(ovl_call(&o, de, da, dbm, e->stream)) ||
           team_drain(e, "first");
  failed = team_sync(e, failed) != 0;
  cudaGraphExec_t exec = NULL;
  if (!failed && c->transport == TPLA_TRANSPORT_PEER && P > 1) {
    EXPECT_REFUSED(e, cap, name, ovl_call(&o, dg, da, dbm, cap));
  } else if (!failed) {
    failed = CUDA_FAILED(cudaStreamBeginCapture(cap, capture_mode(e))) ||
             TPLA_FAILED(ovl_call(&o, dg, da, dbm, cap));
    failed = capture_end(cap, &exec) || failed;
  }
  failed = team_sync(e, failed) != 0;
  for (int round = 1; round <= ROUNDS && !failed; round++) {
    failed = upload_rows(da, TPLA_BFLOAT16, o.a_rows, OK, o.a_row0, round, o.a_tag, NULL) ||
             ovl_reference(&o, r, P, round, ref, absref);
    failed = team_sync(e, failed) != 0;
    if (!failed && exec != NULL) /* every rank launches its graph: the transfers meet */
      failed = CUDA_FAILED(cudaGraphLaunch(exec, cap)) ||
               sync_stream_timeout(cap, TEAM_DRAIN_S, "replay");
    failed = team_sync(e, failed) != 0 || TPLA_FAILED(ovl_call(&o, de, da, dbm, e->stream)) ||
             team_drain(e, "uncaptured");
    failed = team_sync(e, failed) != 0;
    if (failed)
      break;
    if (exec != NULL)
      failures += differ(r, name, dg, de, db);
    double err = gemm_error(exec != NULL ? dg : de, ref, absref, o.d_rows, ON);
    /* RS/AR: each rank's bf16 partial is rounded before the sum */
    CHECK(&failures, err >= 0 && err <= P + 2.0, "rank %d round %d: %s off the float64 product by "
          "%.2f units of |A||B| u", r, round, name, err);
  }
  if (exec != NULL)
    cudaGraphExecDestroy(exec);
  if (cap != NULL)
    cudaStreamDestroy(cap);
  failures += team_drain(e, "end");
  failed = team_sync(e, failed) != 0 || failed;
  ovl_destroy(&o);
  team_free(e, da), team_free(e, dbm), team_free(e, dg), team_free(e, de);
  free(ref), free(absref);
  return failures + failed;
}

/* ---- the tests ------------------------------------------------------------------ */

static void run_team(int P, team_body_t body, void *arg) {
  REQUIRE_GPUS(P, gpu_count());
  ASSERT_EQ_INT(team_run(P, false, body, arg), 0);
}

static tpla_ns_gram_sum_t g_auto = TPLA_NS_GRAM_SUM_AUTO;
static tpla_ns_gram_sum_t g_collective = TPLA_NS_GRAM_SUM_COLLECTIVE;

static void test_gemm_one_gpu(void) { run_team(1, gemm_body, NULL); }
static void test_gemm_two_gpus(void) { run_team(2, gemm_body, NULL); }
static void test_global_capture_beside_a_watched_call(void) { run_team(2, watched_body, NULL); }
static void test_ns_one_gpu(void) { run_team(1, ns_body, &g_auto); }
static void test_ns_two_gpus_pulls_refused(void) {
  if (getenv("TPLA_NS_GRAM_SUM") != NULL)
    SKIP("TPLA_NS_GRAM_SUM is set: the plan would not pull");
  run_team(2, ns_body, &g_auto); /* two H200s map each other: the plan pulls */
}
static void test_ns_two_gpus_collective(void) { run_team(2, ns_body, &g_collective); }
/* AG, RS, AR: one rank with the default transport (PEER without peers); two
 * ranks over SENDRECV, and over PEER refused */
static void run_overlap(int P, tpla_transport_t transport) {
  for (int kind = OVL_AG; kind <= OVL_AR; kind++) {
    ovl_case_t c = {kind, transport};
    run_team(P, ovl_body, &c);
    if (test_state_ != TEST_RUNNING)
      return;
  }
}
static void test_overlap_one_gpu(void) { run_overlap(1, TPLA_TRANSPORT_AUTO); }
static void test_overlap_two_gpus_sendrecv(void) { run_overlap(2, TPLA_TRANSPORT_SENDRECV); }
static void test_overlap_two_gpus_peer_refused(void) { run_overlap(2, TPLA_TRANSPORT_PEER); }

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  gpu_eager_loading();
  watchdog_arm("test_gpu_graphs", 600);
  g_seed = gpu_fresh_seed("test_gpu_graphs");
  TEST(test_gemm_one_gpu);
  TEST(test_ns_one_gpu);
  TEST(test_overlap_one_gpu);
  TEST(test_gemm_two_gpus);
  TEST(test_global_capture_beside_a_watched_call);
  TEST(test_ns_two_gpus_pulls_refused);
  TEST(test_ns_two_gpus_collective);
  TEST(test_overlap_two_gpus_sendrecv);
  TEST(test_overlap_two_gpus_peer_refused);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
