/*
 * nccl_comm.c - NCCL communicators without NCCL code in the caller:
 * tpla_nccl_get_unique_id, tpla_nccl_comm_create (non-blocking init, polled
 * with a timeout, aborted if the other ranks never join),
 * tpla_nccl_comm_destroy; and the polled-completion helpers that every NCCL
 * call of the executor goes through so that no rank can hang forever.
 */
#include "cuda_ctx.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tpla_unique_id_t) == sizeof(ncclUniqueId),
               "tpla_unique_id_t must hold an ncclUniqueId");

/* ---- communicators we aborted --------------------------------------------- */

/* ncclCommAbort frees the communicator, but the caller still holds the
 * pointer and will pass it to tpla_nccl_comm_destroy. Remember every
 * aborted pointer so that destroy recognizes it (a bounded ring forgot the
 * oldest: after 64 aborts, e.g. elastic restarts, destroy would finalize
 * freed memory). A pointer is forgotten by that destroy, or when
 * tpla_nccl_comm_create hands out a new communicator at its address. */
static pthread_mutex_t aborted_lock = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t *aborted, fallback_slot; /* fallback_slot: where realloc fails */
static size_t naborted, cap_aborted;

void tpla_nccl_abort(ncclComm_t comm) {
  if (comm == NULL)
    return;
  (void)ncclCommAbort(comm);
  pthread_mutex_lock(&aborted_lock);
  if (naborted == cap_aborted) {
    size_t cap = cap_aborted ? 2 * cap_aborted : 16;
    ncclComm_t *grown = realloc(aborted, cap * sizeof *grown);
    if (grown != NULL)
      aborted = grown, cap_aborted = cap;
  }
  if (naborted < cap_aborted)
    aborted[naborted++] = comm;
  else
    fallback_slot = comm; /* out of memory: the latest is still known */
  pthread_mutex_unlock(&aborted_lock);
}

/* Removes `comm` from the aborted set; true if it was there. */
static bool forget_aborted(ncclComm_t comm) {
  bool found = false;
  pthread_mutex_lock(&aborted_lock);
  for (size_t i = 0; i < naborted;)
    if (aborted[i] == comm) {
      aborted[i] = aborted[--naborted];
      found = true;
    } else {
      i++;
    }
  if (fallback_slot == comm && comm != NULL) {
    fallback_slot = NULL;
    found = true;
  }
  pthread_mutex_unlock(&aborted_lock);
  return found;
}

/* ---- polled completion ------------------------------------------------------ */

static tpla_status_t abort_with(ncclComm_t comm, int *aborted_flag, tpla_status_t s) {
  tpla_nccl_abort(comm);
  if (aborted_flag)
    *aborted_flag = 1;
  return s;
}

/* Message for an asynchronous NCCL error; the communicator is then aborted,
 * so read ncclGetLastError before that. */
static tpla_status_t async_error(ncclComm_t comm, ncclResult_t ae, int *aborted_flag,
                                 const char *fn, const char *what) {
  tpla_status_t s = tpla_nccl_status(ae, comm, fn, what);
  return abort_with(comm, aborted_flag, s == TPLA_SUCCESS ? TPLA_ERROR_NCCL : s);
}

/* A call on a non-blocking communicator may return ncclInProgress while a
 * thread of NCCL's enqueues it: spin (yielding) a while before the sleeping
 * ladder, whose first 20-us nanosleep lasts ~90 us with Linux's default timer
 * slack (review 100). Not measured where it matters: on one rank NCCL never
 * returns ncclInProgress (run 223, bench/nccl_poll_bench.c). */
#define NCCL_SPIN_US 500

tpla_status_t tpla_nccl_finish(ncclComm_t comm, ncclResult_t r, int64_t timeout_ms,
                               int *aborted_flag, const char *fn, const char *call) {
  if (r == ncclSuccess)
    return TPLA_SUCCESS;
  if (r != ncclInProgress)
    return tpla_nccl_status(r, comm, fn, call);
  int64_t deadline = tpla_now_ms() + timeout_ms, spin_until = tpla_now_us() + NCCL_SPIN_US;
  for (int round = 0;;) {
    ncclResult_t ae = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(comm, &ae);
    if (q != ncclSuccess)
      return tpla_nccl_status(q, comm, fn, "ncclCommGetAsyncError");
    if (ae == ncclSuccess)
      return TPLA_SUCCESS;
    if (ae != ncclInProgress)
      return async_error(comm, ae, aborted_flag, fn, call);
    if (tpla_now_ms() > deadline) {
      tpla_status_t s = tpla_fail(TPLA_ERROR_TIMEOUT, fn,
                                  "%s still in progress after %" PRId64
                                  " ms (cfg timeout_ms); the communicator was aborted "
                                  "(ncclCommAbort) and can no longer be used",
                                  call, timeout_ms);
      return abort_with(comm, aborted_flag, s);
    }
    if (tpla_now_us() < spin_until)
      sched_yield();
    else
      tpla_poll_sleep(round++);
  }
}

tpla_status_t tpla_nccl_wait_stream(ncclComm_t comm, cudaStream_t stream, int64_t timeout_ms,
                                    int *aborted_flag, const char *fn, const char *what) {
  int64_t deadline = tpla_now_ms() + timeout_ms;
  for (int round = 0;; round++) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess)
      return TPLA_SUCCESS;
    if (q != cudaErrorNotReady)
      return tpla_cuda_status(q, fn, what);
    ncclResult_t ae = ncclSuccess;
    ncclResult_t g = ncclCommGetAsyncError(comm, &ae);
    if (g != ncclSuccess)
      return tpla_nccl_status(g, comm, fn, "ncclCommGetAsyncError");
    if (ae != ncclSuccess && ae != ncclInProgress)
      return async_error(comm, ae, aborted_flag, fn, what);
    if (tpla_now_ms() > deadline) {
      tpla_status_t s = tpla_fail(TPLA_ERROR_TIMEOUT, fn,
                                  "%s did not complete within %" PRId64
                                  " ms (cfg timeout_ms): another rank did not take part or "
                                  "is stuck; the communicator was aborted (ncclCommAbort) and "
                                  "can no longer be used",
                                  what, timeout_ms);
      return abort_with(comm, aborted_flag, s);
    }
    tpla_poll_sleep(round);
  }
}

/* ---- public entry points ------------------------------------------------------ */

tpla_status_t tpla_nccl_get_unique_id(tpla_unique_id_t *id) {
  static const char fn[] = "tpla_nccl_get_unique_id";
  tpla_clear_error();
  if (id == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'id' is NULL");
  ncclUniqueId uid;
  ncclResult_t r = ncclGetUniqueId(&uid);
  if (r != ncclSuccess)
    return tpla_nccl_status(r, NULL, fn, "ncclGetUniqueId");
  memcpy(id->internal, uid.internal, sizeof id->internal);
  return TPLA_SUCCESS;
}

tpla_status_t tpla_nccl_comm_create(struct ncclComm **comm, const tpla_unique_id_t *id,
                                    int nranks, int rank, int device, const tpla_config_t *cfg) {
  static const char fn[] = "tpla_nccl_comm_create";
  tpla_clear_error();
  if (comm == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'comm' is NULL");
  if (id == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'id' is NULL");
  if (nranks < 1 || nranks > TPLA_MAX_RANKS)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'nranks': %d is not in [1, %d]",
                     nranks, TPLA_MAX_RANKS);
  if (rank < 0 || rank >= nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'rank': %d is not in [0, %d)",
                     rank, nranks);
  if (device < 0)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'device': %d is negative",
                     device);
  tpla_config_t c;
  TPLA_TRY(tpla_check_config(fn, cfg, &c));
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (device >= count)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'device': %d, but there are %d CUDA devices", device, count);
  CUDA_TRY(fn, cudaSetDevice(device));

  ncclUniqueId uid;
  memcpy(uid.internal, id->internal, sizeof uid.internal);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; /* init returns at once; we poll it with a deadline */
  ncclComm_t c_comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&c_comm, nranks, uid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    tpla_status_t s = tpla_nccl_status(r, c_comm, fn, "ncclCommInitRankConfig");
    if (c_comm != NULL)
      (void)ncclCommAbort(c_comm);
    return s;
  }
  if (c_comm == NULL)
    return tpla_fail(TPLA_ERROR_NCCL, fn, "ncclCommInitRankConfig returned %s but no communicator",
                     ncclGetErrorString(r));
  forget_aborted(c_comm); /* a fresh communicator may reuse an aborted address */
  char what[128];
  snprintf(what, sizeof what, "ncclCommInitRankConfig (rank %d of %d, device %d)", rank, nranks,
           device);
  /* tpla_nccl_finish aborts on failure; the pointer stays in the aborted
   * set, harmless since it is never handed out. */
  TPLA_TRY(tpla_nccl_finish(c_comm, ncclInProgress, c.timeout_ms, NULL, fn, what));
  *comm = c_comm;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_nccl_comm_destroy(struct ncclComm *comm) {
  static const char fn[] = "tpla_nccl_comm_destroy";
  tpla_clear_error();
  if (comm == NULL)
    return TPLA_SUCCESS;
  if (forget_aborted(comm))
    return TPLA_SUCCESS; /* already freed by the abort that reported the failure */
  /* Finalize flushes the communicator's outstanding work; on a non-blocking
   * communicator it returns ncclInProgress and we poll, so a peer that never
   * finishes cannot hang us. */
  ncclResult_t r = ncclCommFinalize(comm);
  int aborted_flag = 0;
  tpla_status_t s =
      tpla_nccl_finish(comm, r, TPLA_DEFAULT_TIMEOUT_MS, &aborted_flag, fn, "ncclCommFinalize");
  if (aborted_flag) {
    forget_aborted(comm); /* freed by the abort; the caller must not reuse it */
    return s;
  }
  if (s != TPLA_SUCCESS) {
    tpla_nccl_abort(comm);
    forget_aborted(comm);
    return s;
  }
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess && r != ncclInProgress)
    return tpla_nccl_status(r, NULL, fn, "ncclCommDestroy");
  return TPLA_SUCCESS;
}
