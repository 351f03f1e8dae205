/*
 * gpu_util.h - helpers of the GPU tests (tests/gpu/test_*.c and the MPI
 * test): device counting for the skip, checked device allocation and
 * copies, a seeded generator, dtype packing through the library's own
 * conversions, a float64 GEMM reference, a per-rank CHECK that records a
 * failure without leaving the body (so the other ranks' collectives still
 * find a partner), and a watchdog that turns a hang into a clear failure.
 *
 * Header-only (static functions): each test is one translation unit.
 * Include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_GPU_UTIL_H
#define TPLA_GPU_UTIL_H

#include "internal.h"
#include "test.h"
#include "tpla.h"

#include <cuda_runtime.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- devices -------------------------------------------------------------- */

/* One process driving several GPUs with overlapped plans: load every CUDA
 * module at initialization (docs/OVERLAP.md, "One process, several GPUs"),
 * unless the caller chose a mode or TPLA_TEST_LAZY is set (to reproduce
 * the lazy-loading behaviour). Call before the first CUDA call. */
static inline void gpu_eager_loading(void) {
  if (getenv("TPLA_TEST_LAZY") == NULL)
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  printf("# CUDA_MODULE_LOADING=%s\n",
         getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "(unset: LAZY)");
}

static inline int gpu_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/* cudaMemcpy from pageable host memory and cudaMemset run on the legacy
 * default stream and may return before the device has written; the tests'
 * streams are non-blocking, so their kernels do not wait for them (run 45:
 * under load, a kernel's output was overwritten by its buffer's fill). These
 * return once the bytes are in place. */
static inline cudaError_t gpu_upload(void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  return e != cudaSuccess ? e : cudaStreamSynchronize(cudaStreamLegacy);
}
static inline cudaError_t gpu_fill(void *dst, int byte, size_t bytes) {
  cudaError_t e = cudaMemset(dst, byte, bytes);
  return e != cudaSuccess ? e : cudaStreamSynchronize(cudaStreamLegacy);
}

/* Prints "file:line: call failed: error" and evaluates to nonzero. */
#define CUDA_FAILED(call) gpu_cuda_failed_((call), #call, __FILE__, __LINE__)
static inline int gpu_cuda_failed_(cudaError_t e, const char *call, const char *file, int line) {
  if (e == cudaSuccess)
    return 0;
  fprintf(stderr, "  %s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(e),
          cudaGetErrorString(e));
  return 1;
}

/* A tpla call that must succeed: prints status and last error otherwise. */
#define TPLA_FAILED(call) gpu_tpla_failed_((call), #call, __FILE__, __LINE__)
static inline int gpu_tpla_failed_(tpla_status_t s, const char *call, const char *file,
                                   int line) {
  if (s == TPLA_SUCCESS)
    return 0;
  fprintf(stderr, "  %s:%d: %s returned %s: %s\n", file, line, call, tpla_status_string(s),
          tpla_last_error());
  return 1;
}

/* Waits for `stream` for at most `seconds`, so that a stuck collective
 * fails the test instead of hanging it. Returns 0 when drained. */
static inline int sync_stream_timeout(cudaStream_t stream, int seconds, const char *what) {
  time_t deadline = time(NULL) + seconds;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess)
      return 0;
    if (q != cudaErrorNotReady) {
      fprintf(stderr, "  %s: cudaStreamQuery: %s\n", what, cudaGetErrorString(q));
      return 1;
    }
    if (time(NULL) > deadline) {
      fprintf(stderr, "  %s: stream did not drain within %d s (a rank missing?)\n", what,
              seconds);
      return 1;
    }
    usleep(200);
  }
}

/* A host stand-in switch (TPLA_NS_TEST_HOST, TPLA_FUZZ_HOST): set and not "0". */
static inline int gpu_env_on(const char *name) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* TPLA_TEST_REQUIRE_GPUS=N: the machine has N GPUs, so a test that needs at most N and
 * finds fewer FAILS instead of skipping (tests/gpu/run.sh sets it from nvidia-smi; without
 * it, a machine that shows a test fewer GPUs than it has would pass with its 2-GPU cases
 * skipped). Unset: 0. */
static inline int gpu_required(void) {
  const char *v = getenv("TPLA_TEST_REQUIRE_GPUS");
  return v != NULL ? atoi(v) : 0;
}

/* In a test body: skip unless `available` GPUs (or stand-in ranks) cover `need`. */
#define REQUIRE_GPUS(need, available)                                                    \
  do {                                                                                   \
    int need_ = (need), have_ = (available);                                             \
    if (have_ < need_ && need_ <= gpu_required()) {                                      \
      TEST_FAIL_("needs %d GPUs, found %d, but TPLA_TEST_REQUIRE_GPUS=%d", need_, have_, \
                 gpu_required());                                                        \
      return;                                                                            \
    }                                                                                    \
    if (have_ < need_)                                                                   \
      SKIP("needs %d GPUs, found %d", need_, have_);                                     \
  } while (0)

static inline void gpu_test_no_device(void) { REQUIRE_GPUS(1, 0); }

/* main's opening: with nothing to run on (`available`: gpu_count(), or a host stand-in's
 * ranks), the test's one result is a skip, so CTest reports it skipped, not passed. */
#define GPU_TEST_MAIN_SKIP_WITHOUT(available) \
  do {                                        \
    if ((available) == 0) {                   \
      TEST(gpu_test_no_device);               \
      return test_summary();                  \
    }                                         \
  } while (0)


/* ---- device memory growth ---------------------------------------------------------- */

/* The no-growth checks read cudaMemGetInfo, which counts every process on the
 * GPU: a job beside the tests moves it (run 48: a `tpla ns` loop failed three
 * checks; run 50: one whose neighbour was starting up shrank it in four windows
 * in a row). So a window of calls counts only when the device was quiet around
 * it: free memory the same over 20 ms of this process's idleness before and
 * after. One quiet window without shrinking passes; two quiet windows that
 * shrank fail (one, if it is the only quiet one); other windows are repeated,
 * up to GPU_STEADY_TRIES. With no quiet window at all the check says that it
 * could not measure, and does not fail. */
#define GPU_STEADY_TRIES 8

typedef struct {
  int windows, shrank;   /* windows ended; quiet ones whose free memory shrank */
  int verdict;           /* 0 undecided, 1 steady, -1 grew */
  bool quiet;            /* the current window's start was quiet */
  size_t before, after;  /* free bytes at its start and end */
} gpu_steady_t;

/* Free memory of the current device into *free_bytes, twice 20 ms apart: *quiet
 * when they agree. Nonzero (with a message) on failure. */
static inline int gpu_free_probe(size_t *free_bytes, bool *quiet) {
  size_t first = 0, total = 0;
  cudaError_t e = cudaMemGetInfo(&first, &total);
  if (e == cudaSuccess) {
    usleep(20000);
    e = cudaMemGetInfo(free_bytes, &total);
  }
  if (e != cudaSuccess)
    fprintf(stderr, "  cudaMemGetInfo: %s\n", cudaGetErrorString(e));
  *quiet = e == cudaSuccess && first == *free_bytes;
  return e != cudaSuccess;
}

/* Call with this rank's work drained, before the window's calls. */
static inline int gpu_steady_begin(gpu_steady_t *g) {
  return gpu_free_probe(&g->before, &g->quiet);
}

/* Call with the window's calls drained; nonzero if cudaMemGetInfo failed. */
static inline int gpu_steady_end(gpu_steady_t *g, int rank) {
  bool quiet_after = false;
  int failed = gpu_free_probe(&g->after, &quiet_after);
  bool shrank = (double)g->before - (double)g->after > 2.0 * 1024 * 1024; /* driver slack */
  g->windows++;
  if (failed || g->verdict != 0)
    return failed;
  if (!(g->quiet && quiet_after)) {
    printf("# rank %d: window %d: another process moved device memory, again\n", rank,
           g->windows);
    return 0;
  }
  if (shrank)
    printf("# rank %d: window %d: free device memory %zu -> %zu bytes\n", rank, g->windows,
           g->before, g->after);
  g->shrank += shrank;
  g->verdict = !shrank ? 1 : g->shrank == 2 ? -1 : 0;
  return 0;
}

/* Another window is needed (this rank's view). */
static inline bool gpu_steady_more(const gpu_steady_t *g) {
  return g->verdict == 0 && g->windows < GPU_STEADY_TRIES;
}

/* The verdict once no rank needs another window: true unless memory grew. Under
 * compute-sanitizer (TPLA_TEST_SANITIZER=1) the figures are printed, not judged: the tool
 * allocates device memory of its own as a run goes on (run 126, memcheck: 4 MiB per window of
 * 2-GPU GEMM+AR calls, where the same test without it shrinks by nothing). */
static inline bool gpu_steady_ok(const gpu_steady_t *g, int rank) {
  if (getenv("TPLA_TEST_SANITIZER") != NULL) {
    printf("# rank %d: device memory not judged under a sanitizer: %d window(s), %d shrank, "
           "free %zu -> %zu in the last\n", rank, g->windows, g->shrank, g->before, g->after);
    return true;
  }
  if (g->verdict == 0 && g->shrank == 0)
    printf("# rank %d: device memory not checked: other processes moved it around each of %d "
           "windows\n", rank, g->windows);
  return g->verdict == 1 || (g->verdict == 0 && g->shrank == 0);
}

/* ---- per-rank checks --------------------------------------------------------- */

/* Records a failure in `*failures` (an int in scope) and carries on. */
#define CHECK(failures, cond, ...)                                     \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, "\n");                                           \
      (*(failures))++;                                                 \
    }                                                                  \
  } while (0)

/* ---- watchdog ------------------------------------------------------------------ */

static const char *gpu_watchdog_name_ = "?";
static void gpu_watchdog_fire_(int sig) {
  (void)sig;
  static const char msg[] = "\nWATCHDOG: test did not finish in time (hang) in ";
  ssize_t w = write(2, msg, sizeof msg - 1);
  w = write(2, gpu_watchdog_name_, strlen(gpu_watchdog_name_));
  w = write(2, "\n", 1);
  (void)w;
  _exit(1);
}
/* Kill the process with a message naming `name` if it is still running
 * after `seconds`; 0 disarms. TPLA_TEST_NO_WATCHDOG=1 turns it off (slow
 * runs under compute-sanitizer). */
static inline void watchdog_arm(const char *name, unsigned seconds) {
  if (getenv("TPLA_TEST_NO_WATCHDOG"))
    return;
  gpu_watchdog_name_ = name;
  signal(SIGALRM, gpu_watchdog_fire_);
  alarm(seconds);
}

/* ---- random numbers ------------------------------------------------------------- */

typedef struct {
  uint64_t s;
} gpu_rng_t;

static inline void gpu_rng_seed(gpu_rng_t *r, uint64_t seed) {
  r->s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  if (r->s == 0)
    r->s = 1;
}
/* Uniform in [-1, 1). */
static inline double gpu_rng_uniform(gpu_rng_t *r) {
  uint64_t x = r->s; /* xorshift64* */
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / (double)(1ull << 52) - 1.0;
}
/* A seed that differs between runs, printed so a failure can be replayed
 * by setting TPLA_TEST_SEED. */
static inline uint64_t gpu_fresh_seed(const char *name) {
  const char *env = getenv("TPLA_TEST_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0)
                      : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
  printf("# %s: seed %llu (replay with TPLA_TEST_SEED)\n", name, (unsigned long long)seed);
  return seed;
}

/* ---- host <-> dtype ------------------------------------------------------------- */

/* Pack n doubles into a buffer of `dtype` (rounding) and back. */
static inline void pack(void *dst, tpla_dtype_t dtype, const double *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    tpla_store_elem(dst, dtype, i, src[i]);
}
static inline void unpack(double *dst, const void *src, tpla_dtype_t dtype, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = tpla_load_elem(src, dtype, i);
}

/* Unit roundoff of a dtype. */
static inline double unit_roundoff(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT16: return 1.0 / 2048;   /* 2^-11 */
  case TPLA_BFLOAT16: return 1.0 / 256;   /* 2^-8 */
  case TPLA_FLOAT64: return 1.0 / 9007199254740992.0;
  default: return 1.0 / 16777216;         /* fp32: 2^-24 */
  }
}

/* ---- float64 GEMM reference -------------------------------------------------------- */

/* c (m x n, ldc) = op(A) op(B) and absc = |op(A)| |op(B)| (the scale of
 * the rounding error), A and B row-major doubles with their lds. */
static inline void gemm_ref_f64(double *c, double *absc, int64_t ldc, int64_t m, int64_t n,
                                int64_t k, const double *a, int64_t lda, tpla_op_t op_a,
                                const double *b, int64_t ldb, tpla_op_t op_b) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, sa = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = op_a == TPLA_OP_N ? a[i * lda + p] : a[p * lda + i];
        double y = op_b == TPLA_OP_N ? b[p * ldb + j] : b[j * ldb + p];
        s += x * y;
        sa += fabs(x * y);
      }
      c[i * ldc + j] = s;
      absc[i * ldc + j] = sa;
    }
}

/* ---- a one-rank context --------------------------------------------------------- */

/* A 1-rank NCCL communicator on `device` and a context on it; 0 on
 * success. Close with close_single_ctx. */
static inline int open_single_ctx(int device, struct ncclComm **comm, tpla_ctx_t *ctx) {
  tpla_unique_id_t id;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  *comm = NULL;
  *ctx = NULL;
  if (TPLA_FAILED(tpla_nccl_get_unique_id(&id)) ||
      TPLA_FAILED(tpla_nccl_comm_create(comm, &id, 1, 0, device, &cfg)))
    return 1;
  if (TPLA_FAILED(tpla_ctx_create_nccl(ctx, *comm, &cfg))) {
    tpla_nccl_comm_destroy(*comm);
    *comm = NULL;
    return 1;
  }
  return 0;
}

static inline int close_single_ctx(struct ncclComm *comm, tpla_ctx_t ctx) {
  int failed = TPLA_FAILED(tpla_ctx_destroy(ctx));
  failed += TPLA_FAILED(tpla_nccl_comm_destroy(comm));
  return failed;
}

#endif /* TPLA_GPU_UTIL_H */
