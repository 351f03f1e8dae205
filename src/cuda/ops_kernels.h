/*
 * ops_kernels.h - C launch wrappers of the kernels in ops_kernels.cu: the
 * memory-bound building blocks of the algorithms (axpby, sum of squares,
 * scale by a device-held norm, mirror of an upper triangle). Plain C; the
 * host-side wrappers with error reporting are in cuda_ops.c.
 *
 * Every wrapper enqueues its kernel(s) on `stream` and returns the launch
 * status (cudaGetLastError right after the launch). Shapes are assumed
 * valid; an empty matrix enqueues nothing (sumsq still writes 0).
 * `max_blocks` caps the persistent grid (tpla_ops_max_blocks).
 */
#ifndef TPLA_CUDA_OPS_KERNELS_H
#define TPLA_CUDA_OPS_KERNELS_H

#include "tpla.h"

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of fp64 block partials a sum-of-squares reduction may write: the
 * size of the scratch passed to tpla_launch_sumsq. */
#define TPLA_OPS_SUMSQ_PARTIALS 1024
/* Members of one list launch (tpla_launch_normalize_list, _store_list). */
#define TPLA_OPS_LIST_MAX 64

/* The grid cap for a device with `sm_count` multiprocessors: the blocks
 * that are resident at once (8 blocks of 256 threads per SM). */
int tpla_ops_max_blocks(int sm_count);

/* True if every row of a view at `data` with leading dimension `ld` of
 * `elem`-byte elements starts 16-byte aligned (the vector kernels). */
int tpla_ops_rows_aligned16(const void *data, int64_t ld, size_t elem);
/* True for a batch the kernels take: 1 .. 65535 members, a stride that is a
 * nonzero multiple of 256 bytes when there are several. */
int tpla_ops_batch_ok(int count, size_t stride);

/* True if axpby/sumsq/scale_by_norm support the dtype (fp32, fp16, bf16). */
int tpla_ops_float_dtype(tpla_dtype_t dtype);

/* y = alpha * x + beta * y (fp32 math); beta == 0 never reads y. Over
 * `count` members (1 .. TPLA_BATCH_MAX) `stride` bytes apart (a multiple of
 * 256 when count > 1; else cudaErrorInvalidValue), each the same way. */
cudaError_t tpla_launch_axpby(tpla_matrix_t y, tpla_matrix_t x, float alpha, float beta,
                              int count, size_t stride, int max_blocks, cudaStream_t stream);

/* a(i, i) += value for i < min(rows, cols), fp32 math; over `count` members
 * `stride` bytes apart as tpla_launch_axpby's. */
cudaError_t tpla_launch_add_diagonal(tpla_matrix_t a, float value, int count, size_t stride,
                                     cudaStream_t stream);

/* *sumsq = sum of x(i,j)^2 in fp64, deterministic: block partials into
 * `partials` (TPLA_OPS_SUMSQ_PARTIALS doubles), then one block adds them
 * in a fixed order. Two launches; no atomics. */
cudaError_t tpla_launch_sumsq(double *sumsq, double *partials, tpla_matrix_t x, int max_blocks,
                              cudaStream_t stream);

/* y = x / (safety * sqrt(*sumsq) + eps), *sumsq read on the device; y may
 * be the same view as x. */
cudaError_t tpla_launch_scale_by_norm(tpla_matrix_t y, tpla_matrix_t x, const double *sumsq,
                                      float safety, float eps, int max_blocks,
                                      cudaStream_t stream);

/* For m < count (1 .. TPLA_OPS_LIST_MAX): sumsq[m] = the sum of squares
 * of x[m] (fp64, deterministic as tpla_launch_sumsq's), then member m of
 * the batch at y (`stride` bytes apart) = x[m] / (safety[m] sqrt(sumsq[m])
 * + eps[m]). The x[m] share shape and dtype (y's shape, any float dtypes);
 * partials: TPLA_OPS_SUMSQ_PARTIALS doubles. Three launches for the list;
 * none for an empty y. */
cudaError_t tpla_launch_normalize_list(tpla_matrix_t y, size_t stride, const tpla_matrix_t *x,
                                       int count, const float *safety, const float *eps,
                                       double *sumsq, double *partials, int max_blocks,
                                       cudaStream_t stream);
/* x[m] = member m of the batch at y, for m < count (one launch; y's dtype). */
cudaError_t tpla_launch_store_list(const tpla_matrix_t *x, tpla_matrix_t y, size_t stride,
                                   int count, int max_blocks, cudaStream_t stream);

/* (mirror_kernel.cu) a(i, j) = a(j, i) for i > j over the leading min(rows, cols) square;
 * any dtype (elements are moved as raw 1/2/4/8-byte words); over `count`
 * members `stride` bytes apart as tpla_launch_axpby's. whole > 0: tiles
 * inside one diagonal block of edge `whole` (computed whole) are skipped. */
cudaError_t tpla_launch_mirror_upper(tpla_matrix_t a, int64_t whole, int count, size_t stride,
                                     int max_blocks, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* TPLA_CUDA_OPS_KERNELS_H */
