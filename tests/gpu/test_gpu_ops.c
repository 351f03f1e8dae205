/*
 * test_gpu_ops.c - the CUDA executor's building blocks (src/cuda/cuda_ops.h)
 * against float64 host references: axpby, sumsq, scale_by_norm,
 * mirror_upper, add_diagonal, mem_alloc/mem_free (alltoallv: test_gpu_alltoallv.c; over a
 * batch or a list: test_gpu_ops_batch.c). Every op runs on a real
 * single-rank NCCL context, over
 * fp32/fp16/bf16, odd shapes, padded leading dimensions and misaligned
 * starts (the scalar fallback); bytes outside a view must stay untouched.
 * Correctness only; speed is measured by the benchmarks.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_ops (exits 77 without a GPU).
 */
#include "internal.h"
#include "ranks.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "../../src/cuda/cuda_ops.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

enum { NO_GPU, SETUP_FAILED, READY };
static int g_state = NO_GPU;
static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static cudaStream_t g_stream;

#define NEED_CTX()                                                \
  do {                                                            \
    if (g_state == NO_GPU)                                        \
      SKIP("no CUDA device");                                     \
    if (g_state != READY) {                                       \
      TEST_FAIL_("the single-rank context could not be created"); \
      return;                                                     \
    }                                                             \
  } while (0)

/* A view of rows x cols with leading dimension ld, starting `offset`
 * elements into its allocation (offset 1 breaks 16-byte alignment). */
typedef struct {
  int64_t rows, cols, ld, offset;
} shape_t;

static const shape_t k_shapes[] = {
    {1, 1, 1, 0},       {7, 13, 13, 0},     {7, 13, 20, 0},        {64, 256, 256, 0},
    {33, 64, 72, 0},    {64, 256, 256, 1},  {1000, 4097, 4097, 0}, {1000, 4096, 4104, 0},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])
static const tpla_dtype_t k_float_types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};

/* Device buffer holding one view, with its host image. Elements outside the
 * view (padding, the offset, one spare element) hold a 0xA5 byte pattern. */
typedef struct {
  tpla_matrix_t view;
  shape_t shape;
  void *base;
  unsigned char *host;
  size_t count, bytes;
} dbuf_t;

static size_t view_index(const dbuf_t *b, int64_t i, int64_t j) {
  return (size_t)(b->shape.offset + i * b->shape.ld + j);
}

static int in_view(const dbuf_t *b, size_t idx) {
  if (idx < (size_t)b->shape.offset)
    return 0;
  size_t k = idx - (size_t)b->shape.offset;
  return (int64_t)(k / (size_t)b->shape.ld) < b->shape.rows &&
         (int64_t)(k % (size_t)b->shape.ld) < b->shape.cols;
}

/* fill: 0 random in [-1, 1), 1 NaN. Returns 0 on success. */
static int dbuf_init(dbuf_t *b, shape_t s, tpla_dtype_t dt, rng_t *rng, int fill) {
  memset(b, 0, sizeof *b);
  b->shape = s;
  b->count = (size_t)(s.rows * s.ld + s.offset) + 1;
  b->bytes = b->count * tpla_dtype_size(dt);
  b->host = malloc(b->bytes);
  if (b->host == NULL)
    return 1;
  memset(b->host, 0xA5, b->bytes);
  for (int64_t i = 0; i < s.rows; i++)
    for (int64_t j = 0; j < s.cols; j++)
      tpla_store_elem(b->host, dt, view_index(b, i, j), fill ? NAN : rng_uniform(rng));
  /* cudaMemcpy from pageable memory may return before its DMA lands, and the
   * ops run on a non-blocking stream: synchronize the device before use. */
  if (cudaMalloc(&b->base, b->bytes) != cudaSuccess ||
      cudaMemcpy(b->base, b->host, b->bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "  cudaMalloc/cudaMemcpy of %zu bytes failed\n", b->bytes);
    return 1;
  }
  b->view = (tpla_matrix_t){(char *)b->base + (size_t)s.offset * tpla_dtype_size(dt), s.rows,
                            s.cols, s.ld, dt};
  return 0;
}

static void dbuf_free(dbuf_t *b) {
  cudaFree(b->base);
  free(b->host);
  memset(b, 0, sizeof *b);
}

/* Waits for the stream and copies the whole allocation back into `img`. */
static int dbuf_download(const dbuf_t *b, unsigned char *img) {
  cudaError_t e = cudaStreamSynchronize(g_stream);
  if (e == cudaSuccess)
    e = cudaMemcpy(img, b->base, b->bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    fprintf(stderr, "  download failed: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}

/* Number of bytes outside the view that differ between b->host and img. */
static size_t outside_changes(const dbuf_t *b, const unsigned char *img) {
  size_t es = tpla_dtype_size(b->view.dtype), changed = 0;
  for (size_t idx = 0; idx < b->count; idx++)
    if (!in_view(b, idx) && memcmp(b->host + idx * es, img + idx * es, es) != 0)
      changed++;
  return changed;
}

/* Unit roundoff of a dtype: the largest relative error of rounding to it. */
static double unit_roundoff(tpla_dtype_t dt) {
  return dt == TPLA_FLOAT32 ? 0x1p-24 : dt == TPLA_FLOAT16 ? 0x1p-11 : 0x1p-8;
}
/* Half the smallest subnormal step (absolute error floor of rounding). */
static double abs_floor(tpla_dtype_t dt) {
  return dt == TPLA_FLOAT16 ? 0x1p-25 : dt == TPLA_BFLOAT16 ? 0x1p-134 : 0x1p-150;
}

static void describe_case(char *buf, size_t n, const char *op, tpla_dtype_t ty, tpla_dtype_t tx,
                          shape_t s) {
  snprintf(buf, n, "%s y %s x %s %" PRId64 "x%" PRId64 " ld %" PRId64 " offset %" PRId64, op,
           tpla_dtype_name(ty), tpla_dtype_name(tx), s.rows, s.cols, s.ld, s.offset);
}

/* 0 on success; otherwise prints the status and message and returns 1. */
static int failed_call(tpla_status_t st, const char *what) {
  if (st == TPLA_SUCCESS)
    return 0;
  fprintf(stderr, "  %s: %s (%s)\n", what, tpla_status_string(st), tpla_last_error());
  return 1;
}

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
 * device by sumsq just before (no host round trip). in_place uses y = x. */
static int check_scale(tpla_dtype_t ty, tpla_dtype_t tx, shape_t s, int in_place, uint64_t seed) {
  const float safety = 1.01f, eps = 1e-7f;
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
        ASSERT_EQ_INT(check_scale(k_float_types[a], k_float_types[b], k_shapes[k], 0, 800 + k), 0);
}

static void test_scale_by_norm_in_place(void) {
  NEED_CTX();
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < N_SHAPES; k++)
      ASSERT_EQ_INT(check_scale(k_float_types[t], k_float_types[t], k_shapes[k], 1, 900 + k), 0);
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

/* ---- setup ----------------------------------------------------------------------------------- */

static void test_create_single_rank_context(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    SKIP("no CUDA device");
  }
  g_state = SETUP_FAILED;
  tpla_unique_id_t id;
  ASSERT_TRUE(cudaSetDevice(0) == cudaSuccess);
  ASSERT_OK(tpla_nccl_get_unique_id(&id));
  ASSERT_OK(tpla_nccl_comm_create(&g_comm, &id, 1, 0, 0, NULL));
  ASSERT_OK(tpla_ctx_create_nccl(&g_ctx, g_comm, NULL));
  ASSERT_TRUE(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) == cudaSuccess);
  g_state = READY;
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_mem_alloc_and_free);
  TEST(test_axpby_same_dtype);
  TEST(test_axpby_mixed_dtypes);
  TEST(test_axpby_beta_zero_never_reads_y);
  TEST(test_axpby_rejects_fp64);
  TEST(test_sumsq_matches_reference);
  TEST(test_sumsq_is_deterministic);
  TEST(test_sumsq_of_empty_matrix_is_zero);
  TEST(test_scale_by_norm_out_of_place);
  TEST(test_scale_by_norm_in_place);
  TEST(test_scale_by_norm_of_zeros_with_eps_zero);
  TEST(test_norm_of_huge_entries);
  TEST(test_norm_of_tiny_entries);
  TEST(test_mirror_upper);
  TEST(test_add_diagonal);
  if (g_stream)
    cudaStreamDestroy(g_stream);
  tpla_ctx_destroy(g_ctx);
  tpla_nccl_comm_destroy(g_comm);
  return test_summary();
}

#else /* no CUDA executor in this build */

static void test_gpu_ops_need_cuda(void) { SKIP("built without the CUDA executor"); }

int main(void) {
  TEST(test_gpu_ops_need_cuda);
  return test_summary();
}
#endif
