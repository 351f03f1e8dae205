"""run121_pull_grid_patch.py - the experiment patch of bench/device_run121.sh, applied to a copy
of the tree (argv[1]); not part of the library. Past two ranks GEMM+AllReduce's pulls are the
fold kernel as an SM copy (00c1a3b), launched with one block row per row of the chunk (up to
65535): thousands of CTAs that compete with the GEMM chunks still running. TPLA_XP_PULL_GRID_Y=n
(read at each pull; 0 or unset: the library's grid) caps the pull's block rows at n, each block
row then striding over the chunk's rows, so a pull takes about 4n CTAs (n = 8192 bf16 columns:
4 blocks per row) and leaves the other SMs to the GEMMs."""
import sys

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from patch_util import patch

root = sys.argv[1]
patch(root + "/src/cuda/transport_kernels.cu", [
    ("template <typename T> cudaError_t launch(const FoldArgs &a, cudaStream_t stream) {",
     "template <typename T> cudaError_t launch(const FoldArgs &a, cudaStream_t stream,\n"
     "                                         int64_t max_y = 65535) {"),
    ("  dim3 grid((unsigned)(bx < 64 ? bx : 64), (unsigned)(a.rows < 65535 ? a.rows : 65535));",
     "  dim3 grid((unsigned)(bx < 64 ? bx : 64), (unsigned)(a.rows < max_y ? a.rows : max_y));"),
    ("""extern "C" cudaError_t tpla_launch_fold(tpla_matrix_t y, float beta, const void *slots,""",
     """extern "C" cudaError_t run121_pull(tpla_matrix_t y, const void *src, int64_t max_y,
                                   cudaStream_t stream) {
  if (y.rows <= 0 || y.cols <= 0)
    return cudaSuccess;
  FoldArgs a = {y.data, y.ld, y.rows, y.cols, 0.0f, src, 0, 1, nullptr, nullptr, 0};
  switch (y.dtype) {
  case TPLA_FLOAT32: return launch<float>(a, stream, max_y);
  case TPLA_FLOAT16: return launch<__half>(a, stream, max_y);
  case TPLA_BFLOAT16: return launch<__nv_bfloat16>(a, stream, max_y);
  default: return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t tpla_launch_fold(tpla_matrix_t y, float beta, const void *slots,"""),
])
patch(root + "/src/cuda/transport_kernels.h", [
    ("cudaError_t tpla_transport_preload_kernels(void);",
     "cudaError_t tpla_transport_preload_kernels(void);\n"
     "cudaError_t run121_pull(tpla_matrix_t y, const void *src, int64_t max_y, cudaStream_t stream);"),
])
patch(root + "/src/cuda/transport.c", [
    ("""      TPLA_TRY(tpla_cuda_status(tpla_launch_fold(*v, 0.0f, src, 0, 1, NULL,
                                                 (tpla_matrix_t){NULL, 0, 0, 1, v->dtype}, st),
                                xp->fn, "the fold kernel as a pull (SM copy)"));""",
     """    {
      const char *cap = getenv("TPLA_XP_PULL_GRID_Y");
      int64_t max_y = cap != NULL && atoll(cap) > 0 ? atoll(cap) : 65535;
      TPLA_TRY(tpla_cuda_status(run121_pull(*v, src, max_y, st), xp->fn,
                                "the fold kernel as a pull (SM copy)"));
    }"""),
    ("#include <stdio.h>\n", "#include <stdio.h>\n#include <stdlib.h>\n"),
])
