"""run50_pull_trace_patch.py - the experiment patch of bench/device_run50.sh, applied to
a copy of the tree (argv[1]): run 37's Newton-Schulz timeline (which it runs first) plus
marks inside GRAM_SHARDED's pulled product (ns_shard.c: exchange begun, own rows per
round, own rows placed, peer rows arrived, mirror, exchange closed) and inside the Gram
sum by pulls (ns_pull.c: each block row's GEMM on lane 0, its fold on lane 1, the close).
Run 49 measured pulled products about as slow as GRAM_ALLREDUCE's redundant ones
(16384x4096: 3.90 against 3.84-4.09 ms); this shows which part of them costs. Not part of
the library."""
import os
import subprocess
import sys

from patch_util import PULLED_GRAM_MARKS, patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)


def mark(stream, label):
    return "  run37_mark(%s, \"    %s\");\n" % (stream, label)


patch(root + "/src/core/ns_shard.c", [
    ("  TPLA_TRY(pull_round(ctx, it, pr, 0, tf32, &scratch));\n"
     "  TPLA_TRY(pull_round(ctx, it, pr, 1, tf32, &scratch)); /* behind round 0's pulls */\n"
     "  for (int r = 0; r < 2; r++)\n"
     "    TPLA_TRY(unpack_round(ctx, it, pr->d, r, win, true, lane0));\n"
     "  for (int r = 0; r < 2; r++)\n"
     "    TPLA_TRY(ns_pull_arrived(it->pull, OVL_LANE_COMPUTE0, r));\n"
     "  return ctx->backend->mirror_upper(ctx, pr->d, lane0);\n",
     mark("lane0", "pulled product: lanes joined") +
     "  TPLA_TRY(pull_round(ctx, it, pr, 0, tf32, &scratch));\n"
     + mark("lane0", "pulled product: own rows, round 0") +
     "  TPLA_TRY(pull_round(ctx, it, pr, 1, tf32, &scratch)); /* behind round 0's pulls */\n"
     + mark("lane0", "pulled product: own rows, round 1") +
     "  for (int r = 0; r < 2; r++)\n"
     "    TPLA_TRY(unpack_round(ctx, it, pr->d, r, win, true, lane0));\n"
     + mark("lane0", "pulled product: own rows placed") +
     "  for (int r = 0; r < 2; r++) {\n"
     "    TPLA_TRY(ns_pull_arrived(it->pull, OVL_LANE_COMPUTE0, r));\n"
     "    run37_mark(lane0, \"    pulled product: peer round %d arrived\", r);\n"
     "  }\n"
     "  TPLA_TRY(ctx->backend->mirror_upper(ctx, pr->d, lane0));\n"
     + mark("lane0", "pulled product: mirrored") +
     "  return TPLA_SUCCESS;\n"),
])

patch(root + "/src/core/ns_pull.c", PULLED_GRAM_MARKS)
print("patched")
