/*
 * nccl_coll.c - the collectives of the CUDA executor on NCCL. Arguments are
 * validated by src/core/api.c; these only map them onto NCCL calls on the
 * caller's stream:
 *   allreduce        ncclAllReduce
 *   allgatherv       equal counts: ncclAllGather; uneven: one grouped
 *                    ncclBroadcast per rank into that rank's slice
 *   reduce_scatterv  equal counts: ncclReduceScatter; uneven: one grouped
 *                    ncclReduce per rank, rooted at the rank that owns it
 *   broadcast        ncclBroadcast (in place)
 *   sendrecv         grouped ncclSend/ncclRecv; to/from self: a copy
 *   barrier          a 1-element in-place max all-reduce of a zero int
 * Every NCCL result goes through tpla_nccl_finish, which polls the
 * ncclInProgress of non-blocking communicators with the context's timeout.
 */
#include "cuda_ctx.h"

#include <stdio.h>

/* Common prologue: refuse an aborted communicator, make the device current. */
static tpla_status_t enter(tpla_ctx_t ctx, tpla_device_guard_t *guard, const char *fn) {
  if (tpla_cuda_impl(ctx)->comm_aborted)
    return tpla_fail(TPLA_ERROR_REMOTE, fn,
                     "the context's communicator was aborted after an earlier timeout or NCCL "
                     "error; destroy the context and create a new communicator");
  return tpla_device_guard_enter(guard, ctx->device, fn);
}

/* Completes one NCCL call (success, or polled ncclInProgress); names the
 * call with its count and dtype only when it failed. */
static tpla_status_t finish(tpla_ctx_t ctx, ncclResult_t r, const char *fn, const char *call,
                            size_t count, const char *type) {
  if (r == ncclSuccess)
    return TPLA_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "%s (%zu %s elements, rank %d of %d)", call, count, type,
           ctx->rank, ctx->nranks);
  return tpla_cuda_nccl_finish(ctx, r, fn, what);
}

/* Tracks the first failure inside an NCCL group; ncclGroupEnd must run
 * whatever happened, to close the group. */
typedef struct {
  ncclResult_t first;
  const char *call;
} group_state_t;

static void group_note(group_state_t *g, ncclResult_t r, const char *call) {
  if (r != ncclSuccess && r != ncclInProgress && g->first == ncclSuccess) {
    g->first = r;
    g->call = call;
  }
}

static tpla_status_t group_end(tpla_ctx_t ctx, group_state_t *g, const char *fn,
                               const char *what, size_t count, const char *type) {
  ncclResult_t r = ncclGroupEnd();
  if (g->first != ncclSuccess)
    return tpla_nccl_status(g->first, tpla_cuda_impl(ctx)->comm, fn, g->call);
  return finish(ctx, r, fn, what, count, type);
}

static bool counts_equal(const size_t *counts, int nranks) {
  for (int r = 1; r < nranks; r++)
    if (counts[r] != counts[0])
      return false;
  return true;
}

tpla_status_t tpla_nccl_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                                  tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allreduce";
  TPLA_TRY(tpla_check_in_place(fn, "send", send, count, "recv", recv, count, 0, dtype));
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  ncclResult_t r = ncclAllReduce(send, recv, count, tpla_nccl_datatype(dtype), ncclSum,
                                 tpla_cuda_impl(ctx)->comm, (cudaStream_t)stream);
  tpla_status_t s = finish(ctx, r, fn, "ncclAllReduce", count, tpla_dtype_name(dtype));
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_nccl_allgatherv(tpla_ctx_t ctx, void *recv, const void *send,
                                   const size_t *counts, tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allgatherv";
  TPLA_TRY(tpla_check_in_place(fn, "send", send, counts[ctx->rank], "recv", recv,
                               tpla_sum_counts(counts, ctx->nranks),
                               tpla_sum_counts(counts, ctx->rank), dtype));
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  ncclDataType_t dt = tpla_nccl_datatype(dtype);
  cudaStream_t st = (cudaStream_t)stream;
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  tpla_status_t s;
  if (counts_equal(counts, ctx->nranks)) {
    ncclResult_t r = ncclAllGather(send, recv, counts[0], dt, impl->comm, st);
    s = finish(ctx, r, fn, "ncclAllGather", counts[0], tpla_dtype_name(dtype));
  } else {
    /* Rank q broadcasts its block into recv at q's offset; with send at
     * that offset the root's broadcast is in place. */
    const size_t esize = tpla_dtype_size(dtype);
    group_state_t g = {ncclSuccess, NULL};
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) {
      tpla_device_guard_exit(&guard);
      return tpla_nccl_status(r, impl->comm, fn, "ncclGroupStart");
    }
    size_t offset = 0;
    for (int q = 0; q < ctx->nranks; q++) {
      char *slot = (char *)recv + offset * esize;
      if (counts[q] > 0) {
        const void *src = q == ctx->rank ? send : slot;
        group_note(&g, ncclBroadcast(src, slot, counts[q], dt, q, impl->comm, st),
                   "ncclBroadcast (allgatherv block)");
      }
      offset += counts[q];
    }
    s = group_end(ctx, &g, fn, "ncclGroupEnd (allgatherv: grouped ncclBroadcast)", offset,
                  tpla_dtype_name(dtype));
  }
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_nccl_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                        const size_t *counts, tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_reduce_scatterv";
  TPLA_TRY(tpla_check_in_place(fn, "recv", recv, counts[ctx->rank], "send", send,
                               tpla_sum_counts(counts, ctx->nranks),
                               tpla_sum_counts(counts, ctx->rank), dtype));
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  ncclDataType_t dt = tpla_nccl_datatype(dtype);
  cudaStream_t st = (cudaStream_t)stream;
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  tpla_status_t s;
  if (counts_equal(counts, ctx->nranks)) {
    ncclResult_t r = ncclReduceScatter(send, recv, counts[0], dt, ncclSum, impl->comm, st);
    s = finish(ctx, r, fn, "ncclReduceScatter", counts[0],
               tpla_dtype_name(dtype));
  } else {
    /* Block q of every rank's send is summed into rank q's recv. */
    const size_t esize = tpla_dtype_size(dtype);
    group_state_t g = {ncclSuccess, NULL};
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) {
      tpla_device_guard_exit(&guard);
      return tpla_nccl_status(r, impl->comm, fn, "ncclGroupStart");
    }
    size_t offset = 0;
    for (int q = 0; q < ctx->nranks; q++) {
      if (counts[q] > 0) {
        const char *block = (const char *)send + offset * esize;
        void *dst = q == ctx->rank ? recv : NULL;
        group_note(&g, ncclReduce(block, dst, counts[q], dt, ncclSum, q, impl->comm, st),
                   "ncclReduce (reduce_scatterv block)");
      }
      offset += counts[q];
    }
    s = group_end(ctx, &g, fn, "ncclGroupEnd (reduce_scatterv: grouped ncclReduce)", offset,
                  tpla_dtype_name(dtype));
  }
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_nccl_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                                  int root, void *stream) {
  static const char fn[] = "tpla_broadcast";
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  ncclResult_t r = ncclBroadcast(buf, buf, count, tpla_nccl_datatype(dtype), root,
                                 tpla_cuda_impl(ctx)->comm, (cudaStream_t)stream);
  tpla_status_t s = finish(ctx, r, fn, "ncclBroadcast", count, tpla_dtype_name(dtype));
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_nccl_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                                 void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                                 void *stream) {
  static const char fn[] = "tpla_sendrecv";
  const int me = ctx->rank;
  /* A message to self can only be matched by a receive from self. */
  if ((dst == me) != (src == me))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "rank %d: dst (%d) and src (%d) must both be this rank or both other "
                     "ranks/-1 (a send to self is received only by a receive from self)",
                     me, dst, src);
  TPLA_TRY(tpla_check_sendrecv_buffers(fn, send, dst < 0 ? 0 : send_count, recv,
                                       src < 0 ? 0 : recv_count, dst == me, dtype));
  if (dst == me && send_count != recv_count)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "rank %d sends %zu elements to itself but receives %zu", me, send_count,
                     recv_count);
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  cudaStream_t st = (cudaStream_t)stream;
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  tpla_status_t s;
  if (dst == me) {
    s = TPLA_SUCCESS;
    if (send_count > 0 && send != recv)
      s = tpla_cuda_status(cudaMemcpyAsync(recv, send, send_count * tpla_dtype_size(dtype),
                                           cudaMemcpyDeviceToDevice, st),
                           fn, "cudaMemcpyAsync (sendrecv to self)");
  } else {
    ncclDataType_t dt = tpla_nccl_datatype(dtype);
    group_state_t g = {ncclSuccess, NULL};
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) {
      tpla_device_guard_exit(&guard);
      return tpla_nccl_status(r, impl->comm, fn, "ncclGroupStart");
    }
    if (dst >= 0)
      group_note(&g, ncclSend(send, send_count, dt, dst, impl->comm, st), "ncclSend");
    if (src >= 0)
      group_note(&g, ncclRecv(recv, recv_count, dt, src, impl->comm, st), "ncclRecv");
    s = group_end(ctx, &g, fn, "ncclGroupEnd (ncclSend/ncclRecv)", send_count + recv_count,
                  tpla_dtype_name(dtype));
  }
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_nccl_barrier(tpla_ctx_t ctx, void *stream) {
  static const char fn[] = "tpla_barrier";
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  tpla_device_guard_t guard;
  TPLA_TRY(enter(ctx, &guard, fn));
  /* max of zeros stays zero, so concurrent barriers never disturb it */
  ncclResult_t r = ncclAllReduce(impl->barrier_buf, impl->barrier_buf, 1, ncclInt32, ncclMax,
                                 impl->comm, (cudaStream_t)stream);
  tpla_status_t s = finish(ctx, r, fn, "ncclAllReduce (barrier)", 1, "int32");
  tpla_device_guard_exit(&guard);
  return s;
}
