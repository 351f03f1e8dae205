/*
 * test_gpu_fp8_edges.c - FP8 tpla_gemm at its edges, on cuBLASLt (fp8_cases.h):
 * NULL scales (1) with no amax requested, a misaligned scale pointer refused
 * with D untouched, k = 0 (D = beta D, an FP8 D zeroed over NaN), an FP8
 * D's saturation, infinity and NaN with the amax of the unrounded values,
 * and D rows more than 2 GiB apart. test_gpu_fp8.c has the accuracy sweep.
 *
 * Run: build/tests/test_gpu_fp8_edges (exits 77 without a GPU; skips the
 * FP8 GEMMs on a GPU without FP8 tensor cores).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "fp8_cases.h"

/* NULL scales mean 1; no amax requested leaves it alone. */
static void test_fp8_null_scales(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 4);
  fp8_result_t r;
  fp8_case_t c = {32, 64, 48, E4M3, E4M3, E4M3, TPLA_OP_N, TPLA_OP_T, 0, 0, 0, 0, 0, 0,
                  0.125f, 0.0f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 0};
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  float amax = 0;
  ASSERT_EQ_INT(cudaMemcpy(&amax, g_scalars + 12, sizeof amax, cudaMemcpyDeviceToHost),
                cudaSuccess);
  ASSERT_EQ_INT(amax == 1e30f, 1); /* as run_case left it: not written */
}

/* cuBLASLt takes only 16-byte aligned scale pointers: a scale 4 bytes into
 * an array is INVALID_ARGUMENT naming it, and D stays untouched. */
static void test_fp8_misaligned_scale(void) {
  NEED_FP8();
  void *a = NULL, *b = NULL, *d = NULL;
  ASSERT_EQ_INT(cudaMalloc(&a, 64 * 64), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc(&b, 64 * 64), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc(&d, 64 * 64 * 2), cudaSuccess);
  ASSERT_EQ_INT(gpu_fill(d, 0x5a, 64 * 64 * 2), cudaSuccess);
  tpla_matrix_t am = {a, 64, 64, 64, E4M3}, bm = {b, 64, 64, 64, E4M3};
  tpla_matrix_t dm = {d, 64, 64, 64, TPLA_BFLOAT16};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.b_scale = g_scalars + 1;
  ASSERT_EQ_INT(tpla_gemm(g_ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_T, &args, NULL),
                TPLA_ERROR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(tpla_last_error(), "fp8.b_scale");
  unsigned char host[64];
  ASSERT_EQ_INT(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < sizeof host; i++)
    ASSERT_EQ_INT(host[i], 0x5a);
  cudaFree(a), cudaFree(b), cudaFree(d);
}

/* k = 0: D = beta D (an FP8 D: zeros over NaN), the amax of that. */
static void test_fp8_k_zero(void) {
  NEED_FP8();
  gpu_rng_t rng;
  gpu_rng_seed(&rng, g_seed + 6);
  fp8_result_t r;
  fp8_case_t c = {19, 23, 0, E4M3, E5M2, TPLA_FLOAT32, TPLA_OP_T, TPLA_OP_N, 0, 0, 2, 0, 0, 0,
                  1.0f, 0.5f, TPLA_FP8_ACCUM_SPLIT, 0, 0, 0, 1};
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  c.td = E4M3;
  c.beta = 0.0f; /* NaN-poisoned D becomes zeros, amax 0 */
  c.d_scale = 1;
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
  c.td = TPLA_BFLOAT16;
  ASSERT_EQ_INT(run_case(&c, &rng, &r, 0), 0);
}

/* One small FP8 GEMM from host bytes: D (m x n) = A (m x k) B (k x n), each
 * at most 256 bytes, no scales, d_amax into g_scalars[12]; D's bytes and
 * the amax come back. */
static int tiny_fp8_gemm(const uint8_t *a, tpla_dtype_t ta, const uint8_t *b, tpla_dtype_t tb,
                         uint8_t *d, tpla_dtype_t td, int m, int n, int k, float *amax) {
  uint8_t *dev = NULL;
  float minus_one = -1.0f;
  if (m * k > 256 || k * n > 256 || m * n > 256 ||
      CUDA_FAILED(cudaMalloc((void **)&dev, 3 * 256)) ||
      CUDA_FAILED(cudaMemcpy(dev, a, (size_t)(m * k), cudaMemcpyHostToDevice)) ||
      CUDA_FAILED(cudaMemcpy(dev + 256, b, (size_t)(k * n), cudaMemcpyHostToDevice)) ||
      CUDA_FAILED(cudaMemcpy(g_scalars + 12, &minus_one, sizeof(float), cudaMemcpyHostToDevice))) {
    cudaFree(dev);
    return 1;
  }
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.d_amax = g_scalars + 12;
  tpla_matrix_t av = {dev, m, k, k, ta}, bv = {dev + 256, k, n, n, tb};
  tpla_matrix_t dv = {dev + 512, m, n, n, td};
  tpla_status_t st = tpla_gemm(g_ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, &args, g_stream);
  int bad = st != TPLA_SUCCESS;
  if (bad)
    fprintf(stderr, "  tpla_gemm: %s: %s\n", tpla_status_string(st), tpla_last_error());
  bad = bad || CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
        CUDA_FAILED(cudaMemcpy(d, dev + 512, (size_t)(m * n), cudaMemcpyDeviceToHost)) ||
        CUDA_FAILED(cudaMemcpy(amax, g_scalars + 12, sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dev);
  return bad;
}

/* An FP8 D as docs/API.md says, the host executor's test_saturation_and_nan
 * on cuBLASLt: overflow saturates to the largest finite value (E4M3 448,
 * E5M2 57344), an infinite product too (run 205: cuBLASLt's conversion is
 * saturating), a NaN input gives NaN, and the amax is of the unrounded
 * values: NaN for a NaN, not finite for an infinite product (cuBLASLt's
 * AMAX_D gives NaN, run 206). */
static void test_fp8_saturation_inf_nan(void) {
  NEED_FP8();
  const uint8_t a[4] = {0x7e, 0xfe, 0x38, 0x7f};  /* E4M3 448, -448, 1, NaN (1 x k) */
  const uint8_t b3[3 * 2] = {0x7e, 0x38, 0x00, 0x38, 0x00, 0x38};      /* k = 3 rows of 2 */
  const uint8_t b4[4 * 2] = {0x7e, 0x38, 0x00, 0x38, 0x00, 0x38, 0x38, 0x38};
  uint8_t d[2];
  float amax;
  /* D = [448 * 448 = 200704 -> 448, 448 - 448 + 1 = 1] */
  ASSERT_EQ_INT(tiny_fp8_gemm(a, E4M3, b3, E4M3, d, E4M3, 1, 2, 3, &amax), 0);
  printf("# E4M3 overflow: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1], (double)amax);
  ASSERT_EQ_INT(d[0], 0x7e);
  ASSERT_EQ_INT(d[1], 0x38);
  ASSERT_TRUE(amax == 200704.0f);
  /* the NaN joins both columns */
  ASSERT_EQ_INT(tiny_fp8_gemm(a, E4M3, b4, E4M3, d, E4M3, 1, 2, 4, &amax), 0);
  printf("# E4M3 NaN input: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1], (double)amax);
  ASSERT_TRUE(isnan(fp8_value(d[0], E4M3)) && isnan(fp8_value(d[1], E4M3)));
  ASSERT_TRUE(isnan(amax));
  /* E5M2 A [[inf, 0], [57344, 57344]] x E4M3 B [[1], [448]]: [inf, 25.7e6 -> 57344] */
  const uint8_t a5[4] = {0x7c, 0x00, 0x7b, 0x7b}, b5[2] = {0x38, 0x7e};
  ASSERT_EQ_INT(tiny_fp8_gemm(a5, E5M2, b5, E4M3, d, E5M2, 2, 1, 2, &amax), 0);
  printf("# E5M2 infinity and overflow: D bytes 0x%02x 0x%02x, amax %g\n", d[0], d[1],
         (double)amax);
  ASSERT_EQ_INT(d[0], 0x7b);
  ASSERT_EQ_INT(d[1], 0x7b);
  ASSERT_TRUE(!isfinite(amax));
  /* unpadded (16 x 16 x 16): A's first row [inf, 0, ...], B's first row all 1: D's first
   * row infinite (stored 57344), the others 0; cuBLASLt's own amax: NaN (run 206) */
  uint8_t a16[16 * 16] = {0x7c}, b16[16 * 16] = {0}, d16[16 * 16];
  memset(b16, 0x38, 16);
  ASSERT_EQ_INT(tiny_fp8_gemm(a16, E5M2, b16, E4M3, d16, E5M2, 16, 16, 16, &amax), 0);
  printf("# E5M2 infinity, 16 x 16 x 16: D[0][0] 0x%02x, D[1][0] 0x%02x, amax %g\n", d16[0],
         d16[16], (double)amax);
  ASSERT_EQ_INT(d16[0], 0x7b);
  ASSERT_EQ_INT(d16[16], 0x00);
  ASSERT_TRUE(!isfinite(amax));
}

/* D inside rows of more than 2 GiB (pitch past what cudaMemcpy2D and cudaMemset2D take):
 * a bf16 D through the padded copy (n = 24), and an E4M3 D zeroed by k = 0. */
static void test_fp8_huge_pitch(void) {
  NEED_FP8();
  const int64_t m = 2, n = 24, k = 32, ld = ((int64_t)1 << 30) + 64; /* bf16: 2^31 + 128 B */
  uint8_t ones[32 * 24], *a = NULL, *b = NULL, *d = NULL;
  memset(ones, 0x38, sizeof ones); /* E4M3 1.0 */
  size_t dbytes = (size_t)((m - 1) * ld + n) * 2;
  ASSERT_EQ_INT(cudaMalloc((void **)&a, 256 + 1024) == cudaSuccess &&
                    cudaMalloc((void **)&d, dbytes) == cudaSuccess,
                1);
  b = a + 256;
  ASSERT_EQ_INT(cudaMemcpy(a, ones, (size_t)(m * k), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpy(b, ones, (size_t)(k * n), cudaMemcpyHostToDevice), cudaSuccess);
  for (int64_t i = 0; i < m; i++)
    ASSERT_EQ_INT(cudaMemset(d + (size_t)(i * ld) * 2, 0xff, (size_t)n * 2), cudaSuccess);
  tpla_matrix_t av = {a, m, k, k, E4M3}, bv = {b, k, n, n, E4M3};
  tpla_matrix_t dv = {d, m, n, ld, TPLA_BFLOAT16};
  ASSERT_OK(tpla_gemm(g_ctx, dv, av, TPLA_OP_N, bv, TPLA_OP_N, NULL, g_stream));
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  uint16_t row[24];
  for (int64_t i = 0; i < m; i++) {
    ASSERT_EQ_INT(cudaMemcpy(row, d + (size_t)(i * ld) * 2, sizeof row, cudaMemcpyDeviceToHost),
                  cudaSuccess);
    for (int j = 0; j < 24; j++)
      ASSERT_EQ_INT(row[j], 0x4200); /* bf16 32 */
  }
  /* k = 0 into an E4M3 D whose rows are 2^31 + 128 bytes apart: zeros */
  const int64_t ld8 = ((int64_t)1 << 31) + 128;
  cudaFree(d);
  ASSERT_EQ_INT(cudaMalloc((void **)&d, (size_t)((m - 1) * ld8 + n)), cudaSuccess);
  for (int64_t i = 0; i < m; i++)
    ASSERT_EQ_INT(cudaMemset(d + (size_t)(i * ld8), 0x5a, (size_t)n), cudaSuccess);
  tpla_matrix_t a0 = {a, m, 0, 1, E4M3}, b0 = {b, 0, n, n, E4M3}, d8 = {d, m, n, ld8, E4M3};
  ASSERT_OK(tpla_gemm(g_ctx, d8, a0, TPLA_OP_N, b0, TPLA_OP_N, NULL, g_stream));
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  for (int64_t i = 0; i < m; i++) {
    uint8_t r8[24];
    ASSERT_EQ_INT(cudaMemcpy(r8, d + (size_t)(i * ld8), sizeof r8, cudaMemcpyDeviceToHost),
                  cudaSuccess);
    for (int j = 0; j < 24; j++)
      ASSERT_EQ_INT(r8[j], 0);
  }
  cudaFree(a);
  cudaFree(d);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  if (fp8_open("test_gpu_fp8_edges", 120) != 0) {
    printf("FAIL setup (see above)\n0 passed, 1 failed\n");
    return 1;
  }
  TEST(test_fp8_features);
  TEST(test_fp8_null_scales);
  TEST(test_fp8_misaligned_scale);
  TEST(test_fp8_k_zero);
  TEST(test_fp8_saturation_inf_nan);
  TEST(test_fp8_huge_pitch);
  fp8_close();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
