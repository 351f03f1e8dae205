/*
 * transport.c - the per-call operations of the CUDA overlap transport (see
 * transport.h) and its ops table.
 *
 * Lanes are streams of the transport: two compute streams, up to four copy
 * streams (a PEER push to the peer at ring distance i runs on copy stream
 * (i - 1) mod ncopy, a pull from the other end, step_stream; transfers to
 * different peers use different copy engines at once) and one NCCL stream (SENDRECV steps, issued in the same
 * order on every rank). begin() makes every stream wait for the caller's
 * stream and, for PEER, writes "ready for call seq" into every peer's flags;
 * end() makes the caller's stream wait for every stream.
 *
 * A PEER push: the copy stream waits until the destination announced the
 * call (its ready word in our flags reached seq), copies with
 * cudaMemcpy(2D)Async straight into the destination's window (the copy
 * engine of this GPU writes over NVLink), then writes seq into the
 * destination's step flag; the write is fenced after the copy. The receiver
 * waits on its own flag word. A PEER pull signals first, then waits on its
 * own flag and copies out of the source's window. Nothing spins on an SM.
 *
 * The context's GEMM workspace: the compute lanes use one half each
 * (transport_gemm.c). begin() makes them follow the context's last GEMM on
 * another stream and end() records its end on the caller's stream
 * (lt_gemm.h), so tpla_gemm and these lanes never share the workspace.
 */
#include "transport.h"
#include "fp8_kernels.h"
#include "lt_gemm.h"
#include "transport_kernels.h"

#include <stdio.h>
#include <string.h>

cudaStream_t xp_lane_stream(const tpla_xport_t *xp, int lane) {
  return xp->streams[lane < OVL_LANES ? lane : 0]; /* OVL_LANE_COPY is copy stream 0 (index 2) */
}

/* The stream of a step with the peer at ring distance `dist`. Pulls (the
 * second phase of GEMM+AllReduce) count from the other end of the copy
 * streams, so a chunk's pull does not queue behind the pushes of the later
 * chunks' partials: both phases stream at once (with P = 2, pushes on copy
 * stream 0, pulls on copy stream 3: two copy engines). */
static cudaStream_t step_stream(const tpla_xport_t *xp, int dist, bool pull) {
  if (xp->kind == OVL_XPORT_SENDRECV)
    return xp->streams[XP_COMM_STREAM];
  int i = (dist - 1) % xp->ncopy;
  return xp->streams[2 + (pull ? XP_COPY_STREAMS - 1 - i : i)];
}

static int streams_used(const tpla_xport_t *xp, int s) {
  if (s < 2)
    return 1;
  if (s == XP_COMM_STREAM)
    return xp->kind == OVL_XPORT_SENDRECV;
  return s - 2 < xp->ncopy || s - 2 >= XP_COPY_STREAMS - xp->ncopy;
}

/* `waiter` follows the work enqueued so far on `source`. */
static tpla_status_t follow(tpla_xport_t *xp, cudaStream_t waiter, int source) {
  if (xp->streams[source] == waiter)
    return TPLA_SUCCESS;
  CUDA_TRY(xp->fn, cudaEventRecord(xp->ev[source], xp->streams[source]));
  CUDA_TRY(xp->fn, cudaStreamWaitEvent(waiter, xp->ev[source], 0));
  return TPLA_SUCCESS;
}

static bool capturing(cudaStream_t stream) {
  enum cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &c) != cudaSuccess) {
    (void)cudaGetLastError(); /* a bad stream: the call's own operations report it */
    return false;
  }
  return c != cudaStreamCaptureStatusNone;
}

static tpla_status_t begin_on_device(tpla_xport_t *xp, uint32_t seq, cudaStream_t caller,
                                     const char *fn) {
  tpla_cuda_ctx_t *impl = xp->impl;
  if (impl->comm_aborted)
    return tpla_fail(TPLA_ERROR_REMOTE, fn, "the context's communicator was aborted after an "
                     "earlier timeout or NCCL error; destroy the context");
  CUDA_TRY(fn, cudaEventRecord(xp->fork, caller));
  /* A call on another stream than the last one's: every lane also waits for the last call
   * to end, so that this call's copies and announcements cannot overwrite the window while
   * the last call's GEMMs still read it (each lane follows only its own earlier work). */
  bool after_other = xp->joined_valid && xp->joined_on != caller && !capturing(caller);
  for (int s = 0; s < XP_STREAMS; s++) {
    if (!streams_used(xp, s))
      continue;
    CUDA_TRY(fn, cudaStreamWaitEvent(xp->streams[s], xp->fork, 0));
    if (after_other)
      CUDA_TRY(fn, cudaStreamWaitEvent(xp->streams[s], xp->joined, 0));
    if (s < 2) /* the compute lanes use the context's GEMM workspace */
      TPLA_TRY(tpla_lt_ctx_follow(impl, xp->streams[s], caller, fn));
  }
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal)
    return TPLA_SUCCESS;
  /* our window is free for call seq: everything before it on the caller's stream is done */
  for (int q = 0; q < xp->nranks; q++)
    if (q != xp->rank)
      TPLA_TRY(xp_write(xp, xp->streams[2], xp_ready_word(xp, q, xp->rank), seq,
                        "announce the call to a peer"));
  return TPLA_SUCCESS;
}

/* PEER: the host waits until call seq - in_flight has finished on the device.
 * With hundreds of calls enqueued at once, two ranks' calls stopped for good
 * right after a pause, 7 times in 34 invocations (runs 132-135, one process:
 * the peer's announcement of the next call never ran); bounded, 0 in 64
 * (runs 135-136), at the same speed. A captured call runs later, in a graph:
 * no wait. */
static tpla_status_t wait_in_flight(tpla_xport_t *xp, uint32_t seq, cudaStream_t caller,
                                    const char *fn) {
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal || xp->in_flight == 0)
    return TPLA_SUCCESS;
  int slot = (int)(seq % (uint32_t)xp->in_flight);
  if (!xp->ended_valid[slot] || capturing(caller))
    return TPLA_SUCCESS;
  for (int round = 0;; round++) {
    cudaError_t e = cudaEventQuery(xp->ended[slot]);
    /* failed first: an abort releases the waits, so the call it let end says nothing */
    if (tpla_ctx_failed(xp->ctx))
      return tpla_ctx_check(xp->ctx, fn);
    if (e != cudaErrorNotReady)
      return tpla_cuda_status(e, fn, "cudaEventQuery (a call of this plan still in flight)");
    tpla_poll_sleep(round);
  }
}

static bool xp_capturing(void *stream) { return capturing((cudaStream_t)stream); }

/* A PEER call's flags and waits carry its number (seq) as literal values, so a
 * graph replayed would repeat one call's numbers: its waits would pass on the
 * flags of the last launch, before the peer's pieces. One rank has no flags. */
static bool xp_cannot_capture(const tpla_xport_t *xp, void *stream) {
  return xp->kind == OVL_XPORT_PEER && xp->nranks > 1 && capturing((cudaStream_t)stream);
}

/* The device stays current until xp_end (or until a failed begin returns). */
static tpla_status_t xp_begin(tpla_xport_t *xp, uint32_t seq, void *stream, const char *fn) {
  xp->fn = fn;
  atomic_store(&xp->last_seq, seq);
  TPLA_TRY(tpla_device_guard_enter(&xp->guard, xp->device, fn));
  tpla_status_t s = wait_in_flight(xp, seq, (cudaStream_t)stream, fn);
  if (s == TPLA_SUCCESS)
    s = begin_on_device(xp, seq, (cudaStream_t)stream, fn);
  if (s != TPLA_SUCCESS)
    tpla_device_guard_exit(&xp->guard);
  return s;
}

static tpla_status_t xp_end(tpla_xport_t *xp, void *stream) {
  cudaStream_t caller = (cudaStream_t)stream;
  tpla_status_t first = TPLA_SUCCESS;
  for (int s = 0; s < XP_STREAMS; s++) {
    if (!streams_used(xp, s))
      continue;
    cudaError_t e = cudaEventRecord(xp->ev[s], xp->streams[s]);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent(caller, xp->ev[s], 0);
    if (e != cudaSuccess && first == TPLA_SUCCESS)
      first = tpla_cuda_status(e, xp->fn, "joining the transport's streams to the caller's");
  }
  if (xp->kind == OVL_XPORT_PEER && !xp->rehearsal && xp->in_flight > 0 && !capturing(caller)) {
    int slot = (int)(atomic_load(&xp->last_seq) % (uint32_t)xp->in_flight);
    cudaError_t e = cudaEventRecord(xp->ended[slot], caller);
    xp->ended_valid[slot] = e == cudaSuccess;
    if (e != cudaSuccess && first == TPLA_SUCCESS)
      first = tpla_cuda_status(e, xp->fn, "cudaEventRecord (end of a call)");
  }
  if (!capturing(caller)) { /* a captured call ran nothing yet: the last one still counts */
    cudaError_t e = cudaEventRecord(xp->joined, caller);
    xp->joined_valid = e == cudaSuccess;
    xp->joined_on = caller;
    if (e != cudaSuccess && first == TPLA_SUCCESS)
      first = tpla_cuda_status(e, xp->fn, "cudaEventRecord (end of a call)");
  }
  tpla_status_t left = tpla_lt_ctx_leave(xp->impl, caller, xp->fn);
  if (first == TPLA_SUCCESS)
    first = left;
  tpla_device_guard_exit(&xp->guard);
  return first;
}

/* ---- steps ---------------------------------------------------------------------------- */

/* dst (rows x cols at dst_ld) = src (src_ld), elements of `es` bytes. */
static cudaError_t copy2d(void *dst, int64_t dst_ld, const void *src, int64_t src_ld,
                          int64_t rows, int64_t cols, size_t es, cudaStream_t st) {
  size_t width = (size_t)cols * es;
  if ((dst_ld == cols && src_ld == cols) || rows == 1)
    return cudaMemcpyAsync(dst, src, width * (size_t)rows, cudaMemcpyDeviceToDevice, st);
  return tpla_cuda_copy_2d(dst, (size_t)dst_ld * es, src, (size_t)src_ld * es, width,
                           (size_t)rows, st);
}

static tpla_status_t copy_status(cudaError_t e, const tpla_xport_t *xp, const char *what, int peer,
                                 int64_t rows, int64_t cols) {
  if (e == cudaSuccess)
    return TPLA_SUCCESS;
  char call[192];
  snprintf(call, sizeof call, "cudaMemcpy(2D)Async (%s rank %d, %lldx%lld, rank %d device %d)",
           what, peer, (long long)rows, (long long)cols, xp->rank, xp->device);
  return tpla_cuda_status(e, xp->fn, call);
}

static tpla_status_t step_sendrecv(tpla_xport_t *xp, const ovl_step_t *s, cudaStream_t st) {
  const char *fn = xp->fn;
  tpla_cuda_ctx_t *impl = xp->impl;
  size_t sb = s->to >= 0 ? (size_t)(s->send.rows * s->send.cols) * tpla_dtype_size(s->send.dtype)
                         : 0;
  size_t rb = s->from >= 0
                  ? (size_t)(s->recv.rows * s->recv.cols) * tpla_dtype_size(s->recv.dtype)
                  : 0;
  ncclResult_t first = ncclSuccess;
  const char *failed = NULL;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return tpla_nccl_status(r, impl->comm, fn, "ncclGroupStart");
  /* an FP8 scale first: both sides post it before the data, so they match in order */
  if (s->scale_send != NULL &&
      (r = ncclSend(s->scale_send, 1, ncclFloat32, s->to, impl->comm, st)) != ncclSuccess &&
      r != ncclInProgress)
    first = r, failed = "ncclSend (FP8 scale)";
  if (s->scale_recv != NULL &&
      (r = ncclRecv(s->scale_recv, 1, ncclFloat32, s->from, impl->comm, st)) != ncclSuccess &&
      r != ncclInProgress && first == ncclSuccess)
    first = r, failed = "ncclRecv (FP8 scale)";
  if (first == ncclSuccess && s->to >= 0 &&
      (r = ncclSend(s->send.data, sb, ncclUint8, s->to, impl->comm, st)) != ncclSuccess &&
      r != ncclInProgress)
    first = r, failed = "ncclSend (overlap step)";
  if (s->from >= 0 && (r = ncclRecv(s->recv.data, rb, ncclUint8, s->from, impl->comm, st)) !=
                          ncclSuccess && r != ncclInProgress && first == ncclSuccess)
    first = r, failed = "ncclRecv (overlap step)";
  r = ncclGroupEnd();
  if (first != ncclSuccess)
    return tpla_nccl_status(first, impl->comm, fn, failed);
  if (r == ncclSuccess) /* the message below only for a poll: nothing formatted per step */
    return TPLA_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "ncclGroupEnd (overlap step: %zu bytes to rank %d, %zu from %d)", sb,
           s->to, rb, s->from);
  return tpla_cuda_nccl_finish(xp->ctx, r, fn, what);
}

/* A pull by the SMs (the fold kernel with one slot: a copy) instead of the copy engine. With
 * three or more ranks, copy-engine pulls of peers' windows stop for good once peers pull from
 * each other at the same time (runs 115-118, 4 H200s: every GEMM+AllReduce over PEER hung,
 * with the progress marks of run 118 on the pulls' copies, their flags already set); with two
 * ranks they never did in thousands of calls, and keep the copy engine. */
static bool pull_by_sm(const tpla_xport_t *xp, const tpla_matrix_t *v, int64_t src_ld) {
  bool fold_type = v->dtype == TPLA_FLOAT32 || v->dtype == TPLA_FLOAT16 ||
                   v->dtype == TPLA_BFLOAT16;
  return xp->nranks > 2 && fold_type && src_ld == v->cols;
}

static tpla_status_t xp_step(tpla_xport_t *xp, const ovl_step_t *s, uint32_t seq) {
  if (xp->rehearsal)
    return TPLA_SUCCESS;
  const int P = xp->nranks, r = xp->rank;
  int dist = s->to >= 0 ? (s->to - r + P) % P : s->from >= 0 ? (r - s->from + P) % P : 1;
  cudaStream_t st = step_stream(xp, dist, s->pull);
  if (s->pull && s->from < 0 && s->after >= 0) /* a publication only: its flag follows the */
    st = xp_lane_stream(xp, s->after);         /* data there, never queued behind a pull   */
  if (s->after >= 0 && !s->written)
    TPLA_TRY(follow(xp, st, s->after));
  if (xp->kind == OVL_XPORT_SENDRECV) {
    TPLA_TRY(step_sendrecv(xp, s, st));
    CUDA_TRY(xp->fn, cudaEventRecord(xp->flag_events[s->flag], st));
    return TPLA_SUCCESS;
  }
  if (xp->kind != OVL_XPORT_PEER)
    return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "a transfer step on a local transport");
  xp->flag_pull[s->flag] = (unsigned char)(s->pull != 0); /* plans of a window group share
                                                            flag numbers: push or pull per step */
  if (!s->pull) {
    if (s->to < 0)
      return TPLA_SUCCESS;
    if (s->written) /* a GEMM on lane `after` wrote the piece: the flag follows it there */
      return xp_write(xp, xp_lane_stream(xp, s->after), xp_step_word(xp, s->to, s->flag), seq,
                      "signal a chunk written by a GEMM");
    const tpla_matrix_t *v = &s->send;
    TPLA_TRY(xp_wait(xp, st, xp_ready_word(xp, r, s->to), seq, "wait for a peer's ready"));
    if (s->scale_send != NULL) /* lands before the flag below, like the data */
      TPLA_TRY(copy_status(cudaMemcpyAsync(xp_window_of(xp, s->to) + s->scale_to_offset,
                                           s->scale_send, sizeof(float),
                                           cudaMemcpyDeviceToDevice, st),
                           xp, "FP8 scale to", s->to, 1, 1));
    TPLA_TRY(copy_status(copy2d(xp_window_of(xp, s->to) + s->to_offset, v->cols, v->data, v->ld,
                                v->rows, v->cols, tpla_dtype_size(v->dtype), st),
                         xp, "push to", s->to, v->rows, v->cols));
    return xp_write(xp, st, xp_step_word(xp, s->to, s->flag), seq, "signal a pushed chunk");
  }
  if (s->to >= 0) /* our piece is in our window: `to` may read it */
    TPLA_TRY(xp_write(xp, st, xp_step_word(xp, s->to, s->flag), seq, "signal a published slice"));
  if (s->from >= 0) {
    const tpla_matrix_t *v = &s->recv;
    const char *src = xp_window_of(xp, s->from) + s->from_offset;
    int64_t src_ld = s->from_ld > 0 ? s->from_ld : v->cols;
    TPLA_TRY(xp_wait(xp, st, xp_step_word(xp, r, s->flag), seq, "wait for a published slice"));
    if (pull_by_sm(xp, v, src_ld))
      TPLA_TRY(tpla_cuda_status(tpla_launch_fold(*v, 0.0f, src, 0, 1, NULL,
                                                 (tpla_matrix_t){NULL, 0, 0, 1, v->dtype}, st),
                                xp->fn, "the fold kernel as a pull (SM copy)"));
    else
      TPLA_TRY(copy_status(copy2d(v->data, v->ld, src, src_ld, v->rows, v->cols,
                                  tpla_dtype_size(v->dtype), st),
                           xp, "pull from", s->from, v->rows, v->cols));
  }
  CUDA_TRY(xp->fn, cudaEventRecord(xp->flag_events[s->flag], st));
  return TPLA_SUCCESS;
}

static tpla_status_t xp_arrival(tpla_xport_t *xp, int lane, int flag, uint32_t seq) {
  if (xp->rehearsal)
    return TPLA_SUCCESS;
  cudaStream_t st = xp_lane_stream(xp, lane);
  if (xp->kind == OVL_XPORT_SENDRECV || xp->flag_pull[flag]) {
    CUDA_TRY(xp->fn, cudaStreamWaitEvent(st, xp->flag_events[flag], 0));
    return TPLA_SUCCESS;
  }
  return xp_wait(xp, st, xp_step_word(xp, xp->rank, flag), seq, "wait for a chunk");
}

static tpla_status_t xp_wait_ready(tpla_xport_t *xp, int lane, int peer, uint32_t seq) {
  if (xp->kind != OVL_XPORT_PEER || xp->rehearsal)
    return TPLA_SUCCESS;
  return xp_wait(xp, xp_lane_stream(xp, lane), xp_ready_word(xp, xp->rank, peer), seq,
                 "wait for a peer's ready");
}

static tpla_status_t xp_sync_lanes(tpla_xport_t *xp, int lane) {
  cudaStream_t st = xp_lane_stream(xp, lane);
  for (int s = 0; s < XP_STREAMS; s++)
    if (streams_used(xp, s))
      TPLA_TRY(follow(xp, st, s));
  return TPLA_SUCCESS;
}

static tpla_status_t xp_copy(tpla_xport_t *xp, int lane, int after, tpla_matrix_t dst,
                             tpla_matrix_t src) {
  if (dst.rows == 0 || dst.cols == 0)
    return TPLA_SUCCESS;
  if (after >= 0)
    TPLA_TRY(follow(xp, xp_lane_stream(xp, lane), after));
  return copy_status(copy2d(dst.data, dst.ld, src.data, src.ld, dst.rows, dst.cols,
                            tpla_dtype_size(dst.dtype), xp_lane_stream(xp, lane)),
                     xp, "local copy, own", xp->rank, dst.rows, dst.cols);
}

/* A NULL scale is the context's device 1.0f: a copy, not a stream memory
 * write, which the transports other than PEER (and the serial mode's) must
 * not need. */
static tpla_status_t xp_set_scale(tpla_xport_t *xp, int lane, float *dst, const float *src) {
  cudaStream_t st = xp_lane_stream(xp, lane);
  src = tpla_cuda_fp8_scale(tpla_cuda_impl(xp->ctx), src);
  return copy_status(cudaMemcpyAsync(dst, src, sizeof(float), cudaMemcpyDeviceToDevice, st), xp,
                     "FP8 scale, own", xp->rank, 1, 1);
}

static tpla_status_t xp_transpose(tpla_xport_t *xp, int lane, tpla_matrix_t dst,
                                  tpla_matrix_t src) {
  return tpla_cuda_status(tpla_cuda_transpose_bytes(dst.data, dst.ld, src.data, src.ld, src.rows,
                                                    src.cols, xp_lane_stream(xp, lane)),
                          xp->fn, "FP8 transpose of B (tpla_cuda_transpose_bytes)");
}

static tpla_status_t xp_amax(tpla_xport_t *xp, int lane, tpla_matrix_t m, float *amax) {
  return tpla_cuda_status(tpla_cuda_amax(amax, m.data, m.dtype, m.rows, m.cols, m.ld, 0,
                                         xp_lane_stream(xp, lane)),
                          xp->fn, "amax of the output (tpla_cuda_amax)");
}

static ovl_xport_kind_t xp_kind(const tpla_xport_t *xp) { return xp->kind; }
static void *xp_window(const tpla_xport_t *xp) {
  return xp->window_bytes > 0 ? (char *)xp->alloc + xp->flag_bytes : NULL;
}
static size_t xp_bytes(const tpla_xport_t *xp) { return xp->flag_bytes + xp->window_bytes; }
static void *xp_stream(const tpla_xport_t *xp, int lane) { return xp_lane_stream(xp, lane); }
static void *xp_peer_window(const tpla_xport_t *xp, int q) {
  return xp->kind == OVL_XPORT_PEER && !xp->rehearsal ? xp_window_of(xp, q) : NULL;
}

/* ---- plan-time rehearsal ------------------------------------------------------------ */

/* CUDA lazy module loading (CUDA_MODULE_LOADING=LAZY, the default) loads a
 * kernel at its first launch, and the load waits for the device to idle. In
 * an overlapped call the device may be blocked in cuStreamWaitValue32 on a
 * flag that a peer writes only after work that waits on this rank, so the
 * first launch of a fold instance or of a cuBLASLt kernel for a new GEMM
 * configuration mid-call deadlocks the GPUs (seen on 2 H200s). Plan
 * creation therefore loads the fold kernels here and rehearses one call
 * (GEMMs, folds and copies on zeroed scratch, no peer traffic), then waits,
 * so every later launch of those kernels finds them loaded. */
static tpla_status_t xp_rehearse_begin(tpla_xport_t *xp, size_t scratch_bytes, void **scratch) {
  const char *fn = xp->fn;
  *scratch = NULL;
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, xp->device, fn));
  cudaStream_t st = xp->streams[0];
  tpla_status_t s = tpla_cuda_status(tpla_transport_preload_kernels(), fn,
                                     "cudaFuncGetAttributes (loading the fold kernels)");
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(tpla_fp8_preload_kernels(), fn,
                         "cudaFuncGetAttributes (loading the FP8 kernels)");
  /* stream-ordered: cudaMalloc/cudaFree could wait for peer GPUs in one process */
  if (s == TPLA_SUCCESS && scratch_bytes > 0) {
    s = tpla_cuda_status(cudaMallocAsync(scratch, scratch_bytes, st), fn,
                         "cudaMallocAsync (scratch of the plan-time rehearsal)");
    if (s == TPLA_SUCCESS) /* tuning times the GEMMs on it: small non-zero values then */
      s = tpla_cuda_status(cudaMemsetAsync(*scratch, xp->tune ? 0x20 : 0, scratch_bytes, st),
                           fn, "cudaMemsetAsync (scratch of the plan-time rehearsal)");
  }
  /* the window too, so the rehearsal reads no stale NaN/Inf */
  if (s == TPLA_SUCCESS && xp->window_bytes > 0)
    s = tpla_cuda_status(cudaMemsetAsync((char *)xp->alloc + xp->flag_bytes, 0,
                                         xp->window_bytes, st),
                         fn, "cudaMemsetAsync (window, plan-time rehearsal)");
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(cudaStreamSynchronize(st), fn,
                         "cudaStreamSynchronize (plan-time rehearsal)");
  if (s != TPLA_SUCCESS && *scratch != NULL) {
    (void)cudaFreeAsync(*scratch, st);
    (void)cudaStreamSynchronize(st);
    *scratch = NULL;
  }
  if (s == TPLA_SUCCESS)
    xp->rehearsal = 1;
  tpla_device_guard_exit(&guard);
  return s;
}

/* The host waits for `st`, polling: it gives up once the context has
 * failed, since a stream stuck in an NCCL kernel drains only after the
 * abort takes the call lock, which this call holds (watchdog.h). */
static tpla_status_t wait_stream(tpla_xport_t *xp, cudaStream_t st, const char *what) {
  for (int round = 0;; round++) {
    cudaError_t e = cudaStreamQuery(st);
    if (e != cudaErrorNotReady)
      return tpla_cuda_status(e, xp->fn, what);
    if (tpla_ctx_failed(xp->ctx))
      return tpla_ctx_check(xp->ctx, xp->fn);
    tpla_poll_sleep(round);
  }
}

tpla_status_t xp_sync_streams(tpla_xport_t *xp, const char *what) {
  tpla_status_t first = TPLA_SUCCESS;
  for (int s = 0; s < XP_STREAMS; s++) {
    if (!streams_used(xp, s))
      continue;
    tpla_status_t t = wait_stream(xp, xp->streams[s], what);
    if (first == TPLA_SUCCESS)
      first = t;
  }
  return first;
}

static tpla_status_t xp_quiesce(tpla_xport_t *xp) {
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, xp->device, xp->fn));
  tpla_status_t st =
      xp_sync_streams(xp, "cudaStreamSynchronize (a window group's buffers change hands)");
  tpla_device_guard_exit(&guard);
  return st;
}

static tpla_status_t xp_rehearse_end(tpla_xport_t *xp, void *scratch) {
  const char *fn = xp->fn;
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, xp->device, fn));
  tpla_status_t first =
      xp_sync_streams(xp, "cudaStreamSynchronize (end of the plan-time rehearsal)");
  if (scratch != NULL) {
    tpla_status_t t = tpla_cuda_status(cudaFreeAsync(scratch, xp->streams[0]), fn,
                                       "cudaFreeAsync (scratch of the plan-time rehearsal)");
    if (t == TPLA_SUCCESS)
      t = tpla_cuda_status(cudaStreamSynchronize(xp->streams[0]), fn, "cudaStreamSynchronize");
    if (first == TPLA_SUCCESS)
      first = t;
  }
  xp->rehearsal = 0;
  tpla_device_guard_exit(&guard);
  return first;
}

const struct tpla_xport_ops tpla_cuda_xport_ops = {
    .create = xp_create,
    .destroy = xp_destroy,
    .kind = xp_kind,
    .window = xp_window,
    .bytes = xp_bytes,
    .stream = xp_stream,
    .peer_window = xp_peer_window,
    .cannot_capture = xp_cannot_capture,
    .capturing = xp_capturing,
    .begin = xp_begin,
    .end = xp_end,
    .step = xp_step,
    .arrival = xp_arrival,
    .wait_ready = xp_wait_ready,
    .sync_lanes = xp_sync_lanes,
    .quiesce = xp_quiesce,
    .gemm = xp_gemm,
    .fold = xp_fold,
    .copy = xp_copy,
    .set_scale = xp_set_scale,
    .transpose = xp_transpose,
    .amax = xp_amax,
    .rehearse_begin = xp_rehearse_begin,
    .rehearse_end = xp_rehearse_end,
};
