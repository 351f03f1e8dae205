/*
 * cuda_ctx.h - the state of a CUDA-executor context (ctx->impl) and the
 * NCCL helpers its files share: polled completion of NCCL calls on
 * non-blocking communicators, the abort-on-timeout path, and hooks the GPU
 * tests use to reach inside.
 *
 * Everything here is created once, by tpla_ctx_create_nccl, and released by
 * tpla_ctx_destroy; execute paths only enqueue work.
 */
#ifndef TPLA_CUDA_CTX_H
#define TPLA_CUDA_CTX_H

#include "cuda_util.h"
#include "workspace.h"

#define TPLA_CUDA_SIDE_STREAMS 2
#define TPLA_CUDA_EVENTS 4

typedef struct tpla_lt_cache tpla_lt_cache_t;
struct tpla_watchdog;

typedef struct {
  ncclComm_t comm;  /* borrowed from the caller: never destroyed here */
  int comm_aborted; /* we called ncclCommAbort on it (timeout, async error) */
  cudaStream_t internal; /* non-blocking; creation-time exchange, teardown */
  cudaStream_t side[TPLA_CUDA_SIDE_STREAMS]; /* non-blocking, for overlap */
  cudaEvent_t events[TPLA_CUDA_EVENTS];      /* timing disabled, for joins */

  /* cuBLASLt: handle, the one GEMM workspace and the per-shape plan cache.
   * A GEMM that used the workspace records gemm_done[0] after it, or
   * gemm_done[1] when it was captured into a graph (capture sequence
   * gemm_capture); a GEMM on another stream first waits for the record of
   * its own capture state, so two streams never share the workspace at
   * once. A graph's launch is ordered by the caller (lt_gemm.h). */
  cublasLtHandle_t lt;
  void *gemm_ws;
  size_t gemm_ws_bytes;
  cudaEvent_t gemm_done[2];
  cudaStream_t gemm_last_stream[2];
  int gemm_done_valid[2];
  unsigned long long gemm_capture;
  tpla_lt_cache_t *gemm_cache;

  tpla_cuda_workspace_t scratch; /* grow-only, stream-ordered (workspace.h) */
  int32_t *barrier_buf;          /* one zero int for tpla_barrier's all-reduce */
  void *ops_state;               /* the building blocks' state (cuda_ops.h) */
  struct local_meet *meet;       /* all ranks in this process: host exchange (local_meet.h) */
  float *fp8_one;                /* device 1.0f: the FP8 scale a NULL pointer stands for */

  /* Failure handling (watchdog.h): a public call holds call_mu (recursive)
   * from its begin to its end; the watchdog exists for 2 or more ranks. */
  pthread_mutex_t call_mu;
  int call_mu_ready, call_depth;
  struct tpla_watchdog *wd;
} tpla_cuda_ctx_t;

/* An FP8 scale pointer for cuBLASLt: never NULL. A plan whose heuristic ran
 * without scale pointers fails (NOT_SUPPORTED) once a call sets them, and
 * the other way round (seen on H200, run 7), so every FP8 GEMM passes one. */
static inline const float *tpla_cuda_fp8_scale(const tpla_cuda_ctx_t *impl, const float *s) {
  return s != NULL ? s : impl->fp8_one;
}

static inline tpla_cuda_ctx_t *tpla_cuda_impl(tpla_ctx_t ctx) {
  return (tpla_cuda_ctx_t *)ctx->impl;
}

/* The backend of contexts made by tpla_ctx_create_nccl (nccl_ctx.c). */
extern const tpla_backend_t tpla_nccl_backend;

/* ---- NCCL helpers (nccl_comm.c) ------------------------------------------ */

/* Complete an NCCL call that returned `r` on `comm`: ncclSuccess is done;
 * ncclInProgress (non-blocking communicators) is polled with
 * ncclCommGetAsyncError until it settles or `timeout_ms` passes; any other
 * result is an error. On timeout or an asynchronous error the communicator
 * is aborted (*aborted set when aborted != NULL), so no rank hangs.
 * TPLA_ERROR_TIMEOUT / TPLA_ERROR_NCCL name `call`. */
tpla_status_t tpla_nccl_finish(ncclComm_t comm, ncclResult_t r, int64_t timeout_ms,
                               int *aborted, const char *fn, const char *call);

/* Wait, with a timeout, for `stream` to drain work that includes NCCL
 * operations on `comm`, watching the communicator for asynchronous errors
 * (a dead peer) meanwhile. Aborts the communicator on timeout or error, as
 * tpla_nccl_finish does. Polls; never blocks in the driver. */
tpla_status_t tpla_nccl_wait_stream(ncclComm_t comm, cudaStream_t stream, int64_t timeout_ms,
                                    int *aborted, const char *fn, const char *what);

/* tpla_nccl_finish on the context's communicator, inside one of its calls:
 * where the wait aborted the communicator (a timeout, an NCCL error), the
 * context fails too, as when the watchdog finds it (the peers see the
 * abort marks, this rank's flag waits are released), with that message. */
tpla_status_t tpla_cuda_nccl_finish(tpla_ctx_t ctx, ncclResult_t r, const char *fn,
                                    const char *call);

/* ncclCommAbort, remembering the pointer so that a later
 * tpla_nccl_comm_destroy of it is a harmless no-op instead of a use after
 * free. */
void tpla_nccl_abort(ncclComm_t comm);

/* ---- test hooks ------------------------------------------------------------ */

/* For the calling thread only: the tpla version this rank announces in the
 * tpla_ctx_create_nccl exchange (0 = the real one). Lets a test provoke the
 * TPLA_ERROR_REMOTE disagreement path on a healthy communicator. */
void tpla_cuda_test_override_version(int version);

#endif /* TPLA_CUDA_CTX_H */
