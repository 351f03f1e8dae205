/*
 * test_gpu_ops.c - the CUDA executor's building blocks (src/cuda/cuda_ops.h)
 * against float64 host references: axpby, mirror_upper, add_diagonal,
 * mem_alloc/mem_free (sumsq and scale_by_norm: test_gpu_norm.c; alltoallv:
 * test_gpu_alltoallv.c; over a batch or a list: test_gpu_ops_batch.c).
 * Every op runs on a real single-rank NCCL context (ops_dbuf.h), over
 * fp32/fp16/bf16, odd shapes, padded leading dimensions and misaligned
 * starts (the scalar fallback); bytes outside a view must stay untouched.
 * Correctness only; speed is measured by the benchmarks.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_ops (exits 77 without a GPU).
 */
#include "internal.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "ops_dbuf.h"

/* ---- axpby ---------------------------------------------------------------- */

/* y = alpha x + beta y on one case against float64; poison_y fills y with
 * NaN (only meaningful with beta == 0). Returns the number of failures. */
static int check_axpby(tpla_dtype_t ty, tpla_dtype_t tx, shape_t s, float alpha, float beta,
                       int poison_y, uint64_t seed) {
  char what[160];
  describe_case(what, sizeof what, "axpby", ty, tx, s);
  rng_t rng;
  rng_seed(&rng, seed);
  dbuf_t y, x;
  int bad = dbuf_init(&y, s, ty, &rng, poison_y) | dbuf_init(&x, s, tx, &rng, 0);
  unsigned char *img = bad ? NULL : malloc(y.bytes);
  if (img == NULL)
    bad = 1;
  if (!bad)
    bad = failed_call(
        tpla_cuda_axpby(g_ctx, y.view, x.view, alpha, beta, (tpla_batch_t){0}, g_stream), what);
  if (!bad)
    bad = dbuf_download(&y, img);
  for (int64_t i = 0; i < s.rows && !bad; i++)
    for (int64_t j = 0; j < s.cols && !bad; j++) {
      double xv = tpla_load_elem(x.host, tx, view_index(&x, i, j));
      double yv = beta == 0.0f ? 0.0 : tpla_load_elem(y.host, ty, view_index(&y, i, j));
      double ref = (double)alpha * xv + (double)beta * yv;
      double got = tpla_load_elem(img, ty, view_index(&y, i, j));
      double tol = unit_roundoff(ty) * fabs(ref) +
                   4 * 0x1p-24 * (fabs(alpha * xv) + fabs(beta * yv)) + abs_floor(ty);
      if (!(fabs(got - ref) <= tol)) {
        fprintf(stderr, "  %s alpha %g beta %g: (%" PRId64 ", %" PRId64 ") = %.9g, want %.9g\n",
                what, alpha, beta, i, j, got, ref);
        bad = 1;
      }
      /* fp32: the host executor's roundings bit for bit (product, product, sum; no FMA) */
      float host = alpha * (float)xv;
      if (beta != 0.0f)
        host += beta * (float)yv;
      if (!bad && ty == TPLA_FLOAT32 && tx == TPLA_FLOAT32 && got != (double)host) {
        fprintf(stderr, "  %s alpha %g beta %g: (%" PRId64 ", %" PRId64 ") = %a, the host %a\n",
                what, alpha, beta, i, j, got, (double)host);
        bad = 1;
      }
    }
  if (!bad && outside_changes(&y, img) != 0) {
    fprintf(stderr, "  %s: %zu elements outside y changed\n", what, outside_changes(&y, img));
    bad = 1;
  }
  free(img);
  dbuf_free(&y);
  dbuf_free(&x);
  return bad;
}

static void test_axpby_same_dtype(void) {
  NEED_CTX();
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < N_SHAPES; k++) {
      tpla_dtype_t dt = k_float_types[t];
      ASSERT_EQ_INT(check_axpby(dt, dt, k_shapes[k], 0.75f, -1.25f, 0, 100 + k), 0);
      ASSERT_EQ_INT(check_axpby(dt, dt, k_shapes[k], 1.0f, 0.0f, 0, 200 + k), 0); /* copy */
    }
}

static void test_axpby_mixed_dtypes(void) {
  NEED_CTX();
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (size_t k = 0; k < N_SHAPES; k++) {
        if (a == b)
          continue;
        ASSERT_EQ_INT(check_axpby(k_float_types[a], k_float_types[b], k_shapes[k], -1.5f, 0.5f,
                                  0, 300 + k),
                      0);
        ASSERT_EQ_INT(check_axpby(k_float_types[a], k_float_types[b], k_shapes[k], 1.0f, 0.0f,
                                  0, 400 + k),
                      0);
      }
}

static void test_axpby_beta_zero_never_reads_y(void) {
  NEED_CTX();
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (size_t k = 0; k < N_SHAPES; k++)
        ASSERT_EQ_INT(check_axpby(k_float_types[a], k_float_types[b], k_shapes[k], -2.0f, 0.0f,
                                  1, 500 + k),
                      0);
}

static void test_axpby_rejects_fp64(void) {
  NEED_CTX();
  rng_t rng;
  rng_seed(&rng, 7);
  dbuf_t y, x;
  shape_t s = {4, 4, 4, 0};
  ASSERT_EQ_INT(dbuf_init(&y, s, TPLA_FLOAT64, &rng, 0) | dbuf_init(&x, s, TPLA_FLOAT32, &rng, 0),
                0);
  tpla_status_t st =
      tpla_cuda_axpby(g_ctx, y.view, x.view, 1.0f, 0.0f, (tpla_batch_t){0}, g_stream);
  unsigned char img[17 * 8];
  int bad = dbuf_download(&y, img);
  int untouched = !bad && memcmp(img, y.host, y.bytes) == 0;
  dbuf_free(&y);
  dbuf_free(&x);
  ASSERT_STATUS(st, TPLA_ERROR_NOT_SUPPORTED);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_cuda_axpby");
  ASSERT_CONTAINS(tpla_last_error(), "4x4");
  ASSERT_TRUE(untouched);
}

/* ---- mirror_upper ------------------------------------------------------------------ */

/* whole > 0: below the diagonal, elements inside a diagonal block of that
 * edge hold either value (the kernel skips whole tiles only), every other
 * one the mirrored value; whole >= n: nothing may change. */
static int check_mirror(tpla_dtype_t dt, int64_t n, int64_t ld, int64_t whole, uint64_t seed) {
  char what[112];
  snprintf(what, sizeof what, "mirror_upper %s n %" PRId64 " ld %" PRId64 " whole %" PRId64,
           tpla_dtype_name(dt), n, ld, whole);
  rng_t rng;
  rng_seed(&rng, seed);
  dbuf_t a;
  int bad = dbuf_init(&a, (shape_t){n, n, ld, 0}, dt, &rng, 0);
  unsigned char *img = bad ? NULL : malloc(a.bytes);
  bad |= img == NULL;
  if (!bad)
    bad = failed_call(tpla_cuda_mirror_upper(g_ctx, a.view, whole, (tpla_batch_t){0}, g_stream),
                      what);
  if (!bad)
    bad = dbuf_download(&a, img);
  size_t es = tpla_dtype_size(dt);
  for (int64_t i = 0; i < n && !bad; i++)
    for (int64_t j = 0; j < n && !bad; j++) {
      /* bitwise: upper (with diagonal) kept, lower = the transposed upper */
      size_t src = i > j ? view_index(&a, j, i) : view_index(&a, i, j);
      size_t kept = view_index(&a, i, j);
      bool in_block = whole > 0 && i / whole == j / whole;
      const unsigned char *got = img + kept * es;
      bool ok = !in_block ? memcmp(got, a.host + src * es, es) == 0
                : whole >= n ? memcmp(got, a.host + kept * es, es) == 0
                             : memcmp(got, a.host + src * es, es) == 0 ||
                                   memcmp(got, a.host + kept * es, es) == 0;
      if (!ok) {
        fprintf(stderr, "  %s: element (%" PRId64 ", %" PRId64 ") wrong\n", what, i, j);
        bad = 1;
      }
    }
  if (!bad && outside_changes(&a, img) != 0) {
    fprintf(stderr, "  %s: elements outside the matrix changed\n", what);
    bad = 1;
  }
  free(img);
  dbuf_free(&a);
  return bad;
}

static void test_mirror_upper(void) {
  NEED_CTX();
  /* ld = n + 5: the element kernel; n a multiple of 16 bytes' elements with
   * ld = n or n + 16: the chunk kernel, whole and partial tiles */
  /* 3000: more tiles than the grid's blocks, so blocks walk several tiles */
  static const int64_t sizes[] = {1, 2, 7, 8, 16, 31, 32, 33, 64, 100, 136, 1000, 1025, 3000};
  const tpla_dtype_t types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16, TPLA_FLOAT64};
  for (int t = 0; t < 4; t++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      ASSERT_EQ_INT(check_mirror(types[t], sizes[k], sizes[k], 0, 1000 + k), 0);
      ASSERT_EQ_INT(check_mirror(types[t], sizes[k], sizes[k] + 5, 0, 1100 + k), 0);
      ASSERT_EQ_INT(check_mirror(types[t], sizes[k], sizes[k] + 16, 0, 1200 + k), 0);
    }
  /* diagonal blocks computed whole: edges off the tiles (the full walk,
   * skipping), edges of whole tiles (the compact walk; 16-64 elements a
   * tile edge by dtype) with an uneven last block, one block, an edge of 1
   * (none), and more than 64 blocks of whole tiles (the full walk again) */
  static const int64_t wholes[][2] = {{1000, 500}, {1025, 513}, {3000, 1000}, {3000, 375},
                                      {136, 68},   {100, 33},   {1000, 1000}, {1025, 2048},
                                      {64, 1},     {2048, 1024}, {3000, 1024}, {1025, 512},
                                      {1000, 256}, {136, 64},   {200, 32},   {1100, 16}};
  for (int t = 0; t < 4; t++)
    for (size_t k = 0; k < sizeof wholes / sizeof wholes[0]; k++) {
      int64_t n = wholes[k][0], w = wholes[k][1];
      ASSERT_EQ_INT(check_mirror(types[t], n, n, w, 1300 + k), 0);
      ASSERT_EQ_INT(check_mirror(types[t], n, n + 5, w, 1400 + k), 0);
    }
}

/* a(i, i) += value over min(rows, cols) of two members 256-byte multiples
 * apart (odd shapes and ld, a misaligned start): one fp32 rounding to the
 * dtype on the diagonal, every other byte untouched. */
static int check_add_diagonal(tpla_dtype_t dt, shape_t s, uint64_t seed) {
  const size_t es = tpla_dtype_size(dt);
  const size_t span = (size_t)(s.offset + s.rows * s.ld) * es;
  const size_t stride = (span + 255) / 256 * 256, bytes = 2 * stride;
  unsigned char *host = malloc(bytes), *img = malloc(bytes);
  void *dev = NULL;
  int bad = host == NULL || img == NULL;
  rng_t rng;
  rng_seed(&rng, seed);
  for (size_t b = 0; !bad && b < bytes; b++)
    host[b] = (unsigned char)(rng_uniform(&rng) * 28.0 + 92.0); /* 64..119: finite in every dtype */
  bad = bad || cudaMalloc(&dev, bytes) != cudaSuccess ||
        cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess;
  tpla_matrix_t a = {(char *)dev + (size_t)s.offset * es, s.rows, s.cols, s.ld, dt};
  bad = bad || tpla_cuda_add_diagonal(g_ctx, a, -11.875f, (tpla_batch_t){2, stride}, g_stream) !=
                   TPLA_SUCCESS ||
        cudaStreamSynchronize(g_stream) != cudaSuccess ||
        cudaMemcpy(img, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess;
  for (size_t m = 0; !bad && m < 2; m++)
    for (int64_t i = 0; i < s.rows && i < s.cols; i++) { /* the diagonal, then restore it */
      size_t idx = m * stride / es + (size_t)(s.offset + i * s.ld + i);
      float v = (float)tpla_load_elem(host, dt, idx) - 11.875f;
      tpla_store_elem(host, dt, idx, v);
    }
  if (!bad && memcmp(host, img, bytes) != 0) {
    fprintf(stderr, "  add_diagonal %s %" PRId64 "x%" PRId64 " ld %" PRId64 ": wrong bytes\n",
            tpla_dtype_name(dt), s.rows, s.cols, s.ld);
    bad = 1;
  }
  cudaFree(dev);
  free(host), free(img);
  return bad;
}

static void test_add_diagonal(void) {
  NEED_CTX();
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < N_SHAPES; k++)
      ASSERT_EQ_INT(check_add_diagonal(k_float_types[t], k_shapes[k], 1500 + k), 0);
}

/* ---- memory ---------------------------------------------------------------------------- */

static void test_mem_alloc_and_free(void) {
  NEED_CTX();
  void *p = (void *)1;
  ASSERT_OK(tpla_cuda_mem_alloc(g_ctx, 0, &p));
  ASSERT_TRUE(p == NULL);
  ASSERT_OK(tpla_cuda_mem_alloc(g_ctx, 1 << 20, &p));
  ASSERT_TRUE(p != NULL);
  ASSERT_TRUE(cudaMemset(p, 0x5a, 1 << 20) == cudaSuccess);
  tpla_cuda_mem_free(g_ctx, p);
  tpla_cuda_mem_free(g_ctx, NULL);
  void *q = (void *)&q;
  ASSERT_STATUS(tpla_cuda_mem_alloc(g_ctx, (size_t)1 << 60, &q), TPLA_ERROR_OUT_OF_MEMORY);
  ASSERT_CONTAINS(tpla_last_error(), "tpla_cuda_mem_alloc");
  ASSERT_TRUE(q == (void *)&q);                  /* untouched on failure */
  ASSERT_TRUE(cudaGetLastError() == cudaSuccess); /* the failure did not leak */
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_mem_alloc_and_free);
  TEST(test_axpby_same_dtype);
  TEST(test_axpby_mixed_dtypes);
  TEST(test_axpby_beta_zero_never_reads_y);
  TEST(test_axpby_rejects_fp64);
  TEST(test_mirror_upper);
  TEST(test_add_diagonal);
  destroy_single_rank_context();
  return test_summary();
}

#else /* no CUDA executor in this build */
TEST_MAIN_WITHOUT_CUDA()
#endif
