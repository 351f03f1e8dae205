/*
 * scale_kernel.cu - D *= beta over a strided row-major matrix, the k = 0
 * case of tpla_gemm (cuBLASLt is not asked to handle an empty inner
 * dimension). beta == 0 stores zeros without reading D, so NaNs in an
 * uninitialized output do not survive, as with BLAS.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "tpla.h"

namespace {

__device__ inline float load(const float *p) { return *p; }
__device__ inline float load(const __half *p) { return __half2float(*p); }
__device__ inline float load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ inline void store(float *p, float v) { *p = v; }
__device__ inline void store(__half *p, float v) { *p = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Grid-stride over rows (y) and columns (x). */
template <typename T>
__global__ void scale_kernel(T *d, int64_t rows, int64_t cols, int64_t ld, float beta) {
  for (int64_t i = blockIdx.y; i < rows; i += gridDim.y)
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
         j += (int64_t)gridDim.x * blockDim.x) {
      T *p = d + i * ld + j;
      store(p, beta == 0.0f ? 0.0f : beta * load(p));
    }
}

template <typename T>
cudaError_t launch(void *d, int64_t rows, int64_t cols, int64_t ld, float beta,
                   cudaStream_t stream) {
  const int threads = 256;
  int64_t bx = (cols + threads - 1) / threads;
  dim3 grid((unsigned)(bx < 64 ? bx : 64), (unsigned)(rows < 65535 ? rows : 65535));
  (void)cudaGetLastError(); /* an earlier error is not this launch's */
  scale_kernel<T><<<grid, threads, 0, stream>>>(static_cast<T *>(d), rows, cols, ld, beta);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t tpla_cuda_scale_matrix(void *d, tpla_dtype_t dtype, int64_t rows,
                                              int64_t cols, int64_t ld, float beta,
                                              cudaStream_t stream) {
  if (rows <= 0 || cols <= 0)
    return cudaSuccess;
  switch (dtype) {
  case TPLA_FLOAT32: return launch<float>(d, rows, cols, ld, beta, stream);
  case TPLA_FLOAT16: return launch<__half>(d, rows, cols, ld, beta, stream);
  case TPLA_BFLOAT16: return launch<__nv_bfloat16>(d, rows, cols, ld, beta, stream);
  default: return cudaErrorInvalidValue;
  }
}
