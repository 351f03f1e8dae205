"""run102_lt_keys_patch.py - the experiment patch of bench/device_run102.sh, applied to a copy of
the tree (argv[1]); not part of the library. With TPLA_XP_LT_KEYS=1 every cuBLASLt plan the
library builds (tpla_lt_plan_build: tpla_gemm's cache, the transport's lanes, so every GEMM of
a Newton-Schulz call) prints its key and the workspace it may use to stderr as one line
"LTKEY m n k lda ldb ldc ldd op_a op_b a_dtype b_dtype d_dtype align_a align_b align_c align_d
beta_zero tf32 bias c_separate fast_accum fp8_pointers ws_bytes", which bench/lt_algo_bench.c
reads."""
import sys

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from patch_util import patch

root = sys.argv[1]
patch(root + "/src/cuda/lt_plan.c", [
    ("  p->algo = result.algo;\n  p->ws_needed = result.workspaceSize;\n  return TPLA_SUCCESS;\n}\n",
     "  p->algo = result.algo;\n  p->ws_needed = result.workspaceSize;\n"
     "  if (getenv(\"TPLA_XP_LT_KEYS\") != NULL)\n"
     "    fprintf(stderr, \"LTKEY %lld %lld %lld %lld %lld %lld %lld %d %d %d %d %d %u %u %u %u %d \"\n"
     "            \"%d %d %d %d %d %zu\\n\", (long long)key->m, (long long)key->n,\n"
     "            (long long)key->k, (long long)key->lda, (long long)key->ldb, (long long)key->ldc,\n"
     "            (long long)key->ldd, key->op_a, key->op_b, key->a_dtype, key->b_dtype,\n"
     "            key->d_dtype, key->align_a, key->align_b, key->align_c, key->align_d,\n"
     "            key->beta_zero, key->tf32, key->bias, key->c_separate, key->fast_accum,\n"
     "            key->fp8_pointers, ws_bytes);\n"
     "  return TPLA_SUCCESS;\n}\n"),
])
s = open(root + "/src/cuda/lt_plan.c").read()
if "#include <stdlib.h>" not in s:
    s = s.replace('#include "lt_plan.h"\n', '#include "lt_plan.h"\n#include <stdlib.h>\n#include <stdio.h>\n', 1)
    open(root + "/src/cuda/lt_plan.c", "w").write(s)
print("patched: TPLA_XP_LT_KEYS")
