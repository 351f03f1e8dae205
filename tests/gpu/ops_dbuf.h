/*
 * ops_dbuf.h - what test_gpu_ops.c and test_gpu_norm.c share: the
 * single-rank NCCL context and non-blocking stream their ops run on (made
 * by the setup test, test_create_single_rank_context; NEED_CTX skips a test
 * without a GPU), the shapes and float dtypes they sweep (odd shapes,
 * padded leading dimensions, a misaligned start), dbuf_t (a device buffer
 * holding one view amid a 0xA5 byte pattern, with its host image, so that
 * bytes outside the view can be checked untouched), the absolute error
 * floor of rounding to a dtype (the unit roundoff is gpu_util.h's), and a
 * message for a failed call.
 *
 * Header-only (static functions): each test is one translation unit.
 * Include only when TPLA_HAVE_CUDA is defined.
 */
#ifndef TPLA_OPS_DBUF_H
#define TPLA_OPS_DBUF_H

#include "../../src/cuda/cuda_ops.h"
#include "gpu_util.h"
#include "internal.h"
#include "ranks.h"
#include "test.h"

#include <stdlib.h>

/* ---- the single-rank context ------------------------------------------------------------- */

enum { NO_GPU, SETUP_FAILED, READY };
static int g_state = NO_GPU;
static struct ncclComm *g_comm;
static tpla_ctx_t g_ctx;
static cudaStream_t g_stream;

#define NEED_CTX()                                                \
  do {                                                            \
    if (g_state == NO_GPU)                                        \
      SKIP("no CUDA device");                                     \
    if (g_state != READY) {                                       \
      TEST_FAIL_("the single-rank context could not be created"); \
      return;                                                     \
    }                                                             \
  } while (0)

/* The first test of each program: skipped without a GPU, else creates the
 * context (a failure here fails every later test through NEED_CTX). */
static inline void test_create_single_rank_context(void) {
  REQUIRE_GPUS(1, gpu_count());
  g_state = SETUP_FAILED;
  tpla_unique_id_t id;
  ASSERT_TRUE(cudaSetDevice(0) == cudaSuccess);
  ASSERT_OK(tpla_nccl_get_unique_id(&id));
  ASSERT_OK(tpla_nccl_comm_create(&g_comm, &id, 1, 0, 0, NULL));
  ASSERT_OK(tpla_ctx_create_nccl(&g_ctx, g_comm, NULL));
  ASSERT_TRUE(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) == cudaSuccess);
  g_state = READY;
}

/* After the last test: whatever setup made, gone. */
static inline void destroy_single_rank_context(void) {
  if (g_stream)
    cudaStreamDestroy(g_stream);
  tpla_ctx_destroy(g_ctx);
  tpla_nccl_comm_destroy(g_comm);
}

/* ---- shapes and device buffers ------------------------------------------------------------ */

/* A view of rows x cols with leading dimension ld, starting `offset`
 * elements into its allocation (offset 1 breaks 16-byte alignment). */
typedef struct {
  int64_t rows, cols, ld, offset;
} shape_t;

static const shape_t k_shapes[] = {
    {1, 1, 1, 0},       {7, 13, 13, 0},     {7, 13, 20, 0},        {64, 256, 256, 0},
    {33, 64, 72, 0},    {64, 256, 256, 1},  {1000, 4097, 4097, 0}, {1000, 4096, 4104, 0},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])
static const tpla_dtype_t k_float_types[] = {TPLA_FLOAT32, TPLA_FLOAT16, TPLA_BFLOAT16};

/* Device buffer holding one view, with its host image. Elements outside the
 * view (padding, the offset, one spare element) hold a 0xA5 byte pattern. */
typedef struct {
  tpla_matrix_t view;
  shape_t shape;
  void *base;
  unsigned char *host;
  size_t count, bytes;
} dbuf_t;

static inline size_t view_index(const dbuf_t *b, int64_t i, int64_t j) {
  return (size_t)(b->shape.offset + i * b->shape.ld + j);
}

static inline int in_view(const dbuf_t *b, size_t idx) {
  if (idx < (size_t)b->shape.offset)
    return 0;
  size_t k = idx - (size_t)b->shape.offset;
  return (int64_t)(k / (size_t)b->shape.ld) < b->shape.rows &&
         (int64_t)(k % (size_t)b->shape.ld) < b->shape.cols;
}

/* fill: 0 random in [-1, 1), 1 NaN. Returns 0 on success. */
static inline int dbuf_init(dbuf_t *b, shape_t s, tpla_dtype_t dt, rng_t *rng, int fill) {
  memset(b, 0, sizeof *b);
  b->shape = s;
  b->count = (size_t)(s.rows * s.ld + s.offset) + 1;
  b->bytes = b->count * tpla_dtype_size(dt);
  b->host = malloc(b->bytes);
  if (b->host == NULL)
    return 1;
  memset(b->host, 0xA5, b->bytes);
  for (int64_t i = 0; i < s.rows; i++)
    for (int64_t j = 0; j < s.cols; j++)
      tpla_store_elem(b->host, dt, view_index(b, i, j), fill ? NAN : rng_uniform(rng));
  /* cudaMemcpy from pageable memory may return before its DMA lands, and the
   * ops run on a non-blocking stream: synchronize the device before use. */
  if (cudaMalloc(&b->base, b->bytes) != cudaSuccess ||
      cudaMemcpy(b->base, b->host, b->bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "  cudaMalloc/cudaMemcpy of %zu bytes failed\n", b->bytes);
    return 1;
  }
  b->view = (tpla_matrix_t){(char *)b->base + (size_t)s.offset * tpla_dtype_size(dt), s.rows,
                            s.cols, s.ld, dt};
  return 0;
}

static inline void dbuf_free(dbuf_t *b) {
  cudaFree(b->base);
  free(b->host);
  memset(b, 0, sizeof *b);
}

/* Waits for the stream and copies the whole allocation back into `img`. */
static inline int dbuf_download(const dbuf_t *b, unsigned char *img) {
  cudaError_t e = cudaStreamSynchronize(g_stream);
  if (e == cudaSuccess)
    e = cudaMemcpy(img, b->base, b->bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    fprintf(stderr, "  download failed: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}

/* Number of bytes outside the view that differ between b->host and img. */
static inline size_t outside_changes(const dbuf_t *b, const unsigned char *img) {
  size_t es = tpla_dtype_size(b->view.dtype), changed = 0;
  for (size_t idx = 0; idx < b->count; idx++)
    if (!in_view(b, idx) && memcmp(b->host + idx * es, img + idx * es, es) != 0)
      changed++;
  return changed;
}

/* Half the smallest subnormal step (absolute error floor of rounding). */
static inline double abs_floor(tpla_dtype_t dt) {
  return dt == TPLA_FLOAT16 ? 0x1p-25 : dt == TPLA_BFLOAT16 ? 0x1p-134 : 0x1p-150;
}

static inline void describe_case(char *buf, size_t n, const char *op, tpla_dtype_t ty,
                                 tpla_dtype_t tx, shape_t s) {
  snprintf(buf, n, "%s y %s x %s %" PRId64 "x%" PRId64 " ld %" PRId64 " offset %" PRId64, op,
           tpla_dtype_name(ty), tpla_dtype_name(tx), s.rows, s.cols, s.ld, s.offset);
}

/* 0 on success; otherwise prints the status and message and returns 1. */
static inline int failed_call(tpla_status_t st, const char *what) {
  if (st == TPLA_SUCCESS)
    return 0;
  fprintf(stderr, "  %s: %s (%s)\n", what, tpla_status_string(st), tpla_last_error());
  return 1;
}

#endif /* TPLA_OPS_DBUF_H */
