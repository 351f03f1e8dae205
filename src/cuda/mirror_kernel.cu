/*
 * mirror_kernel.cu - the mirror of an upper triangle (tpla_launch_mirror_upper,
 * ops_kernels.h): a(i, j) = a(j, i) below the diagonal, of one matrix or of
 * each member of a batch (a grid row per member). It transposes tiles
 * through shared memory, visiting only the tiles on and below the diagonal:
 * 16-byte chunks in tiles of 8 x 8 chunks (64 x 64 bf16) when the rows allow
 * it, else one element at a time in 32 x 32 tiles. Elements move as raw
 * words, so any dtype works. Given the edge of diagonal blocks that a
 * blocked symmetric product computed whole, the tiles inside one of them
 * are skipped: at two block rows that is half the triangle. Tested bit for bit in tests/gpu/test_gpu_ops.c
 * and test_gpu_ops_batch.c.
 */
#include "ops_kernels.h"

#include <stdint.h>
#include <string.h>

namespace {

constexpr int kThreads = 256; /* threads per block */
constexpr int kTile = 32;     /* the element kernel's tile edge */
constexpr int kTileRows = kThreads / kTile;

/* ---- mirror of the upper triangle -------------------------------------------- */

/* Tile row ti and column tj (tj <= ti) of the k-th tile of the walk over
 * the lower-triangular tiles, row by row. */
__device__ __forceinline__ void lower_tile(int64_t k, int64_t &ti, int64_t &tj) {
  ti = (int64_t)((sqrt(8.0 * (double)k + 1.0) - 1.0) * 0.5);
  while (ti * (ti + 1) / 2 > k)
    ti--;
  while ((ti + 1) * (ti + 2) / 2 <= k)
    ti++;
  tj = k - ti * (ti + 1) / 2;
}

/* True if the destination tile of source origin (r0, c0), rows [c0, c0 + T)
 * and columns [r0, r0 + T) clipped to n, lies inside one diagonal block of
 * edge `whole` (r0 <= c0: the rows and columns between share it). */
__device__ __forceinline__ bool inside_whole_block(int64_t r0, int64_t c0, int64_t T, int64_t n,
                                                   int64_t whole) {
  const int64_t last = (c0 + T < n ? c0 + T : n) - 1;
  return whole > 0 && r0 / whole == last / whole;
}

/* Block k of the walk handles destination tile (ti, tj): it reads source
 * tile (tj, ti) of the upper triangle into shared memory and writes its
 * transpose. Off-diagonal source tiles are never written; a diagonal tile
 * is read whole before its lower part is written, by the same block. */
template <typename W>
__global__ void __launch_bounds__(kThreads)
    mirror_upper_kernel(W *a, int64_t n, int64_t ld, int64_t whole, int64_t tri_tiles,
                        size_t batch_stride) {
  __shared__ W tile[kTile][kTile + 1]; /* +1: the transposed read is conflict-free */
  a = (W *)((char *)a + (size_t)blockIdx.y * batch_stride); /* this grid row's member */
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  for (int64_t k = blockIdx.x; k < tri_tiles; k += gridDim.x) {
    int64_t ti, tj;
    lower_tile(k, ti, tj);
    const int64_t r0 = tj * kTile, c0 = ti * kTile; /* source tile origin */
    if (inside_whole_block(r0, c0, kTile, n, whole))
      continue; /* uniform over the block: no thread reaches the barrier */
#pragma unroll
    for (int j0 = 0; j0 < kTile; j0 += kTileRows) {
      const int j = j0 + ty;
      const int64_t r = r0 + j, c = c0 + tx;
      if (r < n && c < n)
        tile[j][tx] = a[r * ld + c];
    }
    __syncthreads();
    /* destination (c0 + j, r0 + tx) = a(r0 + tx, c0 + j) = tile[tx][j] */
#pragma unroll
    for (int j0 = 0; j0 < kTile; j0 += kTileRows) {
      const int j = j0 + ty;
      const int64_t r = c0 + j, c = r0 + tx;
      if (r < n && r > c)
        a[r * ld + c] = tile[tx][j];
    }
    __syncthreads();
  }
}

/* The same walk with 16-byte chunks of E = 16 / sizeof(W) elements, for
 * rows 16-byte aligned and n a multiple of E (a chunk is then wholly inside
 * or outside the matrix). A tile is T x T elements, 8 chunks a row; the
 * scalar kernel's 2-byte accesses reach about a quarter of HBM bandwidth
 * (run 37: 28 us for a 4096^2 bf16 mirror), chunks keep 32 bytes in flight
 * per thread. Source chunk (r, c) is kept at chunk (c ^ (r / E) % 8) of its
 * shared row, so that the transposed reads (a warp: 4 destination rows x 8
 * chunks, each chunk gathering E source rows) fall on distinct banks. */
template <typename W>
__global__ void __launch_bounds__(kThreads)
    mirror_upper_chunks_kernel(W *a, int64_t n, int64_t ld, int64_t whole, int64_t tri_tiles,
                               size_t batch_stride) {
  constexpr int E = 16 / (int)sizeof(W), T = 8 * E, kChunks = 8 * T;
  __shared__ __align__(16) W tile[T * T];
  a = (W *)((char *)a + (size_t)blockIdx.y * batch_stride);
  for (int64_t k = blockIdx.x; k < tri_tiles; k += gridDim.x) {
    int64_t ti, tj;
    lower_tile(k, ti, tj);
    const int64_t r0 = tj * T, c0 = ti * T; /* source tile origin */
    if (inside_whole_block(r0, c0, T, n, whole))
      continue;
    for (int q = threadIdx.x; q < kChunks; q += kThreads) {
      const int r = q / 8, c = q % 8;
      if (r0 + r < n && c0 + c * E < n)
        reinterpret_cast<uint4 *>(tile)[r * 8 + (c ^ ((r / E) % 8))] =
            *reinterpret_cast<const uint4 *>(a + (r0 + r) * ld + c0 + c * E);
    }
    __syncthreads();
    /* destination row c0 + j, chunk u: a(r0 + u E + e, c0 + j) for e < E */
    for (int q = threadIdx.x; q < kChunks; q += kThreads) {
      const int j = q / 8, u = q % 8;
      const int64_t dr = c0 + j, dc = r0 + u * E;
      if (dr >= n || dc >= n)
        continue;
      W v[E];
#pragma unroll
      for (int e = 0; e < E; e++)
        v[e] = tile[((u * E + e) * 8 + ((j / E) ^ u)) * E + j % E];
      if (ti != tj) {
        uint4 raw;
        memcpy(&raw, v, sizeof raw);
        *reinterpret_cast<uint4 *>(a + dr * ld + dc) = raw;
      } else {
#pragma unroll
        for (int e = 0; e < E; e++)
          if (dr > dc + e)
            a[dr * ld + dc + e] = v[e];
      }
    }
    __syncthreads();
  }
}

} /* namespace */

/* One of the two mirror kernels for element word W. */
template <typename W>
cudaError_t launch_mirror(const tpla_matrix_t &a, int64_t n, int64_t whole, int count,
                          size_t stride, int max_blocks, cudaStream_t stream) {
  constexpr int E = 16 / (int)sizeof(W);
  const bool chunks = n % E == 0 && tpla_ops_rows_aligned16(a.data, a.ld, sizeof(W));
  const int64_t edge = chunks ? 8 * E : kTile;
  const int64_t tiles = (n + edge - 1) / edge;
  const int64_t tri = tiles * (tiles + 1) / 2;
  const int per = max_blocks / count > 0 ? max_blocks / count : 1;
  const dim3 grid((unsigned)(tri < per ? tri : per), (unsigned)count);
  if (chunks)
    mirror_upper_chunks_kernel<<<grid, kThreads, 0, stream>>>((W *)a.data, n, a.ld, whole, tri,
                                                               stride);
  else
    mirror_upper_kernel<<<grid, kThreads, 0, stream>>>((W *)a.data, n, a.ld, whole, tri, stride);
  return cudaGetLastError();
}

extern "C" cudaError_t tpla_launch_mirror_upper(tpla_matrix_t a, int64_t whole, int count,
                                                size_t stride, int max_blocks,
                                                cudaStream_t stream) {
  const int64_t n = a.rows < a.cols ? a.rows : a.cols;
  if (n <= 1)
    return cudaSuccess;
  if (!tpla_ops_batch_ok(count, stride))
    return cudaErrorInvalidValue;
  (void)cudaGetLastError();
  switch (tpla_dtype_size(a.dtype)) {
  case 1: return launch_mirror<uint8_t>(a, n, whole, count, stride, max_blocks, stream);
  case 2: return launch_mirror<uint16_t>(a, n, whole, count, stride, max_blocks, stream);
  case 4: return launch_mirror<uint32_t>(a, n, whole, count, stride, max_blocks, stream);
  case 8: return launch_mirror<uint64_t>(a, n, whole, count, stride, max_blocks, stream);
  default: return cudaErrorNotSupported;
  }
}
