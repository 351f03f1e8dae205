"""run66_pull_trace_patch.py - the experiment patch of bench/device_run66.sh, applied to
a copy of the tree (argv[1]): run 37's Newton-Schulz timeline (which it runs first) plus
marks inside GRAM_SHARDED's pulled products as runs 64/65 left them (ns_shard.c: exchange
begun, each own block row's GEMM, each of the peer's rows arrived, the close, the mirror)
and inside the Gram sum by pulls (ns_pull.c: each block row's GEMM on lane 0, its fold on
lane 1, the close). Run 50's patch marked rounds, which the products no longer have. Not
part of the library."""
import os
import subprocess
import sys

from patch_util import PULLED_GRAM_MARKS, patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)


def mark(stream, label, arg=None):
    if arg is None:
        return "  run37_mark(%s, \"    %s\");\n" % (stream, label)
    return "      run37_mark(%s, \"    %s\", %s);\n" % (stream, label, arg)


patch(root + "/src/core/ns_shard.c", [
    ("  size_t scratch = 0;\n  for (int i = 0; i < sh->nbk; i++) {\n",
     mark("lane0", "pulled product: lanes joined") +
     "  size_t scratch = 0;\n  for (int i = 0; i < sh->nbk; i++) {\n"),
    ("      TPLA_TRY(own_row(ctx, it, pr, i, tf32, in_place ? NULL : win, &scratch, lane0));\n",
     "      TPLA_TRY(own_row(ctx, it, pr, i, tf32, in_place ? NULL : win, &scratch, lane0));\n"
     + mark("lane0", "pulled product: own row %d done", "i")),
    ("      TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE0, i));\n",
     "    {\n      TPLA_TRY(ns_pull_arrived(p, OVL_LANE_COMPUTE0, i));\n"
     + mark("lane0", "pulled product: peer row %d arrived", "i") + "    }\n"),
    ("  return ctx->backend->mirror_upper(ctx, pr->d, lane0);\n}\n",
     "  TPLA_TRY(ctx->backend->mirror_upper(ctx, pr->d, lane0));\n"
     + mark("lane0", "pulled product: mirrored") + "  return TPLA_SUCCESS;\n}\n"),
])

patch(root + "/src/core/ns_pull.c", PULLED_GRAM_MARKS)
print("patched")
