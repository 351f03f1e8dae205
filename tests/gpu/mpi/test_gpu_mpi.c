/*
 * test_gpu_mpi.c - the CUDA executor with one process per rank, as a
 * training job runs it: rank 0 makes the NCCL unique id, MPI_Bcast ships
 * it, each rank takes GPU (node-local rank % GPUs), creates its
 * communicator with tpla_nccl_comm_create and a context with
 * tpla_ctx_create_nccl, and runs every collective and a GEMM against exact
 * host references (tests/gpu/coll_checks.h), then a plan-time exchange.
 *
 * Run: mpirun -np 2 --allow-run-as-root --oversubscribe build-gpu/tests/gpu/mpi/test_gpu_mpi
 * (tests/gpu/run.sh does). Alone it runs as a one-rank MPI singleton.
 * Exits 77 without a GPU (before MPI_Init) or with more ranks on a node
 * than GPUs; every rank exits 1 if any rank failed.
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "coll_checks.h"
#include "gpu_util.h"

#include <mpi.h>

static int g_rank, g_size, g_device;
static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;

static void test_ctx_info(void) {
  int rank = -1, nranks = -1, device = -1;
  tpla_executor_t ex = TPLA_EXECUTOR_HOST;
  ASSERT_OK(tpla_ctx_get_info(g_ctx, &rank, &nranks, &ex, &device));
  ASSERT_EQ_INT(rank, g_rank);
  ASSERT_EQ_INT(nranks, g_size);
  ASSERT_EQ_INT(ex, TPLA_EXECUTOR_CUDA);
  ASSERT_EQ_INT(device, g_device);
}

static void test_collectives_and_gemm(void) {
  rank_env_t e = {g_ctx, NULL, g_rank, g_size};
  ASSERT_EQ_INT(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking), cudaSuccess);
  int failures = run_collective_checks(&e);
  cudaStreamDestroy(e.stream);
  ASSERT_EQ_INT(failures, 0);
}

/* The backend's blocking host-memory allgather that plans use to agree. */
static void test_plan_time_exchange(void) {
  int mine[3] = {g_rank, g_rank * 10 + 1, -g_rank};
  int *all = calloc((size_t)g_size * 3, sizeof(int));
  ASSERT_TRUE(all != NULL);
  ASSERT_TRUE(g_ctx->backend->exchange != NULL);
  tpla_status_t s = g_ctx->backend->exchange(g_ctx, all, mine, sizeof mine);
  int bad = 0;
  for (int r = 0; r < g_size; r++)
    bad += all[3 * r] != r || all[3 * r + 1] != r * 10 + 1 || all[3 * r + 2] != -r;
  free(all);
  ASSERT_OK(s);
  ASSERT_EQ_INT(bad, 0);
}

/* Node-local rank and size, so that ranks of one node take distinct GPUs. */
static void local_rank(int *lrank, int *lsize) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, lrank);
  MPI_Comm_size(node, lsize);
  MPI_Comm_free(&node);
}

/* Every rank agrees to skip: max over ranks of `want`. */
static int all_agree(int want) {
  int any = 0;
  MPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}

static int setup(void) {
  /* Rank 0's id and status travel together: if ncclGetUniqueId failed,
   * every rank learns it and nobody waits for a communicator. */
  struct {
    tpla_unique_id_t id;
    int ok;
  } msg;
  memset(&msg, 0, sizeof msg);
  if (g_rank == 0)
    msg.ok = !TPLA_FAILED(tpla_nccl_get_unique_id(&msg.id));
  MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (!msg.ok)
    return 1;
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  if (TPLA_FAILED(tpla_nccl_comm_create(&g_comm, &msg.id, g_size, g_rank, g_device, &cfg)))
    return 1;
  if (TPLA_FAILED(tpla_ctx_create_nccl(&g_ctx, g_comm, &cfg)))
    return 1;
  return 0;
}

int main(int argc, char **argv) {
  int ndev = gpu_count();
  if (ndev == 0) {
    printf("skip test_gpu_mpi: no CUDA device\n0 passed, 0 failed, 1 skipped\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  int lrank = 0, lsize = 1;
  local_rank(&lrank, &lsize);
  int skip = lsize > ndev || g_size > COLL_MAX_RANKS;
  if (all_agree(skip)) {
    if (g_rank == 0)
      printf("skip test_gpu_mpi: %d ranks on a node with %d GPUs (or more than %d ranks)\n"
             "0 passed, 0 failed, 1 skipped\n",
             lsize, ndev, COLL_MAX_RANKS);
    MPI_Finalize();
    return 77;
  }
  g_device = lrank % ndev;
  watchdog_arm("test_gpu_mpi", 280);
  printf("# rank %d of %d on device %d\n", g_rank, g_size, g_device);
  int setup_failed = CUDA_FAILED(cudaSetDevice(g_device)) || setup();
  if (all_agree(setup_failed)) {
    fprintf(stderr, "rank %d: setup failed on %s\n", g_rank,
            setup_failed ? "this rank" : "another rank");
    tpla_ctx_destroy(g_ctx);
    tpla_nccl_comm_destroy(g_comm);
    MPI_Finalize();
    return 1;
  }
  TEST(test_ctx_info);
  TEST(test_collectives_and_gemm);
  TEST(test_plan_time_exchange);
  if (TPLA_FAILED(tpla_ctx_destroy(g_ctx)) || TPLA_FAILED(tpla_nccl_comm_destroy(g_comm)))
    test_failed_++;
  printf("rank %d: ", g_rank);
  int rc = test_summary();
  int any_failed = all_agree(rc == 1);
  MPI_Finalize();
  return any_failed ? 1 : rc;
}

#else /* a build without the CUDA executor */

int main(void) {
  printf("skip test_gpu_mpi: built without the CUDA executor\n0 passed, 0 failed, 1 skipped\n");
  return 77;
}
#endif
