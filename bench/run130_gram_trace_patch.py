"""run130_gram_trace_patch.py - the experiment patch of bench/device_run130.sh, applied to a
copy of the tree (argv[1]): run 37's Newton-Schulz timeline plus marks inside the Gram sum by
pulls, for either scheme: main's (every row pulled to both ranks and folded on lane 1:
patch_util's PULLED_GRAM_MARKS) or the owner-summed rows of exp-gram-owner (each row's GEMM on
lane 0, the owner's wait for the peer's partial, the copy of an own sum on lane 1, the arrival
of each of the peer's sums on lane 1), and the exchange's closing. Not part of the library."""
import os
import subprocess
import sys

from patch_util import PULLED_GRAM_MARKS, patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)
src = root + "/src/core/ns_pull.c"
if "row_owner" not in open(src).read():
    patch(src, PULLED_GRAM_MARKS)
    print("patched (main's folds)")
    sys.exit(0)
lane1 = "ns_pull_lane(p, OVL_LANE_COMPUTE1)"
patch(src, [
    ("        TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE0, i));\n      }\n",
     "        TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE0, i));\n"
     "        run37_mark(lane0, \"    pulled gram row %d: peer's partial arrived\", i);\n      }\n"),
    ("      TPLA_TRY(ns_gram_row(ctx, slot, x, r.i0, r.h, own ? &place : NULL, lane0));\n",
     "      TPLA_TRY(ns_gram_row(ctx, slot, x, r.i0, r.h, own ? &place : NULL, lane0));\n"
     "      run37_mark(lane0, \"    pulled gram row %d GEMM done (%s)\", i,"
     " own ? \"own: the sum\" : \"the peer's: partial\");\n"),
    ("      if (own)\n        TPLA_TRY(p->x->copy(p->xp, OVL_LANE_COMPUTE1, OVL_LANE_COMPUTE0, place, slot));\n",
     "      if (own) {\n        TPLA_TRY(p->x->copy(p->xp, OVL_LANE_COMPUTE1, OVL_LANE_COMPUTE0, place, slot));\n"
     "        run37_mark(" + lane1 + ", \"    pulled gram row %d: own sum copied (lane 1)\", i);\n"
     "      }\n"),
    ("      TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE1, i));\n    }\n",
     "      TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE1, i));\n"
     "      run37_mark(" + lane1 + ", \"    pulled gram row %d: peer's sum arrived (lane 1)\", i);\n"
     "    }\n"),
] + PULLED_GRAM_MARKS[2:])
print("patched (owner-summed rows)")
