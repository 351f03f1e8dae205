/*
 * test_gpu_alltoallv.c - the CUDA executor's personalized all-to-all
 * (tpla_cuda_alltoallv, src/cuda/cuda_ops.h; the batched Newton-Schulz owners
 * move shards with it): on a single-rank context, and across 2-4 GPUs (one
 * thread per GPU) when present. Blocks of uneven and zero counts laid out with
 * gaps; every received element must be exact and every gap untouched.
 *
 * Run: ctest --test-dir build -L gpu -R test_gpu_alltoallv (exits 77 without
 * a GPU).
 */
#include "internal.h"
#include "test.h"

#ifdef TPLA_HAVE_CUDA
#include "../../src/cuda/cuda_ops.h"
#include "gpu_util.h"

#include <pthread.h>
#include <stdlib.h>

/* Elements rank `src` sends to rank `dst`: zero for some pairs (and for
 * rank 1's own block), never for rank 0's own block. */
static size_t a2a_count(int src, int dst) { return (size_t)((src + 2 * dst + 1) % 4) * 1001; }
/* Exact in fp32: below 2^24. */
static float a2a_value(int src, int dst, size_t k) {
  return (float)(src * 1000000 + dst * 4000) + (float)k;
}

/* One rank's exchange: blocks laid out with gaps (send 2, recv 1 element)
 * that must stay untouched. Returns 0 when every received block is right. */
static int a2a_run(tpla_ctx_t ctx, int rank, int nranks, cudaStream_t stream) {
  size_t sc[8], sd[8], rc[8], rd[8], stotal = 0, rtotal = 0;
  for (int q = 0; q < nranks; q++) {
    sc[q] = a2a_count(rank, q);
    sd[q] = stotal + 2;
    stotal = sd[q] + sc[q];
    rc[q] = a2a_count(q, rank);
    rd[q] = rtotal + 1;
    rtotal = rd[q] + rc[q];
  }
  rtotal += 1;
  float *hs = calloc(stotal + 1, sizeof *hs), *hr = malloc((rtotal + 1) * sizeof *hr);
  void *ds = NULL, *dr = NULL;
  int bad = hs == NULL || hr == NULL;
  for (int q = 0; q < nranks && !bad; q++)
    for (size_t k = 0; k < sc[q]; k++)
      hs[sd[q] + k] = a2a_value(rank, q, k);
  for (size_t k = 0; k < rtotal && !bad; k++)
    hr[k] = -1.0f;
  bad = bad || cudaMalloc(&ds, (stotal + 1) * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&dr, rtotal * sizeof(float)) != cudaSuccess ||
        cudaMemcpy(ds, hs, (stotal + 1) * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dr, hr, rtotal * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaStreamSynchronize(cudaStreamLegacy) != cudaSuccess; /* before `stream`'s work */
  if (!bad)
    bad = TPLA_FAILED(tpla_cuda_alltoallv(ctx, dr, rc, rd, ds, sc, sd, TPLA_FLOAT32, stream));
  bad = bad || cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpy(hr, dr, rtotal * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess;
  size_t next = 0; /* walk the receive buffer: gaps must still read -1 */
  for (int q = 0; q < nranks && !bad; q++) {
    for (; next < rd[q] && !bad; next++)
      bad = hr[next] != -1.0f;
    for (size_t k = 0; k < rc[q] && !bad; k++, next++)
      bad = hr[next] != a2a_value(q, rank, k);
  }
  for (; next < rtotal && !bad; next++)
    bad = hr[next] != -1.0f;
  if (bad)
    fprintf(stderr, "  rank %d of %d: received data wrong near element %zu\n", rank, nranks,
            next);
  cudaFree(ds);
  cudaFree(dr);
  free(hs);
  free(hr);
  return bad;
}

static void test_alltoallv_single_rank(void) {
  struct ncclComm *comm;
  tpla_ctx_t ctx;
  cudaStream_t stream = NULL;
  ASSERT_EQ_INT(open_single_ctx(0, &comm, &ctx), 0);
  ASSERT_TRUE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  int bad = a2a_run(ctx, 0, 1, stream);
  cudaStreamDestroy(stream);
  close_single_ctx(comm, ctx);
  ASSERT_EQ_INT(bad, 0);
}

typedef struct {
  int rank, nranks, failed;
  tpla_unique_id_t id;
} a2a_rank_t;

static void *a2a_thread(void *p) {
  a2a_rank_t *r = p;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000; /* a broken peer fails the test instead of hanging it */
  struct ncclComm *comm = NULL;
  tpla_ctx_t ctx = NULL;
  cudaStream_t stream = NULL;
  r->failed = 1;
  if (tpla_nccl_comm_create(&comm, &r->id, r->nranks, r->rank, r->rank, &cfg) != TPLA_SUCCESS ||
      tpla_ctx_create_nccl(&ctx, comm, &cfg) != TPLA_SUCCESS)
    fprintf(stderr, "  rank %d: setup failed: %s\n", r->rank, tpla_last_error());
  else if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess)
    r->failed = a2a_run(ctx, r->rank, r->nranks, stream);
  if (stream)
    cudaStreamDestroy(stream);
  tpla_ctx_destroy(ctx);
  tpla_nccl_comm_destroy(comm);
  return NULL;
}

static void test_alltoallv_across_gpus(void) {
  int devices = 0;
  ASSERT_TRUE(cudaGetDeviceCount(&devices) == cudaSuccess);
  REQUIRE_GPUS(2, devices);
  int n = devices < 4 ? devices : 4;
  a2a_rank_t ranks[4];
  pthread_t threads[4];
  tpla_unique_id_t id;
  ASSERT_OK(tpla_nccl_get_unique_id(&id));
  for (int r = 0; r < n; r++) {
    ranks[r] = (a2a_rank_t){r, n, 1, id};
    ASSERT_EQ_INT(pthread_create(&threads[r], NULL, a2a_thread, &ranks[r]), 0);
  }
  int failed = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(threads[r], NULL);
    failed += ranks[r].failed;
  }
  ASSERT_EQ_INT(failed, 0);
}

int main(void) {
  GPU_TEST_MAIN_SKIP_WITHOUT(gpu_count());
  TEST(test_alltoallv_single_rank);
  TEST(test_alltoallv_across_gpus);
  return test_summary();
}

#else /* no CUDA executor in this build */
TEST_MAIN_WITHOUT_CUDA()
#endif
