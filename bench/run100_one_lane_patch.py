"""run100_one_lane_patch.py - the experiment patch of bench/device_run100.sh, applied to a copy
of the tree (argv[1]); not part of the library. Two knobs, read at every call (set them alike
on every rank):
  TPLA_XP_OWN_LANE=0   GEMM+RS's and GEMM+AR's own-row chunks on compute lane 0, after the
                       partials on the same stream (the library: lane 1, so that an own chunk's
                       GEMM overlaps the partials still being computed). No chunk GEMM then
                       shares the SMs with another, so the last partial is finished, and its push
                       started, as early as the work allows.
  TPLA_XP_CUT=a,b,...  every slice whose rows add up to a+b+... is cut into those chunks
                       (the plan's chunk count must equal the number of pieces: --chunks=N).
"""
import sys

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from patch_util import patch

root = sys.argv[1]
patch(root + "/src/core/overlap_plan.c", [
    ("void ovl_chunk(int64_t rows, int chunks, int tail, int c, int64_t *r0, int64_t *nr) {\n",
     "void ovl_chunk(int64_t rows, int chunks, int tail, int c, int64_t *r0, int64_t *nr) {\n"
     "  const char *cut = getenv(\"TPLA_XP_CUT\");\n"
     "  if (cut != NULL && *cut) {\n"
     "    int64_t len[16], at = 0;\n"
     "    int n = 0;\n"
     "    for (const char *q = cut; *q && n < 16; n++) {\n"
     "      char *end;\n"
     "      len[n] = strtoll(q, &end, 10);\n"
     "      at += len[n];\n"
     "      q = *end == ',' ? end + 1 : end;\n"
     "    }\n"
     "    if (at == rows && n == chunks) {\n"
     "      int64_t s = 0;\n"
     "      for (int i = 0; i < c; i++)\n"
     "        s += len[i];\n"
     "      *r0 = s;\n"
     "      *nr = len[c];\n"
     "      return;\n"
     "    }\n"
     "  }\n"),
])
patch(root + "/src/core/overlap_exec.c", [
    ('#include "overlap.h"\n', '#include "overlap.h"\n#include <stdlib.h>\n'),
    ("  const int r = p->rank, lane = OVL_LANE_COMPUTE1;\n  TPLA_TRY(send_partials(p, c));\n",
     "  const char *own_lane = getenv(\"TPLA_XP_OWN_LANE\");\n"
     "  const int r = p->rank,\n"
     "            lane = own_lane && *own_lane == '0' ? OVL_LANE_COMPUTE0 : OVL_LANE_COMPUTE1;\n"
     "  TPLA_TRY(send_partials(p, c));\n"),
    ("  int lane = OVL_LANE_COMPUTE1;\n  TPLA_TRY(send_partials(p, c));\n",
     "  const char *own_lane = getenv(\"TPLA_XP_OWN_LANE\");\n"
     "  int lane = own_lane && *own_lane == '0' ? OVL_LANE_COMPUTE0 : OVL_LANE_COMPUTE1;\n"
     "  TPLA_TRY(send_partials(p, c));\n"),
])
print("patched: TPLA_XP_OWN_LANE, TPLA_XP_CUT")
