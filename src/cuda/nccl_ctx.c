/*
 * nccl_ctx.c - contexts of the CUDA executor on a borrowed NCCL
 * communicator: tpla_ctx_create_nccl (checks the communicator against the
 * current device, creates the context's streams, events, cuBLASLt handle
 * and GEMM workspace once, then exchanges a record per rank with one
 * ncclAllGather so that every rank rejects a bad group identically), the
 * backend's destroy and workspace query. Collectives: nccl_coll.c; GEMM:
 * lt_gemm.c.
 */
#include "cuda_ctx.h"
#include "cuda_ops.h"
#include "local_meet.h"
#include "lt_gemm.h"
#include "overlap.h" /* tpla_cuda_xport_ops */
#include "watchdog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORD_MAGIC 0x74706c61u /* "tpla" */

/* What each rank announces at creation. Only int32 and char fields, so the
 * layout has no padding and is identical in every process. */
typedef struct {
  uint32_t magic;
  int32_t version;
  int32_t rank;
  int32_t nranks;
  int32_t device;
  int32_t status; /* TPLA_SUCCESS, or why this rank's local setup failed */
  unsigned char uuid[16]; /* GPU UUID: unique across hosts */
  char pci_bus_id[32];
  char host[64];
  char error[160]; /* the failed rank's message (truncated) */
  unsigned char process[8];  /* tpla_process_nonce(): equal within one process */
  unsigned char meet_key[8]; /* rank 0's: names the process-local exchange */
} rank_record_t;

static _Thread_local int version_override;

void tpla_cuda_test_override_version(int version) { version_override = version; }

/* ---- resources ----------------------------------------------------------------- */

/* Releases whatever `impl` holds (any subset may have been created) with
 * the context's device current. Returns the first failure. */
static tpla_status_t impl_release(tpla_cuda_ctx_t *impl, const char *fn) {
  tpla_status_t first = TPLA_SUCCESS;
  tpla_wd_destroy(impl); /* first (if still there): its thread reads the events and transports */
#define KEEP_FIRST(expr)                        \
  do {                                          \
    tpla_status_t s_ = (expr);                  \
    if (first == TPLA_SUCCESS)                  \
      first = s_;                               \
  } while (0)
  for (int i = 0; i < TPLA_CUDA_SIDE_STREAMS; i++)
    if (impl->side[i])
      KEEP_FIRST(tpla_cuda_status(cudaStreamSynchronize(impl->side[i]), fn,
                                  "cudaStreamSynchronize (side stream)"));
  /* cudaFree waits for the device, so work still running on the caller's
   * streams finishes with our buffers (the scratch included) first. */
  if (impl->gemm_ws)
    KEEP_FIRST(tpla_cuda_status(cudaFree(impl->gemm_ws), fn, "cudaFree (GEMM workspace)"));
  if (impl->barrier_buf)
    KEEP_FIRST(tpla_cuda_status(cudaFree(impl->barrier_buf), fn, "cudaFree (barrier buffer)"));
  if (impl->fp8_one)
    KEEP_FIRST(tpla_cuda_status(cudaFree(impl->fp8_one), fn, "cudaFree (FP8 unit scale)"));
  tpla_cuda_ops_fini(impl->ops_state);
  if (impl->internal) {
    KEEP_FIRST(tpla_cuda_workspace_release(&impl->scratch, impl->internal, fn));
    KEEP_FIRST(tpla_cuda_status(cudaStreamSynchronize(impl->internal), fn,
                                "cudaStreamSynchronize (internal stream)"));
  }
  local_meet_leave(impl->meet);
  tpla_lt_cache_destroy(impl->gemm_cache);
  if (impl->lt)
    KEEP_FIRST(tpla_cublas_status(cublasLtDestroy(impl->lt), fn, "cublasLtDestroy"));
  for (int i = 0; i < 2; i++)
    if (impl->gemm_done[i])
      KEEP_FIRST(tpla_cuda_status(cudaEventDestroy(impl->gemm_done[i]), fn, "cudaEventDestroy"));
  for (int i = 0; i < TPLA_CUDA_EVENTS; i++)
    if (impl->events[i])
      KEEP_FIRST(tpla_cuda_status(cudaEventDestroy(impl->events[i]), fn, "cudaEventDestroy"));
  for (int i = 0; i < TPLA_CUDA_SIDE_STREAMS; i++)
    if (impl->side[i])
      KEEP_FIRST(tpla_cuda_status(cudaStreamDestroy(impl->side[i]), fn, "cudaStreamDestroy"));
  if (impl->internal)
    KEEP_FIRST(tpla_cuda_status(cudaStreamDestroy(impl->internal), fn, "cudaStreamDestroy"));
#undef KEEP_FIRST
  free(impl);
  return first;
}

/* Everything but the internal stream, which the exchange needs even when
 * this fails (so that the other ranks learn of the failure at once). */
static tpla_status_t impl_create_resources(tpla_ctx_t ctx, tpla_cuda_ctx_t *impl,
                                           const tpla_config_t *cfg, const char *fn) {
  for (int i = 0; i < TPLA_CUDA_SIDE_STREAMS; i++)
    CUDA_TRY(fn, cudaStreamCreateWithFlags(&impl->side[i], cudaStreamNonBlocking));
  for (int i = 0; i < TPLA_CUDA_EVENTS; i++)
    CUDA_TRY(fn, cudaEventCreateWithFlags(&impl->events[i], cudaEventDisableTiming));
  for (int i = 0; i < 2; i++)
    CUDA_TRY(fn, cudaEventCreateWithFlags(&impl->gemm_done[i], cudaEventDisableTiming));
  CUBLAS_TRY(fn, cublasLtCreate(&impl->lt));
  TPLA_TRY(tpla_lt_cache_create(&impl->gemm_cache, fn));
  cudaError_t e = cudaMalloc(&impl->gemm_ws, cfg->gemm_workspace_bytes);
  if (e != cudaSuccess) {
    impl->gemm_ws = NULL;
    (void)cudaGetLastError();
    return tpla_fail(e == cudaErrorMemoryAllocation ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_ERROR_CUDA,
                     fn, "cudaMalloc of the %zu-byte GEMM workspace (cfg gemm_workspace_bytes) "
                     "failed: %s (%s)",
                     cfg->gemm_workspace_bytes, cudaGetErrorName(e), cudaGetErrorString(e));
  }
  impl->gemm_ws_bytes = cfg->gemm_workspace_bytes;
  CUDA_TRY(fn, cudaMalloc((void **)&impl->barrier_buf, sizeof(int32_t)));
  CUDA_TRY(fn, cudaMemsetAsync(impl->barrier_buf, 0, sizeof(int32_t), impl->internal));
  static const float one = 1.0f;
  CUDA_TRY(fn, cudaMalloc((void **)&impl->fp8_one, sizeof(float)));
  CUDA_TRY(fn, cudaMemcpyAsync(impl->fp8_one, &one, sizeof one, cudaMemcpyHostToDevice,
                               impl->internal));
  CUDA_TRY(fn, cudaStreamSynchronize(impl->internal));
  TPLA_TRY(tpla_cuda_ops_init(ctx, &impl->ops_state));
  return tpla_wd_create(ctx, impl, fn);
}

/* ---- the creation-time exchange ---------------------------------------------------- */

static tpla_status_t fill_record(rank_record_t *rec, int rank, int nranks, int device,
                                 const char *fn) {
  rec->magic = RECORD_MAGIC;
  rec->version = version_override ? version_override : TPLA_VERSION;
  rec->rank = rank;
  rec->nranks = nranks;
  rec->device = device;
  struct cudaDeviceProp prop;
  CUDA_TRY(fn, cudaGetDeviceProperties(&prop, device));
  memcpy(rec->uuid, prop.uuid.bytes, sizeof rec->uuid);
  CUDA_TRY(fn, cudaDeviceGetPCIBusId(rec->pci_bus_id, (int)sizeof rec->pci_bus_id, device));
  if (gethostname(rec->host, sizeof rec->host - 1) != 0)
    snprintf(rec->host, sizeof rec->host, "?");
  rec->host[sizeof rec->host - 1] = '\0';
  uint64_t process = tpla_process_nonce(), key = local_meet_new_key();
  memcpy(rec->process, &process, sizeof rec->process);
  memcpy(rec->meet_key, &key, sizeof rec->meet_key);
  return TPLA_SUCCESS;
}

/* Appends to a bounded message; the caller checks `len` against the size. */
#define APPEND(buf, len, ...)                                                 \
  do {                                                                        \
    if ((len) < sizeof(buf)) {                                                \
      int n_ = snprintf((buf) + (len), sizeof(buf) - (len), __VA_ARGS__);     \
      (len) += n_ > 0 ? (size_t)n_ : 0;                                       \
    }                                                                         \
  } while (0)

/* Every rank runs this on the same gathered records, so every rank reaches
 * the same verdict and the same message. */
static tpla_status_t check_records(const rank_record_t *recs, int nranks, const char *fn) {
  char msg[768];
  size_t len = 0;
  int problems = 0;
  for (int r = 0; r < nranks; r++) {
    const rank_record_t *x = &recs[r];
    if (x->magic != RECORD_MAGIC) {
      APPEND(msg, len, "%srank %d sent no valid record (magic 0x%08x)", problems++ ? "; " : "", r,
             (unsigned)x->magic);
      continue;
    }
    if (x->status != TPLA_SUCCESS) {
      APPEND(msg, len, "%srank %d (device %d of host %s) failed to set up its context: %s: %.*s",
             problems++ ? "; " : "", r, (int)x->device, x->host,
             tpla_status_string((tpla_status_t)x->status), (int)sizeof x->error, x->error);
      continue;
    }
    if (x->rank != r || x->nranks != nranks)
      APPEND(msg, len, "%srank %d announced itself as rank %d of %d (expected rank %d of %d)",
             problems++ ? "; " : "", r, (int)x->rank, (int)x->nranks, r, nranks);
    if (x->version != recs[0].version)
      APPEND(msg, len, "%srank %d runs tpla version %d but rank 0 runs %d",
             problems++ ? "; " : "", r, (int)x->version, (int)recs[0].version);
    for (int q = 0; q < r; q++)
      if (recs[q].magic == RECORD_MAGIC && recs[q].status == TPLA_SUCCESS &&
          memcmp(recs[q].uuid, x->uuid, sizeof x->uuid) == 0)
        APPEND(msg, len,
               "%sranks %d and %d are both on GPU %s of host %s (CUDA device %d and %d); "
               "give every rank its own GPU",
               problems++ ? "; " : "", q, r, x->pci_bus_id, x->host, (int)recs[q].device,
               (int)x->device);
  }
  if (problems == 0)
    return TPLA_SUCCESS;
  if (len >= sizeof msg)
    snprintf(msg + sizeof msg - 5, 5, "...");
  return tpla_fail(TPLA_ERROR_REMOTE, fn,
                   "the %d ranks of the communicator disagree (%d problem%s): %s", nranks,
                   problems, problems == 1 ? "" : "s", msg);
}

/* recv (nranks * bytes, host) = every rank's `bytes` of host memory at
 * send, in rank order: one in-place ncclAllGather on the internal stream,
 * waited for with the timeout (polling, so a missing rank cannot hang us).
 * Blocking; for creation-time and plan-time agreement only. */
static tpla_status_t exchange_bytes(tpla_cuda_ctx_t *impl, int rank, int nranks, void *recv,
                                    const void *send, size_t bytes, int64_t timeout_ms,
                                    const char *fn, const char *what) {
  char *dev = NULL;
  tpla_status_t s = tpla_cuda_status(
      cudaMallocAsync((void **)&dev, (size_t)nranks * bytes, impl->internal), fn,
      "cudaMallocAsync (exchange buffer)");
  /* A pageable host-to-device copy returns once staged; send may go. */
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(cudaMemcpyAsync(dev + (size_t)rank * bytes, send, bytes,
                                         cudaMemcpyHostToDevice, impl->internal),
                         fn, "cudaMemcpyAsync (exchange: host to device)");
  if (s == TPLA_SUCCESS) {
    ncclResult_t r = ncclAllGather(dev + (size_t)rank * bytes, dev, bytes, ncclUint8, impl->comm,
                                   impl->internal);
    s = tpla_nccl_finish(impl->comm, r, timeout_ms, &impl->comm_aborted, fn, what);
  }
  if (s == TPLA_SUCCESS)
    s = tpla_nccl_wait_stream(impl->comm, impl->internal, timeout_ms, &impl->comm_aborted, fn,
                              what);
  /* The stream holds no NCCL work any more, so this copy cannot hang. */
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(cudaMemcpyAsync(recv, dev, (size_t)nranks * bytes,
                                         cudaMemcpyDeviceToHost, impl->internal),
                         fn, "cudaMemcpyAsync (exchange: device to host)");
  if (dev)
    (void)cudaFreeAsync(dev, impl->internal);
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(cudaStreamSynchronize(impl->internal), fn,
                         "cudaStreamSynchronize (exchange)");
  return s;
}

/* Report `saved` (a message of this thread, "fn: detail") again as the
 * last error, after other calls may have replaced it. */
static tpla_status_t refail(tpla_status_t s, const char *fn, const char *saved) {
  size_t fn_len = strlen(fn);
  if (strncmp(saved, fn, fn_len) == 0 && strncmp(saved + fn_len, ": ", 2) == 0)
    saved += fn_len + 2;
  return tpla_fail(s, fn, "%s", saved);
}

/* The creation-time exchange of rank records and the agreement check.
 * `local` is the outcome of this rank's own setup: a rank that failed still
 * takes part, so the others fail at once (REMOTE, naming it) instead of
 * waiting out the timeout; it returns its own failure. */
static tpla_status_t exchange_records(tpla_cuda_ctx_t *impl, int rank, int nranks, int device,
                                      tpla_status_t local, int64_t timeout_ms, const char *fn) {
  rank_record_t mine;
  memset(&mine, 0, sizeof mine);
  char saved[1024]; /* the message of a local failure; fill_record may overwrite it */
  snprintf(saved, sizeof saved, "%s", tpla_last_error());
  tpla_status_t filled = fill_record(&mine, rank, nranks, device, fn);
  if (local == TPLA_SUCCESS && filled != TPLA_SUCCESS) {
    local = filled;
    snprintf(saved, sizeof saved, "%s", tpla_last_error());
  }
  mine.magic = RECORD_MAGIC;
  mine.status = (int32_t)local;
  if (local != TPLA_SUCCESS) /* truncated; mine is zeroed, so it stays terminated */
    memcpy(mine.error, saved, strnlen(saved, sizeof mine.error - 1));
  rank_record_t *all = calloc((size_t)nranks, sizeof *all);
  if (all == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for %d rank records",
                     nranks);
  tpla_status_t s = exchange_bytes(impl, rank, nranks, all, &mine, sizeof mine, timeout_ms, fn,
                                   "ncclAllGather of the rank records");
  if (local != TPLA_SUCCESS)
    s = refail(local, fn, saved); /* the root cause, as it was reported */
  else if (s == TPLA_SUCCESS)
    s = check_records(all, nranks, fn);
  bool one_process = nranks > 1;
  for (int r = 0; r < nranks; r++)
    one_process = one_process && memcmp(all[r].process, mine.process, sizeof mine.process) == 0;
  if (s == TPLA_SUCCESS && one_process) { /* later exchanges on the host (local_meet.h) */
    uint64_t key;
    memcpy(&key, all[0].meet_key, sizeof key);
    s = local_meet_join(&impl->meet, key, nranks, fn);
  }
  free(all);
  return s;
}

/* ---- public entry point ---------------------------------------------------------------- */

tpla_status_t tpla_ctx_create_nccl(tpla_ctx_t *ctx, struct ncclComm *comm,
                                   const tpla_config_t *cfg) {
  static const char fn[] = "tpla_ctx_create_nccl";
  tpla_clear_error();
  if (ctx == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL");
  if (comm == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'comm' is NULL");
  tpla_config_t c;
  TPLA_TRY(tpla_check_config(fn, cfg, &c));

  /* A non-blocking communicator may still be initializing. */
  TPLA_TRY(tpla_nccl_finish(comm, ncclInProgress, c.timeout_ms, NULL, fn,
                            "the communicator's initialization"));
  int nranks = 0, rank = -1, device = -1, current = -1;
  ncclResult_t r = ncclCommCount(comm, &nranks);
  if (r != ncclSuccess)
    return tpla_nccl_status(r, comm, fn, "ncclCommCount");
  r = ncclCommUserRank(comm, &rank);
  if (r != ncclSuccess)
    return tpla_nccl_status(r, comm, fn, "ncclCommUserRank");
  r = ncclCommCuDevice(comm, &device);
  if (r != ncclSuccess)
    return tpla_nccl_status(r, comm, fn, "ncclCommCuDevice");
  if (nranks < 1 || nranks > TPLA_MAX_RANKS || rank < 0 || rank >= nranks)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                     "communicator has rank %d of %d ranks; tpla supports 1 to %d ranks", rank,
                     nranks, TPLA_MAX_RANKS);
  CUDA_TRY(fn, cudaGetDevice(&current));
  if (current != device)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "the current CUDA device is %d but the communicator (rank %d of %d) is on "
                     "device %d; call cudaSetDevice(%d) first",
                     current, rank, nranks, device, device);

  tpla_cuda_ctx_t *impl = calloc(1, sizeof *impl);
  struct tpla_ctx *c_ctx = calloc(1, sizeof *c_ctx);
  if (impl == NULL || c_ctx == NULL) {
    free(impl);
    free(c_ctx);
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  impl->comm = comm;
  c_ctx->backend = &tpla_nccl_backend;
  c_ctx->executor = TPLA_EXECUTOR_CUDA;
  c_ctx->rank = rank;
  c_ctx->nranks = nranks;
  c_ctx->device = device;
  c_ctx->cfg = c;
  c_ctx->impl = impl;
  tpla_status_t s = tpla_cuda_status(
      cudaStreamCreateWithFlags(&impl->internal, cudaStreamNonBlocking), fn,
      "cudaStreamCreateWithFlags (internal stream)");
  if (s == TPLA_SUCCESS) {
    tpla_status_t local = impl_create_resources(c_ctx, impl, &c, fn);
    s = exchange_records(impl, rank, nranks, device, local, c.timeout_ms, fn);
  }
  if (s != TPLA_SUCCESS) {
    /* Keep the failure's message, not a teardown detail. */
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", tpla_last_error());
    (void)impl_release(impl, fn);
    free(c_ctx);
    return refail(s, fn, saved);
  }
  *ctx = c_ctx;
  return TPLA_SUCCESS;
}

/* ---- backend: destroy, workspace ---------------------------------------------------------- */

static tpla_status_t nccl_destroy(tpla_ctx_t ctx) {
  static const char fn[] = "tpla_ctx_destroy";
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  if (impl == NULL)
    return TPLA_SUCCESS;
  tpla_device_guard_t guard;
  tpla_status_t s = tpla_device_guard_enter(&guard, ctx->device, fn);
  /* The watched calls end first, or the watchdog, still running, times a
   * stuck one out and aborts the context: the synchronizations below then
   * cannot wait forever on a peer. */
  (void)tpla_wd_wait_calls(ctx, fn);
  tpla_wd_destroy(impl); /* before ctx->impl goes: an abort on its thread reads it */
  ctx->impl = NULL;
  tpla_status_t s2 = impl_release(impl, fn); /* never the borrowed communicator */
  tpla_device_guard_exit(&guard);
  return s != TPLA_SUCCESS ? s : s2;
}

static size_t nccl_workspace_bytes(tpla_ctx_t ctx) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  return impl->gemm_ws_bytes + impl->scratch.bytes + impl->scratch.kept_bytes +
         (impl->ops_state ? tpla_cuda_ops_state_bytes() : 0);
}

void *tpla_cuda_ctx_ops_state(tpla_ctx_t ctx) { return tpla_cuda_impl(ctx)->ops_state; }

/* A wait of the calling thread that aborted the communicator fails the
 * context (the watchdog would find it only later, or never: it stops
 * watching an aborted communicator). */
static tpla_status_t fail_if_aborted(tpla_ctx_t ctx, tpla_status_t st) {
  if (st != TPLA_SUCCESS && tpla_cuda_impl(ctx)->comm_aborted && !tpla_ctx_failed(ctx)) {
    char why[512]; /* the abort (watchdog.c) keeps this thread's last error */
    snprintf(why, sizeof why, "%s", tpla_last_error());
    (void)tpla_ctx_fail(ctx, st, "%s", why);
  }
  return st;
}

static tpla_status_t nccl_exchange(tpla_ctx_t ctx, void *recv, const void *send, size_t bytes) {
  static const char fn[] = "tpla (plan-time exchange)";
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  if (impl->comm_aborted)
    return tpla_fail(TPLA_ERROR_REMOTE, fn,
                     "the context's communicator was aborted after an earlier timeout or NCCL "
                     "error; destroy the context and create a new communicator");
  if (bytes == 0)
    return TPLA_SUCCESS;
  if (ctx->nranks == 1) {
    memcpy(recv, send, bytes);
    return TPLA_SUCCESS;
  }
  if (impl->meet != NULL) /* every rank in this process: no GPU spins (local_meet.h) */
    return local_meet_allgather(impl->meet, ctx->rank, recv, send, bytes, ctx->cfg.timeout_ms,
                                fn);
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_status_t s = exchange_bytes(impl, ctx->rank, ctx->nranks, recv, send, bytes,
                                   ctx->cfg.timeout_ms, fn, "ncclAllGather (exchange)");
  tpla_device_guard_exit(&guard);
  return fail_if_aborted(ctx, s);
}

tpla_status_t tpla_cuda_nccl_finish(tpla_ctx_t ctx, ncclResult_t r, const char *fn,
                                    const char *call) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  return fail_if_aborted(ctx, tpla_nccl_finish(impl->comm, r, ctx->cfg.timeout_ms,
                                               &impl->comm_aborted, fn, call));
}

/* Side streams and cross-stream order, for overlap inside one rank. One
 * event serves every wait: cudaStreamWaitEvent captures the record at the
 * time of the call, so the event can be recorded again at once. */
static void *nccl_side_stream(tpla_ctx_t ctx, int i) {
  return tpla_cuda_impl(ctx)->side[i % TPLA_CUDA_SIDE_STREAMS];
}

static tpla_status_t nccl_stream_wait(tpla_ctx_t ctx, void *waiter, void *signaler) {
  static const char fn[] = "tpla (stream join)";
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  if (waiter == signaler)
    return TPLA_SUCCESS;
  CUDA_TRY(fn, cudaEventRecord(impl->events[0], (cudaStream_t)signaler));
  CUDA_TRY(fn, cudaStreamWaitEvent((cudaStream_t)waiter, impl->events[0], 0));
  return TPLA_SUCCESS;
}

static tpla_status_t nccl_quiesce(tpla_ctx_t ctx) {
  static const char fn[] = "tpla (device synchronize)";
  /* the watched calls first: a stuck one fails the context instead of
   * holding cudaDeviceSynchronize (and the call lock the abort needs) */
  TPLA_TRY(tpla_wd_wait_calls(ctx, fn));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = cudaDeviceSynchronize();
  tpla_device_guard_exit(&guard);
  return e == cudaSuccess ? TPLA_SUCCESS : tpla_cuda_status(e, fn, "cudaDeviceSynchronize()");
}

/* The collectives (nccl_coll.c). */
tpla_status_t tpla_nccl_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                                  tpla_dtype_t dtype, void *stream);
tpla_status_t tpla_nccl_allgatherv(tpla_ctx_t ctx, void *recv, const void *send,
                                   const size_t *counts, tpla_dtype_t dtype, void *stream);
tpla_status_t tpla_nccl_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                        const size_t *counts, tpla_dtype_t dtype, void *stream);
tpla_status_t tpla_nccl_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                                  int root, void *stream);
tpla_status_t tpla_nccl_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                                 void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                                 void *stream);
tpla_status_t tpla_nccl_barrier(tpla_ctx_t ctx, void *stream);

const tpla_backend_t tpla_nccl_backend = {
    .name = "cuda",
    .destroy = nccl_destroy,
    .allreduce = tpla_nccl_allreduce,
    .allgatherv = tpla_nccl_allgatherv,
    .reduce_scatterv = tpla_nccl_reduce_scatterv,
    .broadcast = tpla_nccl_broadcast,
    .sendrecv = tpla_nccl_sendrecv,
    .barrier = tpla_nccl_barrier,
    .side_stream = nccl_side_stream,
    .stream_wait = nccl_stream_wait,
    .quiesce = nccl_quiesce,
    .gemm = tpla_cuda_gemm,
    .workspace_bytes = nccl_workspace_bytes,
    .mem_alloc = tpla_cuda_mem_alloc,
    .mem_free = tpla_cuda_mem_free,
    .axpby = tpla_cuda_axpby,
    .sumsq = tpla_cuda_sumsq,
    .scale_by_norm = tpla_cuda_scale_by_norm,
    .zero = tpla_cuda_zero,
    .mirror_upper = tpla_cuda_mirror_upper,
    .add_diagonal = tpla_cuda_add_diagonal,
    .normalize_list = tpla_cuda_normalize_list,
    .store_list = tpla_cuda_store_list,
    .alltoallv = tpla_cuda_alltoallv,
    .exchange = nccl_exchange,
    .xport = &tpla_cuda_xport_ops, /* transport.c (overlap plans) */
    .call_begin = tpla_wd_call_begin, /* watchdog.c */
    .call_end = tpla_wd_call_end,
    .abort = tpla_wd_abort,
};
