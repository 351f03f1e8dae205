/*
 * lt_gemm.h - tpla_gemm on cuBLASLt: row-major GEMMs through the column-major
 * operand swap, with a per-context cache of plans (lt_plan.h: matmul
 * descriptor, matrix layouts and the algorithm the heuristic chose) keyed by
 * everything that can change the choice, so each shape pays for the
 * heuristic once and an execute call only enqueues cublasLtMatmul. FP8
 * inputs take lt_fp8.c, which stages operands cuBLASLt's FP8 kernels cannot
 * read as they are.
 */
#ifndef TPLA_CUDA_LT_GEMM_H
#define TPLA_CUDA_LT_GEMM_H

#include "cuda_ctx.h"
#include "lt_plan.h"

/* Plans kept per context; when full, the cache is emptied and refilled
 * (a flush), which keeps it bounded with no per-entry bookkeeping. */
#define TPLA_LT_CACHE_MAX_ENTRIES 256

tpla_status_t tpla_lt_cache_create(tpla_lt_cache_t **cache, const char *fn);
void tpla_lt_cache_destroy(tpla_lt_cache_t *cache);

/* The backend's gemm: arguments are validated by tpla_gemm (api.c);
 * m, n > 0 here. Never synchronizes; allocates device memory only when
 * FP8 staging grows the context's scratch (refused in a captured stream). */
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

/* ---- shared by lt_gemm.c and lt_fp8.c -------------------------------------- */

/* The context's cached plan for `key`, built on a miss (the heuristic may
 * look at first's pointers). Counts a hit or a miss. */
tpla_status_t tpla_lt_cache_plan(tpla_cuda_ctx_t *impl, const tpla_lt_key_t *key,
                                 const tpla_lt_operands_t *first, const char *fn,
                                 const tpla_lt_what_t *what, tpla_lt_plan_t **out);

/* The context's GEMM workspace and its FP8 staging scratch serve one stream
 * at a time: enter makes `stream` wait for the last GEMM that used them on
 * another stream (gemm_done), leave records gemm_done on `stream`; follow
 * makes `waiter` (a lane forked from `caller`) wait for it unless it ran on
 * `caller`. Captured and uncaptured GEMMs keep separate records, and a wait
 * happens only within one capture state (both uncaptured, or both in the
 * same capture): CUDA invalidates a capture that waits on a record made
 * outside it (run 151) and refuses an uncaptured wait on a captured record.
 * A graph's launch is ordered against the context's other work by the
 * caller (docs/API.md, "CUDA graphs"). One capture at a time per context:
 * a GEMM of one capture does not wait for another open capture's. */
tpla_status_t tpla_lt_ctx_follow(tpla_cuda_ctx_t *impl, cudaStream_t waiter, cudaStream_t caller,
                                 const char *fn);
tpla_status_t tpla_lt_ctx_enter(tpla_cuda_ctx_t *impl, cudaStream_t stream, const char *fn);
tpla_status_t tpla_lt_ctx_leave(tpla_cuda_ctx_t *impl, cudaStream_t stream, const char *fn);

/* Runs a plan on `stream` with the context's workspace when it needs one,
 * entering and leaving around it. */
tpla_status_t tpla_lt_run_ctx(tpla_cuda_ctx_t *impl, tpla_lt_plan_t *p,
                              const tpla_lt_operands_t *ops, cudaStream_t stream, const char *fn,
                              const tpla_lt_what_t *what);

/* "D(17x130 fp32, ld 131) = op_a(A(...), N) op_b(B(...), T), m=.." of a
 * tpla_gemm_call_t, for tpla_lt_what_t. */
void tpla_lt_describe_call(char *buf, size_t size, const void *call);

/* tpla_gemm of FP8 A and B (lt_fp8.c). */
tpla_status_t tpla_cuda_gemm_fp8(tpla_ctx_t ctx, const tpla_gemm_call_t *call,
                                 cudaStream_t stream, const char *fn);

/* D (rows x cols, ld, fp32/fp16/bf16) *= beta on `stream`; beta == 0 writes
 * zeros without reading D. The k = 0 case of a GEMM. (scale_kernel.cu) */
cudaError_t tpla_cuda_scale_matrix(void *d, tpla_dtype_t dtype, int64_t rows, int64_t cols,
                                   int64_t ld, float beta, cudaStream_t stream);

#endif /* TPLA_CUDA_LT_GEMM_H */
