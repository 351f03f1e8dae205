/*
 * ops_kernels.cu - kernels of the CUDA executor's building blocks: axpby,
 * sum of squares, scale by norm (mirror_kernel.cu: the mirror of an upper
 * triangle), over one matrix, a batch (members one stride apart, a grid row
 * each) or a list (up to TPLA_OPS_LIST_MAX views anywhere, their pointers a
 * kernel parameter). The C launch wrappers are declared in ops_kernels.h;
 * cuda_ops.c reports their errors. The float64 host references are in
 * tests/gpu/test_gpu_ops.c, test_gpu_norm.c and test_gpu_ops_batch.c.
 *
 * All of them are memory-bound, so they are built for bandwidth:
 *  - a persistent grid (at most the resident blocks) walks the matrix as
 *    rows x column-chunks, row-major, so consecutive threads touch
 *    consecutive addresses;
 *  - a chunk is 16 bytes of the narrower operand (8 bf16/fp16 or 4 fp32)
 *    when every row of every operand starts 16-byte aligned and cols is a
 *    multiple of the chunk, else one element (the scalar fallback);
 *  - arithmetic in fp32 (the sum of squares: fp64), conversions through
 *    cuda_fp16.h / cuda_bf16.h (round to nearest even).
 * The sum of squares is deterministic: each block writes one partial,
 * then a single block adds the partials in a fixed order; no atomics. (The
 * grid depends on the shape and the SM count, and the walk on the view's
 * alignment, so the bits are the same on every run of one view on one kind
 * of device.) Products and sums that the host executor rounds separately are
 * written __fmul_rn / __fadd_rn, which nvcc never contracts into an FMA.
 */
#include "ops_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

namespace {

constexpr int kThreads = 256;       /* threads per block of every kernel */
constexpr int kBlocksPerSm = 8;     /* 2048 resident threads per SM */

/* ---- element conversions -------------------------------------------------- */

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/* Load N elements starting at p as floats: 16-byte loads when N > 1 (p is
 * then 16-byte aligned and N * sizeof(T) a multiple of 16). */
template <typename T, int N>
__device__ __forceinline__ void load_n(const T *p, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = to_float(p[0]);
  } else {
    constexpr int kPer = 16 / (int)sizeof(T);
    static_assert(N % kPer == 0, "a vector is a whole number of 16-byte words");
#pragma unroll
    for (int w = 0; w < N / kPer; w++) {
      uint4 raw = reinterpret_cast<const uint4 *>(p)[w];
      T e[kPer];
      memcpy(e, &raw, sizeof raw);
#pragma unroll
      for (int k = 0; k < kPer; k++)
        v[w * kPer + k] = to_float(e[k]);
    }
  }
}

template <typename T, int N>
__device__ __forceinline__ void store_n(T *p, const float (&v)[N]) {
  if constexpr (N == 1) {
    p[0] = from_float<T>(v[0]);
  } else {
    constexpr int kPer = 16 / (int)sizeof(T);
#pragma unroll
    for (int w = 0; w < N / kPer; w++) {
      T e[kPer];
#pragma unroll
      for (int k = 0; k < kPer; k++)
        e[k] = from_float<T>(v[w * kPer + k]);
      uint4 raw;
      memcpy(&raw, e, sizeof raw);
      reinterpret_cast<uint4 *>(p)[w] = raw;
    }
  }
}

/* ---- the rows x chunks walk -------------------------------------------------- */

/* A thread's position in a grid-stride walk over rows * chunks items,
 * advanced without a division per step. */
struct Walk {
  int64_t i, stride, total, chunks, row, chunk, drow, dchunk;

  __device__ __forceinline__ Walk(int64_t rows, int64_t chunks_per_row) {
    chunks = chunks_per_row;
    total = rows * chunks;
    i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    stride = (int64_t)gridDim.x * kThreads;
    row = i / chunks;
    chunk = i - row * chunks;
    drow = stride / chunks;
    dchunk = stride - drow * chunks;
  }
  __device__ __forceinline__ bool valid() const { return i < total; }
  __device__ __forceinline__ void next() {
    i += stride;
    row += drow;
    chunk += dchunk;
    if (chunk >= chunks) {
      chunk -= chunks;
      row++;
    }
  }
};

/* Every op is applied to member `m` of a batch (blockIdx.y): setup(m) gives
 * a per-thread constant, apply<N>(r, c, constant, m) one item. */
template <typename TY, typename TX> struct AxpbyOp {
  TY *y;
  const TX *x;
  int64_t ldy, ldx;
  float alpha, beta;
  size_t stride; /* bytes between the members of a batch */

  __device__ __forceinline__ float setup(int) const { return 0.0f; }
  template <int N>
  __device__ __forceinline__ void apply(int64_t r, int64_t c, float, int m) const {
    const size_t off = (size_t)m * stride;
    TY *yb = (TY *)((char *)y + off);
    const TX *xb = (const TX *)((const char *)x + off);
    float xv[N], yv[N];
    load_n<TX, N>(xb + r * ldx + c, xv);
    if (beta != 0.0f) { /* uniform branch: beta == 0 must not read y (NaN) */
      load_n<TY, N>(yb + r * ldy + c, yv);
#pragma unroll
      for (int k = 0; k < N; k++)
        yv[k] = __fadd_rn(__fmul_rn(alpha, xv[k]), __fmul_rn(beta, yv[k])); /* as the host */
    } else {
#pragma unroll
      for (int k = 0; k < N; k++)
        yv[k] = alpha * xv[k];
    }
    store_n<TY, N>(yb + r * ldy + c, yv);
  }
};

/* 1/D with D = safety sqrt(sumsq) + eps formed in fp64 (see ScaleOp). */
__device__ __forceinline__ double inverse_norm(double sumsq, float safety, float eps) {
  const double D = safety * sqrt(sumsq) + eps;
  return D == 0.0 ? 0.0 : 1.0 / D;
}

/* y[0..N) = x[0..N) * inv, each in fp64 and rounded once to fp32. */
template <typename TY, typename TX, int N>
__device__ __forceinline__ void scale_row_part(TY *y, const TX *x, double inv) {
  float v[N];
  load_n<TX, N>(x, v);
#pragma unroll
  for (int k = 0; k < N; k++)
    v[k] = (float)((double)v[k] * inv);
  store_n<TY, N>(y, v);
}

template <typename TY, typename TX> struct ScaleOp {
  TY *y;
  const TX *x; /* may equal y: each element is read before it is written */
  int64_t ldy, ldx;
  const double *sumsq;
  float safety, eps;

  /* 1/D, read once per thread (every thread reads the same word), with
   * D = safety ||X|| + eps formed in fp64: the sum of squares of fp32
   * entries goes far past fp32's range, and D can fall below fp32's normal
   * range. Each element is x (1/D) in fp64, rounded once to fp32: within
   * half an fp32 ulp and a few fp64 roundings of x / D, the host's formula,
   * and free in a memory-bound kernel (no division in the loop, which
   * would spill under the 32-register cap). X = 0 with eps = 0 divides by
   * 0: zeros then, as eps > 0 would give. */
  __device__ __forceinline__ double setup(int) const { return inverse_norm(*sumsq, safety, eps); }
  template <int N>
  __device__ __forceinline__ void apply(int64_t r, int64_t c, double inv, int) const {
    scale_row_part<TY, TX, N>(y + r * ldy + c, x + r * ldx + c, inv);
  }
};

/* The members of a list: up to TPLA_OPS_LIST_MAX views of one shape and
 * dtype anywhere in memory, passed by value (a kernel parameter). */
struct List {
  const void *p[TPLA_OPS_LIST_MAX];
  int64_t ld[TPLA_OPS_LIST_MAX];
};

/* Member m of the batch at y = x_m / (safety_m ||x_m|| + eps_m), x_m from a
 * list, sumsq_m from sumsq[m]: ScaleOp per member of a list. */
template <typename TY, typename TX> struct ScaleListOp {
  TY *y;
  int64_t ldy;
  size_t stride;
  List x;
  const double *sumsq;
  float safety[TPLA_OPS_LIST_MAX], eps[TPLA_OPS_LIST_MAX];

  __device__ __forceinline__ double setup(int m) const {
    return inverse_norm(sumsq[m], safety[m], eps[m]);
  }
  template <int N>
  __device__ __forceinline__ void apply(int64_t r, int64_t c, double inv, int m) const {
    TY *yb = (TY *)((char *)y + (size_t)m * stride);
    scale_row_part<TY, TX, N>(yb + r * ldy + c, (const TX *)x.p[m] + r * x.ld[m] + c, inv);
  }
};

/* List member m = member m of the batch at y (same dtype). */
template <typename T> struct StoreListOp {
  List x; /* the destinations */
  const T *y;
  int64_t ldy;
  size_t stride;

  __device__ __forceinline__ float setup(int) const { return 0.0f; }
  template <int N>
  __device__ __forceinline__ void apply(int64_t r, int64_t c, float, int m) const {
    const T *yb = (const T *)((const char *)y + (size_t)m * stride);
    float v[N];
    load_n<T, N>(yb + r * ldy + c, v);
    store_n<T, N>((T *)x.p[m] + r * x.ld[m] + c, v);
  }
};

/* Grid row blockIdx.y walks member blockIdx.y of a batch or list. */
template <int N, typename Op>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    elementwise_kernel(Op op, int64_t rows, int64_t chunks) {
  Walk w(rows, chunks);
  if (!w.valid())
    return;
  /* setup() returns a per-thread constant, so op itself stays read-only in
   * the kernel's parameter space instead of being copied to registers. */
  const int m = (int)blockIdx.y;
  const auto u = op.setup(m);
  for (; w.valid(); w.next())
    op.template apply<N>(w.row, w.chunk * N, u, m);
}

/* ---- sum of squares ------------------------------------------------------------ */

/* Sum over the block, in a fixed order; the result is valid in thread 0. */
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0)
    warp_sums[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

/* Squares are summed in fp64: one square of an fp32 entry above ~1.8e19
 * overflows fp32 (bandwidth, not the fp64 rate, bounds these kernels). */
template <typename T, int N>
__device__ __forceinline__ double item_sumsq(const T *p) {
  float v[N];
  load_n<T, N>(p, v);
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < N; k++)
    s = fma((double)v[k], (double)v[k], s);
  return s;
}

/* This block's sum of squares of its items of x (the grid's x extent walks
 * rows x chunks); valid in thread 0. */
template <typename T, int N>
__device__ __forceinline__ double block_sumsq(const T *x, int64_t ld, int64_t rows,
                                              int64_t chunks) {
  Walk w(rows, chunks);
  double acc0 = 0.0, acc1 = 0.0;
  /* Two items per step, both loads issued before either is summed. */
  while (w.valid() && w.i + w.stride < w.total) {
    const T *p0 = x + w.row * ld + w.chunk * N;
    w.next();
    const T *p1 = x + w.row * ld + w.chunk * N;
    w.next();
    float v0[N], v1[N];
    load_n<T, N>(p0, v0);
    load_n<T, N>(p1, v1);
#pragma unroll
    for (int k = 0; k < N; k++) {
      acc0 = fma((double)v0[k], (double)v0[k], acc0);
      acc1 = fma((double)v1[k], (double)v1[k], acc1);
    }
  }
  if (w.valid())
    acc0 += item_sumsq<T, N>(x + w.row * ld + w.chunk * N);
  return block_sum(acc0 + acc1);
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    sumsq_partials_kernel(const T *x, int64_t ld, int64_t rows, int64_t chunks, double *partials) {
  double s = block_sumsq<T, N>(x, ld, rows, chunks);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
}

/* Member blockIdx.y of a list: its partials follow the previous member's. */
template <typename T, int N>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    sumsq_list_partials_kernel(List x, int64_t rows, int64_t chunks, double *partials) {
  const int m = (int)blockIdx.y;
  double s = block_sumsq<T, N>((const T *)x.p[m], x.ld[m], rows, chunks);
  if (threadIdx.x == 0)
    partials[(size_t)m * gridDim.x + blockIdx.x] = s;
}

/* sumsq[b] = the sum of partials[b * count .. (b + 1) * count), b = blockIdx.x. */
__global__ void __launch_bounds__(kThreads)
    sumsq_finish_kernel(const double *partials, int count, double *sumsq) {
  partials += (size_t)blockIdx.x * count;
  double v = 0.0;
  for (int k = threadIdx.x; k < count; k += kThreads)
    v += partials[k];
  v = block_sum(v);
  if (threadIdx.x == 0)
    sumsq[blockIdx.x] = v;
}

/* ---- host-side dispatch ---------------------------------------------------------- */

template <typename T> struct Tag {
  using type = T;
};

/* Call f(Tag<T>) for the element type of a float dtype. */
template <typename F> cudaError_t with_float_type(tpla_dtype_t dtype, F f) {
  switch (dtype) {
  case TPLA_FLOAT32: return f(Tag<float>{});
  case TPLA_FLOAT16: return f(Tag<__half>{});
  case TPLA_BFLOAT16: return f(Tag<__nv_bfloat16>{});
  default: return cudaErrorNotSupported;
  }
}

bool row_aligned16(const void *data, int64_t ld, size_t elem) {
  return ((uintptr_t)data % 16 == 0) && (((size_t)ld * elem) % 16 == 0);
}

int grid_for(int64_t items, int max_blocks) {
  int64_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks > max_blocks)
    blocks = max_blocks;
  return blocks < 1 ? 1 : (int)blocks;
}

/* The grid over `count` members: grid_for's blocks shared among them, one
 * grid row each. */
dim3 batch_grid(int64_t items, int count, int max_blocks) {
  const int per = max_blocks / count;
  return dim3((unsigned)grid_for(items, per > 0 ? per : 1), (unsigned)count);
}

/* Launch an elementwise op over rows x cols (each of `count` members
 * `stride` bytes apart) with chunks of N elements, or of one element when
 * `vector` is false. */
template <int N, typename Op>
cudaError_t launch_elementwise(Op op, int64_t rows, int64_t cols, bool vector, int count,
                               int max_blocks, cudaStream_t stream) {
  const int64_t chunks = vector ? cols / N : cols;
  const dim3 grid = batch_grid(rows * chunks, count, max_blocks);
  if (vector)
    elementwise_kernel<N><<<grid, kThreads, 0, stream>>>(op, rows, chunks);
  else
    elementwise_kernel<1><<<grid, kThreads, 0, stream>>>(op, rows, chunks);
  return cudaGetLastError();
}

/* The checks of a batch's launch: a grid row per member, and a stride that
 * keeps every member's 16-byte alignment. */
bool batch_ok(int count, size_t stride) {
  constexpr int kMaxBatch = 65535; /* a grid's y extent (internal.h's TPLA_BATCH_MAX) */
  return count >= 1 && count <= kMaxBatch && (count == 1 || (stride > 0 && stride % 256 == 0));
}

/* Elements per 16 bytes of the narrower of two types: the vector width. */
template <typename A, typename B> constexpr int vec_width() {
  return 16 / (int)(sizeof(A) < sizeof(B) ? sizeof(A) : sizeof(B));
}

template <typename TY, typename TX>
bool can_vectorize(const tpla_matrix_t &y, const tpla_matrix_t &x) {
  constexpr int n = vec_width<TY, TX>();
  return y.cols % n == 0 && row_aligned16(y.data, y.ld, sizeof(TY)) &&
         row_aligned16(x.data, x.ld, sizeof(TX));
}

} /* namespace */

/* ---- C entry points ---------------------------------------------------------------- */

extern "C" int tpla_ops_max_blocks(int sm_count) {
  return (sm_count > 0 ? sm_count : 1) * kBlocksPerSm;
}

extern "C" int tpla_ops_rows_aligned16(const void *data, int64_t ld, size_t elem) {
  return row_aligned16(data, ld, elem);
}

extern "C" int tpla_ops_batch_ok(int count, size_t stride) { return batch_ok(count, stride); }

extern "C" int tpla_ops_float_dtype(tpla_dtype_t dtype) {
  return dtype == TPLA_FLOAT32 || dtype == TPLA_FLOAT16 || dtype == TPLA_BFLOAT16;
}

extern "C" cudaError_t tpla_launch_axpby(tpla_matrix_t y, tpla_matrix_t x, float alpha,
                                         float beta, int count, size_t stride, int max_blocks,
                                         cudaStream_t stream) {
  if (y.rows == 0 || y.cols == 0)
    return cudaSuccess;
  if (!batch_ok(count, stride))
    return cudaErrorInvalidValue;
  (void)cudaGetLastError(); /* report this launch's error, not a stale one */
  return with_float_type(y.dtype, [&](auto ty) {
    return with_float_type(x.dtype, [&](auto tx) {
      using TY = typename decltype(ty)::type;
      using TX = typename decltype(tx)::type;
      AxpbyOp<TY, TX> op{(TY *)y.data, (const TX *)x.data, y.ld, x.ld, alpha, beta, stride};
      return launch_elementwise<vec_width<TY, TX>()>(op, y.rows, y.cols,
                                                     can_vectorize<TY, TX>(y, x), count,
                                                     max_blocks, stream);
    });
  });
}

/* a(i, i) += value, member blockIdx.y of a batch: a few thousand elements
 * at most, one thread each. */
template <typename T>
__global__ void add_diagonal_kernel(T *a, int64_t ld, int64_t n, float value, size_t stride) {
  T *am = (T *)((char *)a + (size_t)blockIdx.y * stride);
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * kThreads)
    am[i * ld + i] = from_float<T>(to_float(am[i * ld + i]) + value);
}

extern "C" cudaError_t tpla_launch_add_diagonal(tpla_matrix_t a, float value, int count,
                                                size_t stride, cudaStream_t stream) {
  const int64_t n = a.rows < a.cols ? a.rows : a.cols;
  if (n <= 0)
    return cudaSuccess;
  if (!batch_ok(count, stride))
    return cudaErrorInvalidValue;
  (void)cudaGetLastError();
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const dim3 grid((unsigned)(blocks < 1024 ? blocks : 1024), (unsigned)count);
  return with_float_type(a.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    add_diagonal_kernel<T><<<grid, kThreads, 0, stream>>>((T *)a.data, a.ld, n, value, stride);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t tpla_launch_scale_by_norm(tpla_matrix_t y, tpla_matrix_t x,
                                                 const double *sumsq, float safety, float eps,
                                                 int max_blocks, cudaStream_t stream) {
  if (y.rows == 0 || y.cols == 0)
    return cudaSuccess;
  (void)cudaGetLastError();
  return with_float_type(y.dtype, [&](auto ty) {
    return with_float_type(x.dtype, [&](auto tx) {
      using TY = typename decltype(ty)::type;
      using TX = typename decltype(tx)::type;
      ScaleOp<TY, TX> op{(TY *)y.data, (const TX *)x.data, y.ld, x.ld, sumsq, safety, eps};
      return launch_elementwise<vec_width<TY, TX>()>(op, y.rows, y.cols,
                                                     can_vectorize<TY, TX>(y, x), 1, max_blocks,
                                                     stream);
    });
  });
}

extern "C" cudaError_t tpla_launch_sumsq(double *sumsq, double *partials, tpla_matrix_t x,
                                         int max_blocks, cudaStream_t stream) {
  (void)cudaGetLastError();
  if (max_blocks > TPLA_OPS_SUMSQ_PARTIALS)
    max_blocks = TPLA_OPS_SUMSQ_PARTIALS;
  int blocks = 0;
  if (x.rows > 0 && x.cols > 0) {
    cudaError_t e = with_float_type(x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr int n = 16 / (int)sizeof(T);
      const bool vector = x.cols % n == 0 && row_aligned16(x.data, x.ld, sizeof(T));
      const int64_t chunks = vector ? x.cols / n : x.cols;
      blocks = grid_for(x.rows * chunks, max_blocks);
      if (vector)
        sumsq_partials_kernel<T, n><<<blocks, kThreads, 0, stream>>>((const T *)x.data, x.ld,
                                                                     x.rows, chunks, partials);
      else
        sumsq_partials_kernel<T, 1><<<blocks, kThreads, 0, stream>>>((const T *)x.data, x.ld,
                                                                     x.rows, chunks, partials);
      return cudaGetLastError();
    });
    if (e != cudaSuccess)
      return e;
  }
  /* With no blocks this writes 0: the sum over an empty matrix. */
  sumsq_finish_kernel<<<1, kThreads, 0, stream>>>(partials, blocks, sumsq);
  return cudaGetLastError();
}

/* The list of x[0..count) and whether every member's rows are 16-byte
 * aligned for vectors of `n` elements of `elem` bytes. */
static bool make_list(List &list, const tpla_matrix_t *x, int count, int n, size_t elem) {
  bool vector = x[0].cols % n == 0;
  for (int m = 0; m < count; m++) {
    list.p[m] = x[m].data;
    list.ld[m] = x[m].ld;
    vector = vector && row_aligned16(x[m].data, x[m].ld, elem);
  }
  return vector;
}

extern "C" cudaError_t tpla_launch_normalize_list(tpla_matrix_t y, size_t stride,
                                                  const tpla_matrix_t *x, int count,
                                                  const float *safety, const float *eps,
                                                  double *sumsq, double *partials,
                                                  int max_blocks, cudaStream_t stream) {
  if (count == 0 || y.rows == 0 || y.cols == 0)
    return cudaSuccess;
  if (count < 0 || count > TPLA_OPS_LIST_MAX || !batch_ok(count, stride))
    return cudaErrorInvalidValue;
  (void)cudaGetLastError();
  cudaError_t e = with_float_type(x[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int n = 16 / (int)sizeof(T);
    List list;
    const bool vector = make_list(list, x, count, n, sizeof(T));
    const int64_t chunks = vector ? y.cols / n : y.cols;
    const unsigned blocks = batch_grid(y.rows * chunks, count, max_blocks).x,
                   per = TPLA_OPS_SUMSQ_PARTIALS / count; /* each member's partials */
    const dim3 grid(blocks < per ? blocks : per, (unsigned)count);
    if (vector)
      sumsq_list_partials_kernel<T, n><<<grid, kThreads, 0, stream>>>(list, y.rows, chunks,
                                                                      partials);
    else
      sumsq_list_partials_kernel<T, 1><<<grid, kThreads, 0, stream>>>(list, y.rows, chunks,
                                                                      partials);
    sumsq_finish_kernel<<<count, kThreads, 0, stream>>>(partials, (int)grid.x, sumsq);
    return cudaGetLastError();
  });
  if (e != cudaSuccess)
    return e;
  return with_float_type(y.dtype, [&](auto ty) {
    return with_float_type(x[0].dtype, [&](auto tx) {
      using TY = typename decltype(ty)::type;
      using TX = typename decltype(tx)::type;
      constexpr int n = vec_width<TY, TX>();
      ScaleListOp<TY, TX> op{};
      op.y = (TY *)y.data;
      op.ldy = y.ld;
      op.stride = stride;
      op.sumsq = sumsq;
      bool vector = make_list(op.x, x, count, n, sizeof(TX)) &&
                    row_aligned16(y.data, y.ld, sizeof(TY));
      for (int m = 0; m < count; m++) {
        op.safety[m] = safety[m];
        op.eps[m] = eps[m];
      }
      return launch_elementwise<n>(op, y.rows, y.cols, vector, count, max_blocks, stream);
    });
  });
}

extern "C" cudaError_t tpla_launch_store_list(const tpla_matrix_t *x, tpla_matrix_t y,
                                              size_t stride, int count, int max_blocks,
                                              cudaStream_t stream) {
  if (count == 0 || y.rows == 0 || y.cols == 0)
    return cudaSuccess;
  if (count < 0 || count > TPLA_OPS_LIST_MAX || !batch_ok(count, stride))
    return cudaErrorInvalidValue;
  (void)cudaGetLastError();
  return with_float_type(y.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int n = 16 / (int)sizeof(T);
    StoreListOp<T> op{};
    op.y = (const T *)y.data;
    op.ldy = y.ld;
    op.stride = stride;
    bool vector = make_list(op.x, x, count, n, sizeof(T)) && row_aligned16(y.data, y.ld, sizeof(T));
    return launch_elementwise<n>(op, y.rows, y.cols, vector, count, max_blocks, stream);
  });
}
