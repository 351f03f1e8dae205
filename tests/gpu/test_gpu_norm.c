/*
 * test_gpu_norm.c - the CUDA executor's norm building blocks
 * (src/cuda/cuda_ops.h) against float64 host references: sumsq (the sum of
 * squares into a device double, deterministic run to run, 0 for an empty
 * matrix) and scale_by_norm (x / (safety sqrt(sumsq) + eps), out of place
 * and in place, eps 1e-7 or half the norm; zeros for a zero matrix with
 * eps 0), with entries whose squares overflow fp32 and norms below fp32's
 * normal range. Every op runs
 * on a real single-rank NCCL context (ops_dbuf.h), over fp32/fp16/bf16, odd
 * shapes, padded leading dimensions and misaligned starts (the scalar
 * fallback); bytes outside a view must stay untouched. (axpby, the mirror,
 * add_diagonal and memory: test_gpu_ops.c; over a list: test_gpu_ops_batch.c.)
 * Correctness only; speed is measured by the benchmarks.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_norm (exits 77 without a GPU).
 */
#include "internal.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "ops_dbuf.h"

/* ---- sumsq ------------------------------------------------------------------ */

/* Runs sumsq on x into a fresh device double; returns it through *out. */
static int device_sumsq(const dbuf_t *x, double *out) {
  double *d = NULL;
  if (cudaMalloc((void **)&d, sizeof *d) != cudaSuccess)
    return 1;
  const double nan = NAN;
  /* legacy-stream copies may land after g_stream's (non-blocking) kernels: wait */
  int bad = cudaMemcpy(d, &nan, sizeof nan, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess;
  if (!bad)
    bad = failed_call(tpla_cuda_sumsq(g_ctx, d, x->view, g_stream), "sumsq");
  if (!bad)
    bad = cudaStreamSynchronize(g_stream) != cudaSuccess ||
          cudaMemcpy(out, d, sizeof *out, cudaMemcpyDeviceToHost) != cudaSuccess;
  cudaFree(d);
  return bad;
}

static void test_sumsq_matches_reference(void) {
  NEED_CTX();
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < N_SHAPES; k++) {
      tpla_dtype_t dt = k_float_types[t];
      shape_t s = k_shapes[k];
      rng_t rng;
      rng_seed(&rng, 600 + k);
      dbuf_t x;
      ASSERT_EQ_INT(dbuf_init(&x, s, dt, &rng, 0), 0);
      double ref = 0;
      for (int64_t i = 0; i < s.rows; i++)
        for (int64_t j = 0; j < s.cols; j++) {
          double v = tpla_load_elem(x.host, dt, view_index(&x, i, j));
          ref += v * v;
        }
      double got = NAN;
      int bad = device_sumsq(&x, &got);
      dbuf_free(&x);
      ASSERT_EQ_INT(bad, 0);
      /* fp64 partial sums of nonnegative terms: a few dozen roundings deep */
      ASSERT_NEAR(got, ref, 1e-12 * ref + 1e-300);
    }
}

static void test_sumsq_is_deterministic(void) {
  NEED_CTX();
  for (int t = 0; t < 6; t++) { /* the big scalar-path and vector-path shapes */
    rng_t rng;
    rng_seed(&rng, 700 + t);
    dbuf_t x;
    ASSERT_EQ_INT(dbuf_init(&x, k_shapes[N_SHAPES - 1 - t / 3], k_float_types[t % 3], &rng, 0),
                  0);
    double first = NAN, again = NAN;
    int bad = device_sumsq(&x, &first), differ = 0;
    for (int run = 0; run < 5 && !bad; run++) {
      bad = device_sumsq(&x, &again);
      differ |= memcmp(&first, &again, sizeof first) != 0;
    }
    dbuf_free(&x);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_EQ_INT(differ, 0);
  }
}

/* Sums in flight on two streams of one context at once (one partials
 * scratch per context, ordered like the cuBLASLt workspace): each must read
 * its own matrix's partials. Before that ordering, one in-flight sum could
 * take the other's (review 88). */
static void test_sumsq_on_two_streams_at_once(void) {
  NEED_CTX();
  enum { ROWS = 2048, COLS = 4096, CALLS = 200 };
  const size_t n = (size_t)ROWS * COLS;
  float *host = malloc(n * sizeof *host), *x[2] = {NULL, NULL};
  double *sums[2] = {NULL, NULL}, got[2][CALLS];
  cudaStream_t other = NULL;
  int bad = host == NULL ||
            cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess;
  for (int k = 0; k < 2 && !bad; k++) { /* every element 1, then 3: sums n and 9 n */
    for (size_t i = 0; i < n; i++)
      host[i] = k == 0 ? 1.0f : 3.0f;
    bad = cudaMalloc((void **)&x[k], n * sizeof(float)) != cudaSuccess ||
          cudaMalloc((void **)&sums[k], CALLS * sizeof(double)) != cudaSuccess ||
          CUDA_FAILED(gpu_upload(x[k], host, n * sizeof(float)));
  }
  cudaStream_t streams[2] = {g_stream, other};
  for (int c = 0; c < CALLS && !bad; c++)
    for (int k = 0; k < 2 && !bad; k++) {
      tpla_matrix_t v = {x[k], ROWS, COLS, COLS, TPLA_FLOAT32};
      bad = failed_call(tpla_cuda_sumsq(g_ctx, sums[k] + c, v, streams[k]), "sumsq");
    }
  for (int k = 0; k < 2 && !bad; k++)
    bad = cudaStreamSynchronize(streams[k]) != cudaSuccess ||
          cudaMemcpy(got[k], sums[k], sizeof got[k], cudaMemcpyDeviceToHost) != cudaSuccess;
  int wrong = 0;
  for (int c = 0; c < CALLS && !bad; c++)
    wrong += (got[0][c] != (double)n) + (got[1][c] != 9.0 * (double)n);
  if (wrong)
    fprintf(stderr, "  %d of %d sums read the other stream's partials\n", wrong, 2 * CALLS);
  for (int k = 0; k < 2; k++) {
    cudaFree(x[k]);
    cudaFree(sums[k]);
  }
  if (other)
    cudaStreamDestroy(other);
  free(host);
  ASSERT_EQ_INT(bad, 0);
  ASSERT_EQ_INT(wrong, 0);
}

static void test_sumsq_of_empty_matrix_is_zero(void) {
  NEED_CTX();
  tpla_matrix_t views[] = {{NULL, 0, 5, 5, TPLA_BFLOAT16}, {NULL, 3, 0, 1, TPLA_FLOAT32}};
  for (int v = 0; v < 2; v++) {
    dbuf_t x = {.view = views[v]};
    double got = NAN;
    ASSERT_EQ_INT(device_sumsq(&x, &got), 0);
    ASSERT_TRUE(got == 0.0);
  }
}

/* ---- scale_by_norm -------------------------------------------------------------- */

/* y = x / (safety sqrt(sumsq(x)) + eps), the sum of squares produced on the
 * device by sumsq just before (no host round trip). in_place uses y = x.
 * eps_rel > 0: eps = eps_rel ||x|| (an eps that shows), else 1e-7. */
static int check_scale(tpla_dtype_t ty, tpla_dtype_t tx, shape_t s, int in_place, uint64_t seed,
                       double eps_rel) {
  const float safety = 1.01f;
  float eps = 1e-7f;
  char what[160];
  describe_case(what, sizeof what, in_place ? "scale_by_norm in place" : "scale_by_norm", ty, tx,
                s);
  rng_t rng;
  rng_seed(&rng, seed);
  dbuf_t x, yb;
  int bad = dbuf_init(&x, s, tx, &rng, 0);
  if (!in_place)
    bad |= dbuf_init(&yb, s, ty, &rng, 1);
  dbuf_t *y = in_place ? &x : &yb;
  double host_sumsq = 0;
  for (int64_t i = 0; i < s.rows && !bad; i++)
    for (int64_t j = 0; j < s.cols; j++) {
      double v = tpla_load_elem(x.host, tx, view_index(&x, i, j));
      host_sumsq += v * v;
    }
  if (eps_rel > 0)
    eps = (float)(eps_rel * sqrt(host_sumsq));
  double *d_sumsq = NULL;
  bad |= cudaMalloc((void **)&d_sumsq, sizeof(double)) != cudaSuccess;
  unsigned char *img = bad ? NULL : malloc(y->bytes);
  bad |= img == NULL;
  if (!bad)
    bad = failed_call(tpla_cuda_sumsq(g_ctx, d_sumsq, x.view, g_stream), what) ||
          failed_call(
              tpla_cuda_scale_by_norm(g_ctx, y->view, x.view, d_sumsq, safety, eps, g_stream),
              what);
  double sumsq = 0;
  if (!bad)
    bad = dbuf_download(y, img) ||
          cudaMemcpy(&sumsq, d_sumsq, sizeof sumsq, cudaMemcpyDeviceToHost) != cudaSuccess;
  double denom = safety * sqrt(sumsq) + eps;
  for (int64_t i = 0; i < s.rows && !bad; i++)
    for (int64_t j = 0; j < s.cols && !bad; j++) {
      double ref = tpla_load_elem(x.host, tx, view_index(&x, i, j)) / denom;
      double got = tpla_load_elem(img, ty, view_index(y, i, j));
      /* fp64 divisor rounded to fp32, and the quotient: a few fp32 roundings */
      double tol = (unit_roundoff(ty) + 8 * 0x1p-24) * fabs(ref) + abs_floor(ty);
      if (!(fabs(got - ref) <= tol)) {
        fprintf(stderr, "  %s: (%" PRId64 ", %" PRId64 ") = %.9g, want %.9g\n", what, i, j, got,
                ref);
        bad = 1;
      }
    }
  if (!bad && outside_changes(y, img) != 0) {
    fprintf(stderr, "  %s: elements outside y changed\n", what);
    bad = 1;
  }
  free(img);
  cudaFree(d_sumsq);
  dbuf_free(&x);
  if (!in_place)
    dbuf_free(&yb);
  return bad;
}

static void test_scale_by_norm_out_of_place(void) {
  NEED_CTX();
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      for (size_t k = 0; k < N_SHAPES; k++)
        ASSERT_EQ_INT(check_scale(k_float_types[a], k_float_types[b], k_shapes[k], 0, 800 + k,
                                  k % 2 ? 0.5 : 0.0), 0);
}

static void test_scale_by_norm_in_place(void) {
  NEED_CTX();
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < N_SHAPES; k++)
      ASSERT_EQ_INT(check_scale(k_float_types[t], k_float_types[t], k_shapes[k], 1, 900 + k,
                                k % 2 ? 0.0 : 0.5), 0);
}

/* A zero matrix with eps = 0 divides 0 by 0: zeros, not NaN (a frozen layer's gradient). */
static void test_scale_by_norm_of_zeros_with_eps_zero(void) {
  NEED_CTX();
  const int64_t rows = 5, cols = 7;
  float *x = NULL, host[5 * 7];
  double *d_sumsq = NULL;
  ASSERT_EQ_INT(cudaMalloc((void **)&x, sizeof host), cudaSuccess);
  ASSERT_EQ_INT(cudaMalloc((void **)&d_sumsq, sizeof(double)), cudaSuccess);
  ASSERT_EQ_INT(cudaMemset(x, 0, sizeof host), cudaSuccess);
  tpla_matrix_t v = {x, rows, cols, cols, TPLA_FLOAT32};
  ASSERT_OK(tpla_cuda_sumsq(g_ctx, d_sumsq, v, g_stream));
  ASSERT_OK(tpla_cuda_scale_by_norm(g_ctx, v, v, d_sumsq, 1.0f, 0.0f, g_stream));
  ASSERT_EQ_INT(cudaStreamSynchronize(g_stream), cudaSuccess);
  ASSERT_EQ_INT(cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  int bad = 0;
  for (int i = 0; i < rows * cols; i++)
    bad += host[i] != 0.0f;
  ASSERT_EQ_INT(bad, 0);
  cudaFree(x);
  cudaFree(d_sumsq);
}

/* sumsq, then scale_by_norm in place, of a rows x cols matrix of `dt` whose
 * image is h; the sum of squares into *sumsq and the result's image into
 * out. Nonzero (with a message) on a failure. */
static int norm_in_place(tpla_dtype_t dt, int64_t rows, int64_t cols, const void *h,
                         float safety, float eps, double *sumsq, void *out) {
  size_t bytes = (size_t)(rows * cols) * tpla_dtype_size(dt);
  void *x = NULL;
  double *d_sumsq = NULL;
  int bad = cudaMalloc(&x, bytes) != cudaSuccess ||
            cudaMalloc((void **)&d_sumsq, sizeof(double)) != cudaSuccess ||
            cudaMemcpy(x, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess; /* g_stream is non-blocking */
  tpla_matrix_t v = {x, rows, cols, cols, dt};
  bad = bad || failed_call(tpla_cuda_sumsq(g_ctx, d_sumsq, v, g_stream), "sumsq") ||
        failed_call(tpla_cuda_scale_by_norm(g_ctx, v, v, d_sumsq, safety, eps, g_stream),
                    "scale_by_norm") ||
        cudaStreamSynchronize(g_stream) != cudaSuccess ||
        cudaMemcpy(sumsq, d_sumsq, sizeof *sumsq, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(out, x, bytes, cudaMemcpyDeviceToHost) != cudaSuccess;
  if (bad)
    fprintf(stderr, "  norm_in_place of a %" PRId64 "x%" PRId64 " %s matrix failed\n", rows, cols,
            tpla_dtype_name(dt));
  cudaFree(x);
  cudaFree(d_sumsq);
  return bad;
}

/* Entries whose squares overflow fp32 (fp32 and bf16 reach 3.4e38), at two
 * magnitudes: the divisor below 2^100 (1e20) and above it (1e30, where the
 * kernel scales x by 2^-100 first). The sum of squares must be right and
 * the result x / (1.01 ||x||), not zeros (an fp32 sum made the divisor
 * infinite). Vector and scalar paths (cols 96 and 47). */
static void test_norm_of_huge_entries(void) {
  NEED_CTX();
  const tpla_dtype_t types[] = {TPLA_FLOAT32, TPLA_BFLOAT16};
  const double magnitudes[] = {1e20, 1e30};
  const int64_t widths[] = {96, 47};
  for (int c = 0; c < 8; c++) {
    tpla_dtype_t dt = types[c & 1];
    int64_t rows = 33, cols = widths[(c >> 2) & 1];
    double mag = magnitudes[(c >> 1) & 1];
    size_t n = (size_t)(rows * cols), es = tpla_dtype_size(dt);
    unsigned char *h = malloc(n * es), *out = malloc(n * es);
    double want = 0.0, got = NAN;
    ASSERT_TRUE(h != NULL && out != NULL);
    rng_t rng;
    rng_seed(&rng, 1000 + (uint64_t)c);
    for (size_t i = 0; i < n; i++) {
      tpla_store_elem(h, dt, i, (i == 5 ? 3.3e38 : mag) * rng_uniform(&rng));
      double v = tpla_load_elem(h, dt, i);
      want += v * v;
    }
    ASSERT_EQ_INT(norm_in_place(dt, rows, cols, h, 1.01f, 1e-7f, &got, out), 0);
    ASSERT_NEAR(got, want, 1e-12 * want);
    double denom = 1.01 * sqrt(want), norm = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      double ref = tpla_load_elem(h, dt, i) / denom, r = tpla_load_elem(out, dt, i);
      bad += !(fabs(r - ref) <= (unit_roundoff(dt) + 8 * 0x1p-24) * fabs(ref) + 1e-37);
      norm += r * r;
    }
    free(h);
    free(out);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_NEAR(sqrt(norm), 1 / 1.01, 4 * unit_roundoff(dt));
  }
}

/* Norms below fp32's normal range (2^-126): with an fp32 divisor 1/d was
 * infinite, so eps = 0 with entries of 1e-40 gave inf and X = 0 with
 * eps = 1e-40 gave NaN. Now x / D (the host's result), and zeros for X = 0. */
static void test_norm_of_tiny_entries(void) {
  NEED_CTX();
  const tpla_dtype_t types[] = {TPLA_FLOAT32, TPLA_BFLOAT16};
  enum { ROWS = 5, COLS = 7, COUNT = ROWS * COLS };
  for (int c = 0; c < 4; c++) {
    tpla_dtype_t dt = types[c & 1];
    bool zero = c >= 2;
    float eps = zero ? 1e-40f : 0.0f;
    unsigned char h[COUNT * 4], out[COUNT * 4];
    double want = 0.0, got_sumsq = NAN;
    for (int i = 0; i < COUNT; i++) {
      tpla_store_elem(h, dt, (size_t)i, zero ? 0.0 : 1e-40 * (1 + i % 3));
      double v = tpla_load_elem(h, dt, (size_t)i);
      want += v * v;
    }
    ASSERT_EQ_INT(norm_in_place(dt, ROWS, COLS, h, 1.0f, eps, &got_sumsq, out), 0);
    ASSERT_NEAR(got_sumsq, want, 1e-12 * want);
    double denom = sqrt(want) + (double)eps;
    for (int i = 0; i < COUNT; i++) {
      double ref = tpla_load_elem(h, dt, (size_t)i) / denom, r = tpla_load_elem(out, dt, (size_t)i);
      ASSERT_TRUE(isfinite(r));
      ASSERT_NEAR(r, ref, (unit_roundoff(dt) + 8 * 0x1p-24) * fabs(ref));
    }
  }
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_sumsq_matches_reference);
  TEST(test_sumsq_is_deterministic);
  TEST(test_sumsq_on_two_streams_at_once);
  TEST(test_sumsq_of_empty_matrix_is_zero);
  TEST(test_scale_by_norm_out_of_place);
  TEST(test_scale_by_norm_in_place);
  TEST(test_scale_by_norm_of_zeros_with_eps_zero);
  TEST(test_norm_of_huge_entries);
  TEST(test_norm_of_tiny_entries);
  destroy_single_rank_context();
  return test_summary();
}

#else /* no CUDA executor in this build */
TEST_MAIN_WITHOUT_CUDA()
#endif
