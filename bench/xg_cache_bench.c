/*
 * xg_cache_bench.c - host time per overlapped call when a window group's
 * plans use more GEMM shapes than the transport's plan cache held (review
 * 100: 32 slots, round-robin, so a cycle of more keys missed every time,
 * each miss a cuBLASLt heuristic mid-call). One rank: N AllGather+GEMM plans
 * (bf16, 256 x 256 A, n = 256 + 16 i) in window group 1, called in turn,
 * N = 16 (fits either way) and 48 (did not fit). The anchor: the same N
 * GEMMs through tpla_gemm (the context's hashed cache), in the same run.
 * Each call is timed alone on the host after two warm-up cycles; the stream
 * is synchronized, untimed, after every cycle. Prints the median host time
 * per call and the ratio to the anchor.
 * Not part of the library; built by hand on the GPU machine:
 *   gcc -O2 -std=c11 -Iinclude -I/usr/local/cuda/include bench/xg_cache_bench.c \
 *     -Lbuild-gpu -ltpla -L/usr/local/cuda/lib64 -lcudart -o xg_cache_bench
 *   LD_LIBRARY_PATH=build-gpu ./xg_cache_bench
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tpla.h"

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #cond,               \
              tpla_last_error());                                                        \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define MAXN 48
#define DIM 256
#define CYCLES 20

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int64_t n_of(int i) { return DIM + 16 * i; }

/* Median host us per call over CYCLES cycles of n calls (plans != NULL: the
 * group's plans, else tpla_gemm). */
static double run(tpla_ctx_t ctx, tpla_ag_gemm_plan_t *plans, int n, void *a, void *b, void *d,
                  cudaStream_t s) {
  static double t[CYCLES * MAXN];
  tpla_matrix_t am = {a, DIM, DIM, DIM, TPLA_BFLOAT16};
  for (int c = -2, k = 0; c < CYCLES; c++) {
    for (int i = 0; i < n; i++) {
      tpla_matrix_t bm = {b, n_of(i), DIM, DIM, TPLA_BFLOAT16}; /* n x k: op(B) T */
      tpla_matrix_t dm = {d, DIM, n_of(i), n_of(i), TPLA_BFLOAT16};
      double t0 = now_us();
      if (plans != NULL)
        CHECK(tpla_ag_gemm(plans[i], dm, am, bm, NULL, s) == TPLA_SUCCESS);
      else
        CHECK(tpla_gemm(ctx, dm, am, TPLA_OP_N, bm, TPLA_OP_T, NULL, s) == TPLA_SUCCESS);
      if (c >= 0)
        t[k++] = now_us() - t0;
    }
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  }
  qsort(t, (size_t)(CYCLES * n), sizeof *t, by_value);
  return t[CYCLES * n / 2];
}

int main(void) {
  CHECK(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  void *a, *b, *d;
  size_t nmax = (size_t)n_of(MAXN - 1);
  CHECK(cudaMalloc(&a, DIM * DIM * 2) == cudaSuccess);
  CHECK(cudaMalloc(&b, nmax * DIM * 2) == cudaSuccess);
  CHECK(cudaMalloc(&d, nmax * DIM * 2) == cudaSuccess);
  CHECK(cudaMemset(a, 0x3c, DIM * DIM * 2) == cudaSuccess); /* bf16 ~0.0117: not zeros */
  CHECK(cudaMemset(b, 0x3c, nmax * DIM * 2) == cudaSuccess);
  tpla_unique_id_t id;
  struct ncclComm *comm;
  tpla_ctx_t ctx;
  CHECK(tpla_nccl_get_unique_id(&id) == TPLA_SUCCESS);
  CHECK(tpla_nccl_comm_create(&comm, &id, 1, 0, 0, NULL) == TPLA_SUCCESS);
  CHECK(tpla_ctx_create_nccl(&ctx, comm, NULL) == TPLA_SUCCESS);
  tpla_ag_gemm_plan_t plans[MAXN];
  for (int i = 0; i < MAXN; i++) {
    tpla_ag_gemm_desc_t x = TPLA_AG_GEMM_DESC_INIT;
    x.local_rows = DIM, x.k = DIM, x.n = n_of(i), x.op_b = TPLA_OP_T;
    x.dtype = x.d_dtype = TPLA_BFLOAT16, x.mode = TPLA_OVERLAP_OVERLAP, x.window_group = 1;
    CHECK(tpla_ag_gemm_plan_create(&plans[i], ctx, &x) == TPLA_SUCCESS);
  }
  printf("# one rank, window group of N AG+GEMM plans (bf16 256 x 256 x n), host us per call\n");
  printf("%4s %12s %12s %8s\n", "N", "group_us", "tpla_gemm_us", "ratio");
  const int ns[2] = {16, MAXN};
  for (int j = 0; j < 2; j++) {
    double g = run(ctx, plans, ns[j], a, b, d, s), anchor = run(ctx, NULL, ns[j], a, b, d, s);
    printf("%4d %12.1f %12.1f %8.2f\n", ns[j], g, anchor, g / anchor);
  }
  for (int i = 0; i < MAXN; i++)
    CHECK(tpla_ag_gemm_plan_destroy(plans[i]) == TPLA_SUCCESS);
  CHECK(tpla_ctx_destroy(ctx) == TPLA_SUCCESS);
  CHECK(tpla_nccl_comm_destroy(comm) == TPLA_SUCCESS);
  cudaFree(a), cudaFree(b), cudaFree(d);
  cudaStreamDestroy(s);
  return 0;
}
