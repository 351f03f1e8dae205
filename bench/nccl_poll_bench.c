/*
 * nccl_poll_bench.c - host time of one small all-reduce on a one-rank NCCL
 * communicator, by how the caller learns the call was enqueued (review 100):
 *   blocking       ncclCommInitRank's communicator: the call returns enqueued (the anchor)
 *   nb + sleep     non-blocking communicator (config.blocking = 0, as tpla_nccl_comm_create
 *                  makes), ncclInProgress polled with nanosleep 20, 40, ... us (tpla before)
 *   nb + spin      the same, polled with sched_yield
 *   tpla           tpla_allreduce on a context over tpla_nccl_comm_create's communicator
 *                  (whatever policy the library linked has)
 * Each call is timed alone on the host (CLOCK_MONOTONIC) after 200 warm-up
 * calls; the stream is synchronized, untimed, every 50 calls so the launch
 * queue never fills. Prints the median and 90th percentile per mode and the
 * ratio of medians to the blocking anchor. The GPU time of a 1 KiB
 * all-reduce on one rank is a few microseconds; what differs is the host.
 * Not part of the library; built by hand on the GPU machine:
 *   gcc -O2 -std=c11 -Iinclude -I/usr/local/cuda/include bench/nccl_poll_bench.c \
 *     -Lbuild-gpu -ltpla -L/usr/local/cuda/lib64 -lnccl -lcudart -o nccl_poll_bench
 *   LD_LIBRARY_PATH=build-gpu ./nccl_poll_bench [calls]
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpla.h"

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond);                  \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

enum { BLOCKING, NB_SLEEP, NB_SPIN, TPLA, MODES };
static const char *const k_names[MODES] = {"blocking", "nb + sleep", "nb + spin", "tpla"};
static const int k_count = 256; /* floats: 1 KiB */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void wait_in_progress(ncclComm_t comm, int spin) {
  for (int round = 0;; round++) {
    ncclResult_t ae = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &ae) == ncclSuccess);
    if (ae == ncclSuccess)
      return;
    CHECK(ae == ncclInProgress);
    if (spin) {
      sched_yield();
    } else {
      long us = 20L << (round < 6 ? round : 6);
      struct timespec ts = {0, (us > 1000 ? 1000 : us) * 1000L};
      nanosleep(&ts, NULL);
    }
  }
}

static void one_call(int mode, ncclComm_t comm, tpla_ctx_t ctx, float *buf, cudaStream_t s) {
  if (mode == TPLA) {
    CHECK(tpla_allreduce(ctx, buf, buf, (size_t)k_count, TPLA_FLOAT32, s) == TPLA_SUCCESS);
    return;
  }
  ncclResult_t r = ncclAllReduce(buf, buf, (size_t)k_count, ncclFloat, ncclSum, comm, s);
  CHECK(r == ncclSuccess || (r == ncclInProgress && mode != BLOCKING));
  if (r == ncclInProgress)
    wait_in_progress(comm, mode == NB_SPIN);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 2000;
  CHECK(calls >= 50);
  CHECK(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  float *buf;
  CHECK(cudaMalloc((void **)&buf, (size_t)k_count * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemset(buf, 0, (size_t)k_count * sizeof(float)) == cudaSuccess);

  ncclUniqueId id;
  ncclComm_t blocking, nb;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess);
  CHECK(ncclCommInitRank(&blocking, 1, id, 0) == ncclSuccess);
  tpla_unique_id_t tid;
  CHECK(tpla_nccl_get_unique_id(&tid) == TPLA_SUCCESS);
  CHECK(tpla_nccl_comm_create(&nb, &tid, 1, 0, 0, NULL) == TPLA_SUCCESS);
  tpla_ctx_t ctx;
  CHECK(tpla_ctx_create_nccl(&ctx, nb, NULL) == TPLA_SUCCESS);

  double *t = malloc((size_t)calls * sizeof(double)), median[MODES];
  CHECK(t != NULL);
  printf("# one rank, ncclAllReduce of %d floats, %d calls per mode, host time per call\n",
         k_count, calls);
  printf("%-12s %10s %10s %12s\n", "mode", "median_us", "p90_us", "vs_blocking");
  for (int mode = 0; mode < MODES; mode++) {
    ncclComm_t comm = mode == BLOCKING ? blocking : nb;
    for (int i = 0; i < 200; i++)
      one_call(mode, comm, ctx, buf, s);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    for (int i = 0; i < calls; i++) {
      double t0 = now_us();
      one_call(mode, comm, ctx, buf, s);
      t[i] = now_us() - t0;
      if (i % 50 == 49)
        CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    }
    qsort(t, (size_t)calls, sizeof *t, by_value);
    median[mode] = t[calls / 2];
    printf("%-12s %10.1f %10.1f %12.2f\n", k_names[mode], median[mode], t[calls * 9 / 10],
           median[mode] / median[BLOCKING]);
  }
  free(t);
  CHECK(tpla_ctx_destroy(ctx) == TPLA_SUCCESS);
  CHECK(tpla_nccl_comm_destroy(nb) == TPLA_SUCCESS);
  CHECK(ncclCommDestroy(blocking) == ncclSuccess);
  cudaFree(buf);
  cudaStreamDestroy(s);
  return 0;
}
