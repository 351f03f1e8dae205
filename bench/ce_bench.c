/*
 * ce_bench.c - tpla issue #4: which mechanism should move an all-gather's bytes
 * between two GPUs of one node. Side by side, in one process, one thread per GPU:
 *
 *   ce_peer_push       cudaMemcpyPeerAsync of each rank's slice into the peer's
 *                      gathered buffer (copy engines; what tpla's PEER transport does)
 *   nccl_ag            ncclAllGather on a default communicator, cudaMalloc buffers
 *   nccl_ag_zero_cta   ncclAllGather on a communicator with CTAPolicy =
 *                      NCCL_CTA_POLICY_ZERO, buffers from ncclMemAlloc registered as
 *                      NCCL_WIN_COLL_SYMMETRIC windows (NCCL >= 2.28 may then move
 *                      them on the copy engines instead of in SM kernels)
 *   nccl_a2a_zero_cta  ncclAlltoAll on that communicator and window
 *
 * All-gathers are in place (rank r's slice already sits at offset r), so every
 * mechanism moves exactly one slice per direction. For each slice size: the
 * transfer alone (median time; algbw = gathered bytes / time, as nccl-tests), and
 * its interference with compute: a bf16 cuBLASLt GEMM 8192x8192x4096 (NN) alone,
 * and while enough back-to-back transfers to cover it run on another stream. A
 * transfer that needs no SMs leaves the GEMM's time unchanged; `sms_taken` is
 * SMs x (1 - alone / concurrent). docs/OVERLAP.md says how to read the table.
 *
 *   tpla_ce_bench [--quick] [--iters=N] [--warmup=N] [--rows=R] [--timeout=S] [--limit=S]
 *
 * Exit 0 after the last line "ce_bench: done"; 77 without two GPUs with peer
 * access; 1 on a failure or a timeout (every wait is bounded by --timeout; on a
 * timeout the communicators are aborted; a watchdog ends a process that still
 * does not finish). NVLink multicast is never used (NCCL_NVLS_ENABLE=0).
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* NCCL 2.28 brought the zero-CTA policy, copy-engine collectives and ncclAlltoAll. */
#if defined(NCCL_CTA_POLICY_ZERO) && NCCL_VERSION_CODE >= 22800
#define CE_HAVE_ZERO_CTA 1
#else
#define CE_HAVE_ZERO_CTA 0
#endif

enum { NRANKS = 2, COLS = 8192, MAX_ITERS = 1000, MAX_REPS = 64, MAX_SIZES = 3 };
enum { GEMM_M = 8192, GEMM_N = 8192, GEMM_K = 4096 };
_Static_assert(GEMM_M == GEMM_N, "A and B are filled from the same host values");
#define ELEM_BYTES ((size_t)2) /* bf16 */
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define MIB (1024.0 * 1024.0)

typedef enum { PEER_PUSH, NCCL_AG, ZERO_AG, ZERO_A2A, NMECH } mech_t;
static const char *const mech_name[NMECH] = {"ce_peer_push", "nccl_ag", "nccl_ag_zero_cta",
                                             "nccl_a2a_zero_cta"};

typedef struct {
  int iters, warmup, quick, rows;
  double timeout_s, limit_s;
} options_t;

typedef struct {
  int ok, reps;
  float xfer_ms, gemm_ms, gemm_conc_ms, xfer_conc_ms;
} result_t;

typedef struct {
  int rank, peer; /* rank r drives GPU r */
  cudaStream_t xfer, gemm;
  cudaEvent_t x0, x1, g0, g1;
  ncclComm_t comm, zero_comm;
#if CE_HAVE_ZERO_CTA
  ncclWindow_t window;
#endif
  char *plain; /* cudaMalloc: the gathered buffer (2 slices of the largest size) */
  char *sym;   /* ncclMemAlloc, 4 slices: AG gathers into [0, 2); A2A sends [0, 2) into [2, 4) */
  size_t sym_bytes;
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *a, *b, *c, *workspace;
} rank_t;

/* State shared by the two rank threads; the per-iteration arrays are written by
 * each rank into its own row and read by both after a barrier. */
static struct {
  options_t opt;
  int rows[MAX_SIZES], nsizes, max_rows, zero_cta, sm_count;
  ncclUniqueId id, zero_id;
  uint16_t *host_bf16; /* GEMM operand data, GEMM_M * GEMM_K (== GEMM_K * GEMM_N) values */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned generation;
  atomic_int aborted, finished;
  _Atomic(const char *) step[NRANKS];
  char *plain[NRANKS];
  int window_ok[NRANKS], check_ok[NRANKS], status[NRANKS];
  float t_x[NRANKS][MAX_ITERS], t_g[NRANKS][MAX_ITERS];
  float slowdown[MAX_SIZES][NMECH];
} g;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *step_of(int rank) {
  const char *s = atomic_load(&g.step[rank]);
  return s ? s : "(starting)";
}

/* Raises the abort flag and wakes every barrier waiter. Never called with g.mu held. */
static void raise_abort(void) {
  atomic_store(&g.aborted, 1);
  pthread_mutex_lock(&g.mu);
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
}

static int fail(int rank, int line, const char *call, const char *why) {
  fprintf(stderr, "ce_bench: rank %d: line %d: %s failed: %s\n", rank, line, call, why);
  raise_abort();
  return -1;
}

static int cuda_failed(int rank, cudaError_t e, const char *call, int line) {
  return e == cudaSuccess ? 0 : fail(rank, line, call, cudaGetErrorString(e));
}
static int nccl_failed(int rank, ncclResult_t e, const char *call, int line) {
  return e == ncclSuccess ? 0 : fail(rank, line, call, ncclGetErrorString(e));
}
static int lt_failed(int rank, cublasStatus_t e, const char *call, int line) {
  return e == CUBLAS_STATUS_SUCCESS ? 0 : fail(rank, line, call, cublasLtGetStatusString(e));
}
/* In functions with a `rk`: return -1 from there when the call fails. */
#define CU(call) do { if (cuda_failed(rk->rank, (call), #call, __LINE__)) return -1; } while (0)
#define NC(call) do { if (nccl_failed(rk->rank, (call), #call, __LINE__)) return -1; } while (0)
#define LT(call) do { if (lt_failed(rk->rank, (call), #call, __LINE__)) return -1; } while (0)

/* Both threads meet here, for at most --timeout seconds. */
static int barrier(const rank_t *rk, const char *what) {
  atomic_store(&g.step[rk->rank], what);
  pthread_mutex_lock(&g.mu);
  unsigned gen = g.generation;
  if (++g.arrived == NRANKS) {
    g.arrived = 0;
    g.generation++;
    pthread_cond_broadcast(&g.cv);
  } else {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += (time_t)g.opt.timeout_s;
    while (gen == g.generation && !atomic_load(&g.aborted)) {
      if (pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT && gen == g.generation) {
        pthread_mutex_unlock(&g.mu);
        fprintf(stderr, "ce_bench: rank %d: timeout after %.0f s at '%s'; rank %d is at '%s'\n",
                rk->rank, g.opt.timeout_s, what, rk->peer, step_of(rk->peer));
        raise_abort();
        return -1;
      }
    }
  }
  pthread_mutex_unlock(&g.mu);
  return atomic_load(&g.aborted) ? -1 : 0;
}

/* Polls `ev` until it completes, for at most --timeout seconds. */
static int wait_event(const rank_t *rk, cudaEvent_t ev, const char *what) {
  double deadline = now_s() + g.opt.timeout_s;
  atomic_store(&g.step[rk->rank], what);
  for (;;) {
    cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess)
      return 0;
    if (q != cudaErrorNotReady)
      return fail(rk->rank, __LINE__, what, cudaGetErrorString(q));
    if (atomic_load(&g.aborted))
      return -1;
    if (now_s() > deadline) {
      fprintf(stderr, "ce_bench: rank %d: timeout: '%s' not done after %.0f s; "
              "rank %d is at '%s'\n", rk->rank, what, g.opt.timeout_s, rk->peer,
              step_of(rk->peer));
      raise_abort();
      return -1;
    }
    struct timespec pause = {0, 20000};
    nanosleep(&pause, NULL);
  }
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float median(const float *v, int n) {
  float tmp[MAX_ITERS];
  memcpy(tmp, v, (size_t)n * sizeof *v);
  qsort(tmp, (size_t)n, sizeof *tmp, cmp_float);
  return n % 2 ? tmp[n / 2] : 0.5f * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Median over iterations of the slower rank's time: an all-gather ends when both are done. */
static float median_of_slower(float t[NRANKS][MAX_ITERS], int n) {
  float slower[MAX_ITERS];
  for (int i = 0; i < n; i++)
    slower[i] = fmaxf(t[0][i], t[1][i]);
  return median(slower, n);
}

static size_t slice_bytes(int rows) { return (size_t)rows * COLS * ELEM_BYTES; }

/* ---- the GEMM --------------------------------------------------------------- */

static int gemm_run(rank_t *rk) {
  const float alpha = 1.0f, beta = 0.0f;
  LT(cublasLtMatmul(rk->lt, rk->op, &alpha, rk->a, rk->la, rk->b, rk->lb, &beta, rk->c, rk->lc,
                    rk->c, rk->lc, &rk->algo, rk->workspace, LT_WORKSPACE_BYTES, rk->gemm));
  return 0;
}

/* bf16 in, bf16 out, fp32 accumulation, column-major NN: C (m x n) = A (m x k) B (k x n). */
static int gemm_setup(rank_t *rk) {
  size_t ab_bytes = (size_t)GEMM_M * GEMM_K * ELEM_BYTES;
  CU(cudaMalloc(&rk->a, ab_bytes));
  CU(cudaMalloc(&rk->b, ab_bytes));
  CU(cudaMalloc(&rk->c, (size_t)GEMM_M * GEMM_N * ELEM_BYTES));
  CU(cudaMalloc(&rk->workspace, LT_WORKSPACE_BYTES));
  CU(cudaMemcpy(rk->a, g.host_bf16, ab_bytes, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(rk->b, g.host_bf16, ab_bytes, cudaMemcpyHostToDevice));
  LT(cublasLtCreate(&rk->lt));
  LT(cublasLtMatmulDescCreate(&rk->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t no_transpose = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(rk->op, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
                                    sizeof no_transpose));
  LT(cublasLtMatmulDescSetAttribute(rk->op, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                    sizeof no_transpose));
  LT(cublasLtMatrixLayoutCreate(&rk->la, CUDA_R_16BF, GEMM_M, GEMM_K, GEMM_M));
  LT(cublasLtMatrixLayoutCreate(&rk->lb, CUDA_R_16BF, GEMM_K, GEMM_N, GEMM_K));
  LT(cublasLtMatrixLayoutCreate(&rk->lc, CUDA_R_16BF, GEMM_M, GEMM_N, GEMM_M));
  cublasLtMatmulPreference_t pref;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = LT_WORKSPACE_BYTES;
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(rk->lt, rk->op, rk->la, rk->lb, rk->lc, rk->lc, pref, 1,
                                       &best, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  LT(s);
  if (found < 1)
    return fail(rk->rank, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm");
  rk->algo = best.algo;
  /* Load the GEMM's kernel now, while no peer can be waiting on this GPU. */
  if (gemm_run(rk))
    return -1;
  CU(cudaEventRecord(rk->g1, rk->gemm));
  return wait_event(rk, rk->g1, "gemm setup");
}

/* ---- transfers -------------------------------------------------------------- */

static int enqueue_transfer(rank_t *rk, mech_t m, size_t slice, int reps) {
  size_t count = slice / ELEM_BYTES, own = (size_t)rk->rank * slice;
  for (int i = 0; i < reps; i++) {
    switch (m) {
    case PEER_PUSH: /* the copy engine of the source GPU writes into the peer's memory */
      CU(cudaMemcpyPeerAsync(g.plain[rk->peer] + own, rk->peer, rk->plain + own, rk->rank, slice,
                             rk->xfer));
      break;
    case NCCL_AG:
      NC(ncclAllGather(rk->plain + own, rk->plain, count, ncclBfloat16, rk->comm, rk->xfer));
      break;
#if CE_HAVE_ZERO_CTA
    case ZERO_AG:
      NC(ncclAllGather(rk->sym + own, rk->sym, count, ncclBfloat16, rk->zero_comm, rk->xfer));
      break;
    case ZERO_A2A:
      NC(ncclAlltoAll(rk->sym, rk->sym + 2 * slice, count, ncclBfloat16, rk->zero_comm, rk->xfer));
      break;
#endif
    default:
      return fail(rk->rank, __LINE__, mech_name[m], "not built (NCCL < 2.28)");
    }
  }
  return 0;
}

/* One transfer on a known pattern: every byte rank q sends is 0x11 + q, and the
 * place where the peer's slice must land starts zeroed; reads back 64 bytes at its
 * start, middle and end. Catches a transfer that does not land where it should. */
static int check_transfer(rank_t *rk, mech_t m, size_t slice) {
  char *base = (m == PEER_PUSH || m == NCCL_AG) ? rk->plain : rk->sym, *theirs;
  if (m == ZERO_A2A) {
    CU(cudaMemsetAsync(base, 0x11 + rk->rank, 2 * slice, rk->xfer));
    CU(cudaMemsetAsync(base + 2 * slice, 0, 2 * slice, rk->xfer));
    theirs = base + 2 * slice + (size_t)rk->peer * slice;
  } else {
    CU(cudaMemsetAsync(base, 0, 2 * slice, rk->xfer));
    CU(cudaMemsetAsync(base + (size_t)rk->rank * slice, 0x11 + rk->rank, slice, rk->xfer));
    theirs = base + (size_t)rk->peer * slice;
  }
  CU(cudaEventRecord(rk->x1, rk->xfer));
  if (wait_event(rk, rk->x1, "check: set patterns") || barrier(rk, "check: patterns set") ||
      enqueue_transfer(rk, m, slice, 1))
    return -1;
  CU(cudaEventRecord(rk->x1, rk->xfer));
  if (wait_event(rk, rk->x1, "check: transfer") || barrier(rk, "check: transfers done"))
    return -1;
  unsigned char got[3][64];
  size_t at[3] = {0, slice / 2, slice - sizeof got[0]};
  for (int i = 0; i < 3; i++)
    CU(cudaMemcpyAsync(got[i], theirs + at[i], sizeof got[i], cudaMemcpyDeviceToHost, rk->xfer));
  CU(cudaEventRecord(rk->x1, rk->xfer));
  if (wait_event(rk, rk->x1, "check: read back"))
    return -1;
  int ok = 1;
  for (int i = 0; i < 3; i++)
    for (size_t j = 0; j < sizeof got[i]; j++)
      ok &= got[i][j] == (unsigned char)(0x11 + rk->peer);
  g.check_ok[rk->rank] = ok;
  return barrier(rk, "check: read back");
}

/* ---- one mechanism at one size ------------------------------------------------ */

/* Warm-up and timed iterations of `reps` back-to-back transfers (none when 0) and/or
 * one GEMM on its own stream, issued together after a host barrier so that both
 * ranks start at once. Rank r's times (per transfer, per GEMM) go to g.t_x[r], g.t_g[r]. */
static int timed_loop(rank_t *rk, mech_t m, size_t slice, int reps, int gemm, const char *what) {
  int r = rk->rank;
  for (int i = -g.opt.warmup; i < g.opt.iters; i++) {
    if (barrier(rk, what))
      return -1;
    if (reps > 0) {
      CU(cudaEventRecord(rk->x0, rk->xfer));
      if (enqueue_transfer(rk, m, slice, reps))
        return -1;
      CU(cudaEventRecord(rk->x1, rk->xfer));
    }
    if (gemm) {
      CU(cudaEventRecord(rk->g0, rk->gemm));
      if (gemm_run(rk))
        return -1;
      CU(cudaEventRecord(rk->g1, rk->gemm));
    }
    if ((gemm && wait_event(rk, rk->g1, what)) || (reps > 0 && wait_event(rk, rk->x1, what)))
      return -1;
    if (i >= 0 && reps > 0) {
      CU(cudaEventElapsedTime(&g.t_x[r][i], rk->x0, rk->x1));
      g.t_x[r][i] /= (float)reps;
    }
    if (i >= 0 && gemm)
      CU(cudaEventElapsedTime(&g.t_g[r][i], rk->g0, rk->g1));
  }
  return barrier(rk, what); /* then both ranks may read both rows */
}

static int measure(rank_t *rk, mech_t m, int rows, result_t *res) {
  size_t slice = slice_bytes(rows);
  int n = g.opt.iters;
  if (check_transfer(rk, m, slice))
    return -1;
  res->ok = g.check_ok[0] && g.check_ok[1];
  if (timed_loop(rk, m, slice, 1, 0, "transfer alone"))
    return -1;
  res->xfer_ms = median_of_slower(g.t_x, n);
  if (timed_loop(rk, m, slice, 0, 1, "gemm alone"))
    return -1;
  res->gemm_ms = fmaxf(median(g.t_g[0], n), median(g.t_g[1], n));
  /* Both at once: the transfers first (as an overlapped layer issues them), enough
   * of them back to back to last about twice the GEMM, so that the GEMM runs under
   * traffic from its first to its last instruction. Both ranks compute the same
   * count from the same shared numbers, so NCCL sees matching calls. */
  float cover = res->xfer_ms > 0.0f ? 2.0f * res->gemm_ms / res->xfer_ms : (float)MAX_REPS;
  res->reps = cover < 1.0f ? 1 : cover > (float)MAX_REPS ? MAX_REPS : (int)ceilf(cover);
  if (timed_loop(rk, m, slice, res->reps, 1, "transfer + gemm"))
    return -1;
  res->gemm_conc_ms = fmaxf(median(g.t_g[0], n), median(g.t_g[1], n));
  res->xfer_conc_ms = median_of_slower(g.t_x, n);
  return 0;
}

static void print_result(int rows, mech_t m, const result_t *res) {
  size_t slice = slice_bytes(rows);
  double algbw = res->xfer_ms > 0 ? 2.0 * (double)slice / (res->xfer_ms * 1e-3) / 1e9 : 0.0;
  double slowdown = res->gemm_ms > 0 ? res->gemm_conc_ms / res->gemm_ms : 0.0;
  double taken = slowdown > 1.0 ? g.sm_count * (1.0 - 1.0 / slowdown) : 0.0;
  printf("%6d %9.0f %12.0f %-18s %-5s %9.3f %9.1f %8.3f %12.3f %8.3f %9.1f %12.3f %4d\n", rows,
         (double)slice / MIB, 2.0 * (double)slice / MIB, mech_name[m], res->ok ? "ok" : "WRONG",
         res->xfer_ms, algbw, res->gemm_ms, res->gemm_conc_ms, slowdown, taken, res->xfer_conc_ms,
         res->reps);
  fflush(stdout);
}

/* Where a zero-CTA collective's GEMM slowdown `s` lies between the peer push's
 * (copy engines, no SMs) and the default all-gather's (SM kernels). */
static const char *engine_verdict(double s_ce, double s_sm, double s) {
  if (s_sm - s_ce < 0.03)
    return "unclear: the default all-gather does not slow the GEMM measurably either";
  double f = (s - s_ce) / (s_sm - s_ce);
  if (f <= 0.25)
    return "copy engines (the GEMM slows about as little as under the peer push)";
  if (f >= 0.75)
    return "SM kernels: NCCL fell back (the GEMM slows like under the default all-gather)";
  return "partly SM kernels (between the peer push and the default all-gather)";
}

/* ---- one rank's thread ------------------------------------------------------------ */

static int comms_init(rank_t *rk) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  atomic_store(&g.step[rk->rank], "ncclCommInitRankConfig (default)");
  NC(ncclCommInitRankConfig(&rk->comm, NRANKS, g.id, rk->rank, &config));
#if CE_HAVE_ZERO_CTA
  if (g.zero_cta) {
    ncclConfig_t zero = NCCL_CONFIG_INITIALIZER;
    zero.CTAPolicy = NCCL_CTA_POLICY_ZERO;
    atomic_store(&g.step[rk->rank], "ncclCommInitRankConfig (zero CTA)");
    NC(ncclCommInitRankConfig(&rk->zero_comm, NRANKS, g.zero_id, rk->rank, &zero));
    rk->sym_bytes = 4 * slice_bytes(g.max_rows);
    NC(ncclMemAlloc((void **)&rk->sym, rk->sym_bytes));
    atomic_store(&g.step[rk->rank], "ncclCommWindowRegister");
    NC(ncclCommWindowRegister(rk->zero_comm, rk->sym, rk->sym_bytes, &rk->window,
                              NCCL_WIN_COLL_SYMMETRIC));
    g.window_ok[rk->rank] = rk->window != NULL;
  }
#endif
  return barrier(rk, "communicators ready");
}

static int rank_run(rank_t *rk) {
  CU(cudaSetDevice(rk->rank));
  cudaError_t pe = cudaDeviceEnablePeerAccess(rk->peer, 0);
  if (pe == cudaErrorPeerAccessAlreadyEnabled) { /* fine; clear the last error */
    (void)cudaGetLastError();
    pe = cudaSuccess;
  }
  if (cuda_failed(rk->rank, pe, "cudaDeviceEnablePeerAccess", __LINE__))
    return -1;
  CU(cudaStreamCreateWithFlags(&rk->xfer, cudaStreamNonBlocking));
  CU(cudaStreamCreateWithFlags(&rk->gemm, cudaStreamNonBlocking));
  cudaEvent_t *events[] = {&rk->x0, &rk->x1, &rk->g0, &rk->g1};
  for (int i = 0; i < 4; i++)
    CU(cudaEventCreate(events[i]));
  CU(cudaMalloc((void **)&rk->plain, 2 * slice_bytes(g.max_rows)));
  g.plain[rk->rank] = rk->plain;
  if (gemm_setup(rk) || barrier(rk, "setup done") || comms_init(rk))
    return -1;
  int mechs = g.zero_cta ? NMECH : ZERO_AG;
  if (rk->rank == 0) {
    if (g.zero_cta && !(g.window_ok[0] && g.window_ok[1]))
      printf("# zero-CTA window: NULL (NCCL has no symmetric memory here: NCCL_CUMEM_ENABLE=0, "
             "NCCL_WIN_ENABLE=0, or GPUs not all P2P): the zero-CTA rows are SM kernels\n");
    else if (g.zero_cta)
      printf("# zero-CTA window: %.0f MiB per GPU from ncclMemAlloc, NCCL_WIN_COLL_SYMMETRIC\n",
             (double)rk->sym_bytes / MIB);
    printf("# rows slice_MiB gathered_MiB mechanism check xfer_ms algbw_GBs gemm_ms "
           "gemm_conc_ms slowdown sms_taken xfer_conc_ms reps\n");
    fflush(stdout);
  }
  for (int s = 0; s < g.nsizes; s++) {
    for (int m = 0; m < mechs; m++) {
      result_t res;
      if (measure(rk, (mech_t)m, g.rows[s], &res))
        return -1;
      if (rk->rank == 0) {
        print_result(g.rows[s], (mech_t)m, &res);
        g.slowdown[s][m] = res.gemm_ms > 0 ? res.gemm_conc_ms / res.gemm_ms : 0.0f;
      }
    }
  }
  return barrier(rk, "all measured");
}

/* After a failure a peer may wait forever on a flag this rank never writes: abort
 * the communicators and leave the memory to the process exit. Otherwise both GPUs
 * are idle (the last step was a barrier) and both ranks tear down in one order. */
static int rank_cleanup(rank_t *rk, int failed) {
  atomic_store(&g.step[rk->rank], "cleanup");
  if (failed) {
    if (rk->zero_comm)
      ncclCommAbort(rk->zero_comm);
    if (rk->comm)
      ncclCommAbort(rk->comm);
    return -1;
  }
#if CE_HAVE_ZERO_CTA
  if (rk->window)
    NC(ncclCommWindowDeregister(rk->zero_comm, rk->window));
#endif
  if (rk->sym)
    NC(ncclMemFree(rk->sym));
  ncclComm_t comms[2] = {rk->zero_comm, rk->comm};
  for (int i = 0; i < 2; i++) {
    if (comms[i]) {
      NC(ncclCommFinalize(comms[i]));
      NC(ncclCommDestroy(comms[i]));
    }
  }
  void *buffers[] = {rk->plain, rk->a, rk->b, rk->c, rk->workspace};
  for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
    CU(cudaFree(buffers[i]));
  cublasLtMatrixLayoutDestroy(rk->la);
  cublasLtMatrixLayoutDestroy(rk->lb);
  cublasLtMatrixLayoutDestroy(rk->lc);
  cublasLtMatmulDescDestroy(rk->op);
  cublasLtDestroy(rk->lt);
  return 0;
}

static void *rank_main(void *arg) {
  rank_t *rk = arg;
  int failed = rank_run(rk) != 0 || atomic_load(&g.aborted);
  g.status[rk->rank] = rank_cleanup(rk, failed) != 0 || failed;
  atomic_store(&g.step[rk->rank], "finished");
  return NULL;
}

/* The last resort: a thread blocked inside a CUDA or NCCL call cannot poll. */
static void *watchdog_main(void *arg) {
  (void)arg;
  double start = now_s(), aborted_at = 0.0;
  while (!atomic_load(&g.finished)) {
    struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL);
    double t = now_s();
    if (aborted_at == 0.0 && atomic_load(&g.aborted))
      aborted_at = t;
    if (t - start > g.opt.limit_s || (aborted_at > 0.0 && t - aborted_at > g.opt.timeout_s)) {
      fprintf(stderr, "ce_bench: watchdog: not finished after %.0f s (rank 0 at '%s', rank 1 "
              "at '%s'); exiting\nce_bench: failed\n", t - start, step_of(0), step_of(1));
      fflush(stdout);
      _exit(1);
    }
  }
  return NULL;
}

/* ---- main ----------------------------------------------------------------------- */

/* "--name=N" with lo <= N <= hi: 1 when parsed, 0 when `arg` is another option, -1 when bad. */
static int int_option(const char *arg, const char *name, int lo, int hi, int *out) {
  size_t len = strlen(name);
  if (strncmp(arg, name, len) != 0 || arg[len] != '=')
    return 0;
  char *end;
  long v = strtol(arg + len + 1, &end, 10);
  if (*end != '\0' || end == arg + len + 1 || v < lo || v > hi) {
    fprintf(stderr, "ce_bench: %s: expected an integer in [%d, %d]\n", arg, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 1;
}

static int parse_args(int argc, char **argv) {
  options_t *o = &g.opt;
  int timeout = 30, limit = 300;
  *o = (options_t){.iters = 20, .warmup = 5};
  for (int i = 1; i < argc; i++) {
    int k = 0;
    if (strcmp(argv[i], "--quick") == 0)
      o->quick = k = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: %s [--quick] [--iters=N] [--warmup=N] [--rows=R] [--timeout=S] "
             "[--limit=S]\n  --quick: one size (8192 rows); default: 4096 8192 16384 rows x "
             "%d bf16 per rank\n  --timeout: bound of every wait (30 s); --limit: of the "
             "whole run (300 s)\n", argv[0], COLS);
      exit(0);
    } else if ((k = int_option(argv[i], "--iters", 1, MAX_ITERS, &o->iters)) == 0 &&
               (k = int_option(argv[i], "--warmup", 0, 1000, &o->warmup)) == 0 &&
               (k = int_option(argv[i], "--rows", 128, 65536, &o->rows)) == 0 &&
               (k = int_option(argv[i], "--timeout", 1, 3600, &timeout)) == 0)
      k = int_option(argv[i], "--limit", 10, 36000, &limit);
    if (k == 0)
      fprintf(stderr, "ce_bench: unknown argument '%s' (see --help)\n", argv[i]);
    if (k != 1)
      return -1;
  }
  o->timeout_s = timeout;
  o->limit_s = limit;
  static const int all_rows[MAX_SIZES] = {4096, 8192, 16384};
  g.nsizes = 0;
  if (o->rows > 0 || o->quick)
    g.rows[g.nsizes++] = o->rows > 0 ? o->rows : 8192;
  else
    for (int i = 0; i < MAX_SIZES; i++)
      g.rows[g.nsizes++] = all_rows[i];
  for (int i = 0; i < g.nsizes; i++)
    g.max_rows = g.rows[i] > g.max_rows ? g.rows[i] : g.max_rows;
  return 0;
}

/* Random non-zero bf16 values, +-[0.5, 1), rounded to nearest even. */
static void fill_random_bf16(uint16_t *v, size_t n) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    float f = (0.5f + (float)(x >> 40) * 0x1p-25f) * ((x & 1) ? -1.0f : 1.0f);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    v[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
}

static int die(const char *what) {
  fprintf(stderr, "ce_bench: %s\nce_bench: failed\n", what);
  return 1;
}

static int skip(const char *why) {
  printf("ce_bench: skipped (exit 77): needs 2 GPUs with peer access: %s\n", why);
  return 77;
}

static void print_header(int nccl_version) {
  printf("# ce_bench: all-gather transfer mechanisms vs a concurrent GEMM, 2 GPUs, one process, "
         "one thread per GPU (tpla issue #4)\n");
  for (int d = 0; d < NRANKS; d++) {
    struct cudaDeviceProp p;
    char bus[32] = "?";
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess) {
      cudaDeviceGetPCIBusId(bus, sizeof bus, d);
      printf("# gpu %d: %s, %d SMs, %.0f GiB, PCI %s\n", d, p.name, p.multiProcessorCount,
             (double)p.totalGlobalMem / (MIB * 1024.0), bus);
    }
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("# cuda: driver %d, runtime %d; cublasLt %zu\n", drv, rt, cublasLtGetVersion());
  printf("# nccl: runtime %d.%d.%d (ncclGetVersion %d), headers %d.%d.%d; zero-CTA rows: %s\n",
         nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100, nccl_version,
         NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         g.zero_cta ? "yes"
         : CE_HAVE_ZERO_CTA ? "no (runtime NCCL < 2.28)"
                            : "no (built against NCCL < 2.28)");
  const char *policy = getenv("NCCL_CTA_POLICY");
  printf("# env: NCCL_NVLS_ENABLE=%s NVSHMEM_DISABLE_NVLS=%s CUDA_MODULE_LOADING=%s "
         "NCCL_CTA_POLICY=%s%s\n", getenv("NCCL_NVLS_ENABLE"), getenv("NVSHMEM_DISABLE_NVLS"),
         getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "(unset: lazy)",
         policy ? policy : "(unset)",
         policy ? " (WARNING: overrides both communicators' CTAPolicy)" : "");
  printf("# gemm: bf16 m=%d n=%d k=%d NN, fp32 accumulation, cuBLASLt, random +-[0.5,1)\n",
         GEMM_M, GEMM_N, GEMM_K);
  printf("# sizes (rows x %d bf16 per rank; in-place all-gather, one slice per direction):", COLS);
  for (int i = 0; i < g.nsizes; i++)
    printf(" %d (slice %.0f MiB, gathered %.0f MiB)%s", g.rows[i],
           (double)slice_bytes(g.rows[i]) / MIB, 2.0 * (double)slice_bytes(g.rows[i]) / MIB,
           i + 1 < g.nsizes ? "," : "\n");
  printf("# timing: CUDA events, median of %d after %d warm-up; times are the slower rank's; "
         "algbw = gathered bytes / xfer_ms; slowdown = gemm_conc_ms / gemm_ms; "
         "sms_taken = %d SMs x (1 - 1/slowdown); xfer_conc_ms = one transfer's time during "
         "the GEMM (reps back to back)\n", g.opt.iters, g.opt.warmup, g.sm_count);
  fflush(stdout);
}

int main(int argc, char **argv) {
  /* Before any CUDA or NCCL call: never NVLink multicast. */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  if (parse_args(argc, argv))
    return 2;
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess) {
    char why[256];
    snprintf(why, sizeof why, "no usable GPU (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    return skip(why);
  }
  if (ndev < NRANKS) {
    char why[128];
    snprintf(why, sizeof why, "found %d GPU%s", ndev, ndev == 1 ? "" : "s");
    return skip(why);
  }
  int p01 = 0, p10 = 0;
  if (cudaDeviceCanAccessPeer(&p01, 0, 1) != cudaSuccess ||
      cudaDeviceCanAccessPeer(&p10, 1, 0) != cudaSuccess || !p01 || !p10)
    return skip("GPUs 0 and 1 cannot access each other's memory");
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) != ncclSuccess)
    return die("ncclGetVersion failed");
  g.zero_cta = CE_HAVE_ZERO_CTA && nccl_version >= 22800;
  cudaDeviceGetAttribute(&g.sm_count, cudaDevAttrMultiProcessorCount, 0);
  print_header(nccl_version);

  if (ncclGetUniqueId(&g.id) != ncclSuccess || ncclGetUniqueId(&g.zero_id) != ncclSuccess)
    return die("ncclGetUniqueId failed");
  size_t values = (size_t)GEMM_M * GEMM_K;
  g.host_bf16 = malloc(values * sizeof *g.host_bf16);
  if (!g.host_bf16)
    return die("out of host memory");
  fill_random_bf16(g.host_bf16, values);

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g.cv, &ca);
  pthread_mutex_init(&g.mu, NULL);
  pthread_t dog, threads[NRANKS];
  static rank_t ranks[NRANKS];
  if (pthread_create(&dog, NULL, watchdog_main, NULL) != 0)
    return die("pthread_create failed");
  int started = 0;
  for (; started < NRANKS; started++) {
    ranks[started] = (rank_t){.rank = started, .peer = 1 - started};
    if (pthread_create(&threads[started], NULL, rank_main, &ranks[started]) != 0) {
      fprintf(stderr, "ce_bench: pthread_create failed\n");
      raise_abort();
      break;
    }
  }
  int failed = started < NRANKS;
  for (int r = 0; r < started; r++) {
    pthread_join(threads[r], NULL);
    failed |= g.status[r];
  }
  atomic_store(&g.finished, 1);
  pthread_join(dog, NULL);
  if (!failed) {
    for (int s = 0; s < g.nsizes && g.zero_cta; s++)
      for (int m = ZERO_AG; m < NMECH; m++)
        printf("# rows=%d %s: %s\n", g.rows[s], mech_name[m],
               engine_verdict(g.slowdown[s][PEER_PUSH], g.slowdown[s][NCCL_AG],
                              g.slowdown[s][m]));
  }
  free(g.host_bf16);
  printf("ce_bench: %s\n", failed ? "failed" : "done");
  return failed ? 1 : 0;
}
