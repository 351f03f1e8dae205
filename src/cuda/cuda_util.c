/*
 * cuda_util.c - error mapping for CUDA, NCCL and cuBLASLt return codes, the
 * current-device guard, the poll clock and dtype conversions of the CUDA
 * executor (see cuda_util.h).
 */
#include "cuda_util.h"

#include <time.h>

tpla_status_t tpla_cuda_status(cudaError_t err, const char *fn, const char *call) {
  if (err == cudaSuccess)
    return TPLA_SUCCESS;
  /* Reset the runtime's last error; sticky errors (a faulted context) stay
   * and will be reported again by the next call, which is what we want. */
  (void)cudaGetLastError();
  tpla_status_t s = err == cudaErrorMemoryAllocation ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_ERROR_CUDA;
  return tpla_fail(s, fn, "%s failed: %s (%s)", call, cudaGetErrorName(err),
                   cudaGetErrorString(err));
}

tpla_status_t tpla_cublas_status(cublasStatus_t st, const char *fn, const char *call) {
  if (st == CUBLAS_STATUS_SUCCESS)
    return TPLA_SUCCESS;
  tpla_status_t s = TPLA_ERROR_CUBLAS;
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH)
    s = TPLA_ERROR_NOT_SUPPORTED;
  else if (st == CUBLAS_STATUS_ALLOC_FAILED)
    s = TPLA_ERROR_OUT_OF_MEMORY;
  return tpla_fail(s, fn, "%s failed: %s (%s)", call, cublasLtGetStatusName(st),
                   cublasLtGetStatusString(st));
}

tpla_status_t tpla_nccl_status(ncclResult_t r, ncclComm_t comm, const char *fn, const char *call) {
  if (r == ncclSuccess)
    return TPLA_SUCCESS;
  const char *detail = ncclGetLastError(comm);
  if (detail == NULL || detail[0] == '\0')
    detail = "no further detail; run with NCCL_DEBUG=WARN";
  return tpla_fail(TPLA_ERROR_NCCL, fn, "%s failed: %s (%d): %s", call, ncclGetErrorString(r),
                   (int)r, detail);
}

tpla_status_t tpla_device_guard_enter(tpla_device_guard_t *g, int device, const char *fn) {
  g->switched = 0;
  g->previous = device;
  CUDA_TRY(fn, cudaGetDevice(&g->previous));
  if (g->previous != device) {
    CUDA_TRY(fn, cudaSetDevice(device));
    g->switched = 1;
  }
  return TPLA_SUCCESS;
}

void tpla_device_guard_exit(tpla_device_guard_t *g) {
  if (g->switched)
    (void)cudaSetDevice(g->previous);
  g->switched = 0;
}

int64_t tpla_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tpla_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void tpla_poll_sleep(int round) {
  long us = 20L << (round < 6 ? round : 6); /* 20, 40, ..., 1280 us */
  if (us > 1000)
    us = 1000;
  struct timespec ts = {0, us * 1000L};
  nanosleep(&ts, NULL);
}

cudaDataType_t tpla_cuda_datatype(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT32: return CUDA_R_32F;
  case TPLA_FLOAT16: return CUDA_R_16F;
  case TPLA_BFLOAT16: return CUDA_R_16BF;
  case TPLA_FLOAT64: return CUDA_R_64F;
  case TPLA_UINT8: return CUDA_R_8U;
  case TPLA_FLOAT8_E4M3: return CUDA_R_8F_E4M3;
  case TPLA_FLOAT8_E5M2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F; /* unreachable: dtypes are validated before dispatch */
}

ncclDataType_t tpla_nccl_datatype(tpla_dtype_t dtype) {
  switch (dtype) {
  case TPLA_FLOAT32: return ncclFloat32;
  case TPLA_FLOAT16: return ncclFloat16;
  case TPLA_BFLOAT16: return ncclBfloat16;
  case TPLA_FLOAT64: return ncclFloat64;
  case TPLA_UINT8: return ncclUint8;
  case TPLA_FLOAT8_E4M3: /* collectives move FP8 as bytes and never reduce it */
  case TPLA_FLOAT8_E5M2: return ncclUint8;
  }
  return ncclUint8; /* unreachable: dtypes are validated before dispatch */
}

#define MAX_2D_PITCH ((size_t)INT32_MAX)

cudaError_t tpla_cuda_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t rows, cudaStream_t stream) {
  if (dpitch <= MAX_2D_PITCH && spitch <= MAX_2D_PITCH)
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice,
                             stream);
  cudaError_t e = cudaSuccess;
  for (size_t i = 0; i < rows && e == cudaSuccess; i++)
    e = cudaMemcpyAsync((char *)dst + i * dpitch, (const char *)src + i * spitch, width,
                        cudaMemcpyDeviceToDevice, stream);
  return e;
}

cudaError_t tpla_cuda_zero_2d(void *dst, size_t pitch, size_t width, size_t rows,
                              cudaStream_t stream) {
  if (pitch <= MAX_2D_PITCH)
    return cudaMemset2DAsync(dst, pitch, 0, width, rows, stream);
  cudaError_t e = cudaSuccess;
  for (size_t i = 0; i < rows && e == cudaSuccess; i++)
    e = cudaMemsetAsync((char *)dst + i * pitch, 0, width, stream);
  return e;
}
