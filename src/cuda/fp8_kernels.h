/*
 * fp8_kernels.h - the small kernels around FP8 GEMMs (fp8_kernels.cu), with
 * C launch wrappers: a byte transpose / staging copy (Hopper's FP8 tensor
 * cores read only K-contiguous operands, so an operand stored the other way
 * is transposed first, and unaligned ones are copied into aligned rows), and
 * the amax of a matrix (max |x|) for outputs cuBLASLt computes none for.
 * All are stream-ordered, never synchronize and allocate nothing; they
 * return the launch error (cudaSuccess for an empty matrix).
 */
#ifndef TPLA_CUDA_FP8_KERNELS_H
#define TPLA_CUDA_FP8_KERNELS_H

#include "tpla.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst (cols x rows, row-major, dst_ld >= rows) = src^T, where src is
 * rows x cols (row-major, src_ld >= cols) of 1-byte elements. dst and src
 * must not overlap. */
cudaError_t tpla_cuda_transpose_bytes(void *dst, int64_t dst_ld, const void *src, int64_t src_ld,
                                      int64_t rows, int64_t cols, cudaStream_t stream);

/* Staging copy of 1-byte elements into a zero-padded buffer:
 * dst (dst_rows x dst_cols, dst_ld) = op(src) in its top-left corner and
 * zeros elsewhere, where op(src) is src (rows x cols, src_ld) or, with
 * transpose, src^T (cols x rows). dst_rows/dst_cols must cover op(src). */
cudaError_t tpla_cuda_stage_bytes(void *dst, int64_t dst_ld, int64_t dst_rows, int64_t dst_cols,
                                  const void *src, int64_t src_ld, int64_t rows, int64_t cols,
                                  int transpose, cudaStream_t stream);

/* *amax = max |x| over x (rows x cols, ld, of dtype fp32, fp16, bf16, E4M3
 * or E5M2); a NaN anywhere gives NaN. accumulate = 0: *amax is reset to 0
 * first (stream-ordered); 1: the maximum is taken with the value already in
 * *amax, so several calls (e.g. the chunks of one output) combine, and
 * concurrent calls on different streams may target the same *amax. */
cudaError_t tpla_cuda_amax(float *amax, const void *x, tpla_dtype_t dtype, int64_t rows,
                           int64_t cols, int64_t ld, int accumulate, cudaStream_t stream);
/* Loads every FP8 kernel (lazy module loading would load each at its first launch). */
cudaError_t tpla_fp8_preload_kernels(void);

#ifdef __cplusplus
}
#endif

#endif /* TPLA_CUDA_FP8_KERNELS_H */
