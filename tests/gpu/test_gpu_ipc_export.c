/*
 * test_gpu_ipc_export.c - a transfer window whose CUDA IPC export fails (as on
 * drivers without CUDA IPC: WSL2's cudaIpcGetMemHandle returns out of memory)
 * must not fail plan creation: only a peer in another process needs the
 * handle, and for such a peer AUTO then becomes SENDRECV on every rank
 * (review 101; the export failed every AUTO overlap plan and every 2-rank
 * Newton-Schulz plan before). cudaIpcGetMemHandle is wrapped at link time
 * (tests/CMakeLists.txt) to fail while g_fail_exports is set. One rank: an
 * AUTO and a PEER AllGather+GEMM plan are created with the export failing
 * and compute D. The 2-process case (AUTO -> SENDRECV on both ranks, PEER
 * NOT_SUPPORTED on both) is not here.
 *
 * Run: build-gpu/tests/test_gpu_ipc_export (exits 77 without a GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ops_dbuf.h"

#define DIM 64

static int g_fail_exports, g_exports_failed;

cudaError_t __real_cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t __wrap_cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t __wrap_cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
  if (!g_fail_exports)
    return __real_cudaIpcGetMemHandle(handle, ptr);
  g_exports_failed++;
  return cudaErrorMemoryAllocation;
}

static void test_plans_without_an_ipc_export(void) {
  NEED_CTX();
  uint16_t ones[DIM * DIM]; /* bf16 1.0 */
  for (int i = 0; i < DIM * DIM; i++)
    ones[i] = 0x3F80;
  void *a = NULL, *d = NULL;
  ASSERT_TRUE(!CUDA_FAILED(cudaMalloc(&a, sizeof ones)) &&
              !CUDA_FAILED(cudaMalloc(&d, sizeof ones)) &&
              !CUDA_FAILED(gpu_upload(a, ones, sizeof ones)));
  tpla_matrix_t am = {a, DIM, DIM, DIM, TPLA_BFLOAT16}, dm = {d, DIM, DIM, DIM, TPLA_BFLOAT16};
  const tpla_transport_t kinds[2] = {TPLA_TRANSPORT_AUTO, TPLA_TRANSPORT_PEER};
  for (int i = 0; i < 2; i++) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = DIM, x.k = DIM, x.n = DIM, x.op_b = TPLA_OP_T;
    x.dtype = x.d_dtype = TPLA_BFLOAT16, x.mode = TPLA_OVERLAP_OVERLAP, x.transport = kinds[i];
    tpla_ag_gemm_plan_t plan = NULL;
    int before = g_exports_failed;
    g_fail_exports = 1;
    tpla_status_t st = tpla_ag_gemm_plan_create(&plan, g_ctx, &x);
    g_fail_exports = 0;
    if (st != TPLA_SUCCESS)
      fprintf(stderr, "  %s: %s\n", i ? "PEER" : "AUTO", tpla_last_error());
    ASSERT_OK(st);
    ASSERT_TRUE(g_exports_failed > before); /* the wrapper was in the way */
    ASSERT_TRUE(!CUDA_FAILED(gpu_fill(d, 0xFF, sizeof ones))); /* NaN */
    ASSERT_OK(tpla_ag_gemm(plan, dm, am, am, NULL, g_stream));
    ASSERT_TRUE(!CUDA_FAILED(cudaStreamSynchronize(g_stream)));
    uint16_t got[DIM * DIM];
    ASSERT_TRUE(!CUDA_FAILED(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost)));
    for (int j = 0; j < DIM * DIM; j++)
      ASSERT_EQ_INT(got[j], 0x4280); /* bf16 64 = k */
    tpla_ag_gemm_plan_destroy(plan);
  }
  cudaFree(a), cudaFree(d);
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_plans_without_an_ipc_export);
  destroy_single_rank_context();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
