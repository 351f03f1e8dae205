/*
 * fp8_kernels.cu - the kernels around FP8 GEMMs (see fp8_kernels.h):
 *  - stage_kernel: dst = op(src), zero-padded, for 1-byte elements. The
 *    transposing variant goes through 32x32 tiles of shared memory (one
 *    padding byte per tile row against bank conflicts), so both the read of
 *    src and the write of dst walk rows; the plain variant copies directly.
 *    One byte per thread: used for padded staging and the edges below.
 *  - transpose4_kernel: an exact transpose (no padding) of 64x64-byte tiles,
 *    four bytes per thread in and out (64-byte row segments per half warp
 *    instead of 32), for the per-call transposes of FP8 B operands (op_b N
 *    on Hopper): at 32-64 MiB the byte kernel ran at well under 1 TB/s
 *    (2 H200s, runs 11 and 14). Needs 4-byte aligned pointers and lds; the
 *    rows and columns beyond the last whole tile go to the byte kernel.
 *  - amax_kernel: max |x| as the bits of a float: for x >= 0 the IEEE
 *    ordering of floats is the unsigned ordering of their bits, and a NaN
 *    (sign cleared by fabsf) is above every number, so unsigned maxima and
 *    one atomicMax per block give max |x| with NaN propagated. At most
 *    kAmaxBlocks blocks stride over the matrix: one atomic per warp over a
 *    block per row, all on one address, made an 8 MiB amax add 124-163 us
 *    to an FP8 AllGather+GEMM (run 26).
 */
#include "fp8_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace {

constexpr int kTile = 32;      /* stage tile edge */
constexpr int kTileRows = 8;   /* rows of a tile each pass of a block covers */
constexpr int kMaxGrid = 4096; /* blocks per grid dimension; the kernels stride */
constexpr int kAmaxThreads = 256;
constexpr int kAmaxBlocks = 1024; /* a few waves: the atomics stay ~1 per 8K elements */

/* ---- staging ---------------------------------------------------------------- */

template <bool Transpose>
__global__ void stage_kernel(uint8_t *dst, int64_t dst_ld, int64_t dst_rows, int64_t dst_cols,
                             const uint8_t *src, int64_t src_ld, int64_t rows, int64_t cols) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const int64_t tiles_r = (dst_rows + kTile - 1) / kTile;
  const int64_t tiles_c = (dst_cols + kTile - 1) / kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y)
    for (int64_t tc = blockIdx.x; tc < tiles_c; tc += gridDim.x) {
      const int64_t i0 = tr * kTile, j0 = tc * kTile; /* the tile's origin in dst */
      if (Transpose) {
        /* dst(i, j) = src(j, i): read src rows j0.., columns i0.. */
        for (int r = ty; r < kTile; r += kTileRows) {
          const int64_t sr = j0 + r, sc = i0 + tx;
          tile[r][tx] = sr < rows && sc < cols ? src[sr * src_ld + sc] : (uint8_t)0;
        }
        __syncthreads();
        for (int r = ty; r < kTile; r += kTileRows) {
          const int64_t i = i0 + r, j = j0 + tx;
          if (i < dst_rows && j < dst_cols)
            dst[i * dst_ld + j] = tile[tx][r];
        }
        __syncthreads(); /* the tile is refilled by the next iteration */
      } else {
        for (int r = ty; r < kTile; r += kTileRows) {
          const int64_t i = i0 + r, j = j0 + tx;
          if (i < dst_rows && j < dst_cols)
            dst[i * dst_ld + j] = i < rows && j < cols ? src[i * src_ld + j] : (uint8_t)0;
        }
      }
    }
}

constexpr int kTile4 = 64; /* transpose4 tile edge, bytes */
constexpr int kTile4Threads = 16;

/* dst (cols x rows) = src^T over the whole 64x64 tiles of src (rows, cols
 * multiples of 64). Load: thread (tx, ty) reads word tx (bytes 4tx..4tx+3)
 * of tile rows ty, ty+16, ty+32, ty+48. Store: thread (tx, ty) writes bytes
 * 4tx..4tx+3 of dst tile rows rr = ty + 16q, i.e. byte rr of src tile rows
 * 4tx..4tx+3. The word pitch 17 spreads a column's words over the banks. */
__global__ void transpose4_kernel(uint8_t *dst, int64_t dst_ld, const uint8_t *src,
                                  int64_t src_ld, int64_t rows, int64_t cols) {
  __shared__ uint32_t tile[kTile4][kTile4 / 4 + 1];
  const int64_t tiles_r = rows / kTile4, tiles_c = cols / kTile4;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y)
    for (int64_t tc = blockIdx.x; tc < tiles_c; tc += gridDim.x) {
      const int64_t r0 = tr * kTile4, c0 = tc * kTile4; /* the tile's origin in src */
      for (int r = ty; r < kTile4; r += kTile4Threads)
        tile[r][tx] = *reinterpret_cast<const uint32_t *>(src + (r0 + r) * src_ld + c0 + 4 * tx);
      __syncthreads();
      for (int rr = ty; rr < kTile4; rr += kTile4Threads) {
        uint32_t v = 0;
        for (int q = 0; q < 4; q++)
          v |= ((tile[4 * tx + q][rr >> 2] >> (8 * (rr & 3))) & 0xffu) << (8 * q);
        *reinterpret_cast<uint32_t *>(dst + (c0 + rr) * dst_ld + r0 + 4 * tx) = v;
      }
      __syncthreads(); /* the tile is refilled by the next iteration */
    }
}

/* ---- amax ---------------------------------------------------------------------- */

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 v) { return static_cast<float>(v); }

template <typename T>
__global__ void amax_kernel(unsigned int *amax_bits, const T *x, int64_t rows, int64_t cols,
                            int64_t ld) {
  unsigned int m = 0;
  for (int64_t i = blockIdx.y; i < rows; i += gridDim.y)
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols;
         j += (int64_t)gridDim.x * blockDim.x)
      m = max(m, __float_as_uint(fabsf(to_float(x[i * ld + j]))));
  __shared__ unsigned int warp_max[kAmaxThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0)
    warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x >= 32)
    return;
  m = threadIdx.x < kAmaxThreads / 32 ? warp_max[threadIdx.x] : 0u;
  for (int offset = 16; offset > 0; offset >>= 1)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x == 0 && m != 0)
    atomicMax(amax_bits, m);
}

template <typename T>
cudaError_t launch_amax(float *amax, const void *x, int64_t rows, int64_t cols, int64_t ld,
                        cudaStream_t stream) {
  int64_t bx = (cols + kAmaxThreads - 1) / kAmaxThreads;
  bx = bx < 64 ? bx : 64;
  int64_t by = kAmaxBlocks / bx;
  dim3 grid((unsigned)bx, (unsigned)(rows < by ? rows : by));
  amax_kernel<T><<<grid, kAmaxThreads, 0, stream>>>(reinterpret_cast<unsigned int *>(amax),
                                                   static_cast<const T *>(x), rows, cols, ld);
  return cudaGetLastError();
}

} // namespace

namespace {

/* dst (cols x rows) = src^T: whole 64-byte tiles four bytes at a time, the
 * right and bottom strips one byte at a time. */
cudaError_t transpose_fast(uint8_t *dst, int64_t dst_ld, const uint8_t *src, int64_t src_ld,
                           int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t r64 = rows / kTile4 * kTile4, c64 = cols / kTile4 * kTile4;
  if (r64 > 0 && c64 > 0) {
    int64_t tr = r64 / kTile4, tc = c64 / kTile4;
    dim3 grid((unsigned)(tc < kMaxGrid ? tc : kMaxGrid), (unsigned)(tr < kMaxGrid ? tr : kMaxGrid));
    transpose4_kernel<<<grid, dim3(kTile4Threads, kTile4Threads), 0, stream>>>(dst, dst_ld, src,
                                                                              src_ld, r64, c64);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  if (c64 < cols) { /* src columns c64.. (every row) -> dst rows c64.. */
    cudaError_t e = tpla_cuda_stage_bytes(dst + c64 * dst_ld, dst_ld, cols - c64, rows, src + c64,
                                          src_ld, rows, cols - c64, 1, stream);
    if (e != cudaSuccess)
      return e;
  }
  if (r64 < rows && c64 > 0) /* src rows r64.., columns ..c64 -> dst columns r64.. */
    return tpla_cuda_stage_bytes(dst + r64, dst_ld, c64, rows - r64, src + r64 * src_ld, src_ld,
                                 rows - r64, c64, 1, stream);
  return cudaSuccess;
}

} // namespace

extern "C" cudaError_t tpla_cuda_stage_bytes(void *dst, int64_t dst_ld, int64_t dst_rows,
                                             int64_t dst_cols, const void *src, int64_t src_ld,
                                             int64_t rows, int64_t cols, int transpose,
                                             cudaStream_t stream) {
  if (dst_rows <= 0 || dst_cols <= 0)
    return cudaSuccess;
  /* an exact transpose (no padding) of 4-byte aligned rows: four bytes at a time */
  if (transpose && dst_rows == cols && dst_cols == rows && rows >= kTile4 && cols >= kTile4 &&
      (((uintptr_t)dst | (uintptr_t)src | (uintptr_t)dst_ld | (uintptr_t)src_ld) & 3) == 0)
    return transpose_fast(static_cast<uint8_t *>(dst), dst_ld, static_cast<const uint8_t *>(src),
                          src_ld, rows, cols, stream);
  if (rows <= 0 || cols <= 0) /* nothing to copy: all padding */
    rows = cols = 0;
  int64_t tiles_r = (dst_rows + kTile - 1) / kTile, tiles_c = (dst_cols + kTile - 1) / kTile;
  dim3 grid((unsigned)(tiles_c < kMaxGrid ? tiles_c : kMaxGrid),
            (unsigned)(tiles_r < kMaxGrid ? tiles_r : kMaxGrid));
  dim3 block(kTile, kTileRows);
  uint8_t *d = static_cast<uint8_t *>(dst);
  const uint8_t *s = static_cast<const uint8_t *>(src);
  if (transpose)
    stage_kernel<true><<<grid, block, 0, stream>>>(d, dst_ld, dst_rows, dst_cols, s, src_ld, rows,
                                                   cols);
  else
    stage_kernel<false><<<grid, block, 0, stream>>>(d, dst_ld, dst_rows, dst_cols, s, src_ld,
                                                    rows, cols);
  return cudaGetLastError();
}

extern "C" cudaError_t tpla_cuda_transpose_bytes(void *dst, int64_t dst_ld, const void *src,
                                                 int64_t src_ld, int64_t rows, int64_t cols,
                                                 cudaStream_t stream) {
  return tpla_cuda_stage_bytes(dst, dst_ld, cols, rows, src, src_ld, rows, cols, 1, stream);
}

extern "C" cudaError_t tpla_cuda_amax(float *amax, const void *x, tpla_dtype_t dtype,
                                      int64_t rows, int64_t cols, int64_t ld, int accumulate,
                                      cudaStream_t stream) {
  if (!accumulate) {
    cudaError_t e = cudaMemsetAsync(amax, 0, sizeof *amax, stream);
    if (e != cudaSuccess)
      return e;
  }
  if (rows <= 0 || cols <= 0)
    return cudaSuccess;
  switch (dtype) {
  case TPLA_FLOAT32: return launch_amax<float>(amax, x, rows, cols, ld, stream);
  case TPLA_FLOAT16: return launch_amax<__half>(amax, x, rows, cols, ld, stream);
  case TPLA_BFLOAT16: return launch_amax<__nv_bfloat16>(amax, x, rows, cols, ld, stream);
  case TPLA_FLOAT8_E4M3: return launch_amax<__nv_fp8_e4m3>(amax, x, rows, cols, ld, stream);
  case TPLA_FLOAT8_E5M2: return launch_amax<__nv_fp8_e5m2>(amax, x, rows, cols, ld, stream);
  default: return cudaErrorInvalidValue;
  }
}
