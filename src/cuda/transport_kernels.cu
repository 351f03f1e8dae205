/*
 * transport_kernels.cu - the fold of the overlap transport: every partial a
 * rank received for its slice of a GEMM+ReduceScatter (and GEMM+AllReduce)
 * is added into its output in ONE pass, however many peers sent one:
 *   s = sum of nslots dense slots;  y = beta y + s + bias;  y2 = s (optional)
 * Memory-bound, so built for bandwidth: rows over gridDim.y, columns over
 * threads, 16-byte vectors (8 bf16/fp16 or 4 fp32) when every pointer and
 * row pitch allows, one element otherwise; fp32 math in the same order as
 * the host executor's loop (src/host/host_transport.c), which is its
 * reference. Launch wrapper: transport_kernels.h.
 */
#include "transport_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

namespace {

constexpr int kThreads = 256;

struct FoldArgs {
  void *y;
  int64_t ldy, rows, cols;
  float beta;
  const void *slots;
  int64_t stride;
  int nslots;
  const void *bias;
  void *y2;
  int64_t ld2;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/* V elements at p: one 16-byte load when V > 1 (p is then 16-byte aligned). */
template <typename T, int V> __device__ __forceinline__ void load_v(const T *p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = to_float(p[0]);
  } else {
    static_assert(V * sizeof(T) == 16, "one 16-byte vector");
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    T e[V];
    memcpy(e, &raw, sizeof raw);
#pragma unroll
    for (int k = 0; k < V; k++)
      v[k] = to_float(e[k]);
  }
}

template <typename T, int V> __device__ __forceinline__ void store_v(T *p, const float (&v)[V]) {
  if constexpr (V == 1) {
    p[0] = from_float<T>(v[0]);
  } else {
    T e[V];
#pragma unroll
    for (int k = 0; k < V; k++)
      e[k] = from_float<T>(v[k]);
    uint4 raw;
    memcpy(&raw, e, sizeof raw);
    *reinterpret_cast<uint4 *>(p) = raw;
  }
}

template <typename T, int V> __global__ void fold_kernel(FoldArgs a) {
  T *y = static_cast<T *>(a.y), *y2 = static_cast<T *>(a.y2);
  const T *slots = static_cast<const T *>(a.slots), *bias = static_cast<const T *>(a.bias);
  for (int64_t i = blockIdx.y; i < a.rows; i += gridDim.y)
    for (int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V; j < a.cols;
         j += (int64_t)gridDim.x * blockDim.x * V) {
      float s[V], t[V];
#pragma unroll
      for (int k = 0; k < V; k++)
        s[k] = 0.0f;
      for (int q = 0; q < a.nslots; q++) {
        load_v<T, V>(slots + q * a.stride + i * a.cols + j, t);
#pragma unroll
        for (int k = 0; k < V; k++)
          s[k] += t[k];
      }
      if (y2 != nullptr)
        store_v<T, V>(y2 + i * a.ld2 + j, s);
      if (a.beta != 0.0f) {
        load_v<T, V>(y + i * a.ldy + j, t);
#pragma unroll
        for (int k = 0; k < V; k++)
          s[k] = __fadd_rn(s[k], __fmul_rn(a.beta, t[k])); /* no FMA: as the host */
      }
      if (bias != nullptr) {
        load_v<T, V>(bias + j, t);
#pragma unroll
        for (int k = 0; k < V; k++)
          s[k] += t[k];
      }
      store_v<T, V>(y + i * a.ldy + j, s);
    }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

template <typename T> cudaError_t launch(const FoldArgs &a, cudaStream_t stream) {
  constexpr int kVec = 16 / (int)sizeof(T);
  const size_t es = sizeof(T);
  bool vec = a.cols % kVec == 0 && aligned16(a.y) && (a.ldy * es) % 16 == 0 &&
             (a.nslots == 0 || (aligned16(a.slots) && (a.stride * es) % 16 == 0)) &&
             (a.bias == nullptr || aligned16(a.bias)) &&
             (a.y2 == nullptr || (aligned16(a.y2) && (a.ld2 * es) % 16 == 0));
  int v = vec ? kVec : 1;
  int64_t bx = (a.cols / v + kThreads - 1) / kThreads;
  dim3 grid((unsigned)(bx < 64 ? bx : 64), (unsigned)(a.rows < 65535 ? a.rows : 65535));
  (void)cudaGetLastError(); /* an earlier error is not this launch's */
  if (vec)
    fold_kernel<T, kVec><<<grid, kThreads, 0, stream>>>(a);
  else
    fold_kernel<T, 1><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t tpla_launch_fold(tpla_matrix_t y, float beta, const void *slots,
                                        size_t slot_stride, int nslots, const void *bias,
                                        tpla_matrix_t y2, cudaStream_t stream) {
  if (y.rows <= 0 || y.cols <= 0)
    return cudaSuccess;
  FoldArgs a = {y.data, y.ld, y.rows, y.cols, beta, slots, (int64_t)slot_stride, nslots,
                bias, y2.data, y2.data != nullptr ? y2.ld : 0};
  switch (y.dtype) {
  case TPLA_FLOAT32: return launch<float>(a, stream);
  case TPLA_FLOAT16: return launch<__half>(a, stream);
  case TPLA_BFLOAT16: return launch<__nv_bfloat16>(a, stream);
  default: return cudaErrorInvalidValue;
  }
}

/* Lazy module loading (CUDA_MODULE_LOADING=LAZY, the default) loads a
 * kernel at its first launch and that load waits for the device to idle; in
 * an overlapped call the device may be blocked in cuStreamWaitValue32 on a
 * peer that waits for this rank, so the first fold launch mid-call can
 * deadlock two GPUs. Querying the attributes loads every instance now. */
extern "C" cudaError_t tpla_transport_preload_kernels(void) {
  cudaFuncAttributes attr;
  const void *kernels[] = {
      (const void *)fold_kernel<float, 4>,          (const void *)fold_kernel<float, 1>,
      (const void *)fold_kernel<__half, 8>,         (const void *)fold_kernel<__half, 1>,
      (const void *)fold_kernel<__nv_bfloat16, 8>,  (const void *)fold_kernel<__nv_bfloat16, 1>};
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    cudaError_t e = cudaFuncGetAttributes(&attr, kernels[i]);
    if (e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}
