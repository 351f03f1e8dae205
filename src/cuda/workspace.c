/*
 * workspace.c - grow-only, stream-ordered device scratch buffers (see
 * workspace.h).
 */
#include "workspace.h"

#include "cuda_ctx.h"

#include <stdlib.h>

/* ws->ptr is freed after the work already on `stream`; ws becomes empty. */
static tpla_status_t free_current(tpla_cuda_workspace_t *ws, cudaStream_t stream,
                                  const char *fn) {
  void *p = ws->ptr;
  ws->ptr = NULL;
  ws->bytes = 0;
  ws->captured = false;
  if (p != NULL)
    CUDA_TRY(fn, cudaFreeAsync(p, stream));
  return TPLA_SUCCESS;
}

/* ws->ptr stays allocated for the graphs that captured it; ws becomes empty. */
static tpla_status_t keep_for_graphs(tpla_cuda_workspace_t *ws, const char *fn) {
  void **grown = realloc(ws->kept, sizeof *grown * (size_t)(ws->nkept + 1));
  if (grown == NULL)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
  ws->kept = grown;
  ws->kept[ws->nkept++] = ws->ptr;
  ws->kept_bytes += ws->bytes;
  ws->ptr = NULL;
  ws->bytes = 0;
  ws->captured = false;
  return TPLA_SUCCESS;
}

tpla_status_t tpla_cuda_workspace_reserve(tpla_cuda_workspace_t *ws, size_t bytes,
                                          cudaStream_t stream, const char *fn, void **ptr) {
  enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_TRY(fn, cudaStreamIsCapturing(stream, &capture));
  if (bytes <= ws->bytes && ws->ptr != NULL) {
    ws->captured |= capture != cudaStreamCaptureStatusNone;
    *ptr = ws->ptr;
    return TPLA_SUCCESS;
  }
  if (bytes > SIZE_MAX - TPLA_WORKSPACE_GRANULE)
    return tpla_fail(TPLA_ERROR_OUT_OF_MEMORY, fn, "workspace of %zu bytes requested", bytes);
  size_t rounded = (bytes + TPLA_WORKSPACE_GRANULE - 1) / TPLA_WORKSPACE_GRANULE *
                   TPLA_WORKSPACE_GRANULE;
  if (rounded == 0)
    rounded = TPLA_WORKSPACE_GRANULE;
  if (capture != cudaStreamCaptureStatusNone)
    return tpla_fail(TPLA_ERROR_INVALID_USAGE, fn, "the context's scratch must grow from %zu to "
                     "%zu bytes while the stream is captured; make the same call once "
                     "uncaptured first", ws->bytes, rounded);
  /* Free first so the pool can hand the same memory back: peak usage stays
   * at the new size rather than old + new. */
  TPLA_TRY(ws->captured ? keep_for_graphs(ws, fn) : free_current(ws, stream, fn));
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
  tpla_status_t first = TPLA_SUCCESS;
  for (int i = 0; i < ws->nkept; i++) {
    cudaError_t e = cudaFreeAsync(ws->kept[i], stream);
    if (e != cudaSuccess && first == TPLA_SUCCESS)
      first = tpla_cuda_status(e, fn, "cudaFreeAsync (scratch kept for CUDA graphs)");
  }
  free(ws->kept);
  ws->kept = NULL;
  ws->nkept = 0;
  ws->kept_bytes = 0;
  tpla_status_t current = free_current(ws, stream, fn);
  return first != TPLA_SUCCESS ? first : current;
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
