/*
 * workspace.c - grow-only, stream-ordered device scratch buffers (see
 * workspace.h).
 */
#include "workspace.h"

#include "cuda_ctx.h"

tpla_status_t tpla_cuda_workspace_reserve(tpla_cuda_workspace_t *ws, size_t bytes,
                                          cudaStream_t stream, const char *fn, void **ptr) {
  if (bytes <= ws->bytes && ws->ptr != NULL) {
    *ptr = ws->ptr;
    return TPLA_SUCCESS;
  }
  if (bytes > SIZE_MAX - TPLA_WORKSPACE_GRANULE)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "workspace of %zu bytes requested", bytes);
  size_t rounded = (bytes + TPLA_WORKSPACE_GRANULE - 1) / TPLA_WORKSPACE_GRANULE *
                   TPLA_WORKSPACE_GRANULE;
  if (rounded == 0)
    rounded = TPLA_WORKSPACE_GRANULE;
  /* In a captured stream the free and the allocation would become graph nodes: the graph
   * would own the buffer the context keeps, and free the old one at every launch. */
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_TRY(fn, cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "the context's scratch must grow from %zu to "
                     "%zu bytes while the stream is captured; make the same call once "
                     "uncaptured first", ws->bytes, rounded);
  /* Free first so the pool can hand the same memory back: peak usage stays
   * at the new size rather than old + new. */
  TPLA_TRY(tpla_cuda_workspace_release(ws, stream, fn));
  void *p = NULL;
  cudaError_t e = cudaMallocAsync(&p, rounded, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tpla_fail(e == cudaErrorMemoryAllocation ? TPLA_ERROR_OUT_OF_MEMORY : TPLA_ERROR_CUDA,
                     fn, "cudaMallocAsync of a %zu-byte workspace failed: %s (%s)", rounded,
                     cudaGetErrorName(e), cudaGetErrorString(e));
  }
  ws->ptr = p;
  ws->bytes = rounded;
  *ptr = p;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_cuda_workspace_release(tpla_cuda_workspace_t *ws, cudaStream_t stream,
                                          const char *fn) {
  if (ws->ptr == NULL)
    return TPLA_SUCCESS;
  void *p = ws->ptr;
  ws->ptr = NULL;
  ws->bytes = 0;
  CUDA_TRY(fn, cudaFreeAsync(p, stream));
  return TPLA_SUCCESS;
}

tpla_status_t tpla_cuda_ctx_scratch(tpla_ctx_t ctx, size_t bytes, void *stream, void **ptr) {
  static const char fn[] = "tpla_cuda_ctx_scratch";
  if (ctx == NULL || ctx->executor != TPLA_EXECUTOR_CUDA || ptr == NULL)
    return tpla_fail(TPLA_ERROR_INVALID_ARGUMENT, fn,
                     "needs a context of the CUDA executor and an output pointer");
  tpla_cuda_ctx_t *impl = tpla_cuda_impl(ctx);
  tpla_device_guard_t guard;
  TPLA_TRY(tpla_device_guard_enter(&guard, ctx->device, fn));
  tpla_status_t s =
      tpla_cuda_workspace_reserve(&impl->scratch, bytes, (cudaStream_t)stream, fn, ptr);
  tpla_device_guard_exit(&guard);
  return s;
}
