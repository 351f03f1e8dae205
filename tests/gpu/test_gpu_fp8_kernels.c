/*
 * test_gpu_fp8_kernels.c - the pieces around FP8 GEMMs on the GPU: the byte
 * transpose / staging kernel and the amax kernel checked exactly
 * (fp8_kernels.h), and the FP8 plans in the context's cache (a repeated
 * shape is a hit, the accumulation mode is part of the key, a staged
 * operand reuses the plan of the aligned one) and a loop of staged calls
 * that must not grow memory. The GEMM results themselves are checked in
 * test_gpu_fp8.c.
 *
 * Run: build/tests/test_gpu_fp8_kernels (exits 77 without a GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "../../src/cuda/fp8_kernels.h"
#include "../../src/cuda/lt_gemm.h"
#include "gpu_util.h"

static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static cudaStream_t g_stream;
static float *g_amax; /* device: one float */
static int g_fp8;     /* the device has FP8 GEMMs (tpla_features_t.fp8) */

#define E4M3 TPLA_FLOAT8_E4M3

#define NEED_FP8()                                                        \
  do {                                                                    \
    if (!g_fp8)                                                           \
      SKIP("device 0 has no FP8 GEMMs (tpla_features_t.fp8 = 0)");        \
  } while (0)

/* The exact transpose: whole 128-byte tiles (4x4-byte blocks in registers)
 * and its byte-kernel strips (rows or columns beyond the last whole tile),
 * for 4-byte aligned and (falling back to bytes) unaligned lds: every byte of
 * dst is src's, and the bytes beyond dst's columns are untouched. */
static void test_transpose_tiles_and_strips(void) {
  static const int64_t shapes[][4] = {/* rows, cols, src_ld, dst_ld */
                                      {128, 128, 128, 128},   {256, 384, 388, 260},
                                      {300, 264, 268, 304},   {128, 1000, 1000, 132},
                                      {1000, 128, 132, 1000}, {640, 4100, 4100, 644},
                                      {260, 140, 143, 261},   {64, 64, 64, 64},
                                      {37, 70, 73, 41}}; /* last two: bytes only, under one tile */
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
    const int64_t rows = shapes[s][0], cols = shapes[s][1], src_ld = shapes[s][2];
    const int64_t dst_ld = shapes[s][3];
    size_t src_bytes = (size_t)(rows * src_ld), dst_bytes = (size_t)(cols * dst_ld);
    unsigned char *src = malloc(src_bytes), *out = malloc(dst_bytes);
    void *d_src = NULL, *d_dst = NULL;
    ASSERT_TRUE(src && out);
    for (size_t i = 0; i < src_bytes; i++)
      src[i] = (unsigned char)((i * 2654435761u) >> 13);
    ASSERT_EQ_INT(cudaMalloc(&d_src, src_bytes), cudaSuccess);
    ASSERT_EQ_INT(cudaMalloc(&d_dst, dst_bytes), cudaSuccess);
    ASSERT_EQ_INT(gpu_upload(d_src, src, src_bytes), cudaSuccess);
    ASSERT_EQ_INT(gpu_fill(d_dst, 0xAB, dst_bytes), cudaSuccess);
    ASSERT_EQ_INT(tpla_cuda_transpose_bytes(d_dst, dst_ld, d_src, src_ld, rows, cols, g_stream),
                  cudaSuccess);
    ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
    ASSERT_EQ_INT(cudaMemcpy(out, d_dst, dst_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t i = 0; i < cols; i++)
      for (int64_t j = 0; j < dst_ld; j++)
        ASSERT_EQ_INT(out[i * dst_ld + j], j < rows ? src[j * src_ld + i] : 0xAB);
    cudaFree(d_src);
    cudaFree(d_dst);
    free(src);
    free(out);
  }
}

/* The staging kernel (padded, plain or transposed), exactly: every byte of
 * the destination rows is the source's, a zero of the padding, or (beyond
 * the destination's columns) untouched. */
static void test_stage_bytes(void) {
  const int64_t rows = 37, cols = 70, src_ld = 73, big_rows = 80, big_ld = 83;
  size_t src_bytes = (size_t)(rows * src_ld), big = (size_t)(big_rows * big_ld);
  unsigned char *src = malloc(src_bytes), *out = malloc(big);
  void *d_src = NULL, *d_dst = NULL;
  ASSERT_TRUE(src && out);
  for (size_t i = 0; i < src_bytes; i++)
    src[i] = (unsigned char)(i * 131 + 7);
  ASSERT_EQ_INT(cudaMalloc(&d_src, src_bytes), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc(&d_dst, big), cudaSuccess);
  ASSERT_EQ_INT(gpu_upload(d_src, src, src_bytes), cudaSuccess);
  /* staged: op(src) in the corner of dr x dc (ld 83), zeros around it */
  for (int t = 0; t < 2; t++) {
    int64_t r = t ? cols : rows, c = t ? rows : cols; /* op(src) is r x c */
    int64_t dr = t ? 80 : 48, dc = t ? 40 : 80;
    ASSERT_EQ_INT(gpu_fill(d_dst, 0xAB, big), cudaSuccess);
    ASSERT_EQ_INT(tpla_cuda_stage_bytes(d_dst, big_ld, dr, dc, d_src, src_ld, rows, cols, t,
                                        g_stream),
                  cudaSuccess);
    ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
    ASSERT_EQ_INT(cudaMemcpy(out, d_dst, big, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t i = 0; i < big_rows; i++)
      for (int64_t j = 0; j < big_ld; j++) {
        int want = 0xAB;
        if (i < dr && j < dc)
          want = i >= r || j >= c ? 0 : t ? src[j * src_ld + i] : src[i * src_ld + j];
        ASSERT_EQ_INT(out[i * big_ld + j], want);
      }
  }
  cudaFree(d_src);
  cudaFree(d_dst);
  free(src);
  free(out);
}

/* tpla_cuda_amax: max |x| per dtype, NaN wins, accumulate combines. */
static void test_amax_kernel(void) {
  const int64_t rows = 300, cols = 129, ld = 131;
  float *h = malloc(sizeof(float) * (size_t)(rows * ld)), *dx = NULL, *dm = NULL, got = 0;
  ASSERT_TRUE(h != NULL);
  for (int64_t i = 0; i < rows * ld; i++)
    h[i] = (float)((i % 977) - 488) * 0.01f;
  h[5 * ld + 128] = -7.25f;    /* the largest |x| in the view */
  h[7 * ld + 130] = 1000.0f;   /* padding: not in the view */
  ASSERT_EQ_INT(cudaMalloc((void **)&dx, sizeof(float) * (size_t)(rows * ld)), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc((void **)&dm, sizeof(float)), cudaSuccess);
  ASSERT_EQ_INT(gpu_upload(dx, h, sizeof(float) * (size_t)(rows * ld)),
                cudaSuccess);
  ASSERT_EQ_INT(tpla_cuda_amax(dm, dx, TPLA_FLOAT32, rows, cols, ld, 0, g_stream), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpyAsync(&got, dm, sizeof got, cudaMemcpyDeviceToHost, g_stream),
                cudaSuccess);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  ASSERT_EQ_INT(got == 7.25f, 1);
  /* accumulate: a smaller matrix keeps the larger value already there */
  ASSERT_EQ_INT(tpla_cuda_amax(dm, dx, TPLA_FLOAT32, 3, 3, ld, 1, g_stream), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpyAsync(&got, dm, sizeof got, cudaMemcpyDeviceToHost, g_stream),
                cudaSuccess);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  ASSERT_EQ_INT(got == 7.25f, 1);
  uint8_t fp8[4] = {0x38, 0xB8, 0xC6, 0x00}; /* E4M3 1, -1, -3.5 (1.1000.110), 0 */
  ASSERT_EQ_INT(gpu_upload(dx, fp8, sizeof fp8), cudaSuccess);
  ASSERT_EQ_INT(tpla_cuda_amax(dm, dx, E4M3, 2, 2, 2, 0, g_stream), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpyAsync(&got, dm, sizeof got, cudaMemcpyDeviceToHost, g_stream),
                cudaSuccess);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  ASSERT_EQ_INT(got == 3.5f, 1);
  h[0] = NAN;
  ASSERT_EQ_INT(gpu_upload(dx, h, sizeof(float)), cudaSuccess);
  ASSERT_EQ_INT(tpla_cuda_amax(dm, dx, TPLA_FLOAT32, rows, cols, ld, 0, g_stream), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpyAsync(&got, dm, sizeof got, cudaMemcpyDeviceToHost, g_stream),
                cudaSuccess);
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  ASSERT_TRUE(isnan(got));
  cudaFree(dx);
  cudaFree(dm);
  free(h);
}

/* More rows and columns than the amax grid has blocks: the largest |x| sits
 * in the last row, the last column and the middle, one at a time. */
static void test_amax_kernel_strides(void) {
  const int64_t rows = 4099, cols = 1030, ld = 1031;
  const size_t n = (size_t)(rows * ld);
  float *h = malloc(sizeof(float) * n), *dx = NULL, *dm = NULL, got = 0;
  ASSERT_TRUE(h != NULL);
  ASSERT_EQ_INT(cudaMalloc((void **)&dx, sizeof(float) * n), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc((void **)&dm, sizeof(float)), cudaSuccess);
  const int64_t at[3][2] = {{rows - 1, 17}, {2048, cols - 1}, {1500, 600}};
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < n; i++)
      h[i] = (float)((int64_t)(i % 1013) - 506) * 0.001f;
    h[at[k][0] * ld + at[k][1]] = -(float)(k + 2);
    ASSERT_EQ_INT(gpu_upload(dx, h, sizeof(float) * n), cudaSuccess);
    ASSERT_EQ_INT(tpla_cuda_amax(dm, dx, TPLA_FLOAT32, rows, cols, ld, 0, g_stream),
                  cudaSuccess);
    ASSERT_EQ_INT(cudaMemcpyAsync(&got, dm, sizeof got, cudaMemcpyDeviceToHost, g_stream),
                  cudaSuccess);
    ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
    ASSERT_TRUE(got == (float)(k + 2));
  }
  cudaFree(dx);
  cudaFree(dm);
  free(h);
}

/* Raw FP8 device buffers for the cache and loop tests (contents: zero). */
typedef struct {
  void *a, *b, *d;
} trio_t;

static tpla_status_t trio_gemm(const trio_t *t, int64_t m, int64_t n, int64_t k, tpla_op_t op_a,
                               tpla_fp8_accum_t accum, cudaStream_t stream) {
  tpla_matrix_t a = op_a == TPLA_OP_N ? (tpla_matrix_t){t->a, m, k, k, E4M3}
                                      : (tpla_matrix_t){t->a, k, m, m, E4M3};
  tpla_matrix_t b = {t->b, n, k, k, E4M3};
  tpla_matrix_t d = {t->d, m, n, n, TPLA_BFLOAT16};
  tpla_gemm_args_t args = TPLA_GEMM_ARGS_INIT;
  args.fp8.accum = accum;
  args.fp8.d_amax = g_amax;
  return tpla_gemm(g_ctx, d, a, op_a, b, TPLA_OP_T, &args, stream);
}

static int trio_alloc(trio_t *t, size_t bytes) {
  memset(t, 0, sizeof *t);
  return CUDA_FAILED(cudaMalloc(&t->a, bytes)) || CUDA_FAILED(cudaMalloc(&t->b, bytes)) ||
         CUDA_FAILED(cudaMalloc(&t->d, 2 * bytes)) || CUDA_FAILED(gpu_fill(t->a, 0, bytes)) ||
         CUDA_FAILED(gpu_fill(t->b, 0, bytes));
}

static void trio_free(trio_t *t) {
  cudaFree(t->a);
  cudaFree(t->b);
  cudaFree(t->d);
}

/* A repeated FP8 shape is a cache hit; the accumulation mode is part of
 * the key; a staged call loops without growing memory. */
static void test_fp8_cache_and_loop(void) {
  NEED_FP8();
  const int64_t m = 192, n = 160, k = 224;
  trio_t t;
  ASSERT_EQ_INT(trio_alloc(&t, (size_t)(m > n ? m : n) * (size_t)k), 0);
  tpla_lt_cache_stats_t s0, s1, s2;
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s0));
  ASSERT_OK(trio_gemm(&t, m, n, k, TPLA_OP_N, TPLA_FP8_ACCUM_SPLIT, g_stream));
  ASSERT_OK(trio_gemm(&t, m, n, k, TPLA_OP_N, TPLA_FP8_ACCUM_SPLIT, g_stream));
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s1));
  ASSERT_EQ_INT(s1.misses, s0.misses + 1);
  ASSERT_EQ_INT(s1.hits, s0.hits + 1);
  ASSERT_OK(trio_gemm(&t, m, n, k, TPLA_OP_N, TPLA_FP8_ACCUM_FAST, g_stream));
  ASSERT_OK(trio_gemm(&t, m, n, k, TPLA_OP_T, TPLA_FP8_ACCUM_FAST, g_stream)); /* staged A */
  ASSERT_OK(tpla_cuda_gemm_cache_stats(g_ctx, &s2));
  ASSERT_EQ_INT(s2.misses, s1.misses + 1); /* staged A is A m x k again: the FAST plan */
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  size_t ws0 = 0, ws1 = 0;
  /* racecheck ended the process in this loop at 500 calls (runs 147, 148, 222) */
  const int calls = getenv("TPLA_TEST_QUICK") != NULL ? 20 : 500;
  gpu_steady_t g = {0};
  while (gpu_steady_more(&g)) {
    ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &ws0));
    ASSERT_EQ_INT(gpu_steady_begin(&g), 0);
    for (int i = 0; i < calls; i++)
      ASSERT_OK(trio_gemm(&t, m, n, k, TPLA_OP_T, TPLA_FP8_ACCUM_FAST, g_stream));
    ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
    ASSERT_EQ_INT(gpu_steady_end(&g, 0), 0);
    ASSERT_OK(tpla_ctx_workspace_bytes(g_ctx, &ws1));
    printf("# %d staged FP8 calls: workspace %zu -> %zu bytes, free %zu -> %zu\n", calls, ws0,
           ws1, g.before, g.after);
    ASSERT_EQ_INT(ws1, ws0);
  }
  ASSERT_TRUE(gpu_steady_ok(&g, 0));
  trio_free(&t);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  watchdog_arm("test_gpu_fp8_kernels", 220);
  tpla_features_t f = TPLA_FEATURES_INIT;
  if (CUDA_FAILED(cudaSetDevice(0)) ||
      CUDA_FAILED(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) ||
      CUDA_FAILED(cudaMalloc((void **)&g_amax, sizeof(float))) ||
      TPLA_FAILED(tpla_get_features(&f, 0)) || open_single_ctx(0, &g_comm, &g_ctx) != 0) {
    printf("FAIL setup (see above)\n0 passed, 1 failed\n");
    return 1;
  }
  g_fp8 = f.fp8;
  TEST(test_stage_bytes);
  TEST(test_transpose_tiles_and_strips);
  TEST(test_amax_kernel);
  TEST(test_amax_kernel_strides);
  TEST(test_fp8_cache_and_loop);
  if (close_single_ctx(g_comm, g_ctx) != 0)
    test_failed_++;
  cudaFree(g_amax);
  cudaStreamDestroy(g_stream);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
