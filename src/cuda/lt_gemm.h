/*
 * lt_gemm.h - tpla_gemm on cuBLASLt: row-major GEMMs through the column-major
 * operand swap, with a per-context cache of plans (matmul descriptor, the
 * three matrix layouts and the algorithm the heuristic chose) keyed by
 * everything that can change the choice, so each shape pays for the
 * heuristic once and an execute call only enqueues cublasLtMatmul.
 */
#ifndef TPLA_CUDA_LT_GEMM_H
#define TPLA_CUDA_LT_GEMM_H

#include "cuda_ctx.h"

/* Plans kept per context; when full, the cache is emptied and refilled
 * (a flush), which keeps it bounded with no per-entry bookkeeping. */
#define TPLA_LT_CACHE_MAX_ENTRIES 256

tpla_status_t tpla_lt_cache_create(tpla_lt_cache_t **cache, const char *fn);
void tpla_lt_cache_destroy(tpla_lt_cache_t *cache);

/* The backend's gemm: arguments are validated by tpla_gemm (api.c);
 * m, n > 0 here. Never synchronizes, never allocates device memory. */
tpla_status_t tpla_cuda_gemm(tpla_ctx_t ctx, const tpla_gemm_call_t *call, void *stream);

/* Counters of the plan cache, for tests and diagnostics. */
typedef struct {
  uint64_t hits;    /* calls that reused a cached plan */
  uint64_t misses;  /* calls that ran the heuristic */
  uint64_t flushes; /* times the full cache was emptied */
  int entries;      /* plans held now */
} tpla_lt_cache_stats_t;

/* INVALID_ARGUMENT unless ctx is a CUDA-executor context. */
tpla_status_t tpla_cuda_gemm_cache_stats(tpla_ctx_t ctx, tpla_lt_cache_stats_t *stats);

/* D (rows x cols, ld, fp32/fp16/bf16) *= beta on `stream`; beta == 0 writes
 * zeros without reading D. The k = 0 case of a GEMM. (scale_kernel.cu) */
cudaError_t tpla_cuda_scale_matrix(void *d, tpla_dtype_t dtype, int64_t rows, int64_t cols,
                                   int64_t ld, float beta, cudaStream_t stream);

#endif /* TPLA_CUDA_LT_GEMM_H */
