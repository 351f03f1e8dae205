/*
 * chunk_delay.cu - the modelled link of chunk_bench.c: a one-thread kernel
 * that spins on %globaltimer for a push's time, so that a stream behaves like
 * a copy engine busy with a chunk (one SM's slot taken, no memory traffic).
 */
#include <cuda_runtime.h>

namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < ns) {
  }
}

} // namespace

extern "C" cudaError_t chunk_bench_spin(cudaStream_t stream, unsigned long long ns) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}
