/*
 * api.c - the executor-independent public entry points: context queries,
 * collectives and the local GEMM (FP8 included). Each validates its
 * arguments completely (so a rejected call touches nothing) and dispatches
 * to the context's backend.
 */
#include "internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Every dtype may be moved (allgatherv, broadcast, sendrecv: u8 and FP8 as
 * raw bytes); only fp32/fp16/bf16/fp64 may be summed. */
static tpla_status_t check_dtype(const char *fn, tpla_dtype_t dtype, bool reduces) {
  if (!tpla_dtype_valid(dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'dtype': unknown dtype %d",
                     (int)dtype);
  if (reduces && dtype == TPLA_UINT8)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'dtype': u8 cannot be summed; use fp16/bf16/fp32/fp64");
  if (reduces && (dtype == TPLA_FLOAT8_E4M3 || dtype == TPLA_FLOAT8_E5M2))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'dtype': %s cannot be summed (FP8 moves as raw bytes in "
                     "allgatherv, broadcast and sendrecv); reduce in fp16/bf16/fp32/fp64",
                     tpla_dtype_name(dtype));
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
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  TPLA_TRY(tpla_call_begin(ctx, fn, true, stream));
  tpla_status_t s = ctx->backend->allreduce(ctx, recv, send, count, dtype, stream);
  tpla_call_end(ctx, true, stream);
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
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  TPLA_TRY(tpla_call_begin(ctx, fn, true, stream));
  tpla_status_t s = ctx->backend->allgatherv(ctx, recv, send, counts, dtype, stream);
  tpla_call_end(ctx, true, stream);
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
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  TPLA_TRY(tpla_call_begin(ctx, fn, true, stream));
  tpla_status_t s = ctx->backend->reduce_scatterv(ctx, recv, send, counts, dtype, stream);
  tpla_call_end(ctx, true, stream);
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
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  TPLA_TRY(tpla_call_begin(ctx, fn, true, stream));
  tpla_status_t s = ctx->backend->broadcast(ctx, buf, count, dtype, root, stream);
  tpla_call_end(ctx, true, stream);
  return s;
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
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  TPLA_TRY(tpla_call_begin(ctx, fn, true, stream));
  tpla_status_t s = ctx->backend->sendrecv(ctx, send, dst < 0 ? 0 : send_count, dst, recv,
                                           src < 0 ? 0 : recv_count, src, dtype, stream);
  tpla_call_end(ctx, true, stream);
  return s;
}

tpla_status_t tpla_barrier(tpla_ctx_t ctx, void *stream) {
  CHECK_CTX("tpla_barrier");
  TPLA_TRY(tpla_call_begin(ctx, "tpla_barrier", true, stream));
  tpla_status_t s = ctx->backend->barrier(ctx, stream);
  tpla_call_end(ctx, true, stream);
  return s;
}

/* ---- GEMM ---------------------------------------------------------------- */

static bool gemm_input_dtype(tpla_dtype_t t) {
  return t == TPLA_FLOAT32 || t == TPLA_FLOAT16 || t == TPLA_BFLOAT16;
}

static bool is_fp8(tpla_dtype_t t) { return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2; }

/* The dtypes of A, B and D: fp32/fp16/bf16 (A = B, D = A or fp32), or FP8
 * inputs (not both E5M2) with a bf16/fp16/fp32/E4M3/E5M2 D. */
static tpla_status_t check_gemm_dtypes(const char *fn, const tpla_matrix_t *d,
                                       const tpla_matrix_t *a, const tpla_matrix_t *b) {
  if (is_fp8(a->dtype) || is_fp8(b->dtype)) {
    if (!is_fp8(a->dtype) || !is_fp8(b->dtype))
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "arguments 'a' and 'b': an FP8 GEMM needs both inputs FP8 (e4m3 or "
                       "e5m2); a is %s, b is %s",
                       tpla_dtype_name(a->dtype), tpla_dtype_name(b->dtype));
    if (a->dtype == TPLA_FLOAT8_E5M2 && b->dtype == TPLA_FLOAT8_E5M2)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "arguments 'a' and 'b': both are e5m2; FP8 GEMMs take e4m3 x e4m3, "
                       "e4m3 x e5m2 or e5m2 x e4m3");
    if (!gemm_input_dtype(d->dtype) && !is_fp8(d->dtype))
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'd': dtype %s is not an FP8 GEMM output (bf16, fp16, fp32, "
                       "e4m3, e5m2)",
                       tpla_dtype_name(d->dtype));
    return TPLA_SUCCESS;
  }
  if (!gemm_input_dtype(a->dtype))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'a': dtype %s is not a GEMM input type (fp32, fp16, bf16; "
                     "e4m3/e5m2 for FP8)",
                     tpla_dtype_name(a->dtype));
  if (b->dtype != a->dtype)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'b': dtype %s differs from a's %s", tpla_dtype_name(b->dtype),
                     tpla_dtype_name(a->dtype));
  if (d->dtype != a->dtype && d->dtype != TPLA_FLOAT32)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'd': dtype %s must be a's dtype (%s) or fp32",
                     tpla_dtype_name(d->dtype), tpla_dtype_name(a->dtype));
  return TPLA_SUCCESS;
}

/* *out = the caller's args (NULL: defaults). The size before the fp8 block
 * (callers built against the header without FP8) is accepted and reads as
 * TPLA_FP8_SCALING_INIT; only that prefix of the caller's struct is read. */
static tpla_status_t read_gemm_args(const char *fn, const tpla_gemm_args_t *args,
                                    tpla_gemm_args_t *out) {
  static const size_t pre_fp8_size = offsetof(tpla_gemm_args_t, fp8);
  *out = (tpla_gemm_args_t)TPLA_GEMM_ARGS_INIT;
  if (args == NULL)
    return TPLA_SUCCESS;
  if (args->size == sizeof(tpla_gemm_args_t))
    *out = *args;
  else if (args->size == pre_fp8_size)
    memcpy(out, args, pre_fp8_size);
  else
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': size field is %zu, expected %zu (initialize with "
                     "TPLA_GEMM_ARGS_INIT)",
                     args->size, sizeof(tpla_gemm_args_t));
  out->size = sizeof(tpla_gemm_args_t);
  return TPLA_SUCCESS;
}

static bool fp8_scaling_is_default(const tpla_fp8_scaling_t *f) {
  return f->a_scale == NULL && f->b_scale == NULL && f->d_scale == NULL && f->d_amax == NULL &&
         f->accum == TPLA_FP8_ACCUM_SPLIT && f->scale_mode == TPLA_FP8_SCALE_TENSOR;
}

/* args->fp8 against the dtypes (already checked by check_gemm_dtypes). */
tpla_status_t tpla_check_fp8_pointers(const char *fn, const tpla_fp8_scaling_t *f) {
  const void *ptr[4] = {f->a_scale, f->b_scale, f->d_scale, f->d_amax};
  static const char *name[4] = {"a_scale", "b_scale", "d_scale", "d_amax"};
  for (int i = 0; i < 4; i++)
    if ((uintptr_t)ptr[i] % 16 != 0)
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn, "argument 'args': fp8.%s (%p) is not "
                       "16-byte aligned, which cuBLASLt needs (space scales "
                       "TPLA_FP8_SCALE_STRIDE floats apart)", name[i], ptr[i]);
  return TPLA_SUCCESS;
}

static tpla_status_t check_gemm_fp8(const char *fn, const tpla_gemm_args_t *args,
                                    const tpla_matrix_t *d, const tpla_matrix_t *a,
                                    bool ctx_is_cuda) {
  const tpla_fp8_scaling_t *f = &args->fp8;
  if (!is_fp8(a->dtype)) {
    if (!fp8_scaling_is_default(f))
      return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                       "argument 'args': args->fp8 is only for FP8 inputs (a is %s); leave it "
                       "TPLA_FP8_SCALING_INIT",
                       tpla_dtype_name(a->dtype));
    return TPLA_SUCCESS;
  }
  if (f->accum != TPLA_FP8_ACCUM_SPLIT && f->accum != TPLA_FP8_ACCUM_FAST)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': fp8.accum %d is not TPLA_FP8_ACCUM_SPLIT or _FAST",
                     (int)f->accum);
  if (f->scale_mode != TPLA_FP8_SCALE_TENSOR && f->scale_mode != TPLA_FP8_SCALE_MXFP8)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': fp8.scale_mode %d is not TPLA_FP8_SCALE_TENSOR or _MXFP8",
                     (int)f->scale_mode);
  if (is_fp8(d->dtype) && args->beta != 0.0f)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': beta is %g but an FP8 output (d is %s) needs beta = 0",
                     (double)args->beta, tpla_dtype_name(d->dtype));
  if (!is_fp8(d->dtype) && f->d_scale != NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': fp8.d_scale is only for an FP8 output (d is %s); pass "
                     "NULL",
                     tpla_dtype_name(d->dtype));
  if (ctx_is_cuda && f->scale_mode == TPLA_FP8_SCALE_TENSOR)
    TPLA_TRY(tpla_check_fp8_pointers(fn, f));
  if (f->scale_mode == TPLA_FP8_SCALE_MXFP8)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                     "argument 'args': fp8.scale_mode TPLA_FP8_SCALE_MXFP8: MXFP8 block scaling "
                     "is a Blackwell (compute capability >= 100) cuBLASLt feature that tpla does "
                     "not provide on Hopper or on the host executor; use TPLA_FP8_SCALE_TENSOR");
  return TPLA_SUCCESS;
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
  TPLA_TRY(check_gemm_dtypes(fn, &d, &a, &b));
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
  tpla_gemm_args_t ga;
  TPLA_TRY(read_gemm_args(fn, args, &ga));
  if (!isfinite(ga.alpha) || !isfinite(ga.beta))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'args': alpha (%g) and beta (%g) must be finite",
                     (double)ga.alpha, (double)ga.beta);
  TPLA_TRY(check_gemm_fp8(fn, &ga, &d, &a, ctx->executor == TPLA_EXECUTOR_CUDA));
  if (tpla_matrices_overlap(&d, &a) || tpla_matrices_overlap(&d, &b))
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "argument 'd': output memory overlaps an input");
  /* A valid call cuBLASLt on Hopper has no kernel for; the host refuses it
   * too, so that what passes there runs on a GPU. */
  if (d.dtype == TPLA_FLOAT8_E5M2 && a.dtype == TPLA_FLOAT8_E4M3 && b.dtype == TPLA_FLOAT8_E4M3)
    return tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                     "argument 'd': an e5m2 D needs an e5m2 input (a or b); cuBLASLt has no "
                     "e4m3 x e4m3 -> e5m2 GEMM: write bf16/fp16/fp32 or e4m3");
  bool empty = m == 0 || n == 0;
  if (empty && ga.fp8.d_amax == NULL)
    return tpla_ctx_check(ctx, fn); /* a no-op, but not on a failed context */
  tpla_gemm_call_t call = {d, a, b, op_a, op_b, m, n, k, ga.alpha, ga.beta, ga.allow_tf32,
                           ga.fp8, NULL, {0}};
  /* a local GEMM waits for no peer: the watchdog need not follow it */
  TPLA_TRY(tpla_call_begin(ctx, fn, false, stream));
  /* the amax of no elements is 0 */
  const tpla_matrix_t amax = {ga.fp8.d_amax, 1, 1, 1, TPLA_FLOAT32};
  tpla_status_t s = empty ? ctx->backend->zero(ctx, amax, stream)
                          : ctx->backend->gemm(ctx, &call, stream);
  tpla_call_end(ctx, false, stream);
  return s;
}
