/*
 * test_gpu_overlap_procs.c - the overlap plans across processes: two forked
 * processes, one GPU each (the parent never touches CUDA), so the PEER
 * transport maps the peer's window with a CUDA IPC handle instead of a
 * pointer of the same process, and the same-process detection (the
 * per-process nonce) must say "other process". AllGather+GEMM,
 * GEMM+ReduceScatter and GEMM+AllReduce, bf16, with and without beta/bias,
 * several calls, against float64 (the cases of test_gpu_overlap_util.h).
 * With peer access the plans must resolve to PEER; without it to SENDRECV.
 *
 * Run: build/tests/test_gpu_overlap_procs (exits 77 with fewer than 2 GPUs).
 */
#include "test.h"
#include "tpla.h"

#ifdef TPLA_HAVE_CUDA
#include "test_gpu_overlap_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#define CHILD_SKIP 77

/* Read exactly n bytes within `ms` milliseconds; 0 on success. */
static int read_all(int fd, void *buf, size_t n, int ms) {
  size_t got = 0;
  while (got < n) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, ms);
    if (r <= 0)
      return 1;
    ssize_t k = read(fd, (char *)buf + got, n - got);
    if (k <= 0)
      return 1;
    got += (size_t)k;
  }
  return 0;
}

/* One process = one rank. Returns its exit status. */
static int child(int rank, int id_read, int id_write) {
  watchdog_arm(rank == 0 ? "test_gpu_overlap_procs rank 0" : "test_gpu_overlap_procs rank 1",
               600);
  if (gpu_count() < 2)
    return CHILD_SKIP;
  int can = 0, failures = 0;
  if (TPLA_FAILED(tpla_device_peer_access(&can, rank, 1 - rank)))
    return 1;
  tpla_unique_id_t id;
  if (rank == 0) {
    if (TPLA_FAILED(tpla_nccl_get_unique_id(&id)) || write(id_write, &id, sizeof id) != sizeof id)
      return 1;
  } else if (read_all(id_read, &id, sizeof id, 60000)) {
    fprintf(stderr, "  rank 1: no NCCL id from rank 0\n");
    return 1;
  }
  tpla_config_t cfg = TPLA_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  struct ncclComm *comm = NULL;
  gt_rank_t r = {rank, 2, rank, NULL, NULL, NULL};
  if (CUDA_FAILED(cudaSetDevice(rank)) ||
      TPLA_FAILED(tpla_nccl_comm_create(&comm, &id, 2, rank, rank, &cfg)))
    return 1;
  failures += TPLA_FAILED(tpla_ctx_create_nccl(&r.ctx, comm, &cfg));
  failures += CUDA_FAILED(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  for (int kind = 0; kind < 3 && failures == 0; kind++)
    for (int v = 0; v < 2 && failures == 0; v++) {
      gcase_t c;
      memset(&c, 0, sizeof c);
      c.kind = kind;
      c.dtype = c.d_dtype = TPLA_BFLOAT16;
      c.op_b = TPLA_OP_T;
      c.mode = TPLA_OVERLAP_OVERLAP;
      c.transport = can ? TPLA_TRANSPORT_PEER : TPLA_TRANSPORT_AUTO;
      c.chunks = 3;
      c.alpha = 1.0f;
      c.calls = v == 0 ? 3 : 2;
      c.bias = v;
      c.beta = v ? 1.0f : 0.0f;
      c.seed = seed + 101ull * (uint64_t)(kind * 2 + v);
      int64_t rows[2] = {v ? 300 : 256, v ? 212 : 256}, k[2] = {136, v ? 72 : 136};
      c.m = 0;
      for (int q = 0; q < 2; q++)
        c.rows[q] = rows[q], c.k[q] = kind == 0 ? k[0] : k[q], c.m += rows[q];
      c.n = 200;
      tpla_overlap_info_t info = TPLA_OVERLAP_INFO_INIT;
      failures += run_case(&r, &c, &info);
      tpla_transport_t want = can ? TPLA_TRANSPORT_PEER : TPLA_TRANSPORT_SENDRECV;
      if (failures == 0 && info.transport != want) {
        fprintf(stderr, "  rank %d: %s resolved to transport %d, expected %d\n", rank,
                kind_name(kind), (int)info.transport, (int)want);
        failures++;
      }
      if (rank == 0 && v == 0)
        printf("# two processes, %s: transport %s, chunks %d\n", kind_name(kind),
               info.transport == TPLA_TRANSPORT_PEER ? "PEER (CUDA IPC)" : "SENDRECV",
               info.chunks);
    }
  if (r.stream)
    cudaStreamDestroy(r.stream);
  failures += TPLA_FAILED(tpla_ctx_destroy(r.ctx));
  failures += TPLA_FAILED(tpla_nccl_comm_destroy(comm));
  return failures ? 1 : 0;
}

static void test_two_processes(void) {
  int fd[2];
  ASSERT_EQ_INT(pipe(fd), 0);
  fflush(NULL); /* the children must not repeat buffered output */
  pid_t pids[2];
  for (int rank = 0; rank < 2; rank++) {
    pids[rank] = fork();
    ASSERT_TRUE(pids[rank] >= 0);
    if (pids[rank] == 0) {
      int status = child(rank, fd[0], fd[1]);
      fflush(NULL);
      _exit(status);
    }
  }
  close(fd[0]);
  close(fd[1]);
  int status[2] = {-1, -1}, done = 0;
  time_t deadline = time(NULL) + 900;
  while (done < 2 && time(NULL) < deadline) {
    for (int q = 0; q < 2; q++) {
      int st;
      if (status[q] == -1 && waitpid(pids[q], &st, WNOHANG) == pids[q]) {
        status[q] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        done++;
      }
    }
    usleep(20000);
  }
  for (int q = 0; q < 2; q++)
    if (status[q] == -1) { /* a hang: end it */
      kill(pids[q], SIGKILL);
      waitpid(pids[q], NULL, 0);
      fprintf(stderr, "  rank %d did not finish in 900 s\n", q);
    }
  if (status[0] == CHILD_SKIP && status[1] == CHILD_SKIP)
    REQUIRE_GPUS(2, gpu_count()); /* the children found fewer */
  ASSERT_EQ_INT(status[0], 0);
  ASSERT_EQ_INT(status[1], 0);
}

int main(void) {
  /* no CUDA call here: the children initialize CUDA after the fork */
  seed = gpu_fresh_seed("test_gpu_overlap_procs");
  TEST(test_two_processes);
  return test_summary();
}

#else /* a build without the CUDA executor */
TEST_MAIN_WITHOUT_CUDA()
#endif
