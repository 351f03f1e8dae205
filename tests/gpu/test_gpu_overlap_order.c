/*
 * test_gpu_overlap_order.c - an overlapped call's output is stream-ordered:
 * work the caller enqueues on its stream right after the call (here a copy
 * of D) sees D complete, although the call's GEMMs run on the plan's own
 * lanes. One rank, each operation (AG+GEMM, GEMM+RS, GEMM+AR) in both
 * modes; the GEMMs are long (k = 8192), D starts as NaN, and the copy must
 * equal D once the device is idle. (Mutation run 216: dropping the join of
 * the lanes into the caller's stream passed every other GPU test.)
 *
 * Run: build-gpu/tests/test_gpu_overlap_order (exits 77 without a GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ops_dbuf.h"

#define M 2048
#define N 2048
#define K 8192

/* One call of `kind` (0 AG, 1 RS, 2 AR) in `mode`, then a copy of D on the same stream;
 * 0 if the copy equals D. */
static int ordered(int kind, tpla_overlap_mode_t mode, void *a, void *b, void *d, void *copy) {
  const size_t d_bytes = (size_t)M * N * 2;
  tpla_matrix_t am = {a, M, K, K, TPLA_BFLOAT16}, bm = {b, N, K, K, TPLA_BFLOAT16};
  tpla_matrix_t dm = {d, M, N, N, TPLA_BFLOAT16};
  void *plan = NULL;
  tpla_status_t st;
  if (kind == 0) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = M, x.k = K, x.n = N, x.op_b = TPLA_OP_T, x.mode = mode;
    x.dtype = x.d_dtype = TPLA_BFLOAT16;
    st = tpla_ag_gemm_plan_create((tpla_ag_gemm_plan_t *)&plan, g_ctx, &x);
  } else if (kind == 1) {
    tpla_gemm_rs_desc_t x = TPLA_GEMM_RS_DESC_INIT;
    x.m = M, x.k = K, x.n = N, x.op_b = TPLA_OP_T, x.mode = mode;
    x.dtype = x.d_dtype = TPLA_BFLOAT16;
    st = tpla_gemm_rs_plan_create((tpla_gemm_rs_plan_t *)&plan, g_ctx, &x);
  } else {
    tpla_gemm_ar_desc_t x = TPLA_GEMM_AR_DESC_INIT;
    x.m = M, x.k = K, x.n = N, x.op_b = TPLA_OP_T, x.mode = mode;
    x.dtype = x.d_dtype = TPLA_BFLOAT16;
    st = tpla_gemm_ar_plan_create((tpla_gemm_ar_plan_t *)&plan, g_ctx, &x);
  }
  if (TPLA_FAILED(st))
    return 1;
  int bad = 0;
  for (int rep = 0; rep < 3 && !bad; rep++) {
    bad |= CUDA_FAILED(cudaMemsetAsync(d, 0xFF, d_bytes, g_stream)); /* NaN */
    bad |= CUDA_FAILED(cudaMemsetAsync(copy, 0, d_bytes, g_stream));
    st = kind == 0   ? tpla_ag_gemm(plan, dm, am, bm, NULL, g_stream)
         : kind == 1 ? tpla_gemm_rs(plan, dm, am, bm, NULL, g_stream)
                     : tpla_gemm_ar(plan, dm, am, bm, NULL, g_stream);
    bad |= TPLA_FAILED(st);
    bad |= CUDA_FAILED(cudaMemcpyAsync(copy, d, d_bytes, cudaMemcpyDeviceToDevice, g_stream));
    bad |= CUDA_FAILED(cudaDeviceSynchronize());
    unsigned char *hd = malloc(d_bytes), *hc = malloc(d_bytes);
    bad |= hd == NULL || hc == NULL ||
           CUDA_FAILED(cudaMemcpy(hd, d, d_bytes, cudaMemcpyDeviceToHost)) ||
           CUDA_FAILED(cudaMemcpy(hc, copy, d_bytes, cudaMemcpyDeviceToHost));
    if (!bad && memcmp(hd, hc, d_bytes) != 0) {
      size_t first = 0;
      while (hd[first] == hc[first])
        first++;
      fprintf(stderr, "  %s %s, call %d: the copy enqueued after the call differs from D "
              "(first at byte %zu): D was not complete in stream order\n",
              kind == 0 ? "AG+GEMM" : kind == 1 ? "GEMM+RS" : "GEMM+AR",
              mode == TPLA_OVERLAP_SERIAL ? "SERIAL" : "OVERLAP", rep + 1, first);
      bad = 1;
    }
    free(hd);
    free(hc);
  }
  if (kind == 0)
    tpla_ag_gemm_plan_destroy(plan);
  else if (kind == 1)
    tpla_gemm_rs_plan_destroy(plan);
  else
    tpla_gemm_ar_plan_destroy(plan);
  return bad;
}

static void test_output_follows_in_stream_order(void) {
  NEED_CTX();
  void *a = NULL, *b = NULL, *d = NULL, *copy = NULL;
  ASSERT_TRUE(!CUDA_FAILED(cudaMalloc(&a, (size_t)M * K * 2)) &&
              !CUDA_FAILED(cudaMalloc(&b, (size_t)N * K * 2)) &&
              !CUDA_FAILED(cudaMalloc(&d, (size_t)M * N * 2)) &&
              !CUDA_FAILED(cudaMalloc(&copy, (size_t)M * N * 2)));
  /* every element 0x3C3C (0.0115): D is about 1.08 everywhere, not NaN */
  ASSERT_TRUE(!CUDA_FAILED(gpu_fill(a, 0x3C, (size_t)M * K * 2)) &&
              !CUDA_FAILED(gpu_fill(b, 0x3C, (size_t)N * K * 2)));
  int failures = 0;
  for (int kind = 0; kind < 3; kind++)
    for (int serial = 0; serial < 2; serial++)
      failures += ordered(kind, serial ? TPLA_OVERLAP_SERIAL : TPLA_OVERLAP_OVERLAP, a, b, d,
                          copy);
  cudaFree(a), cudaFree(b), cudaFree(d), cudaFree(copy);
  ASSERT_EQ_INT(failures, 0);
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_output_follows_in_stream_order);
  destroy_single_rank_context();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
