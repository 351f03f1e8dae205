/*
 * test_gpu_overlap_graph_bt.c - an FP8 AllGather+GEMM plan with op(B) N
 * keeps B^T in its staging and reuses it for a call with the same B pointer,
 * ld and nonzero b_version. CUDA graphs must not fool that cache (review 93):
 *   - a graph replayed between uncaptured calls rewrites the staged B^T with
 *     its own B, so an uncaptured call of the cached B must transpose again;
 *   - a call captured while the cache held its B must transpose inside the
 *     graph, since uncaptured calls may stage another B before the replay;
 *   - a graph of another member of the plan's window group (here a bf16
 *     SERIAL GEMM+ReduceScatter, whose partial product lies where the
 *     group's staging keeps B^T) rewrites the staged B^T when it replays,
 *     although that member stages no B^T itself (review 98); and a member
 *     that needs larger buffers than the graph uses is refused (review 101).
 * One rank; A, B1 and B2 constant (1, 1 and 2 in E4M3), so each D is k or
 * 2k everywhere, exactly.
 *
 * Run: build-gpu/tests/test_gpu_overlap_graph_bt (exits 77 without a GPU).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "ops_dbuf.h"

#define DIM 64

/* 0 if every element of the DIM x DIM bf16 D equals want. */
static int all_equal(const void *d, float want, const char *what) {
  uint16_t host[DIM * DIM];
  if (CUDA_FAILED(cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost)))
    return 1;
  for (int i = 0; i < DIM * DIM; i++) {
    float got = (float)tpla_load_elem(host, TPLA_BFLOAT16, (size_t)i);
    if (got != want) {
      fprintf(stderr, "  %s: D[%d] = %g, want %g (a stale staged B^T?)\n", what, i, got, want);
      return 1;
    }
  }
  return 0;
}

static void test_graphs_and_the_staged_b_transpose(void) {
  NEED_CTX();
  tpla_features_t feat = TPLA_FEATURES_INIT;
  ASSERT_OK(tpla_get_features(&feat, 0));
  if (!feat.fp8)
    SKIP("device 0 has no FP8 GEMMs");
  void *a = NULL, *b[2] = {NULL, NULL}, *d = NULL;
  ASSERT_TRUE(!CUDA_FAILED(cudaMalloc(&a, DIM * DIM)) &&
              !CUDA_FAILED(cudaMalloc(&b[0], DIM * DIM)) &&
              !CUDA_FAILED(cudaMalloc(&b[1], DIM * DIM)) &&
              !CUDA_FAILED(cudaMalloc(&d, DIM * DIM * 2)));
  ASSERT_TRUE(!CUDA_FAILED(gpu_fill(a, 0x38, DIM * DIM)) &&    /* E4M3 1.0 */
              !CUDA_FAILED(gpu_fill(b[0], 0x38, DIM * DIM)) && /* 1.0 */
              !CUDA_FAILED(gpu_fill(b[1], 0x40, DIM * DIM)));  /* 2.0 */
  tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
  x.local_rows = DIM, x.k = DIM, x.n = DIM, x.op_b = TPLA_OP_N, x.mode = TPLA_OVERLAP_OVERLAP;
  x.dtype = TPLA_FLOAT8_E4M3, x.d_dtype = TPLA_BFLOAT16;
  tpla_ag_gemm_plan_t plan = NULL, fresh = NULL; /* scenario 2 on a plan with no graph yet */
  ASSERT_OK(tpla_ag_gemm_plan_create(&plan, g_ctx, &x));
  ASSERT_OK(tpla_ag_gemm_plan_create(&fresh, g_ctx, &x));
  tpla_matrix_t am = {a, DIM, DIM, DIM, TPLA_FLOAT8_E4M3}, dm = {d, DIM, DIM, DIM, TPLA_BFLOAT16};
  tpla_matrix_t bm[2] = {{b[0], DIM, DIM, DIM, TPLA_FLOAT8_E4M3},
                         {b[1], DIM, DIM, DIM, TPLA_FLOAT8_E4M3}};
  tpla_overlap_args_t args[2] = {TPLA_OVERLAP_ARGS_INIT, TPLA_OVERLAP_ARGS_INIT};
  args[0].b_version = 1, args[1].b_version = 2;
  const float want[2] = {DIM, 2 * DIM};
  int bad = 0;
  cudaGraph_t graph[2] = {NULL, NULL};
  cudaGraphExec_t exec[2] = {NULL, NULL};
  /* 1. a graph of B2; B1 staged uncaptured; the graph replayed; B1 again uncaptured must
   * not use the B2^T the replay left */
  bad |= CUDA_FAILED(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal)) ||
         TPLA_FAILED(tpla_ag_gemm(plan, dm, am, bm[1], &args[1], g_stream)) ||
         CUDA_FAILED(cudaStreamEndCapture(g_stream, &graph[0])) ||
         CUDA_FAILED(cudaGraphInstantiate(&exec[0], graph[0], 0));
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(plan, dm, am, bm[0], &args[0], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) || all_equal(d, want[0], "B1 staged");
  bad |= bad || CUDA_FAILED(cudaGraphLaunch(exec[0], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) || all_equal(d, want[1], "graph of B2");
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(plan, dm, am, bm[0], &args[0], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
         all_equal(d, want[0], "B1 uncaptured after a replay of B2's graph");
  /* 2. B1 staged; a graph captured while it is (a cache hit but for the capture); B2 staged
   * uncaptured; the replay must be B1's */
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(fresh, dm, am, bm[0], &args[0], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) || all_equal(d, want[0], "B1 staged");
  bad |= bad || CUDA_FAILED(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal)) ||
         TPLA_FAILED(tpla_ag_gemm(fresh, dm, am, bm[0], &args[0], g_stream)) ||
         CUDA_FAILED(cudaStreamEndCapture(g_stream, &graph[1])) ||
         CUDA_FAILED(cudaGraphInstantiate(&exec[1], graph[1], 0));
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(fresh, dm, am, bm[1], &args[1], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) || all_equal(d, want[1], "B2 uncaptured");
  bad |= bad || CUDA_FAILED(cudaGraphLaunch(exec[1], g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
         all_equal(d, want[0], "a graph of B1 replayed after B2 was staged");
  for (int i = 0; i < 2; i++) {
    if (exec[i])
      cudaGraphExecDestroy(exec[i]);
    if (graph[i])
      cudaGraphDestroy(graph[i]);
  }
  tpla_ag_gemm_plan_destroy(plan);
  tpla_ag_gemm_plan_destroy(fresh);
  cudaFree(a), cudaFree(b[0]), cudaFree(b[1]), cudaFree(d);
  ASSERT_EQ_INT(bad, 0);
}

/* Window group 7, SERIAL: an FP8 AG+GEMM (op(B) N, so a staged B^T at the staging's start)
 * and a bf16 GEMM+RS whose graph writes its 64 x 64 partial product (64.0 = 0x4280 in bf16,
 * E4M3 -0 and 2.25 as bytes) over that B^T when it replays. */
static void test_a_group_members_graph_and_the_staged_b_transpose(void) {
  NEED_CTX();
  tpla_features_t feat = TPLA_FEATURES_INIT;
  ASSERT_OK(tpla_get_features(&feat, 0));
  if (!feat.fp8)
    SKIP("device 0 has no FP8 GEMMs");
  uint16_t ones[DIM * DIM]; /* bf16 1.0 */
  for (int i = 0; i < DIM * DIM; i++)
    ones[i] = 0x3F80;
  void *a8 = NULL, *b8 = NULL, *one16 = NULL, *d = NULL, *d16 = NULL;
  ASSERT_TRUE(!CUDA_FAILED(cudaMalloc(&a8, DIM * DIM)) &&
              !CUDA_FAILED(cudaMalloc(&b8, DIM * DIM)) &&
              !CUDA_FAILED(cudaMalloc(&one16, sizeof ones)) &&
              !CUDA_FAILED(cudaMalloc(&d, DIM * DIM * 2)) &&
              !CUDA_FAILED(cudaMalloc(&d16, DIM * DIM * 2)));
  ASSERT_TRUE(!CUDA_FAILED(gpu_fill(a8, 0x38, DIM * DIM)) && /* E4M3 1.0 */
              !CUDA_FAILED(gpu_fill(b8, 0x38, DIM * DIM)) &&
              !CUDA_FAILED(gpu_upload(one16, ones, sizeof ones)));
  tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
  x.local_rows = DIM, x.k = DIM, x.n = DIM, x.op_b = TPLA_OP_N, x.mode = TPLA_OVERLAP_SERIAL;
  x.dtype = TPLA_FLOAT8_E4M3, x.d_dtype = TPLA_BFLOAT16, x.window_group = 7;
  tpla_gemm_rs_desc_t y = TPLA_GEMM_RS_DESC_INIT;
  y.m = DIM, y.k = DIM, y.n = DIM, y.mode = TPLA_OVERLAP_SERIAL, y.window_group = 7;
  y.dtype = y.d_dtype = TPLA_BFLOAT16;
  tpla_ag_gemm_plan_t fp8 = NULL;
  tpla_gemm_rs_plan_t other = NULL;
  ASSERT_OK(tpla_ag_gemm_plan_create(&fp8, g_ctx, &x));
  ASSERT_OK(tpla_gemm_rs_plan_create(&other, g_ctx, &y));
  tpla_matrix_t am = {a8, DIM, DIM, DIM, TPLA_FLOAT8_E4M3}, bm = {b8, DIM, DIM, DIM, x.dtype};
  tpla_matrix_t dm = {d, DIM, DIM, DIM, TPLA_BFLOAT16}, d16m = {d16, DIM, DIM, DIM, TPLA_BFLOAT16};
  tpla_matrix_t onem = {one16, DIM, DIM, DIM, TPLA_BFLOAT16};
  tpla_overlap_args_t args = TPLA_OVERLAP_ARGS_INIT, plain = TPLA_OVERLAP_ARGS_INIT;
  args.b_version = 1;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  /* the other member captured; B staged uncaptured; the graph replayed; B again */
  int bad = CUDA_FAILED(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal)) ||
            TPLA_FAILED(tpla_gemm_rs(other, d16m, onem, onem, &plain, g_stream)) ||
            CUDA_FAILED(cudaStreamEndCapture(g_stream, &graph)) ||
            CUDA_FAILED(cudaGraphInstantiate(&exec, graph, 0));
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(fp8, dm, am, bm, &args, g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) || all_equal(d, DIM, "B staged");
  bad |= bad || CUDA_FAILED(cudaGraphLaunch(exec, g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
         all_equal(d16, DIM, "the other member's graph");
  bad |= bad || TPLA_FAILED(tpla_ag_gemm(fp8, dm, am, bm, &args, g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
         all_equal(d, DIM, "B again after a replay of the other member's graph");
  /* the graph uses the group's buffers: a member that needs larger ones is refused (review
   * 101: they were freed under it), one that fits joins, and the group still works */
  tpla_gemm_rs_plan_t larger = NULL, fits = NULL;
  y.m = 2 * DIM;
  ASSERT_EQ_INT(tpla_gemm_rs_plan_create(&larger, g_ctx, &y), TPLA_ERROR_INVALID_USAGE);
  ASSERT_CONTAINS(tpla_last_error(), "window_group 7 would move to larger buffers");
  ASSERT_TRUE(larger == NULL);
  y.m = DIM / 2;
  ASSERT_OK(tpla_gemm_rs_plan_create(&fits, g_ctx, &y));
  bad |= bad || CUDA_FAILED(cudaGraphLaunch(exec, g_stream)) ||
         TPLA_FAILED(tpla_ag_gemm(fp8, dm, am, bm, &args, g_stream)) ||
         CUDA_FAILED(cudaStreamSynchronize(g_stream)) ||
         all_equal(d16, DIM, "the graph after a refused member") ||
         all_equal(d, DIM, "B after a refused member");
  tpla_gemm_rs_plan_destroy(fits);
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  tpla_ag_gemm_plan_destroy(fp8);
  tpla_gemm_rs_plan_destroy(other);
  cudaFree(a8), cudaFree(b8), cudaFree(one16), cudaFree(d), cudaFree(d16);
  ASSERT_EQ_INT(bad, 0);
}

int main(void) {
  TEST(test_create_single_rank_context);
  TEST(test_graphs_and_the_staged_b_transpose);
  TEST(test_a_group_members_graph_and_the_staged_b_transpose);
  destroy_single_rank_context();
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
