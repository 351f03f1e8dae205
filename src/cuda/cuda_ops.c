/*
 * cuda_ops.c - the CUDA executor's building blocks of the algorithms
 * (tpla_backend_t's mem_alloc, mem_free, axpby, sumsq, scale_by_norm,
 * mirror_upper, add_diagonal, alltoallv) and the per-context state they keep. The
 * kernels are in ops_kernels.cu; this file makes the context's device
 * current, launches, and turns failures into statuses whose message names
 * the op, the shapes and the CUDA/NCCL error. See cuda_ops.h.
 */
#include "cuda_ops.h"

#include "cuda_ctx.h"
#include "lt_gemm.h"
#include "ops_kernels.h"

_Static_assert(TPLA_OPS_LIST_MAX == TPLA_LIST_MAX, "one list bound for core and kernels");

#include <stdio.h>
#include <stdlib.h>

struct tpla_cuda_ops_state {
  int device;
  int max_blocks; /* resident blocks of the elementwise kernels */
  /* TPLA_OPS_SUMSQ_PARTIALS doubles of device scratch, the context's as the
   * cuBLASLt workspace is: a call on another stream waits for the last user
   * (tpla_lt_ctx_enter/leave), or two sums in flight would mix their partials */
  double *partials;
};

/* ---- state -------------------------------------------------------------------- */

size_t tpla_cuda_ops_state_bytes(void) { return TPLA_OPS_SUMSQ_PARTIALS * sizeof(double); }

tpla_status_t tpla_cuda_ops_init(tpla_ctx_t ctx, void **state) {
  static const char fn[] = "tpla_cuda_ops_init";
  *state = NULL;
  struct tpla_cuda_ops_state *st = calloc(1, sizeof *st);
  if (st == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  st->device = ctx->device;
  tpla_device_guard_t guard;
  tpla_status_t s = tpla_device_guard_enter(&guard, ctx->device, fn);
  int sm_count = 0;
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(
        cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, ctx->device), fn,
        "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
  if (s == TPLA_SUCCESS)
    s = tpla_cuda_status(cudaMalloc((void **)&st->partials, tpla_cuda_ops_state_bytes()), fn,
                         "cudaMalloc (sum-of-squares partials, 8 KiB)");
  tpla_device_guard_exit(&guard);
  if (s != TPLA_SUCCESS) {
    free(st); /* partials is NULL here: it was the last step */
    return s;
  }
  st->max_blocks = tpla_ops_max_blocks(sm_count);
  *state = st;
  return TPLA_SUCCESS;
}

void tpla_cuda_ops_fini(void *state) {
  struct tpla_cuda_ops_state *st = state;
  if (st == NULL)
    return;
  tpla_device_guard_t guard;
  if (tpla_device_guard_enter(&guard, st->device, "tpla_cuda_ops_fini") == TPLA_SUCCESS) {
    if (cudaFree(st->partials) != cudaSuccess)
      (void)cudaGetLastError(); /* nothing to report to; do not leak into the next call */
    tpla_device_guard_exit(&guard);
  }
  free(st);
}

static tpla_status_t get_state(tpla_ctx_t ctx, const char *fn,
                               struct tpla_cuda_ops_state **out) {
  *out = tpla_cuda_ctx_ops_state(ctx);
  if (*out == NULL)
    return tpla_fail(TPLA_ERROR_INTERNAL, fn,
                     "the context has no ops state (tpla_cuda_ops_init was not called when it "
                     "was created)");
  return TPLA_SUCCESS;
}

/* ---- messages ---------------------------------------------------------------------- */

/* "y 7x13 (ld 16, bf16)" */
static const char *describe(char *buf, size_t size, const char *name, const tpla_matrix_t *m) {
  snprintf(buf, size, "%s %lldx%lld (ld %lld, %s)", name, (long long)m->rows, (long long)m->cols,
           (long long)m->ld, tpla_dtype_name(m->dtype));
  return buf;
}

static tpla_status_t unsupported(const char *fn, const char *name, const tpla_matrix_t *m) {
  char d[128];
  return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn, "%s: dtype %s is not supported (fp32, fp16, bf16)",
                   describe(d, sizeof d, name, m), tpla_dtype_name(m->dtype));
}

/* Status of a launch; the message reads
 * "fn: <what> on <shapes> failed: cudaErrorX (text)". */
static tpla_status_t launch_status(cudaError_t e, const char *fn, const char *what,
                                   const tpla_matrix_t *a, const char *a_name,
                                   const tpla_matrix_t *b, const char *b_name) {
  if (e == cudaSuccess)
    return TPLA_SUCCESS;
  char da[128], db[128] = "", call[320];
  describe(da, sizeof da, a_name, a);
  if (b != NULL)
    describe(db, sizeof db, b_name, b);
  snprintf(call, sizeof call, "%s on %s%s%s", what, da, b != NULL ? ", " : "", db);
  return tpla_cuda_status(e, fn, call);
}

/* ---- memory ------------------------------------------------------------------------- */

tpla_status_t tpla_cuda_mem_alloc(tpla_ctx_t ctx, size_t bytes, void **ptr) {
  static const char fn[] = "tpla_cuda_mem_alloc";
  if (bytes == 0) {
    *ptr = NULL;
    return TPLA_SUCCESS;
  }
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  tpla_device_guard_exit(&guard);
  if (e != cudaSuccess) {
    char call[96];
    snprintf(call, sizeof call, "cudaMalloc of %zu bytes on device %d", bytes, ctx->device);
    return tpla_cuda_status(e, fn, call);
  }
  *ptr = p;
  return TPLA_SUCCESS;
}

void tpla_cuda_mem_free(tpla_ctx_t ctx, void *ptr) {
  if (ptr == NULL)
    return;
  tpla_device_guard_t guard;
  if (tpla_device_guard_enter(&guard, ctx->device, "tpla_cuda_mem_free") != TPLA_SUCCESS)
    return;
  if (cudaFree(ptr) != cudaSuccess)
    (void)cudaGetLastError();
  tpla_device_guard_exit(&guard);
}

/* ---- elementwise and reductions -------------------------------------------------------- */

/* A batch's count for the launchers: at least 1. */
static int members(tpla_batch_t batch) { return batch.count > 1 ? batch.count : 1; }

tpla_status_t tpla_cuda_axpby(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha,
                              float beta, tpla_batch_t batch, void *stream) {
  static const char fn[] = "tpla_cuda_axpby";
  if (!tpla_ops_float_dtype(y.dtype))
    return unsupported(fn, "y", &y);
  if (!tpla_ops_float_dtype(x.dtype))
    return unsupported(fn, "x", &x);
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_launch_axpby(y, x, alpha, beta, members(batch), batch.stride,
                                    st->max_blocks, (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return launch_status(e, fn, "axpby kernel", &y, "y", &x, "x");
}

tpla_status_t tpla_cuda_add_diagonal(tpla_ctx_t ctx, tpla_matrix_t a, float value,
                                     tpla_batch_t batch, void *stream) {
  static const char fn[] = "tpla_cuda_add_diagonal";
  if (!tpla_ops_float_dtype(a.dtype))
    return unsupported(fn, "a", &a);
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_launch_add_diagonal(a, value, members(batch), batch.stride,
                                           (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return launch_status(e, fn, "add_diagonal kernel", &a, "a", NULL, NULL);
}

tpla_status_t tpla_cuda_sumsq(tpla_ctx_t ctx, double *sumsq, tpla_matrix_t x, void *stream) {
  static const char fn[] = "tpla_cuda_sumsq";
  if (!tpla_ops_float_dtype(x.dtype))
    return unsupported(fn, "x", &x);
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  tpla_status_t s = tpla_lt_ctx_enter(impl, (cudaStream_t)stream, fn);
  if (s == TPLA_SUCCESS) { /* an empty x still launches: *sumsq must become 0 */
    cudaError_t e = tpla_launch_sumsq(sumsq, st->partials, x, st->max_blocks,
                                      (cudaStream_t)stream);
    s = launch_status(e, fn, "sum-of-squares kernels", &x, "x", NULL, NULL);
  }
  if (s == TPLA_SUCCESS)
    s = tpla_lt_ctx_leave(impl, (cudaStream_t)stream, fn);
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_cuda_scale_by_norm(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x,
                                      const double *sumsq, float safety, float eps, void *stream) {
  static const char fn[] = "tpla_cuda_scale_by_norm";
  if (!tpla_ops_float_dtype(y.dtype))
    return unsupported(fn, "y", &y);
  if (!tpla_ops_float_dtype(x.dtype))
    return unsupported(fn, "x", &x);
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_launch_scale_by_norm(y, x, sumsq, safety, eps, st->max_blocks,
                                            (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return launch_status(e, fn, "scale-by-norm kernel", &y, "y", &x, "x");
}

tpla_status_t tpla_cuda_normalize_list(tpla_ctx_t ctx, tpla_matrix_t y, tpla_batch_t batch,
                                       const tpla_matrix_t *x, const float *safety,
                                       const float *eps, double *sumsq, void *stream) {
  static const char fn[] = "tpla_cuda_normalize_list";
  if (!tpla_ops_float_dtype(y.dtype))
    return unsupported(fn, "y", &y);
  for (int j = 0; j < batch.count; j++)
    if (!tpla_ops_float_dtype(x[j].dtype) || x[j].dtype != x[0].dtype)
      return unsupported(fn, "x[j]", &x[j]);
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  tpla_status_t s = tpla_lt_ctx_enter(impl, (cudaStream_t)stream, fn); /* the partials */
  if (s == TPLA_SUCCESS) {
    cudaError_t e = tpla_launch_normalize_list(y, batch.stride, x, batch.count, safety, eps,
                                               sumsq, st->partials, st->max_blocks,
                                               (cudaStream_t)stream);
    s = launch_status(e, fn, "list normalization kernels", &y, "y", &x[0], "x[0]");
  }
  if (s == TPLA_SUCCESS)
    s = tpla_lt_ctx_leave(impl, (cudaStream_t)stream, fn);
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_cuda_store_list(tpla_ctx_t ctx, const tpla_matrix_t *x, tpla_matrix_t y,
                                   tpla_batch_t batch, void *stream) {
  static const char fn[] = "tpla_cuda_store_list";
  if (!tpla_ops_float_dtype(y.dtype))
    return unsupported(fn, "y", &y);
  for (int j = 0; j < batch.count; j++)
    if (x[j].dtype != y.dtype) /* the kernel moves y's elements: no conversion */
      return unsupported(fn, "x[j]", &x[j]);
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_launch_store_list(x, y, batch.stride, batch.count, st->max_blocks,
                                         (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return launch_status(e, fn, "list store kernel", &y, "y", &x[0], "x[0]");
}

tpla_status_t tpla_cuda_zero(tpla_ctx_t ctx, tpla_matrix_t y, void *stream) {
  static const char fn[] = "tpla_cuda_zero";
  if (y.rows == 0 || y.cols == 0)
    return TPLA_SUCCESS;
  size_t es = tpla_dtype_size(y.dtype);
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_cuda_zero_2d(y.data, (size_t)y.ld * es, (size_t)y.cols * es,
                                    (size_t)y.rows, (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return tpla_cuda_status(e, fn, "tpla_cuda_zero_2d");
}

tpla_status_t tpla_cuda_mirror_upper(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole,
                                     tpla_batch_t batch, void *stream) {
  static const char fn[] = "tpla_cuda_mirror_upper";
  if (a.rows <= 1 || a.cols <= 1)
    return TPLA_SUCCESS; /* nothing below the diagonal */
  struct tpla_cuda_ops_state *st;
  TPLA_TRY(get_state(ctx, fn, &st));
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  cudaError_t e = tpla_launch_mirror_upper(a, whole, members(batch), batch.stride,
                                           st->max_blocks, (cudaStream_t)stream);
  tpla_device_guard_exit(&guard);
  return launch_status(e, fn, "mirror-upper kernel", &a, "a", NULL, NULL);
}

/* ---- personalized all-to-all ------------------------------------------------------------ */

/* The NCCL part: one group with a send and a receive per peer that has
 * data. Inside a group NCCL only records the calls, so an error there is
 * reported after the group is closed. */
static tpla_status_t exchange_with_peers(tpla_ctx_t ctx, char *recv, const size_t *recv_counts,
                                         const size_t *recv_displs, const char *send,
                                         const size_t *send_counts, const size_t *send_displs,
                                         size_t elem, cudaStream_t stream, const char *fn) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  if (impl->comm_aborted)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn,
                     "the context's NCCL communicator was aborted after an earlier failure; "
                     "destroy the context");
  ncclComm_t comm = impl->comm;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess)
    return tpla_nccl_status(r, comm, fn, "ncclGroupStart");
  ncclResult_t failed = ncclSuccess;
  char failed_call[96] = "";
  for (int q = 0; q < ctx->nranks && failed == ncclSuccess; q++) {
    if (q == ctx->rank)
      continue;
    if (send_counts[q] > 0) {
      r = ncclSend(send + send_displs[q] * elem, send_counts[q] * elem, ncclUint8, q, comm,
                   stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        failed = r;
        snprintf(failed_call, sizeof failed_call, "ncclSend of %zu elements to rank %d",
                 send_counts[q], q);
      }
    }
    if (recv_counts[q] > 0 && failed == ncclSuccess) {
      r = ncclRecv(recv + recv_displs[q] * elem, recv_counts[q] * elem, ncclUint8, q, comm,
                   stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        failed = r;
        snprintf(failed_call, sizeof failed_call, "ncclRecv of %zu elements from rank %d",
                 recv_counts[q], q);
      }
    }
  }
  r = ncclGroupEnd(); /* always closed, even after a failed call */
  if (failed != ncclSuccess)
    return tpla_nccl_status(failed, comm, fn, failed_call);
  /* ncclInProgress (non-blocking communicator): poll with the context's
   * timeout; on timeout or an asynchronous error the communicator is
   * aborted, so no rank waits forever. */
  return tpla_cuda_nccl_finish(ctx, r, fn, "ncclGroupEnd (alltoallv send/recv group)");
}

tpla_status_t tpla_cuda_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                                  const size_t *recv_displs, const void *send,
                                  const size_t *send_counts, const size_t *send_displs,
                                  tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_cuda_alltoallv";
  const size_t elem = tpla_dtype_size(dtype);
  const int me = ctx->rank;
  cudaStream_t s = (cudaStream_t)stream;
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_status_t status = TPLA_SUCCESS;
  /* The own block: a device copy. Both counts are equal for valid input;
   * the smaller one keeps a bad call inside both buffers. */
  size_t own = send_counts[me] < recv_counts[me] ? send_counts[me] : recv_counts[me];
  if (own > 0) {
    cudaError_t e = cudaMemcpyAsync((char *)recv + recv_displs[me] * elem,
                                    (const char *)send + send_displs[me] * elem, own * elem,
                                    cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
      char call[128];
      snprintf(call, sizeof call, "cudaMemcpyAsync of the own block (%zu %s elements)", own,
               tpla_dtype_name(dtype));
      status = tpla_cuda_status(e, fn, call);
    }
  }
  if (status == TPLA_SUCCESS && ctx->nranks > 1)
    status = exchange_with_peers(ctx, recv, recv_counts, recv_displs, send, send_counts,
                                 send_displs, elem, s, fn);
  tpla_device_guard_exit(&guard);
  return status;
}
