/*
 * cuda_util.h - helpers every file of the CUDA executor shares: turning
 * CUDA runtime, NCCL and cuBLASLt return codes into tpla statuses with a
 * message that names the failed call and the library's own error text, a
 * guard that makes the context's device current for the length of a call,
 * and the monotonic clock and back-off sleep used by every polled wait.
 */
#ifndef TPLA_CUDA_UTIL_H
#define TPLA_CUDA_UTIL_H

#include "internal.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

/* Map a failed CUDA call to TPLA_ERROR_CUDA (TPLA_ERROR_OUT_OF_MEMORY for an
 * allocation failure) with "call failed: cudaErrorX (text)". Clears CUDA's
 * last-error state so the failure does not leak into the next call.
 * Returns TPLA_SUCCESS for cudaSuccess. */
tpla_status_t tpla_cuda_status(cudaError_t err, const char *fn, const char *call);
/* Same for cuBLASLt: TPLA_ERROR_CUBLAS (NOT_SUPPORTED, OUT_OF_MEMORY where
 * the status says so). */
tpla_status_t tpla_cublas_status(cublasStatus_t st, const char *fn, const char *call);
/* Same for NCCL: TPLA_ERROR_NCCL with ncclGetErrorString and, when
 * available, ncclGetLastError(comm). ncclInProgress is NOT handled here
 * (see tpla_nccl_finish in nccl_ctx.h). */
tpla_status_t tpla_nccl_status(ncclResult_t r, ncclComm_t comm, const char *fn, const char *call);

/* Evaluate a call and return its mapped status on failure. `fn` must be a
 * variable or literal naming the public function. */
#define CUDA_TRY(fn, call)                                                   \
  do {                                                                       \
    cudaError_t tpla_cuda_e_ = (call);                                       \
    if (tpla_cuda_e_ != cudaSuccess)                                         \
      return tpla_cuda_status(tpla_cuda_e_, fn, #call);                      \
  } while (0)
#define CUBLAS_TRY(fn, call)                                                 \
  do {                                                                       \
    cublasStatus_t tpla_cublas_s_ = (call);                                  \
    if (tpla_cublas_s_ != CUBLAS_STATUS_SUCCESS)                             \
      return tpla_cublas_status(tpla_cublas_s_, fn, #call);                  \
  } while (0)

/* Makes `device` current until tpla_device_guard_exit; a no-op when it
 * already is (the common case: one cudaGetDevice). */
typedef struct {
  int previous;
  int switched;
} tpla_device_guard_t;
tpla_status_t tpla_device_guard_enter(tpla_device_guard_t *g, int device, const char *fn);
void tpla_device_guard_exit(tpla_device_guard_t *g);

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t tpla_now_ms(void);
int64_t tpla_now_us(void);
/* Sleep for a poll loop: 20 us at first, doubling up to 1 ms, so short
 * waits stay short and long ones do not spin a core. `round` counts the
 * polls made so far. */
void tpla_poll_sleep(int round);

/* cudaMemcpy2DAsync (device to device) and cudaMemset2DAsync (to 0), but
 * row by row where a pitch is past what those take (2^31 - 1 bytes: a view
 * inside rows of 2 GiB or more, which then has few rows). */
cudaError_t tpla_cuda_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t rows, cudaStream_t stream);
cudaError_t tpla_cuda_zero_2d(void *dst, size_t pitch, size_t width, size_t rows,
                              cudaStream_t stream);

/* cudaDataType of a tpla dtype (float types and u8). */
cudaDataType_t tpla_cuda_datatype(tpla_dtype_t dtype);
/* ncclDataType_t of a tpla dtype. */
ncclDataType_t tpla_nccl_datatype(tpla_dtype_t dtype);

#endif /* TPLA_CUDA_UTIL_H */
