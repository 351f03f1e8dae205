/*
 * lt_fp8.c - tpla_gemm of FP8 operands (E4M3/E5M2) on cuBLASLt.
 *
 * cuBLASLt's FP8 kernels on compute capability 8.9/9.0 take only the "TN"
 * layout, 16-byte aligned pointers and dimensions (cuBLAS documentation,
 * cublasLtMatmul, "To use FP8 kernels ...", quoted by NVIDIA in
 * github.com/NVIDIA/CUDALibrarySamples issues 172 and 242; with
 * CUBLASLT_LOG_LEVEL=5 the heuristic says e.g. "Unsupported M dimension for
 * FP8 matrix multiplication. M must be divisible by 16", vllm-project/vllm
 * pull 4691). In our row-major terms (lt_plan.h) that is: A stored m x k
 * (op_a N), B stored n x k (op_b T), every pointer and row 16-byte aligned,
 * and m, n, k multiples of 16. A call that does not fit is reshaped, never
 * refused:
 *  - A and B are staged into the context's scratch as A' (m16 x k16) and
 *    B' (n16 x k16), transposed where the op asks, with zero rows and
 *    columns up to the next multiples of 16 (zeros add nothing to a dot
 *    product, and rows of zeros give rows of zeros in D');
 *  - when m or n is not a multiple of 16 or D is not aligned, cuBLASLt
 *    writes D' (m16 x n16) in the scratch (filled from D first when beta is
 *    not 0) and D' is copied into D afterwards.
 * An aligned TN call (what training code passes: activations m x k,
 * weights n x k, sizes multiples of 16) runs with no extra pass.
 *
 * amax: cuBLASLt's AMAX_D_POINTER (max |alpha a_scale b_scale op(A) op(B) +
 * beta D| before d_scale) is set for an FP8 D; cuBLAS computes it for FP8
 * outputs only (pytorch/pytorch pull 122821), so for a bf16/fp16/fp32 D
 * fp8_kernels.cu takes max |D| of the stored result afterwards (its
 * rounding to D's dtype is the one difference). The zero padding of D'
 * cannot raise a finite amax; with an infinite input its 0 * inf is NaN,
 * and the amax is NaN there as it is unpadded (run 206; API.md).
 *
 * Why the scratch is safe: the context's grow-only scratch (workspace.h) is
 * used by no other path of the library; the tests that borrow it through
 * tpla_cuda_ctx_scratch do not hold it across a tpla_gemm. Work on the
 * caller's stream is ordered by the stream itself, so a staged call and the
 * next call on the same stream never overlap. Calls on different streams
 * are ordered through the context's gemm_done event, as for the cuBLASLt
 * workspace (tpla_lt_ctx_enter before the scratch is touched or grown, so
 * a growth's cudaFreeAsync of the old buffer also follows the last use on
 * the other stream; tpla_lt_ctx_leave after the last use).
 */
#include "fp8_kernels.h"
#include "lt_gemm.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define FP8_QUANTUM 16    /* bytes and elements: cuBLASLt's FP8 alignment rule */
#define REGION_ALIGN 256  /* scratch regions start at multiples of this */

static int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }
static size_t round_region(size_t x) {
  return (x + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
}

static bool rows_aligned(const tpla_matrix_t *x) {
  size_t es = tpla_dtype_size(x->dtype);
  return (uintptr_t)x->data % FP8_QUANTUM == 0 && ((size_t)x->ld * es) % FP8_QUANTUM == 0;
}

/* How a call is reshaped: `run` is the GEMM cuBLASLt runs (staged
 * operands have NULL data until the scratch is reserved). */
typedef struct {
  const tpla_gemm_call_t *call;
  tpla_gemm_call_t run;
  bool stage_a, stage_b, pad_d;
  size_t a_off, b_off, d_off, bytes; /* scratch regions; bytes = 0: none */
} fp8_shape_t;

static void fp8_shape(fp8_shape_t *s, const tpla_gemm_call_t *c) {
  memset(s, 0, sizeof *s);
  s->call = c;
  int64_t m16 = round_up(c->m, FP8_QUANTUM), n16 = round_up(c->n, FP8_QUANTUM);
  int64_t k16 = round_up(c->k, FP8_QUANTUM);
  bool pad_m = m16 != c->m, pad_n = n16 != c->n, pad_k = k16 != c->k;
  s->stage_a = c->op_a != TPLA_OP_N || pad_m || pad_k || !rows_aligned(&c->a);
  s->stage_b = c->op_b != TPLA_OP_T || pad_n || pad_k || !rows_aligned(&c->b);
  s->pad_d = pad_m || pad_n || !rows_aligned(&c->d);
  s->run = *c;
  s->run.m = m16;
  s->run.n = n16;
  s->run.k = k16;
  size_t off = 0;
  if (s->stage_a) {
    s->run.a = (tpla_matrix_t){NULL, m16, k16, k16, c->a.dtype};
    s->run.op_a = TPLA_OP_N;
    s->a_off = off;
    off += round_region((size_t)(m16 * k16));
  }
  if (s->stage_b) {
    s->run.b = (tpla_matrix_t){NULL, n16, k16, k16, c->b.dtype};
    s->run.op_b = TPLA_OP_T;
    s->b_off = off;
    off += round_region((size_t)(n16 * k16));
  }
  if (s->pad_d) {
    s->run.d = (tpla_matrix_t){NULL, m16, n16, n16, c->d.dtype};
    s->d_off = off;
    off += round_region((size_t)(m16 * n16) * tpla_dtype_size(c->d.dtype));
  }
  s->bytes = off;
}

static void describe_fp8(char *buf, size_t size, const void *arg) {
  const fp8_shape_t *s = arg;
  char call[360];
  tpla_lt_describe_call(call, sizeof call, s->call);
  snprintf(call + strlen(call), sizeof call - strlen(call), ", %s accumulation",
           s->call->fp8.accum == TPLA_FP8_ACCUM_FAST ? "fast" : "split");
  snprintf(buf, size, "%s (run as m=%" PRId64 " n=%" PRId64 " k=%" PRId64 "%s%s%s)", call,
           s->run.m, s->run.n, s->run.k, s->stage_a ? ", A staged" : "",
           s->stage_b ? ", B staged" : "", s->pad_d ? ", D through a padded buffer" : "");
}

/* k = 0: D = beta D (an FP8 D has beta 0: zeros), and its amax. */
static tpla_status_t fp8_k0(const tpla_gemm_call_t *g, cudaStream_t stream, const char *fn) {
  if (tpla_lt_is_fp8(g->d.dtype))
    CUDA_TRY(fn, tpla_cuda_zero_2d(g->d.data, (size_t)g->d.ld, (size_t)g->n, (size_t)g->m,
                                   stream));
  else if (g->beta != 1.0f)
    CUDA_TRY(fn, tpla_cuda_scale_matrix(g->d.data, g->d.dtype, g->m, g->n, g->d.ld, g->beta,
                                        stream));
  if (g->fp8.d_amax != NULL)
    CUDA_TRY(fn, tpla_cuda_amax(g->fp8.d_amax, g->d.data, g->d.dtype, g->m, g->n, g->d.ld, 0,
                                stream));
  return TPLA_SUCCESS;
}

/* Fills the staged operands and D' from the caller's matrices. */
static tpla_status_t stage_inputs(const fp8_shape_t *s, cudaStream_t stream, const char *fn) {
  const tpla_gemm_call_t *c = s->call;
  const tpla_gemm_call_t *r = &s->run;
  if (s->stage_a) /* A' = op(A), m x k in the corner of m16 x k16 */
    CUDA_TRY(fn, tpla_cuda_stage_bytes(r->a.data, r->a.ld, r->a.rows, r->a.cols, c->a.data,
                                       c->a.ld, c->a.rows, c->a.cols, c->op_a == TPLA_OP_T,
                                       stream));
  if (s->stage_b) /* B' = op(B)^T, n x k: B itself when op_b = T */
    CUDA_TRY(fn, tpla_cuda_stage_bytes(r->b.data, r->b.ld, r->b.rows, r->b.cols, c->b.data,
                                       c->b.ld, c->b.rows, c->b.cols, c->op_b == TPLA_OP_N,
                                       stream));
  if (s->pad_d && c->beta != 0.0f) { /* C = D': D in its corner, zeros around it */
    size_t es = tpla_dtype_size(c->d.dtype);
    CUDA_TRY(fn, cudaMemsetAsync(r->d.data, 0, (size_t)(r->d.rows * r->d.ld) * es, stream));
    CUDA_TRY(fn, tpla_cuda_copy_2d(r->d.data, (size_t)r->d.ld * es, c->d.data,
                                   (size_t)c->d.ld * es, (size_t)c->n * es, (size_t)c->m, stream));
  }
  return TPLA_SUCCESS;
}

static tpla_status_t fp8_enqueue(tpla_cuda_ctx_t *impl, fp8_shape_t *s, tpla_lt_plan_t *p,
                                 cudaStream_t stream, const char *fn,
                                 const tpla_lt_what_t *what) {
  const tpla_gemm_call_t *c = s->call;
  if (s->bytes > 0) {
    void *scratch = NULL;
    TPLA_TRY(tpla_cuda_workspace_reserve(&impl->scratch, s->bytes, stream, fn, &scratch));
    char *base = scratch;
    if (s->stage_a)
      s->run.a.data = base + s->a_off;
    if (s->stage_b)
      s->run.b.data = base + s->b_off;
    if (s->pad_d)
      s->run.d.data = base + s->d_off;
    TPLA_TRY(stage_inputs(s, stream, fn));
  }
  bool fp8_out = tpla_lt_is_fp8(c->d.dtype);
  tpla_lt_operands_t ops = {.a = s->run.a.data, .b = s->run.b.data, .d = s->run.d.data,
                            .alpha = c->alpha, .beta = c->beta,
                            .a_scale = tpla_cuda_fp8_scale(impl, c->fp8.a_scale),
                            .b_scale = tpla_cuda_fp8_scale(impl, c->fp8.b_scale),
                            .d_scale = tpla_cuda_fp8_scale(impl, c->fp8.d_scale),
                            .d_amax = fp8_out ? c->fp8.d_amax : NULL};
  TPLA_TRY(tpla_lt_run_ctx(impl, p, &ops, stream, fn, what));
  if (s->pad_d) {
    size_t es = tpla_dtype_size(c->d.dtype);
    CUDA_TRY(fn, tpla_cuda_copy_2d(c->d.data, (size_t)c->d.ld * es, s->run.d.data,
                                   (size_t)s->run.d.ld * es, (size_t)c->n * es, (size_t)c->m,
                                   stream));
  }
  if (!fp8_out && c->fp8.d_amax != NULL)
    CUDA_TRY(fn, tpla_cuda_amax(c->fp8.d_amax, c->d.data, c->d.dtype, c->m, c->n, c->d.ld, 0,
                                stream));
  return TPLA_SUCCESS;
}

tpla_status_t tpla_cuda_gemm_fp8(tpla_ctx_t ctx, const tpla_gemm_call_t *call,
                                 cudaStream_t stream, const char *fn) {
  if (call->k == 0)
    return fp8_k0(call, stream, fn);
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  fp8_shape_t s;
  fp8_shape(&s, call);
  /* The plan first: a shape cuBLASLt refuses fails before anything is
   * enqueued. Staged regions are 256-byte aligned, so their alignment is
   * their rows' (a NULL address contributes nothing). */
  const tpla_gemm_call_t *r = &s.run;
  tpla_lt_key_t key;
  tpla_lt_key_from_call(&key, r);
  key.align_a = tpla_lt_alignment(r->a.data, (size_t)r->a.ld);
  key.align_b = tpla_lt_alignment(r->b.data, (size_t)r->b.ld);
  key.align_d = tpla_lt_alignment(r->d.data, (size_t)r->d.ld * tpla_dtype_size(r->d.dtype));
  key.align_c = key.align_d;
  tpla_lt_operands_t first = {.a_scale = tpla_cuda_fp8_scale(impl, call->fp8.a_scale),
                              .b_scale = tpla_cuda_fp8_scale(impl, call->fp8.b_scale),
                              .d_scale = tpla_cuda_fp8_scale(impl, call->fp8.d_scale),
                              .d_amax = call->fp8.d_amax};
  tpla_lt_what_t what = {describe_fp8, &s};
  tpla_lt_plan_t *p;
  TPLA_TRY(tpla_lt_cache_plan(impl, &key, &first, fn, &what, &p));
  if (s.bytes == 0)
    return fp8_enqueue(impl, &s, p, stream, fn, &what);
  TPLA_TRY(tpla_lt_ctx_enter(impl, stream, fn));
  tpla_status_t st = fp8_enqueue(impl, &s, p, stream, fn, &what);
  /* Recorded on failure too: whatever was enqueued has used the scratch. */
  tpla_status_t left = tpla_lt_ctx_leave(impl, stream, fn);
  return st != TPLA_SUCCESS ? st : left;
}
