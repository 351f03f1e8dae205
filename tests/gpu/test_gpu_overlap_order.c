/*
 * test_gpu_overlap_order.c - an overlapped call's output is stream-ordered:
 * work the caller enqueues on its stream right after the call (here a copy
 * of D) sees D complete, although the call's GEMMs run on the plan's own
 * lanes. One rank, each operation (AG+GEMM, GEMM+RS, GEMM+AR) in both
 * modes; the GEMMs are long (k = 8192), D starts as NaN, and the copy must
 * equal D once the device is idle. (Mutation run 216: dropping the join of
 * the lanes into the caller's stream passed every other GPU test; this test
 * catches it, run 218.) And calls of one plan on two streams, unsynchronized,
 * each equal to the same call alone. (Review 93's race, a call on another
 * stream overwriting the window the last call's GEMMs still read, needs two
 * ranks: on one the racing lanes carry nothing the GEMMs read, and this test
 * passed without the fix too, run 217.)
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

static void *make_plan(int kind, tpla_overlap_mode_t mode) {
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
  return TPLA_FAILED(st) ? NULL : plan;
}

static void destroy_plan(int kind, void *plan) {
  if (kind == 0)
    tpla_ag_gemm_plan_destroy(plan);
  else if (kind == 1)
    tpla_gemm_rs_plan_destroy(plan);
  else
    tpla_gemm_ar_plan_destroy(plan);
}

static int call(int kind, void *plan, void *d, void *a, void *b, cudaStream_t stream) {
  tpla_matrix_t am = {a, M, K, K, TPLA_BFLOAT16}, bm = {b, N, K, K, TPLA_BFLOAT16};
  tpla_matrix_t dm = {d, M, N, N, TPLA_BFLOAT16};
  tpla_status_t st = kind == 0   ? tpla_ag_gemm(plan, dm, am, bm, NULL, stream)
                     : kind == 1 ? tpla_gemm_rs(plan, dm, am, bm, NULL, stream)
                                 : tpla_gemm_ar(plan, dm, am, bm, NULL, stream);
  return TPLA_FAILED(st);
}

static const char *name(int kind, tpla_overlap_mode_t mode) {
  static const char *names[3][2] = {{"AG+GEMM OVERLAP", "AG+GEMM SERIAL"},
                                    {"GEMM+RS OVERLAP", "GEMM+RS SERIAL"},
                                    {"GEMM+AR OVERLAP", "GEMM+AR SERIAL"}};
  return names[kind][mode == TPLA_OVERLAP_SERIAL];
}

/* 0 if the M x N bf16 matrices at x and y (device) are equal; else says where not. */
static int same_bytes(const void *x, const void *y, const char *what) {
  const size_t bytes = (size_t)M * N * 2;
  unsigned char *hx = malloc(bytes), *hy = malloc(bytes);
  int bad = hx == NULL || hy == NULL || CUDA_FAILED(cudaMemcpy(hx, x, bytes, cudaMemcpyDefault)) ||
            CUDA_FAILED(cudaMemcpy(hy, y, bytes, cudaMemcpyDefault));
  if (!bad && memcmp(hx, hy, bytes) != 0) {
    size_t first = 0;
    while (hx[first] == hy[first])
      first++;
    fprintf(stderr, "  %s: differ from byte %zu\n", what, first);
    bad = 1;
  }
  free(hx);
  free(hy);
  return bad;
}

/* Three calls, each followed by a copy of D on the same stream; 0 if every copy equals D
 * once the device is idle. */
static int ordered(int kind, tpla_overlap_mode_t mode, void *a, void *b, void *d, void *copy) {
  const size_t d_bytes = (size_t)M * N * 2;
  void *plan = make_plan(kind, mode);
  int bad = plan == NULL;
  for (int rep = 0; rep < 3 && !bad; rep++) {
    bad |= CUDA_FAILED(cudaMemsetAsync(d, 0xFF, d_bytes, g_stream)); /* NaN */
    bad |= CUDA_FAILED(cudaMemsetAsync(copy, 0, d_bytes, g_stream));
    bad |= call(kind, plan, d, a, b, g_stream);
    bad |= CUDA_FAILED(cudaMemcpyAsync(copy, d, d_bytes, cudaMemcpyDeviceToDevice, g_stream));
    bad |= CUDA_FAILED(cudaDeviceSynchronize());
    char what[96];
    snprintf(what, sizeof what, "%s, call %d: the copy of D enqueued after the call and D",
             name(kind, mode), rep + 1);
    if (!bad)
      bad = same_bytes(copy, d, what);
  }
  destroy_plan(kind, plan);
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

/* Calls of one plan on two streams, back to back and unsynchronized, on inputs that
 * alternate: each D must equal the same call made alone (a call on the other stream must
 * not overwrite the plan's buffers while the last one still reads them). */
static int two_streams(int kind, tpla_overlap_mode_t mode, void *a[2], void *b, void *d[4],
                       void *ref[2], cudaStream_t other) {
  const size_t d_bytes = (size_t)M * N * 2;
  void *plan = make_plan(kind, mode);
  int bad = plan == NULL;
  for (int i = 0; i < 2 && !bad; i++) /* the references: one call at a time */
    bad |= call(kind, plan, ref[i], a[i], b, g_stream) ||
           CUDA_FAILED(cudaStreamSynchronize(g_stream));
  for (int i = 0; i < 4 && !bad; i++)
    bad |= CUDA_FAILED(cudaMemset(d[i], 0xFF, d_bytes));
  bad |= CUDA_FAILED(cudaDeviceSynchronize());
  for (int i = 0; i < 4 && !bad; i++)
    bad |= call(kind, plan, d[i], a[i % 2], b, i % 2 ? other : g_stream);
  bad |= CUDA_FAILED(cudaDeviceSynchronize());
  for (int i = 0; i < 4 && !bad; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s, call %d of 4 on alternating streams", name(kind, mode),
             i + 1);
    bad |= same_bytes(d[i], ref[i % 2], what);
  }
  destroy_plan(kind, plan);
  return bad;
}

static void test_calls_on_two_streams(void) {
  NEED_CTX();
  void *a[2] = {NULL, NULL}, *b = NULL, *d[4] = {NULL}, *ref[2] = {NULL};
  cudaStream_t other = NULL;
  int ok = !CUDA_FAILED(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking)) &&
           !CUDA_FAILED(cudaMalloc(&b, (size_t)N * K * 2));
  for (int i = 0; i < 2 && ok; i++)
    ok = !CUDA_FAILED(cudaMalloc(&a[i], (size_t)M * K * 2)) &&
         !CUDA_FAILED(cudaMalloc(&ref[i], (size_t)M * N * 2)) &&
         !CUDA_FAILED(gpu_fill(a[i], i ? 0x40 : 0x3C, (size_t)M * K * 2)); /* 3.0, 0.0115 */
  for (int i = 0; i < 4 && ok; i++)
    ok = !CUDA_FAILED(cudaMalloc(&d[i], (size_t)M * N * 2));
  ok = ok && !CUDA_FAILED(gpu_fill(b, 0x3C, (size_t)N * K * 2));
  int failures = !ok;
  for (int kind = 0; kind < 3 && ok; kind++)
    for (int serial = 0; serial < 2; serial++)
      failures += two_streams(kind, serial ? TPLA_OVERLAP_SERIAL : TPLA_OVERLAP_OVERLAP, a, b, d,
                              ref, other);
  for (int i = 0; i < 4; i++)
    cudaFree(d[i]);
  cudaFree(a[0]), cudaFree(a[1]), cudaFree(ref[0]), cudaFree(ref[1]), cudaFree(b);
  if (other)
    cudaStreamDestroy(other);
  ASSERT_EQ_INT(failures, 0);
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_output_follows_in_stream_order);
  TEST(test_calls_on_two_streams);
  destroy_single_rank_context();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
