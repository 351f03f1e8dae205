"""run43_ns_trace_patch.py - the experiment patch of bench/device_run43.sh, applied to
a copy of the tree (argv[1]): run 37's Newton-Schulz timeline (which it runs first)
plus marks inside GRAM_SHARDED's split product (ns_shard.c: own rows per round, the
two all-gathers on the side stream, the unpacks, the mirror) and inside the Gram
sum by pulls (ns_pull.c: each block row's GEMM on compute lane 0 and its fold on
lane 1, the closing exchange). Run 37 saw split products take 191-566 us against
~161 for a redundant product and its mirror, without telling which part. Not part of
the library."""
import os
import subprocess
import sys

from patch_util import patch

root = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "run37_ns_trace_patch.py"), root], check=True)


def mark(stream, label):
    return "  run37_mark(%s, \"    %s\");\n" % (stream, label)


patch(root + "/src/core/ns_shard.c", [
    ("  TPLA_TRY(own_rows(ctx, it, pr, 0, tf32, &scratch, stream));\n"
     "  TPLA_TRY(gather_round(ctx, it, 0, side, stream));\n"
     "  TPLA_TRY(own_rows(ctx, it, pr, 1, tf32, &scratch, stream)); /* behind round 0 */\n",
     "  TPLA_TRY(own_rows(ctx, it, pr, 0, tf32, &scratch, stream));\n"
     + mark("stream", "split: own rows, round 0") +
     "  TPLA_TRY(gather_round(ctx, it, 0, side, stream));\n"
     + mark("side != NULL ? side : stream", "split: all-gather round 0 (side)") +
     "  TPLA_TRY(own_rows(ctx, it, pr, 1, tf32, &scratch, stream)); /* behind round 0 */\n"
     + mark("stream", "split: own rows, round 1")),
    ("  TPLA_TRY(gather_round(ctx, it, 1, side, stream));\n"
     "  TPLA_TRY(unpack_round(ctx, it, pr->d, 0, stream)); /* behind round 1 */\n",
     "  TPLA_TRY(gather_round(ctx, it, 1, side, stream));\n"
     + mark("side != NULL ? side : stream", "split: all-gather round 1 (side)") +
     "  TPLA_TRY(unpack_round(ctx, it, pr->d, 0, stream)); /* behind round 1 */\n"
     + mark("stream", "split: unpacked round 0")),
    ("  TPLA_TRY(unpack_round(ctx, it, pr->d, 1, stream));\n"
     "  return ctx->backend->mirror_upper(ctx, pr->d, stream);\n",
     "  TPLA_TRY(unpack_round(ctx, it, pr->d, 1, stream));\n"
     + mark("stream", "split: unpacked round 1") +
     "  TPLA_TRY(ctx->backend->mirror_upper(ctx, pr->d, stream));\n"
     + mark("stream", "split: mirrored") +
     "  return TPLA_SUCCESS;\n"),
])

patch(root + "/src/core/ns_pull.c", [
    ("    TPLA_TRY(ns_gram_row(ctx, own, x, i0, h, lane0));\n",
     "    TPLA_TRY(ns_gram_row(ctx, own, x, i0, h, lane0));\n"
     "    run37_mark(lane0, \"  pulled gram row %d GEMM done\", flag);\n"),
    ("    TPLA_TRY(X->fold(p->xp, OVL_LANE_COMPUTE1, &fold));\n",
     "    TPLA_TRY(X->fold(p->xp, OVL_LANE_COMPUTE1, &fold));\n"
     "    run37_mark(X->stream(p->xp, OVL_LANE_COMPUTE1), \"  pulled gram row %d folded (lane 1)\","
     " flag);\n"),
    ("  return X->arrival(p->xp, OVL_LANE_COMPUTE1, nb, p->seq);\n",
     "  TPLA_TRY(X->arrival(p->xp, OVL_LANE_COMPUTE1, nb, p->seq));\n"
     "  run37_mark(X->stream(p->xp, OVL_LANE_COMPUTE1), \"  pulled gram: peer done (lane 1)\");\n"
     "  return TPLA_SUCCESS;\n"),
])
print("patched")
