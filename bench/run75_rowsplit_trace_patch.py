"""run75_rowsplit_trace_patch.py - an experiment patch for a copy of the tree (argv[1]) with
the row-split products (src/core/ns_rowsplit.c, branch exp-full-rows): run 37's Newton-Schulz
timeline (applied first), the Gram sum's marks (patch_util.PULLED_GRAM_MARKS) and marks on
lane 0 after each product's own rows (and each published chunk) and after each wait for the
peer's chunks. Not part of the library."""
import os
import subprocess
import sys

from patch_util import PULLED_GRAM_MARKS, patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)

patch(root + "/src/core/ns_rowsplit.c", [
    ("    if (flag < 0)\n      continue;\n",
     "    run37_mark(rs->lane, \"    rowsplit: own rows chunk %d done (flag %d)\", j, flag);\n"
     "    if (flag < 0)\n      continue;\n"),
    ("    TPLA_TRY(ns_pull_arrived(rs->p, OVL_LANE_COMPUTE0, flag + j));\n",
     "  {\n    TPLA_TRY(ns_pull_arrived(rs->p, OVL_LANE_COMPUTE0, flag + j));\n"
     "    run37_mark(rs->lane, \"    rowsplit: peer chunk of flag %d arrived\", flag + j);\n  }\n"),
    ("  TPLA_TRY(rows_gemm(rs, &z1, Z1, 1.0f, o0, o1, p0, p1, true));\n",
     "  run37_mark(rs->lane, \"    rowsplit: Z_1 first half done, G_1 arrived\");\n"
     "  TPLA_TRY(rows_gemm(rs, &z1, Z1, 1.0f, o0, o1, p0, p1, true));\n"
     "  run37_mark(rs->lane, \"    rowsplit: Z_1 done\");\n"),
])
patch(root + "/src/core/ns_pull.c", PULLED_GRAM_MARKS)
print("patched")
