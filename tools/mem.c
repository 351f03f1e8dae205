/*
 * mem.c - memory, copies and timing for the `tpla` tool on either executor:
 * device memory, a non-blocking stream and CUDA events on the CUDA executor
 * (when built with TPLA_HAVE_CUDA); aligned host memory and the wall clock
 * on the host executor, whose calls complete before they return.
 */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TPLA_HAVE_CUDA
#include <cuda_runtime.h>

#define CUDA_OR_FAIL(r, call)                                                   \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess)                                                      \
      return tool_rank_error((r), "%s: %s", #call, cudaGetErrorString(e_));     \
  } while (0)
#endif

#define TOOL_HOST_CACHE_BYTES ((size_t)60 << 20)

#ifdef TPLA_HAVE_CUDA
/* Waits for `event` for at most the team's timeout. A distributed call's
 * stream waits on the device for its peers' matching calls (as NCCL's), so
 * an unbounded synchronize would turn a hang into a process that never ends
 * (run 51 lost its logs so). On a timeout the stuck work cannot be taken
 * back and freeing its memory would wait for it: the process ends here,
 * saying where (exit status 3). */
static cudaError_t wait_event(tool_rank_t *r, cudaEvent_t event, const char *what) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t e = cudaEventQuery(event);
    if (e != cudaErrorNotReady)
      return e;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t ms = (int64_t)(t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
    if (ms > tool_rank_timeout_ms(r)) {
      tool_rank_error(r, "%s did not finish within %lld ms: the GPU waits (a peer rank's "
                      "matching call missing, or a hang); ending the process", what,
                      (long long)tool_rank_timeout_ms(r));
      fflush(NULL);
      _exit(3);
    }
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

/* Everything enqueued on the rank's stream so far, waited for with wait_event. */
static cudaError_t sync_stream(tool_rank_t *r, const char *what) {
  cudaEvent_t event;
  cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e != cudaSuccess)
    return e;
  e = cudaEventRecord(event, (cudaStream_t)r->stream);
  if (e == cudaSuccess)
    e = wait_event(r, event, what);
  cudaEventDestroy(event);
  return e;
}
#endif

static inline bool on_cuda(const tool_rank_t *r) { return r->executor == TOOL_EXEC_CUDA; }

void *tool_alloc(tool_rank_t *r, size_t bytes) {
  void *p = NULL;
  if (bytes == 0)
    bytes = 1;
#ifdef TPLA_HAVE_CUDA
  if (on_cuda(r)) {
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      tool_rank_error(r, "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
      return NULL;
    }
    return p;
  }
#endif
  size_t rounded = (bytes + 63) / 64 * 64;
  p = aligned_alloc(64, rounded);
  if (p == NULL)
    tool_rank_error(r, "out of host memory (%zu bytes)", bytes);
  return p;
}

void tool_free(tool_rank_t *r, void *ptr) {
  if (ptr == NULL)
    return;
#ifdef TPLA_HAVE_CUDA
  if (on_cuda(r)) {
    cudaFree(ptr);
    return;
  }
#endif
  free(ptr);
}

/* Copy on the rank's stream, then wait for it (the stream is non-blocking,
 * so a plain cudaMemcpy would not be ordered with the work on it). */
static int copy(tool_rank_t *r, void *dst, const void *src, size_t bytes, int kind) {
  if (bytes == 0)
    return 0;
#ifdef TPLA_HAVE_CUDA
  if (on_cuda(r)) {
    cudaStream_t stream = (cudaStream_t)r->stream;
    CUDA_OR_FAIL(r, cudaMemcpyAsync(dst, src, bytes, (enum cudaMemcpyKind)kind, stream));
    CUDA_OR_FAIL(r, sync_stream(r, "a copy on the rank's stream"));
    return 0;
  }
#else
  (void)kind;
#endif
  memmove(dst, src, bytes);
  return 0;
}

#ifdef TPLA_HAVE_CUDA
#define KIND_H2D cudaMemcpyHostToDevice
#define KIND_D2H cudaMemcpyDeviceToHost
#define KIND_D2D cudaMemcpyDeviceToDevice
#else
#define KIND_H2D 0
#define KIND_D2H 0
#define KIND_D2D 0
#endif

int tool_upload(tool_rank_t *r, void *dst, const void *host_src, size_t bytes) {
  return copy(r, dst, host_src, bytes, KIND_H2D);
}

int tool_download(tool_rank_t *r, void *host_dst, const void *src, size_t bytes) {
  return copy(r, host_dst, src, bytes, KIND_D2H);
}

int tool_copy(tool_rank_t *r, void *dst, const void *src, size_t bytes) {
  return copy(r, dst, src, bytes, KIND_D2D);
}

int tool_stream_sync(tool_rank_t *r) {
#ifdef TPLA_HAVE_CUDA
  if (on_cuda(r))
    CUDA_OR_FAIL(r, sync_stream(r, "the work on the rank's stream"));
#endif
  return 0;
}

size_t tool_cache_bytes(tool_rank_t *r) {
#ifdef TPLA_HAVE_CUDA
  int l2 = 0;
  if (on_cuda(r) && cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, r->device) ==
                        cudaSuccess && l2 > 0)
    return (size_t)l2;
#endif
  return TOOL_HOST_CACHE_BYTES;
}

int tool_rotation_sets(tool_rank_t *r, size_t input_bytes, size_t set_bytes, int min_sets,
                       bool *warm) {
  const size_t max_bytes = (size_t)8 << 30, want = 2 * tool_cache_bytes(r);
  size_t sets = input_bytes > 0 ? (want + input_bytes - 1) / input_bytes : (size_t)min_sets;
  sets = sets < (size_t)min_sets ? (size_t)min_sets : sets > TOOL_MAX_SETS ? TOOL_MAX_SETS : sets;
  while (sets > (size_t)min_sets && sets * set_bytes > max_bytes)
    sets--;
  *warm = sets * input_bytes < want;
  return (int)sets;
}

void tool_note_warm(const char *row, int sets) {
  printf("# NOTE: %s: its inputs in %d rotated sets stay under twice the cache: timed calls "
         "may read cached operands\n", row, sets);
}

/* ---- timing ---------------------------------------------------------------------- */

static int compare_doubles(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int run_body(tool_rank_t *r, tool_body_fn_t body, void *arg, int iter) {
  tpla_status_t s = body(r, iter, arg);
  if (s != TPLA_SUCCESS)
    return tool_rank_fail(r, "timed operation", s);
  return 0;
}

static int time_host(tool_rank_t *r, int warmup, int iters, tool_body_fn_t body, void *arg,
                     double *times) {
  for (int i = 0; i < warmup; i++)
    if (run_body(r, body, arg, i))
      return 1;
  for (int i = 0; i < iters; i++) {
    double t0 = now_us();
    if (run_body(r, body, arg, warmup + i))
      return 1;
    times[i] = now_us() - t0;
  }
  return 0;
}

#ifdef TPLA_HAVE_CUDA
/* One event before every timed call and one after the last: the calls run
 * back to back on the stream and each is timed alone. */
static int time_cuda(tool_rank_t *r, int warmup, int iters, tool_body_fn_t body, void *arg,
                     double *times) {
  cudaStream_t stream = (cudaStream_t)r->stream;
  cudaEvent_t *events = calloc((size_t)iters + 1, sizeof *events);
  if (events == NULL)
    return tool_rank_error(r, "out of host memory for %d events", iters + 1);
  int created = 0, failed = 0;
  for (; created <= iters; created++) {
    cudaError_t e = cudaEventCreate(&events[created]);
    if (e != cudaSuccess) {
      failed = tool_rank_error(r, "cudaEventCreate: %s", cudaGetErrorString(e));
      break;
    }
  }
  for (int i = 0; !failed && i < warmup; i++)
    failed = run_body(r, body, arg, i);
  for (int i = 0; !failed && i < iters; i++) {
    cudaError_t e = cudaEventRecord(events[i], stream);
    if (e != cudaSuccess)
      failed = tool_rank_error(r, "cudaEventRecord: %s", cudaGetErrorString(e));
    else
      failed = run_body(r, body, arg, warmup + i);
  }
  if (!failed) { /* call by call: the timeout bounds each call, not the whole run */
    cudaError_t e = cudaEventRecord(events[iters], stream);
    for (int i = 1; e == cudaSuccess && i <= iters; i++)
      e = wait_event(r, events[i], "a timed call");
    if (e != cudaSuccess)
      failed = tool_rank_error(r, "waiting for the timed work: %s", cudaGetErrorString(e));
  }
  for (int i = 0; !failed && i < iters; i++) {
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, events[i], events[i + 1]);
    if (e != cudaSuccess)
      failed = tool_rank_error(r, "cudaEventElapsedTime: %s", cudaGetErrorString(e));
    times[i] = (double)ms * 1e3;
  }
  if (failed)
    (void)sync_stream(r, "the failed timed work"); /* no event may be destroyed in use */
  for (int i = 0; i < created; i++)
    cudaEventDestroy(events[i]);
  free(events);
  return failed;
}
#endif

int tool_time(tool_rank_t *r, int warmup, int iters, tool_body_fn_t body, void *arg,
              double *median_us) {
  if (iters < 1)
    iters = 1;
  double *times = calloc((size_t)iters, sizeof *times);
  if (times == NULL)
    return tool_rank_error(r, "out of host memory for %d timings", iters);
  int failed;
#ifdef TPLA_HAVE_CUDA
  if (on_cuda(r))
    failed = time_cuda(r, warmup, iters, body, arg, times);
  else
#endif
    failed = time_host(r, warmup, iters, body, arg, times);
  if (!failed)
    *median_us = median(times, iters);
  free(times);
  return failed;
}
