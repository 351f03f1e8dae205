/*
 * api.c - the executor-independent public entry points: context queries,
 * collectives and the local GEMM. Each validates its arguments completely
 * (so a rejected call touches nothing) and dispatches to the context's
 * backend.
 */
#include "internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define CHECK_CTX(fn)                                                              \
  do {                                                                             \
    tpla_clear_error();                                                            \
    if (ctx == NULL)                                                               \
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'ctx' is NULL"); \
  } while (0)

tpla_status_t tpla_ctx_destroy(tpla_ctx_t ctx) {
  tpla_clear_error();
  if (ctx == NULL)
    return TPLA_SUCCESS;
  tpla_status_t s = ctx->backend->destroy(ctx);
  free(ctx);
  return s;
}

tpla_status_t tpla_ctx_get_info(tpla_ctx_t ctx, int *rank, int *nranks, tpla_executor_t *executor,
                                int *device) {
  CHECK_CTX("tpla_ctx_get_info");
  if (rank)
    *rank = ctx->rank;
  if (nranks)
    *nranks = ctx->nranks;
  if (executor)
    *executor = ctx->executor;
  if (device)
    *device = ctx->device;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_ctx_workspace_bytes(tpla_ctx_t ctx, size_t *bytes) {
  CHECK_CTX("tpla_ctx_workspace_bytes");
  if (bytes == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, "tpla_ctx_workspace_bytes",
                     "argument 'bytes' is NULL");
  *bytes = ctx->backend->workspace_bytes(ctx);
  return TPLA_SUCCESS;
}

/* ---- collectives --------------------------------------------------------- */

static tpla_status_t check_dtype(const char *fn, tpla_dtype_t dtype, bool reduces) {
  if (!tpla_dtype_valid(dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'dtype': unknown dtype %d",
                     (int)dtype);
  if (reduces && dtype == TPLA_UINT8)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'dtype': u8 cannot be summed; use fp16/bf16/fp32/fp64");
  return TPLA_SUCCESS;
}

static tpla_status_t check_buffer(const char *fn, const char *arg, const void *p, size_t count,
                                  tpla_dtype_t dtype) {
  if (count > (SIZE_MAX >> 2) / tpla_dtype_size(dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s': count %zu is too large",
                     arg, count);
  if (count > 0 && p == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument '%s' is NULL (count %zu)", arg,
                     count);
  return TPLA_SUCCESS;
}

/* Sum of counts[0..nranks) with an overflow check. */
static tpla_status_t check_counts(const char *fn, const size_t *counts, int nranks,
                                  size_t *total) {
  if (counts == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'counts' is NULL");
  size_t sum = 0;
  for (int r = 0; r < nranks; r++) {
    if (counts[r] > (SIZE_MAX >> 4) - sum)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'counts': total overflows at counts[%d] = %zu", r, counts[r]);
    sum += counts[r];
  }
  *total = sum;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_allreduce(tpla_ctx_t ctx, void *recv, const void *send, size_t count,
                             tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allreduce";
  CHECK_CTX(fn);
  TPLA_TRY(check_dtype(fn, dtype, true));
  TPLA_TRY(check_buffer(fn, "recv", recv, count, dtype));
  TPLA_TRY(check_buffer(fn, "send", send, count, dtype));
  if (count == 0)
    return TPLA_SUCCESS;
  tpla_status_t s = ctx->backend->allreduce(ctx, recv, send, count, dtype, stream);
  if (s == TPLA_SUCCESS)
    ctx->counters.allreduces++; /* tpla_ctx_get_counters */
  return s;
}

tpla_status_t tpla_allgatherv(tpla_ctx_t ctx, void *recv, const void *send, const size_t *counts,
                              tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_allgatherv";
  CHECK_CTX(fn);
  TPLA_TRY(check_dtype(fn, dtype, false));
  size_t total = 0;
  TPLA_TRY(check_counts(fn, counts, ctx->nranks, &total));
  TPLA_TRY(check_buffer(fn, "recv", recv, total, dtype));
  TPLA_TRY(check_buffer(fn, "send", send, counts[ctx->rank], dtype));
  if (total == 0)
    return TPLA_SUCCESS;
  tpla_status_t s = ctx->backend->allgatherv(ctx, recv, send, counts, dtype, stream);
  if (s == TPLA_SUCCESS)
    ctx->counters.allgathers++; /* tpla_ctx_get_counters */
  return s;
}

tpla_status_t tpla_reduce_scatterv(tpla_ctx_t ctx, void *recv, const void *send,
                                   const size_t *counts, tpla_dtype_t dtype, void *stream) {
  static const char fn[] = "tpla_reduce_scatterv";
  CHECK_CTX(fn);
  TPLA_TRY(check_dtype(fn, dtype, true));
  size_t total = 0;
  TPLA_TRY(check_counts(fn, counts, ctx->nranks, &total));
  TPLA_TRY(check_buffer(fn, "recv", recv, counts[ctx->rank], dtype));
  TPLA_TRY(check_buffer(fn, "send", send, total, dtype));
  if (total == 0)
    return TPLA_SUCCESS;
  tpla_status_t s = ctx->backend->reduce_scatterv(ctx, recv, send, counts, dtype, stream);
  if (s == TPLA_SUCCESS)
    ctx->counters.reduce_scatters++; /* tpla_ctx_get_counters */
  return s;
}

tpla_status_t tpla_broadcast(tpla_ctx_t ctx, void *buf, size_t count, tpla_dtype_t dtype,
                             int root, void *stream) {
  static const char fn[] = "tpla_broadcast";
  CHECK_CTX(fn);
  TPLA_TRY(check_dtype(fn, dtype, false));
  TPLA_TRY(check_buffer(fn, "buf", buf, count, dtype));
  if (root < 0 || root >= ctx->nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'root': %d is not in [0, %d)",
                     root, ctx->nranks);
  if (count == 0)
    return TPLA_SUCCESS;
  return ctx->backend->broadcast(ctx, buf, count, dtype, root, stream);
}

tpla_status_t tpla_sendrecv(tpla_ctx_t ctx, const void *send, size_t send_count, int dst,
                            void *recv, size_t recv_count, int src, tpla_dtype_t dtype,
                            void *stream) {
  static const char fn[] = "tpla_sendrecv";
  CHECK_CTX(fn);
  TPLA_TRY(check_dtype(fn, dtype, false));
  if (dst < -1 || dst >= ctx->nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'dst': %d is not in [-1, %d)",
                     dst, ctx->nranks);
  if (src < -1 || src >= ctx->nranks)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'src': %d is not in [-1, %d)",
                     src, ctx->nranks);
  TPLA_TRY(check_buffer(fn, "send", send, dst < 0 ? 0 : send_count, dtype));
  TPLA_TRY(check_buffer(fn, "recv", recv, src < 0 ? 0 : recv_count, dtype));
  if (dst < 0 && src < 0)
    return TPLA_SUCCESS;
  return ctx->backend->sendrecv(ctx, send, dst < 0 ? 0 : send_count, dst, recv,
                                src < 0 ? 0 : recv_count, src, dtype, stream);
}

tpla_status_t tpla_barrier(tpla_ctx_t ctx, void *stream) {
  CHECK_CTX("tpla_barrier");
  return ctx->backend->barrier(ctx, stream);
}

/* ---- GEMM ---------------------------------------------------------------- */

static bool gemm_input_dtype(tpla_dtype_t t) {
  return t == TPLA_FLOAT32 || t == TPLA_FLOAT16 || t == TPLA_BFLOAT16;
}

tpla_status_t tpla_gemm(tpla_ctx_t ctx, tpla_matrix_t d, tpla_matrix_t a, tpla_op_t op_a,
                        tpla_matrix_t b, tpla_op_t op_b, const tpla_gemm_args_t *args,
                        void *stream) {
  static const char fn[] = "tpla_gemm";
  CHECK_CTX(fn);
  TPLA_TRY(tpla_check_matrix(fn, "d", &d));
  TPLA_TRY(tpla_check_matrix(fn, "a", &a));
  TPLA_TRY(tpla_check_matrix(fn, "b", &b));
  if (op_a != TPLA_OP_N && op_a != TPLA_OP_T)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'op_a': %d is not N or T",
                     (int)op_a);
  if (op_b != TPLA_OP_N && op_b != TPLA_OP_T)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'op_b': %d is not N or T",
                     (int)op_b);
  if (!gemm_input_dtype(a.dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'a': dtype %s is not a GEMM input type (fp32, fp16, bf16)",
                     tpla_dtype_name(a.dtype));
  if (b.dtype != a.dtype)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'b': dtype %s differs from a's %s", tpla_dtype_name(b.dtype),
                     tpla_dtype_name(a.dtype));
  if (d.dtype != a.dtype && d.dtype != TPLA_FLOAT32)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'd': dtype %s must be a's dtype (%s) or fp32",
                     tpla_dtype_name(d.dtype), tpla_dtype_name(a.dtype));
  int64_t m = op_a == TPLA_OP_N ? a.rows : a.cols;
  int64_t k = op_a == TPLA_OP_N ? a.cols : a.rows;
  int64_t kb = op_b == TPLA_OP_N ? b.rows : b.cols;
  int64_t n = op_b == TPLA_OP_N ? b.cols : b.rows;
  if (kb != k)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'b': op(a) is %" PRId64 "x%" PRId64 " but op(b) is %" PRId64
                     "x%" PRId64 " (inner sizes differ)",
                     m, k, kb, n);
  if (d.rows != m || d.cols != n)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'd': is %" PRId64 "x%" PRId64 ", op(a) op(b) is %" PRId64
                     "x%" PRId64,
                     d.rows, d.cols, m, n);
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                     "sizes m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " exceed 2^31-1", m, n, k);
  tpla_gemm_args_t defaults = TPLA_GEMM_ARGS_INIT;
  if (args == NULL)
    args = &defaults;
  else if (args->size != sizeof(tpla_gemm_args_t))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': size field is %zu, expected %zu (initialize with "
                     "TPLA_GEMM_ARGS_INIT)",
                     args->size, sizeof(tpla_gemm_args_t));
  if (!isfinite(args->alpha) || !isfinite(args->beta))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': alpha (%g) and beta (%g) must be finite",
                     (double)args->alpha, (double)args->beta);
  if (tpla_matrices_overlap(&d, &a) || tpla_matrices_overlap(&d, &b))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'd': output memory overlaps an input");
  if (m == 0 || n == 0)
    return TPLA_SUCCESS;
  tpla_gemm_call_t call = {d,   a, b, op_a, op_b, m, n, k, args->alpha, args->beta,
                           args->allow_tf32};
  return ctx->backend->gemm(ctx, &call, stream);
}
