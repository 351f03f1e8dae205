/*
 * run51_pull_push_probe.cu - an experiment of bench/device_run51.sh, not part of the
 * library: how fast does a copy engine move rows between the two GPUs when the
 * receiving GPU pulls them (cudaMemcpy2DAsync on the receiver's stream from the
 * peer's memory: what the Newton-Schulz exchanges do, ns_pull.c) against the
 * sending GPU pushing them (on the sender's stream: what the overlap schedules
 * do)? Dense rows and rows strided like a Gram's block row (width 3/4 of the pitch),
 * alone and while both GPUs run bf16 GEMMs 8192x8192x4096 (as in Newton-Schulz,
 * where run 50's timelines showed 33.5 MB pulls taking ~200 us beside the GEMMs).
 *
 *   nvcc -O2 -o probe bench/run51_pull_push_probe.cu -lcublas && ./probe
 *
 * Prints one line per case: median of 20 copies (CUDA events on the issuing
 * stream), GB/s. Needs two GPUs with peer access.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

enum { ITERS = 20, GEMMS = 12 };

typedef struct {
  cublasHandle_t h;
  cudaStream_t s;
  __nv_bfloat16 *a, *b, *c;
} gemm_t;

static int gemm_init(gemm_t *g, int dev) {
  CK(cudaSetDevice(dev));
  CK(cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking));
  size_t n = (size_t)8192 * 8192;
  CK(cudaMalloc(&g->a, n * 2));
  CK(cudaMalloc(&g->b, n * 2));
  CK(cudaMalloc(&g->c, n * 2));
  CK(cudaMemset(g->a, 0x3c, n * 2)); /* small nonzero bf16 values, not zeros */
  CK(cudaMemset(g->b, 0x3c, n * 2));
  if (cublasCreate(&g->h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(g->h, g->s) != 0)
    return 1;
  return 0;
}

static int gemms(gemm_t *g, int dev, int count) {
  CK(cudaSetDevice(dev));
  float one = 1.0f, zero = 0.0f;
  for (int i = 0; i < count; i++)
    if (cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, 8192, 8192, 4096, &one, g->a, CUDA_R_16BF,
                     8192, g->b, CUDA_R_16BF, 4096, &zero, g->c, CUDA_R_16BF, 8192,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      return 1;
  return 0;
}

static int cmp(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return a < b ? -1 : a > b;
}

/* One case: `rows` rows of `width` bytes from GPU 1's src (pitch src_pitch) to GPU 0's
 * dst (pitch dst_pitch), issued on GPU 0 (pull) or GPU 1 (push). */
static int run_case(const char *name, int pull, int busy, void *dst, size_t dst_pitch,
                    const void *src, size_t src_pitch, size_t width, size_t rows,
                    gemm_t *g) {
  int dev = pull ? 0 : 1;
  CK(cudaSetDevice(dev));
  cudaStream_t s;
  cudaEvent_t e0, e1;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float ms[ITERS];
  for (int it = -3; it < ITERS; it++) {
    if (busy && (gemms(&g[0], 0, GEMMS) || gemms(&g[1], 1, GEMMS)))
      return 1;
    CK(cudaSetDevice(dev));
    if (busy) /* start the copy once the GEMMs are running */
      for (volatile int spin = 0; spin < 200000; spin++) {
      }
    CK(cudaEventRecord(e0, s));
    CK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice,
                         s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    if (it >= 0)
      CK(cudaEventElapsedTime(&ms[it], e0, e1));
    for (int d = 0; d < 2; d++) {
      CK(cudaSetDevice(d));
      CK(cudaDeviceSynchronize());
    }
  }
  qsort(ms, ITERS, sizeof ms[0], cmp);
  double bytes = (double)width * (double)rows, med = ms[ITERS / 2];
  printf("%-28s %-5s %-4s %8.1f MB %9.1f us %7.1f GB/s\n", name, pull ? "pull" : "push",
         busy ? "busy" : "idle", bytes / 1e6, 1e3 * med, bytes / (1e6 * med));
  CK(cudaSetDevice(dev));
  CK(cudaStreamDestroy(s));
  return 0;
}

int main(void) {
  int n = 0, can01 = 0, can10 = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2)
    return 77;
  CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  if (!can01 || !can10)
    return 77;
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  const size_t pitch = 8192 * 2, bytes = 2048 * pitch; /* a 2048-row block of an 8192 Gram */
  void *src, *dst;
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&src, bytes));
  CK(cudaMemset(src, 1, bytes));
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&dst, bytes));
  gemm_t g[2];
  if (gemm_init(&g[0], 0) || gemm_init(&g[1], 1))
    return 1;
  printf("%-28s %-5s %-4s %11s %12s %12s\n", "case", "how", "GPUs", "bytes", "median", "rate");
  for (int busy = 0; busy < 2; busy++)
    for (int pull = 1; pull >= 0; pull--) {
      /* dense 32 MiB; 2048 rows of 3/4 of the pitch (a strided Gram row, 25 MB); 512 x 1/4 */
      if (run_case("dense 2048 x 16384 B", pull, busy, dst, pitch, src, pitch, pitch, 2048, g) ||
          run_case("strided 2048 x 12288 B", pull, busy, dst, pitch, src, pitch * 3 / 4,
                   pitch * 3 / 4, 2048, g) ||
          run_case("strided 2048 x 4096 B", pull, busy, dst, pitch, src, pitch / 4, pitch / 4,
                   2048, g))
        return 1;
    }
  printf("probe: done\n");
  return 0;
}
