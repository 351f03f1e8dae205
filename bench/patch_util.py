"""patch_util.py - what the experiment patches of bench/device_runN.sh share: apply
exact (old, new) text replacements to a file of the patched copy, each `old`
present exactly once."""


def patch(path, pairs):
    s = open(path).read()
    for old, new in pairs:
        assert s.count(old) == 1, (path, old[:70])
        s = s.replace(old, new, 1)
    open(path, "w").write(s)


# The timeline marks inside the Gram sum by pulls (ns_pull.c: each block row's GEMM on lane 0,
# its fold on lane 1, the closing), as (old, new) pairs for patch(); runs 50 and 66 use them.
PULLED_GRAM_MARKS = [
    ("    TPLA_TRY(ns_gram_row(ctx, ns_dense(win + at * es, h, s - i0, g.dtype), x, i0, h, lane0));\n",
     "    TPLA_TRY(ns_gram_row(ctx, ns_dense(win + at * es, h, s - i0, g.dtype), x, i0, h, lane0));\n"
     "    run37_mark(lane0, \"    pulled gram row %d GEMM done\", flag);\n"),
    ("    TPLA_TRY(p->x->fold(p->xp, OVL_LANE_COMPUTE1, &fold));\n",
     "    TPLA_TRY(p->x->fold(p->xp, OVL_LANE_COMPUTE1, &fold));\n"
     "    run37_mark(ns_pull_lane(p, OVL_LANE_COMPUTE1), \"    pulled gram row %d folded (lane 1)\","
     " flag);\n"),
    ("  TPLA_TRY(X->sync_lanes(p->xp, after_lane));\n",
     "  TPLA_TRY(X->sync_lanes(p->xp, after_lane));\n"
     "  run37_mark(X->stream(p->xp, after_lane), \"    exchange: lanes synced, closing\");\n"),
    ("  return X->arrival(p->xp, after_lane, done_flag, p->seq);\n}\n",
     "  TPLA_TRY(X->arrival(p->xp, after_lane, done_flag, p->seq));\n"
     "  run37_mark(X->stream(p->xp, after_lane), \"    exchange: peer done\");\n"
     "  return TPLA_SUCCESS;\n}\n"),
]
