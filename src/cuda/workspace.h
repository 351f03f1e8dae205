/*
 * workspace.h - grow-only, stream-ordered device scratch buffers of the CUDA
 * executor. A buffer only ever grows; when it must, the old memory is
 * released with cudaFreeAsync and the new one taken with cudaMallocAsync,
 * both on the stream of the operation that needs it, so an execute path
 * never calls the synchronous cudaMalloc/cudaFree and never waits for the
 * device. Work already enqueued on that stream finishes with the old
 * buffer before the pool hands its memory out again.
 *
 * Callers using a buffer on several streams must order those uses (events)
 * themselves, as for any memory.
 *
 * CUDA graphs: a buffer cannot grow while `stream` is captured (the free and
 * the allocation would become graph nodes), and once a captured call has
 * used it, a later growth keeps the old memory until the buffer is
 * released, since the graph still reads and writes it at every launch.
 */
#ifndef TPLA_CUDA_WORKSPACE_H
#define TPLA_CUDA_WORKSPACE_H

#include "cuda_util.h"

/* Sizes are rounded up to this, so slowly growing requests do not
 * reallocate on every call. */
#define TPLA_WORKSPACE_GRANULE ((size_t)2 << 20)

typedef struct {
  void *ptr;
  size_t bytes;  /* 0 when ptr is NULL */
  bool captured; /* a captured call used ptr */
  void **kept;   /* earlier buffers that captured calls used, freed by release */
  int nkept;
  size_t kept_bytes; /* their sizes, summed: memory the context still holds */
} tpla_cuda_workspace_t;

/* Make `ws` hold at least `bytes` bytes, growing it on `stream` if needed,
 * and return its start in *ptr. On failure ws is left empty (its old memory
 * freed, stream-ordered) and *ptr untouched. */
tpla_status_t tpla_cuda_workspace_reserve(tpla_cuda_workspace_t *ws, size_t bytes,
                                          cudaStream_t stream, const char *fn, void **ptr);

/* Free the buffer and the kept ones, ordered after the work already on
 * `stream` (and so before no graph launch made later: release only when no
 * graph that used them will run again). */
tpla_status_t tpla_cuda_workspace_release(tpla_cuda_workspace_t *ws, cudaStream_t stream,
                                          const char *fn);

/* The context's shared scratch buffer (see cuda_ctx.h): at least `bytes`
 * bytes, valid for work enqueued on `stream` until the next call that may
 * grow it. For the algorithms built on the executor, and for tests. */
tpla_status_t tpla_cuda_ctx_scratch(tpla_ctx_t ctx, size_t bytes, void *stream, void **ptr);

#endif /* TPLA_CUDA_WORKSPACE_H */
