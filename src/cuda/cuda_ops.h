/*
 * cuda_ops.h - the CUDA executor's building blocks of the algorithms: the
 * mem_alloc, mem_free, axpby, sumsq, scale_by_norm, mirror_upper and
 * alltoallv members of tpla_backend_t (see internal.h for their contracts),
 * plus the per-context state they need. Implemented in cuda_ops.c on top of
 * the kernels of ops_kernels.cu. Plain C; needs no CUDA or NCCL header.
 *
 * Integration with the context (nccl_ctx.c):
 *   - at context creation, after ctx->device, ctx->rank and ctx->nranks are
 *     set: tpla_cuda_ops_init(ctx, &impl->ops_state) (fail the creation on
 *     error); at destruction: tpla_cuda_ops_fini(impl->ops_state);
 *   - provide the getter below (return impl->ops_state);
 *   - point the backend's members at the tpla_cuda_* functions;
 *   - optionally count tpla_cuda_ops_state_bytes() in workspace_bytes.
 *
 * Arguments are assumed valid (src/core validates them). Every function
 * enqueues on `stream` (a cudaStream_t passed as void*), does not
 * synchronize and does not allocate, except mem_alloc/mem_free, which are
 * for plan creation/destruction only. They make ctx->device current for
 * the length of the call.
 *
 * Concurrency: sumsq uses the context's one fixed scratch (the block
 * partials), like the context's GEMM workspace: sumsq calls of one context
 * on different streams must be ordered by the caller (events).
 */
#ifndef TPLA_CUDA_OPS_H
#define TPLA_CUDA_OPS_H

#include "internal.h"

/* ---- provided by the context implementation ------------------------------ */

/* The state tpla_cuda_ops_init stored for this context (NULL if none).
 * (The communicator and its aborted flag are read from the context's impl,
 * tpla_cuda_ctx_t in cuda_ctx.h.) */
void *tpla_cuda_ctx_ops_state(tpla_ctx_t ctx);

/* ---- per-context state ------------------------------------------------------- */

/* Create the ops state of a context: a fixed device scratch of
 * TPLA_OPS_SUMSQ_PARTIALS floats (4 KiB, see tpla_cuda_ops_state_bytes)
 * for the deterministic sum of squares and the grid size of the device.
 * Call once per context, with ctx->device set. On failure *state is NULL
 * and nothing is held. */
tpla_status_t tpla_cuda_ops_init(tpla_ctx_t ctx, void **state);
/* Release a state from tpla_cuda_ops_init; accepts NULL. Synchronizes the
 * device (cudaFree), so call it only at context destruction. */
void tpla_cuda_ops_fini(void *state);
/* Device bytes one state holds. */
size_t tpla_cuda_ops_state_bytes(void);

/* ---- the backend members ------------------------------------------------------- */

/* cudaMalloc on ctx->device; bytes == 0 gives *ptr = NULL. *ptr is left
 * untouched on failure (TPLA_ERROR_OUT_OF_MEMORY, TPLA_ERROR_CUDA). */
tpla_status_t tpla_cuda_mem_alloc(tpla_ctx_t ctx, size_t bytes, void **ptr);
/* cudaFree; accepts NULL; errors are dropped (nothing to report them to). */
void tpla_cuda_mem_free(tpla_ctx_t ctx, void *ptr);
/* y = alpha x + beta y; fp32, fp16, bf16 in any mix (NOT_SUPPORTED
 * otherwise); beta == 0 never reads y; each member of a batch. */
tpla_status_t tpla_cuda_axpby(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x, float alpha,
                              float beta, tpla_batch_t batch, void *stream);
/* *sumsq (device fp64) = sum of x(i,j)^2, bitwise the same on every run of
 * the same shape on the same device. */
tpla_status_t tpla_cuda_sumsq(tpla_ctx_t ctx, double *sumsq, tpla_matrix_t x, void *stream);
/* y = x / (safety sqrt(*sumsq) + eps); *sumsq is read by the kernel, so it
 * may be produced by earlier work on the stream; y may be the view x. */
tpla_status_t tpla_cuda_scale_by_norm(tpla_ctx_t ctx, tpla_matrix_t y, tpla_matrix_t x,
                                      const double *sumsq, float safety, float eps, void *stream);
/* The backend's normalize_list and store_list (internal.h): one pass over
 * up to TPLA_LIST_MAX views anywhere (fp32, fp16, bf16; NOT_SUPPORTED
 * otherwise, and for a list of mixed dtypes). */
tpla_status_t tpla_cuda_normalize_list(tpla_ctx_t ctx, tpla_matrix_t y, tpla_batch_t batch,
                                       const tpla_matrix_t *x, const float *safety,
                                       const float *eps, double *sumsq, void *stream);
tpla_status_t tpla_cuda_store_list(tpla_ctx_t ctx, const tpla_matrix_t *x, tpla_matrix_t y,
                                   tpla_batch_t batch, void *stream);
/* a(i, i) += value for i < min(rows, cols) (fp32, fp16, bf16); each member of a batch. */
tpla_status_t tpla_cuda_add_diagonal(tpla_ctx_t ctx, tpla_matrix_t a, float value,
                                     tpla_batch_t batch, void *stream);
/* y = 0 (bytes), any dtype; y is not read. */
tpla_status_t tpla_cuda_zero(tpla_ctx_t ctx, tpla_matrix_t y, void *stream);
/* a(i, j) = a(j, i) for i > j outside the diagonal blocks of edge `whole`
 * (0: none); any dtype; each member of a batch. */
tpla_status_t tpla_cuda_mirror_upper(tpla_ctx_t ctx, tpla_matrix_t a, int64_t whole,
                                     tpla_batch_t batch, void *stream);
/* NCCL group of ncclSend/ncclRecv per peer (zero counts skipped; bytes as
 * ncclUint8), the own block copied with cudaMemcpyAsync. On a non-blocking
 * communicator the group's enqueue is polled (tpla_nccl_finish) for at most
 * cfg.timeout_ms; after that, or on an asynchronous NCCL error, the
 * communicator is aborted and TPLA_ERROR_TIMEOUT / TPLA_ERROR_NCCL
 * returned. INVALID_USAGE once the communicator has been aborted. */
tpla_status_t tpla_cuda_alltoallv(tpla_ctx_t ctx, void *recv, const size_t *recv_counts,
                                  const size_t *recv_displs, const void *send,
                                  const size_t *send_counts, const size_t *send_displs,
                                  tpla_dtype_t dtype, void *stream);

#endif /* TPLA_CUDA_OPS_H */
