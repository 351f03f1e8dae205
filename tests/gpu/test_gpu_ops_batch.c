/*
 * test_gpu_ops_batch.c - the CUDA building blocks over a batch (internal.h's
 * tpla_batch_t, which batched Newton-Schulz groups use): axpby and
 * mirror_upper on `count` members one stride apart equal the same call on
 * each member alone, bit for bit, through the vector and the scalar kernels;
 * bytes between the members stay untouched; a stride that would break the
 * members' alignment is refused. normalize_list (a list of views anywhere
 * into a batch, each divided by its own norm) against float64, and
 * store_list (the batch back into the list) bit for bit, padding untouched.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_ops_batch (exits 77
 * without a GPU).
 */
#include "internal.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "../../src/cuda/cuda_ops.h"
#include "gpu_util.h"

#define MEMBERS 5
#define STRIDE ((size_t)1 << 20) /* bytes between members; a multiple of 256 */

static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static bool g_ready;

/* `bytes` of device memory = random values in [-1, 1) of `dt`, the gaps
 * between members included. */
static int fill(void *dev, size_t bytes, tpla_dtype_t dt, uint64_t seed) {
  gpu_rng_t rng;
  gpu_rng_seed(&rng, seed);
  size_t es = tpla_dtype_size(dt), n = bytes / es;
  unsigned char *h = malloc(bytes);
  if (h == NULL)
    return 1;
  for (size_t i = 0; i < n; i++)
    tpla_store_elem(h, dt, i, 2.0 * gpu_rng_uniform(&rng) - 1.0);
  int bad = CUDA_FAILED(cudaMemcpy(dev, h, bytes, cudaMemcpyHostToDevice));
  free(h);
  return bad;
}

static int same_bytes(const void *a, const void *b, size_t bytes) {
  unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
  int same = ha && hb && !CUDA_FAILED(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost)) &&
             !CUDA_FAILED(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost)) &&
             memcmp(ha, hb, bytes) == 0;
  free(ha);
  free(hb);
  return same;
}

/* y (ty) = 0.75 x (tx) + 0.5 y over MEMBERS members of rows x cols with
 * leading dimension ld: batched into one image, member by member into the
 * other; the whole images (gaps included) must agree. */
static int check_axpby(tpla_dtype_t ty, tpla_dtype_t tx, int64_t rows, int64_t cols,
                       int64_t ld) {
  size_t bytes = STRIDE * MEMBERS;
  void *x = NULL, *y1 = NULL, *y2 = NULL;
  int bad = CUDA_FAILED(cudaMalloc(&x, bytes)) || CUDA_FAILED(cudaMalloc(&y1, bytes)) ||
            CUDA_FAILED(cudaMalloc(&y2, bytes));
  bad = bad || fill(x, bytes, tx, 11) || fill(y1, bytes, ty, 12) ||
        CUDA_FAILED(cudaMemcpy(y2, y1, bytes, cudaMemcpyDeviceToDevice));
  tpla_matrix_t vx = {x, rows, cols, ld, tx}, vy = {y1, rows, cols, ld, ty};
  bad = bad || TPLA_FAILED(tpla_cuda_axpby(g_ctx, vy, vx, 0.75f, 0.5f,
                                           (tpla_batch_t){MEMBERS, STRIDE}, NULL));
  for (int j = 0; j < MEMBERS && !bad; j++) {
    tpla_matrix_t mx = vx, my = vy;
    mx.data = (char *)x + j * STRIDE;
    my.data = (char *)y2 + j * STRIDE;
    bad = TPLA_FAILED(tpla_cuda_axpby(g_ctx, my, mx, 0.75f, 0.5f, (tpla_batch_t){0}, NULL));
  }
  bad = bad || CUDA_FAILED(cudaDeviceSynchronize()) || !same_bytes(y1, y2, bytes);
  if (bad)
    fprintf(stderr, "  axpby %s <- %s, %" PRId64 "x%" PRId64 " ld %" PRId64 ": differs\n",
            tpla_dtype_name(ty), tpla_dtype_name(tx), rows, cols, ld);
  cudaFree(x);
  cudaFree(y1);
  cudaFree(y2);
  return bad;
}

static int check_mirror(tpla_dtype_t dt, int64_t n, int64_t ld) {
  size_t bytes = STRIDE * MEMBERS;
  void *a1 = NULL, *a2 = NULL;
  int bad = CUDA_FAILED(cudaMalloc(&a1, bytes)) || CUDA_FAILED(cudaMalloc(&a2, bytes));
  bad = bad || fill(a1, bytes, dt, 21) ||
        CUDA_FAILED(cudaMemcpy(a2, a1, bytes, cudaMemcpyDeviceToDevice));
  tpla_matrix_t v = {a1, n, n, ld, dt};
  bad = bad || TPLA_FAILED(tpla_cuda_mirror_upper(g_ctx, v, n / 2, (tpla_batch_t){MEMBERS, STRIDE},
                                                    NULL));
  for (int j = 0; j < MEMBERS && !bad; j++) {
    tpla_matrix_t m = v;
    m.data = (char *)a2 + j * STRIDE;
    bad = TPLA_FAILED(tpla_cuda_mirror_upper(g_ctx, m, n / 2, (tpla_batch_t){0}, NULL));
  }
  bad = bad || CUDA_FAILED(cudaDeviceSynchronize()) || !same_bytes(a1, a2, bytes);
  if (bad)
    fprintf(stderr, "  mirror %s n %" PRId64 " ld %" PRId64 ": differs\n", tpla_dtype_name(dt),
            n, ld);
  cudaFree(a1);
  cudaFree(a2);
  return bad;
}

static void test_axpby_batch_equals_members(void) {
  if (!g_ready)
    SKIP("no single-rank context");
  /* ld = cols: 16-byte chunks; ld = cols + 1: the element kernel */
  ASSERT_EQ_INT(check_axpby(TPLA_BFLOAT16, TPLA_BFLOAT16, 100, 256, 256), 0);
  ASSERT_EQ_INT(check_axpby(TPLA_FLOAT32, TPLA_BFLOAT16, 77, 96, 97), 0);
  ASSERT_EQ_INT(check_axpby(TPLA_BFLOAT16, TPLA_FLOAT32, 300, 320, 328), 0);
  ASSERT_EQ_INT(check_axpby(TPLA_FLOAT16, TPLA_FLOAT16, 5, 3, 3), 0);
}

static void test_mirror_batch_equals_members(void) {
  if (!g_ready)
    SKIP("no single-rank context");
  ASSERT_EQ_INT(check_mirror(TPLA_FLOAT32, 256, 256), 0);  /* chunk kernel */
  ASSERT_EQ_INT(check_mirror(TPLA_BFLOAT16, 200, 203), 0); /* element kernel */
  ASSERT_EQ_INT(check_mirror(TPLA_FLOAT32, 500, 500), 0);  /* more tiles than blocks per member */
}

/* MEMBERS views of rows x cols (ld) in separate allocations, of `xt`,
 * normalized into a batch of `yt` (safety 1 + m/8, eps 1e-3 m), against
 * float64; then stored back into new views of ld + 3, bit for bit. Member
 * `odd` (-1: none) starts one element into its allocations, so the list
 * mixes 16-byte-aligned members with one that is not. */
static int check_lists(tpla_dtype_t xt, tpla_dtype_t yt, int64_t rows, int64_t cols, int64_t ld,
                       int odd) {
  size_t xes = tpla_dtype_size(xt), yes = tpla_dtype_size(yt);
  size_t xbytes = (size_t)(rows * ld) * xes, ybytes = STRIDE * MEMBERS;
  size_t obytes = (size_t)(rows * (cols + 3)) * yes;
  tpla_matrix_t x[MEMBERS], o[MEMBERS];
  char *xbase[MEMBERS] = {NULL}, *obase[MEMBERS] = {NULL};
  float safety[MEMBERS], eps[MEMBERS];
  void *y = NULL, *sums = NULL;
  unsigned char *hx = malloc(xbytes), *hy = malloc(ybytes), *ho = malloc(obytes);
  double got[MEMBERS];
  int bad = !hx || !hy || !ho || CUDA_FAILED(cudaMalloc(&y, ybytes)) ||
            CUDA_FAILED(cudaMalloc(&sums, sizeof got));
  for (int m = 0; m < MEMBERS; m++) {
    x[m] = (tpla_matrix_t){NULL, rows, cols, ld, xt};
    o[m] = (tpla_matrix_t){NULL, rows, cols, cols + 3, yt};
    safety[m] = 1.0f + (float)m / 8;
    eps[m] = 1e-3f * (float)m;
    bad = bad || CUDA_FAILED(cudaMalloc((void **)&xbase[m], xbytes + xes)) ||
          CUDA_FAILED(cudaMalloc((void **)&obase[m], obytes + yes));
    if (bad)
      break;
    x[m].data = xbase[m] + (m == odd ? xes : 0);
    o[m].data = obase[m] + (m == odd ? yes : 0);
    bad = fill(x[m].data, xbytes, xt, 30 + m) || CUDA_FAILED(cudaMemset(o[m].data, 0x5a, obytes));
  }
  tpla_matrix_t yv = {y, rows, cols, cols, yt};
  tpla_batch_t batch = {MEMBERS, STRIDE};
  bad = bad ||
        TPLA_FAILED(tpla_cuda_normalize_list(g_ctx, yv, batch, x, safety, eps, sums, NULL)) ||
        TPLA_FAILED(tpla_cuda_store_list(g_ctx, o, yv, batch, NULL)) ||
        CUDA_FAILED(cudaDeviceSynchronize()) ||
        CUDA_FAILED(cudaMemcpy(hy, y, ybytes, cudaMemcpyDeviceToHost)) ||
        CUDA_FAILED(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
  double tol = (yt == TPLA_FLOAT32 ? 0x1p-24 : 0x1p-8) + 8 * 0x1p-24;
  for (int m = 0; m < MEMBERS && !bad; m++) {
    bad = CUDA_FAILED(cudaMemcpy(hx, x[m].data, xbytes, cudaMemcpyDeviceToHost)) ||
          CUDA_FAILED(cudaMemcpy(ho, o[m].data, obytes, cudaMemcpyDeviceToHost));
    double ss = 0.0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        ss += pow(tpla_load_elem(hx, xt, (size_t)(r * ld + c)), 2);
    if (fabs(got[m] - ss) > 1e-12 * ss) {
      fprintf(stderr, "  member %d: sum of squares %.17g, want %.17g\n", m, got[m], ss);
      bad = 1;
    }
    double d = safety[m] * sqrt(ss) + eps[m];
    const unsigned char *ym = hy + m * STRIDE;
    for (int64_t r = 0; r < rows && !bad; r++) {
      for (int64_t c = 0; c < cols && !bad; c++) {
        double want = tpla_load_elem(hx, xt, (size_t)(r * ld + c)) / d;
        double v = tpla_load_elem(ym, yt, (size_t)(r * cols + c));
        bad = fabs(v - want) > tol * fabs(want) ||
              memcmp(ho + (size_t)(r * (cols + 3) + c) * yes, ym + (size_t)(r * cols + c) * yes,
                     yes) != 0;
      }
      for (int64_t c = cols; c < cols + 3 && !bad; c++) /* the stored views' padding */
        bad = ho[(size_t)(r * (cols + 3) + c) * yes] != 0x5a;
    }
    if (bad)
      fprintf(stderr, "  list %s -> %s %" PRId64 "x%" PRId64 " ld %" PRId64 ": member %d wrong\n",
              tpla_dtype_name(xt), tpla_dtype_name(yt), rows, cols, ld, m);
  }
  for (int m = 0; m < MEMBERS; m++) {
    cudaFree(xbase[m]);
    cudaFree(obase[m]);
  }
  cudaFree(y);
  cudaFree(sums);
  free(hx);
  free(hy);
  free(ho);
  return bad;
}

static void test_normalize_and_store_lists(void) {
  if (!g_ready)
    SKIP("no single-rank context");
  ASSERT_EQ_INT(check_lists(TPLA_BFLOAT16, TPLA_BFLOAT16, 100, 256, 256, -1), 0); /* vectors */
  ASSERT_EQ_INT(check_lists(TPLA_FLOAT32, TPLA_FLOAT32, 77, 97, 99, -1), 0);      /* elements */
  ASSERT_EQ_INT(check_lists(TPLA_BFLOAT16, TPLA_FLOAT32, 64, 512, 520, -1), 0);
  /* one member off the vectors' alignment: the whole list takes the element kernels */
  ASSERT_EQ_INT(check_lists(TPLA_BFLOAT16, TPLA_BFLOAT16, 100, 256, 256, 3), 0);
  ASSERT_EQ_INT(check_lists(TPLA_FLOAT32, TPLA_BFLOAT16, 64, 512, 512, 0), 0);
}

static void test_misaligned_stride_is_refused(void) {
  if (!g_ready)
    SKIP("no single-rank context");
  void *a = NULL;
  ASSERT_TRUE(!CUDA_FAILED(cudaMalloc(&a, 4096)));
  tpla_matrix_t v = {a, 8, 8, 8, TPLA_FLOAT32};
  ASSERT_TRUE(tpla_cuda_mirror_upper(g_ctx, v, 0, (tpla_batch_t){2, 1000}, NULL) != TPLA_SUCCESS);
  ASSERT_CONTAINS(tpla_last_error(), "mirror");
  ASSERT_TRUE(tpla_cuda_axpby(g_ctx, v, v, 1.0f, 0.0f, (tpla_batch_t){2, 1000}, NULL) !=
              TPLA_SUCCESS);
  ASSERT_CONTAINS(tpla_last_error(), "axpby");
  ASSERT_TRUE(cudaGetLastError() == cudaSuccess); /* nothing left behind */
  cudaFree(a);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  g_ready = open_single_ctx(0, &g_comm, &g_ctx) == 0;
  TEST(test_axpby_batch_equals_members);
  TEST(test_mirror_batch_equals_members);
  TEST(test_normalize_and_store_lists);
  TEST(test_misaligned_stride_is_refused);
  if (g_ready)
    close_single_ctx(g_comm, g_ctx);
  return test_summary();
}

#else /* no CUDA executor in this build */
TEST_MAIN_WITHOUT_CUDA()
#endif
