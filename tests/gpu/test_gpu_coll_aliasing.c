/*
 * test_gpu_coll_aliasing.c - the CUDA executor refuses the collective buffers
 * NCCL would race on, as the host executor does (one rule, tpla_check_in_place
 * in src/core/validate.c): a partial overlap of an all-reduce's send and recv,
 * a reduce-scatter recv or an all-gather send inside the other buffer but not
 * at the rank's in-place block, a sendrecv recv overlapping send. Each
 * refusal is INVALID_ARGUMENT naming the argument, with the buffer untouched;
 * the in-place forms run and give the right values. One rank on GPU 0.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_coll_aliasing (exits 77
 * without a GPU).
 */
#include "internal.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "gpu_util.h"

#define N 64

/* INVALID_ARGUMENT from `fn` naming argument `arg` */
#define ASSERT_REFUSED(expr, fn, arg)                     \
  do {                                                    \
    ASSERT_STATUS(expr, TPLA_ERROR_INVALID_ARGUMENT);     \
    ASSERT_CONTAINS(tpla_last_error(), fn);               \
    ASSERT_CONTAINS(tpla_last_error(), "'" arg "'");      \
  } while (0)

static float host[N], back[N];

/* buf <- 0, 1, 2, ... */
static int reset(float *buf) {
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  return CUDA_FAILED(gpu_upload(buf, host, sizeof host));
}

/* buf holds 0, 1, 2, ... but elements [from, to), which hold i + shift */
static int holds(const float *buf, int from, int to, int shift) {
  if (CUDA_FAILED(cudaMemcpy(back, buf, sizeof back, cudaMemcpyDeviceToHost)))
    return 0;
  for (int i = 0; i < N; i++)
    if (back[i] != (float)(i >= from && i < to ? i + shift : i)) {
      fprintf(stderr, "  element %d is %g\n", i, (double)back[i]);
      return 0;
    }
  return 1;
}

static void test_refusals_leave_the_buffer_alone(void) {
  struct ncclComm *comm;
  tpla_ctx_t ctx;
  ASSERT_EQ_INT(open_single_ctx(0, &comm, &ctx), 0);
  float *buf = NULL;
  ASSERT_TRUE(cudaMalloc((void **)&buf, N * sizeof(float)) == cudaSuccess);
  ASSERT_EQ_INT(reset(buf), 0);
  const tpla_dtype_t f32 = TPLA_FLOAT32;
  size_t counts[1] = {16};
  ASSERT_REFUSED(tpla_allreduce(ctx, buf + 1, buf, 16, f32, NULL), "tpla_allreduce", "send");
  ASSERT_REFUSED(tpla_reduce_scatterv(ctx, buf + 2, buf, counts, f32, NULL),
                 "tpla_reduce_scatterv", "recv");
  ASSERT_REFUSED(tpla_allgatherv(ctx, buf, buf + 3, counts, f32, NULL), "tpla_allgatherv",
                 "send");
  ASSERT_REFUSED(tpla_sendrecv(ctx, buf, 16, 0, buf + 4, 16, 0, f32, NULL), "tpla_sendrecv",
                 "recv");
  ASSERT_TRUE(cudaDeviceSynchronize() == cudaSuccess);
  ASSERT_TRUE(holds(buf, 0, 0, 0));
  /* the in-place forms and a disjoint self exchange run (one rank: a sum is a copy) */
  ASSERT_OK(tpla_allreduce(ctx, buf, buf, 16, f32, NULL));
  ASSERT_OK(tpla_reduce_scatterv(ctx, buf, buf, counts, f32, NULL));
  ASSERT_OK(tpla_allgatherv(ctx, buf, buf, counts, f32, NULL));
  ASSERT_OK(tpla_sendrecv(ctx, buf, 16, 0, buf, 16, 0, f32, NULL));
  ASSERT_OK(tpla_sendrecv(ctx, buf + 16, 16, 0, buf + 32, 16, 0, f32, NULL));
  ASSERT_TRUE(cudaDeviceSynchronize() == cudaSuccess);
  ASSERT_TRUE(holds(buf, 32, 48, -16)); /* the copy: elements 16..31 into 32..47 */
  cudaFree(buf);
  close_single_ctx(comm, ctx);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  TEST(test_refusals_leave_the_buffer_alone);
  return test_summary();
}

#else /* no CUDA executor in this build */
TEST_MAIN_WITHOUT_CUDA()
#endif
