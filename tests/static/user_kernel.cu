/*
 * user_kernel.cu - test_static_gpu's "user" CUDA code, built without optimization (as a
 * Debug build of a user's program is): its host code keeps the CUDA headers' inline
 * functions (dim3's constructor ...) out of line in COMDAT groups that libtpla.a's own
 * objects may carry too. The link must merge them (review 104: a localized copy of one
 * failed it: "defined in discarded section"). x[0 .. n) += 1 on the GPU.
 */
#include <cuda_runtime.h>

__global__ void user_add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += 1.0f;
}

extern "C" int user_add_one_on_gpu(float *x, int n) {
  dim3 block(128), grid((unsigned)((n + 127) / 128));
  user_add_one<<<grid, block>>>(x, n);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
