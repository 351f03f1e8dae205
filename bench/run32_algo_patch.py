"""run32_algo_patch.py - the experiment patch of bench/device_run32.sh, applied to a
copy of the tree (argv[1]): cuBLASLt's heuristic returns up to 8 algorithms and
GEMMs with fewer than TPLA_RUN32_ROWS rows (default 4096: the overlapped
operations' chunks, not the unchunked baseline) take the one at index
TPLA_RUN32_ALGO (clamped to what was returned); every plan prints its pick.
Not part of the library."""
import sys

root = sys.argv[1]
path = root + "/src/cuda/lt_plan.c"
s = open(path).read()
s = s.replace('#include "lt_plan.h"\n', '#include "lt_plan.h"\n#include <stdlib.h>\n', 1)
old = """        lt, p->desc, p->lay_a, p->lay_b, p->lay_c ? p->lay_c : p->lay_d, p->lay_d, pref, 1,
        &result, &returned);
"""
new = """        lt, p->desc, p->lay_a, p->lay_b, p->lay_c ? p->lay_c : p->lay_d, p->lay_d, pref, 8,
        run32_results, &returned);
    result = run32_results[0];
    const char *env_algo = getenv("TPLA_RUN32_ALGO"), *env_rows = getenv("TPLA_RUN32_ROWS");
    long pick = env_algo ? atol(env_algo) : 0, below = env_rows ? atol(env_rows) : 4096;
    if (hs == CUBLAS_STATUS_SUCCESS && returned > 0 && key->m < below) {
      pick = pick < returned ? pick : returned - 1;
      result = run32_results[pick];
      fprintf(stderr, "RUN32 m %lld n %lld k %lld: algo %ld of %d, ws %zu\\n", (long long)key->m,
              (long long)key->n, (long long)key->k, pick, returned, result.workspaceSize);
    }
"""
assert s.count(old) == 1, "heuristic call"
s = s.replace(old, new)
old2 = "  cublasLtMatmulHeuristicResult_t result;\n"
assert s.count(old2) == 1
s = s.replace(old2, old2 + "  cublasLtMatmulHeuristicResult_t run32_results[8];\n  memset(run32_results, 0, sizeof run32_results);\n")
if "#include <stdio.h>" not in s:
    s = s.replace("#include <stdlib.h>\n", "#include <stdlib.h>\n#include <stdio.h>\n", 1)
open(path, "w").write(s)
print("patched")
