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
 *
 * This file: the options, the measurement of one mechanism at one size, the table
 * and the verdicts, each rank's thread and main. ce_mech.c holds the GPU side (the
 * communicators, windows, GEMM and transfers), ce_sync.c the bounded waits.
 */
#include "ce_bench.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ITERS = 1000, MAX_REPS = 64, MAX_SIZES = 3 };

typedef struct {
  int iters, warmup, quick, rows;
  double timeout_s, limit_s;
} options_t;

typedef struct {
  int ok, reps;
  float xfer_ms, gemm_ms, gemm_conc_ms, xfer_conc_ms;
} result_t;

/* The run's settings, and the per-iteration times that each rank writes into its
 * own row and both read after a barrier. */
static struct {
  options_t opt;
  int rows[MAX_SIZES], nsizes, max_rows, zero_cta, sm_count;
  int status[NRANKS];
  float t_x[NRANKS][MAX_ITERS], t_g[NRANKS][MAX_ITERS];
  float slowdown[MAX_SIZES][NMECH];
} g;

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

/* The slower rank's median: each GPU runs its own GEMM. */
static float slower_median(float t[NRANKS][MAX_ITERS], int n) {
  return fmaxf(median(t[0], n), median(t[1], n));
}

static float gemm_slowdown(const result_t *res) {
  return res->gemm_ms > 0 ? res->gemm_conc_ms / res->gemm_ms : 0.0f;
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
  if (check_transfer(rk, m, slice, &res->ok))
    return -1;
  if (timed_loop(rk, m, slice, 1, 0, "transfer alone"))
    return -1;
  res->xfer_ms = median_of_slower(g.t_x, n);
  if (timed_loop(rk, m, slice, 0, 1, "gemm alone"))
    return -1;
  res->gemm_ms = slower_median(g.t_g, n);
  /* Both at once: the transfers first (as an overlapped layer issues them), enough
   * of them back to back to last about twice the GEMM, so that the GEMM runs under
   * traffic from its first to its last instruction. Both ranks compute the same
   * count from the same shared numbers, so NCCL sees matching calls. */
  float cover = res->xfer_ms > 0.0f ? 2.0f * res->gemm_ms / res->xfer_ms : (float)MAX_REPS;
  res->reps = cover < 1.0f ? 1 : cover > (float)MAX_REPS ? MAX_REPS : (int)ceilf(cover);
  if (timed_loop(rk, m, slice, res->reps, 1, "transfer + gemm"))
    return -1;
  res->gemm_conc_ms = slower_median(g.t_g, n);
  res->xfer_conc_ms = median_of_slower(g.t_x, n);
  return 0;
}

static void print_result(int rows, mech_t m, const result_t *res) {
  size_t slice = slice_bytes(rows);
  double algbw = res->xfer_ms > 0 ? 2.0 * (double)slice / (res->xfer_ms * 1e-3) / 1e9 : 0.0;
  double slowdown = gemm_slowdown(res);
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

static int rank_run(rank_t *rk) {
  if (rank_setup(rk))
    return -1;
  int mechs = g.zero_cta ? NMECH : ZERO_AG;
  if (rk->rank == 0) {
    if (g.zero_cta && !zero_cta_windows_ok())
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
        g.slowdown[s][m] = gemm_slowdown(&res);
      }
    }
  }
  return barrier(rk, "all measured");
}

static void *rank_main(void *arg) {
  rank_t *rk = arg;
  int failed = rank_run(rk) != 0 || abort_raised();
  g.status[rk->rank] = rank_cleanup(rk, failed) != 0 || failed;
  set_step(rk, "finished");
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

  const char *not_prepared = mech_prepare(g.zero_cta, g.max_rows);
  if (not_prepared)
    return die(not_prepared);
  sync_init(g.opt.timeout_s, g.opt.limit_s);
  pthread_t threads[NRANKS];
  static rank_t ranks[NRANKS];
  if (watchdog_start())
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
  watchdog_stop();
  if (!failed) {
    for (int s = 0; s < g.nsizes && g.zero_cta; s++)
      for (int m = ZERO_AG; m < NMECH; m++)
        printf("# rows=%d %s: %s\n", g.rows[s], mech_name[m],
               engine_verdict(g.slowdown[s][PEER_PUSH], g.slowdown[s][NCCL_AG],
                              g.slowdown[s][m]));
  }
  mech_release();
  printf("ce_bench: %s\n", failed ? "failed" : "done");
  return failed ? 1 : 0;
}
