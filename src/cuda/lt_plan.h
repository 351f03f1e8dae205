/*
 * lt_plan.h - the one cuBLASLt plan builder of the CUDA executor: a key that
 * holds everything which can change the algorithm cuBLASLt picks for a
 * row-major GEMM, a plan (matmul descriptor, matrix layouts, the algorithm
 * of the heuristic, its workspace need) built from a key, and the call that
 * runs a plan with this call's pointers. tpla_gemm's per-context cache
 * (lt_gemm.c) and the overlap transport's per-plan cache (transport_gemm.c)
 * both key and build through here; only their caches differ.
 *
 * Row-major to column-major: a row-major r x c matrix with leading
 * dimension ld is, byte for byte, the column-major c x r matrix (its
 * transpose) with the same ld. So the row-major D = op(A) op(B) is computed
 * as the column-major D^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B with
 * our op_b, its "B" is our A with our op_a, and its m, n are our n, m.
 *
 * FP8 (cuBLASLt, cublasLtMatmul "FP8" requirements, as quoted by NVIDIA in
 * github.com/NVIDIA/CUDALibrarySamples issues 172 and 242): compute type
 * CUBLAS_COMPUTE_32F, scale type CUDA_R_32F, cuBLASLt's A transposed and its
 * B not ("TN") on compute capability 8.9/9.0, pointers and dimensions
 * 16-byte aligned. In our terms TN is op_a = N (A stored m x k) and op_b = T
 * (B stored n x k). An FP8 D takes a C of type bf16 (fp16 and bf16 are the C
 * types the FP8 output rows of the cuBLASLt type table list; C is not read
 * since an FP8 D needs beta = 0, so C is passed as NULL, as Transformer
 * Engine does). The scale and amax pointers are per-call values: the key
 * records only which are present (an amax changes the kernel's epilogue),
 * tpla_lt_plan_run sets them on the descriptor before each cublasLtMatmul.
 */
#ifndef TPLA_CUDA_LT_PLAN_H
#define TPLA_CUDA_LT_PLAN_H

#include "cuda_util.h"

/* Bits of tpla_lt_key_t.fp8_pointers: which FP8 pointers a call passes. */
enum {
  TPLA_LT_A_SCALE = 1,
  TPLA_LT_B_SCALE = 2,
  TPLA_LT_D_SCALE = 4,
  TPLA_LT_D_AMAX = 8 /* cuBLASLt's AMAX_D: FP8 D only (see lt_plan.c) */
};

/* Everything that can change the plan cuBLASLt picks, in row-major terms.
 * Fixed-width fields with no padding: compared and hashed as bytes, so
 * zero it (memset or tpla_lt_key_from_call) before filling. */
typedef struct {
  int64_t m, n, k;
  int64_t lda, ldb, ldc, ldd; /* ldc: C's when c_separate, else ldd */
  int32_t op_a, op_b;
  int32_t a_dtype, b_dtype, d_dtype; /* C has d_dtype (bf16 for an FP8 D) */
  uint32_t align_a, align_b, align_c, align_d; /* bytes, powers of two <= 256 */
  int32_t beta_zero, tf32;
  int32_t bias;       /* CUBLASLT_EPILOGUE_BIAS: a vector of n elements of d_dtype */
  int32_t c_separate; /* C is its own matrix (ldc, align_c), not D */
  int32_t fast_accum; /* FP8: CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1 */
  int32_t fp8_pointers; /* FP8: TPLA_LT_* bits */
  int32_t batch;      /* strided batch: members (0 or 1: one GEMM) */
  int64_t stride_a, stride_b, stride_c, stride_d; /* elements between members */
} tpla_lt_key_t;
_Static_assert(sizeof(tpla_lt_key_t) == 11 * 8 + 16 * 4, "tpla_lt_key_t must have no padding");

/* The pointers of one call (ours: a is A, b is B). c NULL: C is D. */
typedef struct {
  const void *a, *b, *c;
  void *d;
  float alpha, beta;
  const void *bias;
  const float *a_scale, *b_scale, *d_scale;
  float *d_amax;
} tpla_lt_operands_t;

typedef struct {
  tpla_lt_key_t key;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lay_a, lay_b; /* cuBLASLt's A (our B) and B (our A) */
  cublasLtMatrixLayout_t lay_c;        /* NULL: C has D's layout */
  cublasLtMatrixLayout_t lay_d;
  cublasLtMatmulAlgo_t algo;
  size_t ws_needed;
} tpla_lt_plan_t;

/* Writes what a GEMM is for an error message (e.g. the call's shapes); run
 * only when a message is made, so the per-call path formats nothing. */
typedef struct {
  void (*describe)(char *buf, size_t size, const void *arg);
  const void *arg;
} tpla_lt_what_t;

/* True for TPLA_FLOAT8_E4M3 and TPLA_FLOAT8_E5M2. */
static inline bool tpla_lt_is_fp8(tpla_dtype_t t) {
  return t == TPLA_FLOAT8_E4M3 || t == TPLA_FLOAT8_E5M2;
}

/* Largest power of two (<= 256) dividing the address and `extra` (e.g. the
 * leading dimension in bytes, or 0 to look at the address alone); 256 for
 * NULL. */
uint32_t tpla_lt_alignment(const void *ptr, size_t extra);

/* The call's C when it is read and is not D (call->c set, beta != 0, not
 * the view D itself), else NULL: C is D. */
const tpla_matrix_t *tpla_lt_separate_c(const tpla_gemm_call_t *call);

/* Fills the key's shape, op, leading dimension, dtype, beta and TF32 fields,
 * the batch and its strides, C's ld and c_separate (tpla_lt_separate_c) and, for FP8 inputs,
 * fast_accum and fp8_pointers from a validated call; zeroes the rest
 * (alignments, bias: the caller's to set; a caller with its own C, as the
 * overlap transport, sets ldc and c_separate too). */
void tpla_lt_key_from_call(tpla_lt_key_t *key, const tpla_gemm_call_t *call);

/* "m=.. n=.. k=.. A e4m3 op N ld .., B ..., D bf16 ld .., beta 0, ..." for
 * messages. */
void tpla_lt_key_describe(char *buf, size_t size, const tpla_lt_key_t *key);

/* Builds the plan of `key`: descriptor, layouts, and the heuristic's best
 * algorithm for at most ws_bytes of workspace. `first` gives the pointers
 * the heuristic may look at (bias, scales, amax); NULL for none. On failure
 * (NOT_SUPPORTED when cuBLASLt has no algorithm, with the key in the
 * message, prefixed by `what`) *p holds nothing. */
tpla_status_t tpla_lt_plan_build(tpla_lt_plan_t *p, cublasLtHandle_t lt, size_t ws_bytes,
                                 const tpla_lt_key_t *key, const tpla_lt_operands_t *first,
                                 const char *fn, const tpla_lt_what_t *what);
/* Times the heuristic's first 8 algorithms for the plan's key (the build's preferences) on
 * `ops` and `stream` (median of 5 calls after one, CUDA events; the host waits for each) and
 * keeps the fastest in p->algo and p->ws_needed (ws: ws_bytes of workspace); result 0 stays
 * unless another is more than 2% faster. The GEMMs write ops->d (and read C): only for
 * operands whose contents do not matter, as plan-time scratch. */
tpla_status_t tpla_lt_plan_tune(tpla_lt_plan_t *p, cublasLtHandle_t lt, size_t ws_bytes,
                                const tpla_lt_operands_t *ops, void *ws, cudaStream_t stream,
                                const char *fn);
/* Destroys what the plan holds (a zeroed plan is fine) and zeroes it.
 * Descriptors are host objects read while a GEMM is enqueued, so a plan may
 * go while GEMMs that used it still run. */
void tpla_lt_plan_release(tpla_lt_plan_t *p);

/* Enqueues one GEMM of the plan on `stream`: sets this call's bias, scale
 * and amax pointers on the descriptor where the key says the plan has them,
 * then cublasLtMatmul with workspace ws (ws_bytes; NULL/0 when the plan
 * needs none). Errors name `what`. */
tpla_status_t tpla_lt_plan_run(tpla_lt_plan_t *p, cublasLtHandle_t lt,
                               const tpla_lt_operands_t *ops, void *ws, size_t ws_bytes,
                               cudaStream_t stream, const char *fn, const tpla_lt_what_t *what);

#endif /* TPLA_CUDA_LT_PLAN_H */
