/*
 * transport_gemm.c - GEMMs and folds on the lanes of the CUDA overlap
 * transport. A GEMM on compute lane L uses half L of the context's cuBLASLt
 * workspace, so the two compute lanes run GEMMs at the same time (a chunk's
 * tail overlaps the next chunk's start); transport.c orders the halves with
 * the context's own GEMMs. Plans (descriptor, layouts, algorithm) are cached
 * per transport, keyed like src/cuda/lt_gemm.c (row-major through the
 * operand swap: cuBLASLt's A is our B), plus the bias epilogue and a C
 * apart from D: D = alpha op(A) op(B) + beta C + bias, bias broadcast over
 * rows (cuBLASLt's column vector of our n); C = a received partial lets the
 * GEMM of the own rows add it in its epilogue instead of a separate pass.
 * The folds launch transport_kernels.cu.
 */
#include "transport.h"
#include "transport_kernels.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XG_SLOTS 32 /* distinct GEMM shapes of one plan: a few per chunk size */

typedef struct {
  int64_t m, n, k, lda, ldb, ldd, ldc;
  int32_t op_a, op_b, in_dtype, d_dtype;
  uint32_t align_a, align_b, align_d, align_c;
  int32_t beta_zero, tf32, bias, c_sep; /* c_sep: C is its own matrix, not D */
} xg_key_t;
_Static_assert(sizeof(xg_key_t) == 7 * 8 + 12 * 4, "xg_key_t has padding");

typedef struct {
  int used;
  xg_key_t key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lay_a, lay_b, lay_c, lay_d; /* lay_c: only when C is not D */
  cublasLtMatmulAlgo_t algo;
  size_t ws_needed;
} xg_plan_t;

struct xg_cache {
  xg_plan_t slots[XG_SLOTS];
  int next; /* round-robin victim when full */
};

tpla_status_t xg_cache_create(xg_cache_t **cache, const char *fn) {
  *cache = calloc(1, sizeof **cache);
  if (*cache == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory for GEMM plans");
  return TPLA_SUCCESS;
}

/* Descriptors are read while a GEMM is enqueued, so they may go while it runs. */
static void plan_release(xg_plan_t *p) {
  if (p->lay_d)
    (void)cublasLtMatrixLayoutDestroy(p->lay_d);
  if (p->lay_c)
    (void)cublasLtMatrixLayoutDestroy(p->lay_c);
  if (p->lay_b)
    (void)cublasLtMatrixLayoutDestroy(p->lay_b);
  if (p->lay_a)
    (void)cublasLtMatrixLayoutDestroy(p->lay_a);
  if (p->desc)
    (void)cublasLtMatmulDescDestroy(p->desc);
  memset(p, 0, sizeof *p);
}

void xg_cache_destroy(xg_cache_t *cache) {
  if (cache == NULL)
    return;
  for (int i = 0; i < XG_SLOTS; i++)
    if (cache->slots[i].used)
      plan_release(&cache->slots[i]);
  free(cache);
}

static uint32_t alignment(const void *p, int64_t ld, tpla_dtype_t t) {
  uintptr_t a = (uintptr_t)p | (uintptr_t)((size_t)ld * tpla_dtype_size(t));
  uintptr_t low = a & (~a + 1);
  return low == 0 || low > 256 ? 256u : (uint32_t)low;
}

static tpla_status_t plan_create(xg_plan_t *p, const tpla_xport_t *xp, const tpla_gemm_call_t *g,
                                 const xg_key_t *key) {
  const char *fn = xp->fn;
  memset(p, 0, sizeof *p);
  cudaDataType_t in = tpla_cuda_datatype(g->a.dtype), out = tpla_cuda_datatype(g->d.dtype);
  cublasComputeType_t compute = key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  int32_t ta = g->op_b == TPLA_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t tb = g->op_a == TPLA_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint64_t max_ws = xp->gemm_ws_bytes;
  uint32_t al_a = key->align_b, al_b = key->align_a, al_c = key->align_c, al_d = key->align_d;
  cublasLtEpilogue_t epi = key->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res;
  int returned = 0;
  tpla_status_t s = TPLA_SUCCESS;
#define LT(call)                                            \
  do {                                                      \
    if (s == TPLA_SUCCESS)                                  \
      s = tpla_cublas_status((call), fn, #call);            \
  } while (0)
  LT(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
  LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  LT(cublasLtMatrixLayoutCreate(&p->lay_a, in, (uint64_t)g->b.cols, (uint64_t)g->b.rows,
                                g->b.ld));
  LT(cublasLtMatrixLayoutCreate(&p->lay_b, in, (uint64_t)g->a.cols, (uint64_t)g->a.rows,
                                g->a.ld));
  LT(cublasLtMatrixLayoutCreate(&p->lay_d, out, (uint64_t)g->n, (uint64_t)g->m, g->d.ld));
  if (key->c_sep)
    LT(cublasLtMatrixLayoutCreate(&p->lay_c, out, (uint64_t)g->n, (uint64_t)g->m, key->ldc));
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                          sizeof max_ws));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                          sizeof al_a));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                          sizeof al_b));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                          sizeof al_c));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                          sizeof al_d));
#undef LT
  if (s == TPLA_SUCCESS) {
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(xp->impl->lt, p->desc, p->lay_a, p->lay_b,
                                                       key->c_sep ? p->lay_c : p->lay_d,
                                                       p->lay_d, pref, 1, &res, &returned);
    if (hs != CUBLAS_STATUS_SUCCESS || returned < 1 || res.state != CUBLAS_STATUS_SUCCESS)
      s = tpla_fail(hs == CUBLAS_STATUS_SUCCESS || hs == CUBLAS_STATUS_NOT_SUPPORTED
                        ? TPLA_ERROR_NOT_SUPPORTED
                        : TPLA_ERROR_CUBLAS,
                    fn, "cuBLASLt found no algorithm for an overlap GEMM chunk: m=%" PRId64
                    " n=%" PRId64 " k=%" PRId64 " lda=%" PRId64 " ldb=%" PRId64 " ldd=%" PRId64
                    " %s x %s -> %s%s, alignments %u/%u/%u, workspace %zu (%s)",
                    g->m, g->n, g->k, g->a.ld, g->b.ld, g->d.ld, tpla_dtype_name(g->a.dtype),
                    tpla_dtype_name(g->b.dtype), tpla_dtype_name(g->d.dtype),
                    key->bias ? ", bias epilogue" : "", key->align_a, key->align_b,
                    key->align_d, xp->gemm_ws_bytes, cublasLtGetStatusName(hs));
  }
  if (pref)
    (void)cublasLtMatmulPreferenceDestroy(pref);
  if (s != TPLA_SUCCESS) {
    plan_release(p);
    return s;
  }
  p->algo = res.algo;
  p->ws_needed = res.workspaceSize;
  p->key = *key;
  p->used = 1;
  return TPLA_SUCCESS;
}

static tpla_status_t lookup(tpla_xport_t *xp, const tpla_gemm_call_t *g, const xg_key_t *key,
                            xg_plan_t **out) {
  xg_cache_t *c = xp->gemm_cache;
  for (int i = 0; i < XG_SLOTS; i++)
    if (c->slots[i].used && memcmp(&c->slots[i].key, key, sizeof *key) == 0) {
      *out = &c->slots[i];
      return TPLA_SUCCESS;
    }
  int i = 0;
  while (i < XG_SLOTS && c->slots[i].used)
    i++;
  if (i == XG_SLOTS) {
    i = c->next;
    c->next = (c->next + 1) % XG_SLOTS;
    plan_release(&c->slots[i]);
  }
  TPLA_TRY(plan_create(&c->slots[i], xp, g, key));
  *out = &c->slots[i];
  return TPLA_SUCCESS;
}

tpla_status_t xp_fold(tpla_xport_t *xp, int lane, const ovl_fold_t *f) {
  cudaError_t e = tpla_launch_fold(f->y, f->beta, f->slots, f->slot_stride, f->nslots, f->bias,
                                   f->y2, xp_lane_stream(xp, lane));
  if (e == cudaSuccess)
    return TPLA_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "the fold kernel (%lldx%lld %s, %d slots, rank %d)",
           (long long)f->y.rows, (long long)f->y.cols, tpla_dtype_name(f->y.dtype), f->nslots,
           xp->rank);
  return tpla_cuda_status(e, xp->fn, what);
}

tpla_status_t xp_gemm(tpla_xport_t *xp, int lane, const tpla_gemm_call_t *g, const void *bias,
                      const tpla_matrix_t *c) {
  if (g->k == 0) { /* D = beta C + bias: a fold (C apart from D: a dense slot, beta 1) */
    if (c != NULL && (g->beta != 1.0f || (c->rows > 1 && c->ld != c->cols)))
      return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "k = 0 with a C other than D needs a "
                       "dense C and beta 1");
    ovl_fold_t f = {g->d, c ? 0.0f : g->beta, c ? c->data : NULL, 0, c ? 1 : 0, bias,
                    {NULL, 0, 0, 1, g->d.dtype}};
    return xp_fold(xp, lane, &f);
  }
  /* bias through the epilogue when its pointer suits TMA-era kernels, else by a fold */
  bool epi_bias = bias != NULL && ((uintptr_t)bias & 15) == 0;
  xg_key_t key;
  memset(&key, 0, sizeof key);
  key.m = g->m, key.n = g->n, key.k = g->k;
  key.lda = g->a.ld, key.ldb = g->b.ld, key.ldd = g->d.ld, key.ldc = c ? c->ld : g->d.ld;
  key.c_sep = c != NULL;
  key.op_a = (int32_t)g->op_a, key.op_b = (int32_t)g->op_b;
  key.in_dtype = (int32_t)g->a.dtype, key.d_dtype = (int32_t)g->d.dtype;
  key.align_a = alignment(g->a.data, g->a.ld, g->a.dtype);
  key.align_b = alignment(g->b.data, g->b.ld, g->b.dtype);
  key.align_d = alignment(g->d.data, g->d.ld, g->d.dtype);
  key.align_c = c ? alignment(c->data, c->ld, g->d.dtype) : key.align_d;
  key.beta_zero = g->beta == 0.0f;
  key.tf32 = g->allow_tf32 && g->a.dtype == TPLA_FLOAT32;
  key.bias = epi_bias;
  xg_plan_t *p;
  tpla_status_t found = lookup(xp, g, &key, &p);
  if (found == TPLA_ERROR_NOT_SUPPORTED && epi_bias) { /* no kernel with the epilogue: fold */
    tpla_clear_error();
    epi_bias = false;
    key.bias = 0;
    found = lookup(xp, g, &key, &p);
  }
  TPLA_TRY(found);
  if (epi_bias)
    CUBLAS_TRY(xp->fn, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &bias, sizeof bias));
  int half = lane == OVL_LANE_COMPUTE1 ? 1 : 0;
  void *ws = p->ws_needed > 0 ? xp->gemm_ws[half] : NULL;
  size_t ws_bytes = p->ws_needed > 0 ? xp->gemm_ws_bytes : 0;
  if (ws != NULL && lane != OVL_LANE_COMPUTE0 && lane != OVL_LANE_COMPUTE1)
    return tpla_fail(TPLA_ERROR_INTERNAL, xp->fn, "a GEMM needing workspace on lane %d", lane);
  float alpha = g->alpha, beta = g->beta;
  cudaStream_t st = xp_lane_stream(xp, lane);
  cublasStatus_t cs = cublasLtMatmul(xp->impl->lt, p->desc, &alpha, g->b.data, p->lay_a,
                                     g->a.data, p->lay_b, &beta, c ? c->data : g->d.data,
                                     c ? p->lay_c : p->lay_d, g->d.data, p->lay_d, &p->algo, ws,
                                     ws_bytes, st);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return tpla_fail(cs == CUBLAS_STATUS_NOT_SUPPORTED ? TPLA_ERROR_NOT_SUPPORTED
                                                       : TPLA_ERROR_CUBLAS,
                     xp->fn, "cublasLtMatmul failed: %s for an overlap GEMM chunk m=%" PRId64
                     " n=%" PRId64 " k=%" PRId64 " (rank %d, lane %d)",
                     cublasLtGetStatusName(cs), g->m, g->n, g->k, xp->rank, lane);
  if (bias != NULL && !epi_bias) {
    ovl_fold_t f = {g->d, 1.0f, NULL, 0, 0, bias, {NULL, 0, 0, 1, g->d.dtype}};
    return xp_fold(xp, lane, &f);
  }
  return TPLA_SUCCESS;
}
