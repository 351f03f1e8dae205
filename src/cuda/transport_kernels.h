/*
 * transport_kernels.h - C launch wrapper of the overlap transport's kernel
 * (transport_kernels.cu): the fold that combines received partials.
 * Errors are reported by the caller (transport_gemm.c).
 */
#ifndef TPLA_CUDA_TRANSPORT_KERNELS_H
#define TPLA_CUDA_TRANSPORT_KERNELS_H

#include "tpla.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = beta y + s + bias and, when y2.data != NULL, y2 = s, where s is the
 * sum of `nslots` dense slots (y's rows x cols, ld = cols, y's dtype) at
 * `slots`, `slot_stride` elements apart; bias: NULL or cols elements of y's
 * dtype. fp32, fp16, bf16; fp32 math; beta == 0 never reads y; y2 may be
 * slot 0. One launch; nothing for an empty y. Returns the launch status. */
cudaError_t tpla_launch_fold(tpla_matrix_t y, float beta, const void *slots, size_t slot_stride,
                             int nslots, const void *bias, tpla_matrix_t y2, cudaStream_t stream);

/* Loads every instance of the fold kernel into the current context now
 * (cudaFuncGetAttributes), so no launch inside an overlapped call triggers a
 * lazy module load (which waits for the device to idle: a cross-GPU
 * deadlock while a stream waits on a peer's flag). */
cudaError_t tpla_transport_preload_kernels(void);

#ifdef __cplusplus
}
#endif
#endif /* TPLA_CUDA_TRANSPORT_KERNELS_H */
