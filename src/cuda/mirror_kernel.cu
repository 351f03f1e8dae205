/*
 * mirror_kernel.cu - the mirror of an upper triangle (tpla_launch_mirror_upper,
 * ops_kernels.h): a(i, j) = a(j, i) below the diagonal, of one matrix or of
 * each member of a batch (a grid row per member). It transposes tiles
 * through shared memory, visiting only the tiles on and below the diagonal:
 * 16-byte chunks in tiles of 8 x 8 chunks (64 x 64 bf16) when the rows allow
 * it, else one element at a time in 32 x 32 tiles. Elements move as raw
 * words, so any dtype works. Given the edge of diagonal blocks that a
 * blocked symmetric product computed whole, the tiles inside one of them
 * are left out: at two block rows that is half the triangle. When the edge
 * is a whole number of tiles the walk enumerates only the tiles left of the
 * blocks, so the blocks' shares stay even; skipping tiles of the full walk
 * instead made the fp32 mirror 4-9% slower (run 185). Tested bit for bit in
 * tests/gpu/test_gpu_ops.c and test_gpu_ops_batch.c.
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

/* The destination tiles a mirror walks (tile_walk_plan). */
struct tile_walk {
  int64_t count; /* tiles walked */
  int64_t w;     /* > 0: only the tiles left of the diagonal blocks of w x w tiles */
  int64_t nt;    /* tiles per side */
  int64_t whole; /* w = 0: the whole lower walk, less the tiles inside blocks of this edge */
};

/* Destination tile (ti, tj) of the walk's k-th tile; false: the tile lies
 * inside one diagonal block of edge `whole` (its rows and columns, clipped
 * to n, in one block) and is left as it is. Compact walk: block row b (tile
 * rows b w .. b w + w - 1) holds b w tiles a row, the columns left of its
 * diagonal block. */
__device__ __forceinline__ bool walk_tile(const tile_walk &wk, int64_t k, int64_t T, int64_t n,
                                          int64_t &ti, int64_t &tj) {
  if (wk.w > 0) {
    for (int64_t b = 1;; b++) {
      const int64_t left = b * wk.w, rows = wk.nt - left < wk.w ? wk.nt - left : wk.w;
      if (k < rows * left) {
        ti = left + k / left;
        tj = k % left;
        return true;
      }
      k -= rows * left;
    }
  }
  lower_tile(k, ti, tj);
  const int64_t last = (ti * T + T < n ? ti * T + T : n) - 1; /* the tile's last row */
  return wk.whole == 0 || tj * T / wk.whole != last / wk.whole;
}

/* Block k of the walk handles destination tile (ti, tj): it reads source
 * tile (tj, ti) of the upper triangle into shared memory and writes its
 * transpose. Off-diagonal source tiles are never written; a diagonal tile
 * is read whole before its lower part is written, by the same block. */
template <typename W>
__global__ void __launch_bounds__(kThreads)
    mirror_upper_kernel(W *a, int64_t n, int64_t ld, tile_walk walk, size_t batch_stride) {
  __shared__ W tile[kTile][kTile + 1]; /* +1: the transposed read is conflict-free */
  a = (W *)((char *)a + (size_t)blockIdx.y * batch_stride); /* this grid row's member */
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  for (int64_t k = blockIdx.x; k < walk.count; k += gridDim.x) {
    int64_t ti, tj;
    if (!walk_tile(walk, k, kTile, n, ti, tj))
      continue; /* the whole block skips it: its barriers stay matched */
    const int64_t r0 = tj * kTile, c0 = ti * kTile; /* source tile origin */
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
    mirror_upper_chunks_kernel(W *a, int64_t n, int64_t ld, tile_walk walk, size_t batch_stride) {
  constexpr int E = 16 / (int)sizeof(W), T = 8 * E, kChunks = 8 * T;
  __shared__ __align__(16) W tile[T * T];
  a = (W *)((char *)a + (size_t)blockIdx.y * batch_stride);
  for (int64_t k = blockIdx.x; k < walk.count; k += gridDim.x) {
    int64_t ti, tj;
    if (!walk_tile(walk, k, T, n, ti, tj))
      continue;
    const int64_t r0 = tj * T, c0 = ti * T; /* source tile origin */
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

/* The walk over tiles of edge T of an n x n mirror: compact when the
 * blocks' edge is a whole number of tiles (and the blocks few, so that the
 * kernel's search over block rows stays short), else the whole triangle. */
tile_walk tile_walk_plan(int64_t n, int64_t T, int64_t whole) {
  tile_walk wk = {0, 0, (n + T - 1) / T, 0};
  if (whole > 0 && whole % T == 0 && (wk.nt + whole / T - 1) / (whole / T) <= 64) {
    wk.w = whole / T;
    for (int64_t left = wk.w; left < wk.nt; left += wk.w)
      wk.count += (wk.nt - left < wk.w ? wk.nt - left : wk.w) * left;
    return wk;
  }
  wk.count = wk.nt * (wk.nt + 1) / 2;
  wk.whole = whole;
  return wk;
}

} /* namespace */

/* One of the two mirror kernels for element word W. */
template <typename W>
cudaError_t launch_mirror(const tpla_matrix_t &a, int64_t n, int64_t whole, int count,
                          size_t stride, int max_blocks, cudaStream_t stream) {
  constexpr int E = 16 / (int)sizeof(W);
  const bool chunks = n % E == 0 && tpla_ops_rows_aligned16(a.data, a.ld, sizeof(W));
  const tile_walk walk = tile_walk_plan(n, chunks ? 8 * E : kTile, whole);
  if (walk.count == 0)
    return cudaSuccess; /* one diagonal block: nothing to mirror */
  const int per = max_blocks / count > 0 ? max_blocks / count : 1;
  const dim3 grid((unsigned)(walk.count < per ? walk.count : per), (unsigned)count);
  if (chunks)
    mirror_upper_chunks_kernel<<<grid, kThreads, 0, stream>>>((W *)a.data, n, a.ld, walk, stride);
  else
    mirror_upper_kernel<<<grid, kThreads, 0, stream>>>((W *)a.data, n, a.ld, walk, stride);
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
