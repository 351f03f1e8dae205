/*
 * lt_gemm.c - tpla_gemm on cuBLASLt with a per-context plan cache (see
 * lt_gemm.h): open addressing over keys of lt_plan.h, plans built by
 * tpla_lt_plan_build (which also explains the row-major operand swap), the
 * workspace ordering between streams, and the fp16/bf16/fp32 call, with C
 * apart from D when an internal caller passes one (cuBLASLt's out-of-place
 * matmul: C of D's type and shape, its own leading dimension); FP8 calls go
 * to lt_fp8.c.
 */
#include "lt_gemm.h"

#include "cuda_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 512 /* power of two, twice the entry limit: short probes */
_Static_assert(CACHE_SLOTS >= 2 * TPLA_LT_CACHE_MAX_ENTRIES, "cache load factor");

typedef struct {
  int used;
  tpla_lt_plan_t plan; /* plan.key is the slot's key */
} slot_t;

struct tpla_lt_cache {
  slot_t slots[CACHE_SLOTS];
  int entries;
  uint64_t hits, misses, flushes;
};

tpla_status_t tpla_lt_cache_create(tpla_lt_cache_t **cache, const char *fn) {
  *cache = calloc(1, sizeof **cache);
  if (*cache == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for the GEMM plan cache");
  return TPLA_SUCCESS;
}

/* Plans may go while GEMMs that used them still run (lt_plan.h). */
static void cache_flush(tpla_lt_cache_t *c) {
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (c->slots[i].used) {
      tpla_lt_plan_release(&c->slots[i].plan);
      c->slots[i].used = 0;
    }
  c->entries = 0;
}

void tpla_lt_cache_destroy(tpla_lt_cache_t *cache) {
  if (cache == NULL)
    return;
  cache_flush(cache);
  free(cache);
}

static uint64_t key_hash(const tpla_lt_key_t *k) { /* FNV-1a */
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *k; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static const char *op_name(tpla_op_t op) { return op == TPLA_OP_T ? "T" : "N"; }

void tpla_lt_describe_call(char *buf, size_t size, const void *call) {
  const tpla_gemm_call_t *g = call;
  const tpla_matrix_t *c = tpla_lt_separate_c(g);
  char c_part[64] = "";
  if (c != NULL)
    snprintf(c_part, sizeof c_part, " + beta C(ld %" PRId64 ")", c->ld);
  snprintf(buf, size,
           "D(%" PRId64 "x%" PRId64 " %s, ld %" PRId64 ") = op_a(A(%" PRId64 "x%" PRId64
           " %s, ld %" PRId64 "), %s) op_b(B(%" PRId64 "x%" PRId64 " %s, ld %" PRId64
           "), %s)%s, m=%" PRId64 " n=%" PRId64 " k=%" PRId64 ", beta %g%s",
           g->d.rows, g->d.cols, tpla_dtype_name(g->d.dtype), g->d.ld, g->a.rows, g->a.cols,
           tpla_dtype_name(g->a.dtype), g->a.ld, op_name(g->op_a), g->b.rows, g->b.cols,
           tpla_dtype_name(g->b.dtype), g->b.ld, op_name(g->op_b), c_part, g->m, g->n, g->k,
           (double)g->beta, g->allow_tf32 && g->a.dtype == TPLA_FLOAT32 ? ", tf32" : "");
}

tpla_status_t tpla_lt_cache_plan(tpla_cuda_ctx_t *impl, const tpla_lt_key_t *key,
                                 const tpla_lt_operands_t *first, const char *fn,
                                 const tpla_lt_what_t *what, tpla_lt_plan_t **out) {
  tpla_lt_cache_t *c = impl->gemm_cache;
  size_t mask = CACHE_SLOTS - 1, i = (size_t)key_hash(key) & mask;
  for (; c->slots[i].used; i = (i + 1) & mask)
    if (memcmp(&c->slots[i].plan.key, key, sizeof *key) == 0) {
      c->hits++;
      *out = &c->slots[i].plan;
      return TPLA_SUCCESS;
    }
  c->misses++;
  if (c->entries >= TPLA_LT_CACHE_MAX_ENTRIES) {
    cache_flush(c);
    c->flushes++;
    i = (size_t)key_hash(key) & mask; /* the table is empty: the home slot is free */
  }
  TPLA_TRY(tpla_lt_plan_build(&c->slots[i].plan, impl->lt, impl->gemm_ws_bytes, key, first, fn,
                              what));
  c->slots[i].used = 1;
  c->entries++;
  *out = &c->slots[i].plan;
  return TPLA_SUCCESS;
}

/* The capture sequence `stream` records into: 0 when it is not captured
 * (CUDA numbers capture sequences from 1). */
static unsigned long long capture_of(cudaStream_t stream) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
#if CUDART_VERSION >= 13000
  cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, &id, NULL, NULL, NULL, NULL);
#else /* CUDA 12's signature, without the edge data */
  cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, &id, NULL, NULL, NULL);
#endif
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* a bad stream: the call's own operations report it */
    return 0;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : id;
}

tpla_status_t tpla_lt_ctx_follow(tpla_cuda_ctx_t *impl, cudaStream_t waiter, cudaStream_t caller,
                                 const char *fn) {
  unsigned long long capture = capture_of(caller);
  int i = capture != 0;
  /* the per-thread default stream is one handle for a different stream in each thread */
  bool same_stream = impl->gemm_last_stream[i] == caller && caller != cudaStreamPerThread;
  if (!impl->gemm_done_valid[i] || same_stream || (i == 1 && impl->gemm_capture != capture))
    return TPLA_SUCCESS;
  CUDA_TRY(fn, cudaStreamWaitEvent(waiter, impl->gemm_done[i], 0));
  return TPLA_SUCCESS;
}

tpla_status_t tpla_lt_ctx_enter(tpla_cuda_ctx_t *impl, cudaStream_t stream, const char *fn) {
  return tpla_lt_ctx_follow(impl, stream, stream, fn);
}

tpla_status_t tpla_lt_ctx_leave(tpla_cuda_ctx_t *impl, cudaStream_t stream, const char *fn) {
  unsigned long long capture = capture_of(stream);
  int i = capture != 0;
  CUDA_TRY(fn, cudaEventRecord(impl->gemm_done[i], stream));
  impl->gemm_last_stream[i] = stream;
  impl->gemm_done_valid[i] = 1;
  if (i == 1)
    impl->gemm_capture = capture;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_lt_run_ctx(tpla_cuda_ctx_t *impl, tpla_lt_plan_t *p,
                              const tpla_lt_operands_t *ops, cudaStream_t stream, const char *fn,
                              const tpla_lt_what_t *what) {
  void *ws = NULL;
  size_t ws_bytes = 0;
  if (p->ws_needed > 0) {
    ws = impl->gemm_ws;
    ws_bytes = impl->gemm_ws_bytes;
    /* The one workspace must not serve two streams at once. */
    TPLA_TRY(tpla_lt_ctx_enter(impl, stream, fn));
  }
  TPLA_TRY(tpla_lt_plan_run(p, impl->lt, ops, ws, ws_bytes, stream, fn, what));
  if (ws != NULL)
    TPLA_TRY(tpla_lt_ctx_leave(impl, stream, fn));
  return TPLA_SUCCESS;
}

static tpla_status_t gemm_k0(tpla_ctx_t ctx, const tpla_gemm_call_t *g, const tpla_matrix_t *c,
                             cudaStream_t stream, const char *fn) {
  if (c != NULL) /* D = beta C */
    return tpla_cuda_axpby(ctx, g->d, *c, g->beta, 0.0f, g->batch, stream);
  if (g->beta == 1.0f)
    return TPLA_SUCCESS;
  return tpla_cuda_status(tpla_cuda_scale_matrix(g->d.data, g->d.dtype, g->m, g->n, g->d.ld,
                                                 g->beta, stream),
                          fn, "tpla_cuda_scale_matrix (k = 0: D = beta D)");
}

static tpla_status_t gemm_enqueue(tpla_ctx_t ctx, const tpla_gemm_call_t *g, cudaStream_t stream,
                                  const char *fn) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  const tpla_matrix_t *c = tpla_lt_separate_c(g); /* NULL: C is D */
  if (c != NULL && (tpla_lt_is_fp8(g->a.dtype) || c->dtype != g->d.dtype || c->rows != g->m ||
                    c->cols != g->n))
    return tpla_fail(TPLA_ERROR_INTERNAL, fn,
                     "C apart from D must be m x n = %" PRId64 "x%" PRId64 " of D's dtype %s "
                     "(is %" PRId64 "x%" PRId64 " %s), inputs not FP8 (%s)",
                     g->m, g->n, tpla_dtype_name(g->d.dtype), c->rows, c->cols,
                     tpla_dtype_name(c->dtype), tpla_dtype_name(g->a.dtype));
  if (g->batch.count > 1 &&
      (tpla_lt_is_fp8(g->a.dtype) || g->k == 0 || g->batch.stride == 0 || g->batch.stride % 256))
    return tpla_fail(TPLA_ERROR_INTERNAL, fn, "a batched GEMM needs half or fp32 inputs, k > 0 "
                     "and a stride that is a nonzero multiple of 256 bytes");
  if (tpla_lt_is_fp8(g->a.dtype))
    return tpla_cuda_gemm_fp8(ctx, g, stream, fn);
  if (g->k == 0)
    return gemm_k0(ctx, g, c, stream, fn);
  tpla_lt_key_t key;
  tpla_lt_key_from_call(&key, g); /* ldc and c_separate from c */
  /* the alignment of every row start, not only of the first (as the overlap
   * and FP8 paths do): the suspected cause of a misaligned-address fault on
   * 2 H200s (run 12) with a C apart from D, bf16 rows of odd ld */
  size_t stride = g->batch.count > 1 ? g->batch.stride : 0; /* every member's rows too */
  key.align_a = tpla_lt_alignment(g->a.data,
                                  (size_t)g->a.ld * tpla_dtype_size(g->a.dtype) | stride);
  key.align_b = tpla_lt_alignment(g->b.data,
                                  (size_t)g->b.ld * tpla_dtype_size(g->b.dtype) | stride);
  key.align_d = tpla_lt_alignment(g->d.data,
                                  (size_t)g->d.ld * tpla_dtype_size(g->d.dtype) | stride);
  key.align_c = c != NULL ? tpla_lt_alignment(c->data, (size_t)c->ld * tpla_dtype_size(c->dtype) |
                                                           stride)
                          : key.align_d;
  tpla_lt_operands_t ops = {.a = g->a.data, .b = g->b.data, .c = c != NULL ? c->data : NULL,
                            .d = g->d.data, .alpha = g->alpha, .beta = g->beta};
  tpla_lt_what_t what = {tpla_lt_describe_call, g};
  tpla_lt_plan_t *p;
  TPLA_TRY(tpla_lt_cache_plan(impl, &key, &ops, fn, &what, &p));
  return tpla_lt_run_ctx(impl, p, &ops, stream, fn, &what);
}

tpla_status_t tpla_cuda_gemm(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream) {
  static const char fn[] = "tpla_gemm";
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_status_t s = gemm_enqueue(ctx, call, (cudaStream_t)stream, fn);
  tpla_device_guard_exit(&guard);
  return s;
}

tpla_status_t tpla_cuda_gemm_cache_stats(tpla_ctx_t ctx, tpla_lt_cache_stats_t *stats) {
  static const char fn[] = "tpla_cuda_gemm_cache_stats";
  if (ctx == NULL || ctx->executor != TPLA_EXECUTOR_CUDA || stats == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "needs a context of the CUDA executor and an output pointer");
  const tpla_lt_cache_t *c = tpla_cuda_impl(ctx)->gemm_cache;
  stats->hits = c->hits;
  stats->misses = c->misses;
  stats->flushes = c->flushes;
  stats->entries = c->entries;
  return TPLA_SUCCESS;
}
