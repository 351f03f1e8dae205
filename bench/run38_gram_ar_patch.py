"""run38_gram_ar_patch.py - the experiment patch of bench/device_run38.sh, applied
to a copy of the tree (argv[1]) after run 37's timeline patch (which it runs
first): with RUN38_GRAM_AR_SERIAL set, the distributed Gram (ns_sym_product with
a packed buffer) computes every block row first and all-reduces the packed
triangle once, on the stream, instead of all-reducing each block row on the side
stream behind the next block row's GEMM. Run 37 showed that overlap losing: the
NCCL kernels and the GEMMs share the SMs (a 8 MiB block row's all-reduce took
140 us beside the GEMMs). Not part of the library."""
import os
import subprocess
import sys

from patch_util import patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)

patch(root + "/src/core/ns_iter.c", [
    ("  int64_t s = dst.rows, t = (s + nb - 1) / nb;\n"
     "  void *side = pack != NULL ? ctx->backend->side_stream(ctx, 0) : NULL;\n",
     "  int64_t s = dst.rows, t = (s + nb - 1) / nb;\n"
     "  if (pack != NULL && getenv(\"RUN38_GRAM_AR_SERIAL\") != NULL) {\n"
     "    size_t n = 0;\n"
     "    for (int64_t i0 = 0; i0 < s; i0 += t) {\n"
     "      int64_t h = s - i0 < t ? s - i0 : t;\n"
     "      tpla_matrix_t p = ns_dense((char *)pack + n * tpla_dtype_size(dst.dtype), h, s - i0,\n"
     "                                 dst.dtype);\n"
     "      n += (size_t)(h * (s - i0));\n"
     "      TPLA_TRY(ns_gemm_tf32(ctx, plain(p), op_rows(x, i0, h),\n"
     "                            op_transpose(op_rows(y, i0, s - i0)), 1.0f, 0.0f, tf32, stream));\n"
     "    }\n"
     "    run37_mark(stream, \"  gram GEMMs done (serial)\");\n"
     "    TPLA_TRY(ctx->backend->allreduce(ctx, pack, pack, n, dst.dtype, stream));\n"
     "    run37_mark(stream, \"  gram all-reduced (serial)\");\n"
     "    n = 0;\n"
     "    for (int64_t i0 = 0; i0 < s; i0 += t) {\n"
     "      int64_t h = s - i0 < t ? s - i0 : t;\n"
     "      TPLA_TRY(ns_axpby(ctx, ns_sub(dst, i0, h, i0, s - i0),\n"
     "                        ns_dense((char *)pack + n * tpla_dtype_size(dst.dtype), h, s - i0,\n"
     "                                 dst.dtype), 1.0f, 0.0f, stream));\n"
     "      n += (size_t)(h * (s - i0));\n"
     "    }\n"
     "    return TPLA_SUCCESS;\n"
     "  }\n"
     "  void *side = pack != NULL ? ctx->backend->side_stream(ctx, 0) : NULL;\n"),
])
if "#include <stdlib.h>" not in open(root + "/src/core/ns_iter.c").read():
    patch(root + "/src/core/ns_iter.c", [('#include "ns.h"\n', '#include "ns.h"\n\n#include <stdlib.h>\n')])
print("patched")
