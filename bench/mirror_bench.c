/*
 * mirror_bench.c - how fast is mirror_upper, the memory-bound pass after every
 * symmetric product of Newton-Schulz (the lower triangle written from the
 * upper)? Runs 50 and 37 saw ~17 us for a 4096^2 bf16 mirror and ~51 us at
 * 8192^2 inside a call: the moved bytes (half the matrix read, half written,
 * s^2 e in all) at ~1-1.3 TB/s, where a device-to-device copy of the same
 * bytes is the reference of what HBM gives. Both ranks of a 2-GPU plan
 * mirror the whole matrix, as one GPU does, so a faster mirror shortens both
 * equally (and so raises the 2-GPU speed-up).
 *
 *   tpla_mirror_bench [iters]
 *
 * For s in {2048, 4096, 8192} and bf16 / fp32: the mirror kernel, the same past the
 * diagonal blocks of the X iteration's products (edge s / nb, nb = min(s / 1024, 8) block
 * rows, which the GEMMs computed whole), and a cudaMemcpyAsync
 * of s^2 e / 2 bytes (what the mirror reads, and then writes), median of `iters`
 * (default 50) CUDA-event times after 5 warm-ups, rotating over enough matrices
 * to exceed the L2 cache. Prints one line each and exits 0; 77 without a GPU.
 */
#include "ops_kernels.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "mirror_bench: %s: %s\n", #call, cudaGetErrorString(e_));            \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median microseconds of `iters` runs of one mirror (copy = 0) or copy
 * (copy = 1), each on the next of `nbuf` matrices. */
static float time_us(void **buf, int nbuf, int64_t s, tpla_dtype_t t, int copy, int64_t whole,
                     int iters, int max_blocks, cudaStream_t st) {
  size_t half = (size_t)s * (size_t)s * tpla_dtype_size(t) / 2;
  float *ms = malloc(sizeof(float) * (size_t)iters);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = -5; i < iters; i++) {
    void *m = buf[(i + 5) % nbuf];
    tpla_matrix_t v = {m, s, s, s, t};
    CHECK(cudaEventRecord(a, st));
    if (copy)
      CHECK(cudaMemcpyAsync((char *)m + half, m, half, cudaMemcpyDeviceToDevice, st));
    else
      CHECK(tpla_launch_mirror_upper(v, whole, 1, 0, max_blocks, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    if (i >= 0)
      CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  qsort(ms, (size_t)iters, sizeof(float), by_value);
  float med = 1000.0f * ms[iters / 2];
  free(ms);
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return med;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 50, ngpu = 0;
  if (iters < 1)
    iters = 50;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    printf("mirror_bench: no GPU: skipped\n");
    return 77;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  printf("#     s dtype  mirror_us  mirror_GB/s  blocks_us  edge  copy_us  copy_GB/s  (moved: s^2 "
         "e; L2 %d MiB)\n", l2 >> 20);
  const int64_t sizes[] = {2048, 4096, 8192};
  const tpla_dtype_t types[] = {TPLA_BFLOAT16, TPLA_FLOAT32};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 2; k++) {
      int64_t s = sizes[i], nb = s / 1024 > 8 ? 8 : s / 1024, edge = (s + nb - 1) / nb;
      size_t bytes = (size_t)s * (size_t)s * tpla_dtype_size(types[k]);
      int nbuf = (int)(3 * (size_t)l2 / bytes) + 2; /* rotate past the L2 */
      void *buf[64];
      nbuf = nbuf > 64 ? 64 : nbuf;
      for (int j = 0; j < nbuf; j++) {
        CHECK(cudaMalloc(&buf[j], bytes));
        CHECK(cudaMemset(buf[j], 0x3c, bytes)); /* nonzero words */
      }
      float m = time_us(buf, nbuf, s, types[k], 0, 0, iters, tpla_ops_max_blocks(sms), st);
      float b = time_us(buf, nbuf, s, types[k], 0, edge, iters, tpla_ops_max_blocks(sms), st);
      float c = time_us(buf, nbuf, s, types[k], 1, 0, iters, 0, st);
      printf("%7lld %-5s %10.1f %12.0f %10.1f %5lld %8.1f %10.0f\n", (long long)s,
             tpla_dtype_name(types[k]), m, bytes / (m * 1e3), b, (long long)edge, c,
             bytes / (c * 1e3));
      for (int j = 0; j < nbuf; j++)
        CHECK(cudaFree(buf[j]));
    }
  CHECK(cudaStreamDestroy(st));
  printf("mirror_bench: done\n");
  return 0;
}
