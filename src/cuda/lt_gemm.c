/*
 * lt_gemm.c - tpla_gemm on cuBLASLt with a per-context plan cache (see
 * lt_gemm.h).
 *
 * Row-major to column-major: a row-major r x c matrix with leading
 * dimension ld is, byte for byte, the column-major c x r matrix (its
 * transpose) with the same ld. So the row-major D = op(A) op(B) is computed
 * as the column-major D^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B with
 * our op_b, its "B" is our A with our op_a, and its m, n are our n, m.
 */
#include "lt_gemm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 512 /* power of two, twice the entry limit: short probes */
_Static_assert(CACHE_SLOTS >= 2 * TPLA_LT_CACHE_MAX_ENTRIES, "cache load factor");

/* Everything that can change the plan cuBLASLt picks. Fixed-width fields
 * with no padding, compared and hashed as bytes. */
typedef struct {
  int64_t m, n, k;
  int64_t lda, ldb, ldd;
  int32_t op_a, op_b;
  int32_t in_dtype, d_dtype;
  uint32_t align_a, align_b, align_d; /* bytes: largest power of two <= 256 */
  int32_t beta_zero, tf32;
  int32_t unused; /* keeps the size a multiple of 8, without padding */
} gemm_key_t;
_Static_assert(sizeof(gemm_key_t) == 6 * 8 + 10 * 4, "gemm_key_t must have no padding");

typedef struct {
  int used;
  gemm_key_t key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lay_a, lay_b, lay_d; /* cuBLASLt's A (our B), B (our A), C = D */
  cublasLtMatmulAlgo_t algo;
  size_t ws_needed;
} plan_t;

struct tpla_lt_cache {
  plan_t slots[CACHE_SLOTS];
  int entries;
  uint64_t hits, misses, flushes;
};

tpla_status_t tpla_lt_cache_create(tpla_lt_cache_t **cache, const char *fn) {
  *cache = calloc(1, sizeof **cache);
  if (*cache == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for the GEMM plan cache");
  return TPLA_SUCCESS;
}

static void plan_release(plan_t *p) {
  if (p->lay_d)
    (void)cublasLtMatrixLayoutDestroy(p->lay_d);
  if (p->lay_b)
    (void)cublasLtMatrixLayoutDestroy(p->lay_b);
  if (p->lay_a)
    (void)cublasLtMatrixLayoutDestroy(p->lay_a);
  if (p->desc)
    (void)cublasLtMatmulDescDestroy(p->desc);
  memset(p, 0, sizeof *p);
}

/* Descriptors are host objects that cublasLtMatmul reads while enqueuing,
 * so they may go while GEMMs that used them are still running. */
static void cache_flush(tpla_lt_cache_t *c) {
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (c->slots[i].used)
      plan_release(&c->slots[i]);
  c->entries = 0;
}

void tpla_lt_cache_destroy(tpla_lt_cache_t *cache) {
  if (cache == NULL)
    return;
  cache_flush(cache);
  free(cache);
}

static uint64_t key_hash(const gemm_key_t *k) { /* FNV-1a */
  const unsigned char *p = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof *k; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint32_t ptr_alignment(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uintptr_t low = a & (~a + 1); /* lowest set bit; 0 for NULL */
  return low == 0 || low > 256 ? 256u : (uint32_t)low;
}

static const char *op_name(tpla_op_t op) { return op == TPLA_OP_T ? "T" : "N"; }

/* "D(17x130 fp32, ld 131) = A(...)^T B(...)" for messages. */
static void describe(char *buf, size_t size, const tpla_gemm_call_t *g, int tf32) {
  snprintf(buf, size,
           "D(%" PRId64 "x%" PRId64 " %s, ld %" PRId64 ") = op_a(A(%" PRId64 "x%" PRId64
           " %s, ld %" PRId64 "), %s) op_b(B(%" PRId64 "x%" PRId64 ", ld %" PRId64
           "), %s), m=%" PRId64 " n=%" PRId64 " k=%" PRId64 ", beta %g%s",
           g->d.rows, g->d.cols, tpla_dtype_name(g->d.dtype), g->d.ld, g->a.rows, g->a.cols,
           tpla_dtype_name(g->a.dtype), g->a.ld, op_name(g->op_a), g->b.rows, g->b.cols,
           g->b.ld, op_name(g->op_b), g->m, g->n, g->k, (double)g->beta, tf32 ? ", tf32" : "");
}

/* Runs the heuristic for `key` and fills `p`. On failure `p` holds nothing. */
static tpla_status_t plan_create(plan_t *p, cublasLtHandle_t lt, size_t ws_bytes,
                                 const tpla_gemm_call_t *g, const gemm_key_t *key,
                                 const char *fn) {
  memset(p, 0, sizeof *p);
  cudaDataType_t in_type = tpla_cuda_datatype(g->a.dtype);
  cudaDataType_t d_type = tpla_cuda_datatype(g->d.dtype);
  cublasComputeType_t compute = key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  int32_t trans_a = g->op_b == TPLA_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A = our B */
  int32_t trans_b = g->op_a == TPLA_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B = our A */
  uint64_t max_ws = ws_bytes;
  /* cuBLASLt's A and B are our B and A, so their alignments swap too. */
  uint32_t align_lt_a = key->align_b, align_lt_b = key->align_a, align_d = key->align_d;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t result;
  int returned = 0;
  tpla_status_t s = TPLA_SUCCESS;
#define LT_STEP(call)                                     \
  do {                                                    \
    if (s == TPLA_SUCCESS)                                \
      s = tpla_cublas_status((call), fn, #call);          \
  } while (0)
  LT_STEP(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
  LT_STEP(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                         sizeof trans_a));
  LT_STEP(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                         sizeof trans_b));
  /* Stored (pre-op) shapes in column-major terms: rows = our cols. */
  LT_STEP(cublasLtMatrixLayoutCreate(&p->lay_a, in_type, (uint64_t)g->b.cols,
                                     (uint64_t)g->b.rows, g->b.ld));
  LT_STEP(cublasLtMatrixLayoutCreate(&p->lay_b, in_type, (uint64_t)g->a.cols,
                                     (uint64_t)g->a.rows, g->a.ld));
  LT_STEP(cublasLtMatrixLayoutCreate(&p->lay_d, d_type, (uint64_t)g->n, (uint64_t)g->m,
                                     g->d.ld));
  LT_STEP(cublasLtMatmulPreferenceCreate(&pref));
  LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &max_ws, sizeof max_ws));
  LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                               &align_lt_a, sizeof align_lt_a));
  LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                               &align_lt_b, sizeof align_lt_b));
  LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                               &align_d, sizeof align_d));
  LT_STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                               &align_d, sizeof align_d));
#undef LT_STEP
  if (s == TPLA_SUCCESS) {
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->lay_a, p->lay_b, p->lay_d,
                                                       p->lay_d, pref, 1, &result, &returned);
    char shape[400];
    bool none = hs == CUBLAS_STATUS_SUCCESS &&
                (returned < 1 || result.state != CUBLAS_STATUS_SUCCESS);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED || none) {
      describe(shape, sizeof shape, g, key->tf32);
      s = tpla_fail(TPLA_ERROR_NOT_SUPPORTED, fn,
                    "cuBLASLt found no algorithm for %s (alignments A %u, B %u, D %u bytes; "
                    "workspace %zu bytes)",
                    shape, key->align_a, key->align_b, key->align_d, ws_bytes);
    } else if (hs != CUBLAS_STATUS_SUCCESS) {
      describe(shape, sizeof shape, g, key->tf32);
      s = tpla_fail(TPLA_ERROR_CUBLAS, fn, "cublasLtMatmulAlgoGetHeuristic failed: %s (%s) for %s",
                    cublasLtGetStatusName(hs), cublasLtGetStatusString(hs), shape);
    }
  }
  if (pref)
    (void)cublasLtMatmulPreferenceDestroy(pref);
  if (s != TPLA_SUCCESS) {
    plan_release(p);
    return s;
  }
  p->algo = result.algo;
  p->ws_needed = result.workspaceSize;
  p->key = *key;
  p->used = 1;
  return TPLA_SUCCESS;
}

/* The cached plan for `key`, created on a miss. */
static tpla_status_t plan_lookup(tpla_cuda_ctx_t *impl, const tpla_gemm_call_t *g,
                                 const gemm_key_t *key, const char *fn, plan_t **out) {
  tpla_lt_cache_t *c = impl->gemm_cache;
  size_t mask = CACHE_SLOTS - 1, i = (size_t)key_hash(key) & mask;
  for (; c->slots[i].used; i = (i + 1) & mask)
    if (memcmp(&c->slots[i].key, key, sizeof *key) == 0) {
      c->hits++;
      *out = &c->slots[i];
      return TPLA_SUCCESS;
    }
  c->misses++;
  if (c->entries >= TPLA_LT_CACHE_MAX_ENTRIES) {
    cache_flush(c);
    c->flushes++;
    i = (size_t)key_hash(key) & mask; /* the table is empty: the home slot is free */
  }
  TPLA_TRY(plan_create(&c->slots[i], impl->lt, impl->gemm_ws_bytes, g, key, fn));
  c->entries++;
  *out = &c->slots[i];
  return TPLA_SUCCESS;
}

static tpla_status_t gemm_k0(const tpla_gemm_call_t *g, cudaStream_t stream, const char *fn) {
  if (g->beta == 1.0f)
    return TPLA_SUCCESS;
  return tpla_cuda_status(tpla_cuda_scale_matrix(g->d.data, g->d.dtype, g->m, g->n, g->d.ld,
                                                 g->beta, stream),
                          fn, "tpla_cuda_scale_matrix (k = 0: D = beta D)");
}

static tpla_status_t gemm_enqueue(tpla_ctx_t ctx, const tpla_gemm_call_t *g, cudaStream_t stream,
                                  const char *fn) {
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  if (g->k == 0)
    return gemm_k0(g, stream, fn);
  gemm_key_t key;
  memset(&key, 0, sizeof key);
  key.m = g->m;
  key.n = g->n;
  key.k = g->k;
  key.lda = g->a.ld;
  key.ldb = g->b.ld;
  key.ldd = g->d.ld;
  key.op_a = (int32_t)g->op_a;
  key.op_b = (int32_t)g->op_b;
  key.in_dtype = (int32_t)g->a.dtype;
  key.d_dtype = (int32_t)g->d.dtype;
  key.align_a = ptr_alignment(g->a.data);
  key.align_b = ptr_alignment(g->b.data);
  key.align_d = ptr_alignment(g->d.data);
  key.beta_zero = g->beta == 0.0f;
  key.tf32 = g->allow_tf32 && g->a.dtype == TPLA_FLOAT32;
  plan_t *p;
  TPLA_TRY(plan_lookup(impl, g, &key, fn, &p));

  void *ws = NULL;
  size_t ws_bytes = 0;
  if (p->ws_needed > 0) {
    ws = impl->gemm_ws;
    ws_bytes = impl->gemm_ws_bytes;
    /* The one workspace must not serve two streams at once. */
    if (impl->gemm_done_valid && impl->gemm_last_stream != stream)
      CUDA_TRY(fn, cudaStreamWaitEvent(stream, impl->gemm_done, 0));
  }
  float alpha = g->alpha, beta = g->beta;
  cublasStatus_t st = cublasLtMatmul(impl->lt, p->desc, &alpha, g->b.data, p->lay_a, g->a.data,
                                     p->lay_b, &beta, g->d.data, p->lay_d, g->d.data, p->lay_d,
                                     &p->algo, ws, ws_bytes, stream);
  if (st != CUBLAS_STATUS_SUCCESS) {
    char shape[400];
    describe(shape, sizeof shape, g, key.tf32);
    return tpla_fail(st == CUBLAS_STATUS_NOT_SUPPORTED ? TPLA_ERROR_NOT_SUPPORTED
                                                       : TPLA_ERROR_CUBLAS,
                     fn, "cublasLtMatmul failed: %s (%s) for %s", cublasLtGetStatusName(st),
                     cublasLtGetStatusString(st), shape);
  }
  if (ws != NULL) {
    CUDA_TRY(fn, cudaEventRecord(impl->gemm_done, stream));
    impl->gemm_last_stream = stream;
    impl->gemm_done_valid = 1;
  }
  return TPLA_SUCCESS;
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
