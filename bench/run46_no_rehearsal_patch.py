"""run46_no_rehearsal_patch.py - the experiment patch of bench/device_run46.sh, applied
to a copy of the tree (argv[1]): the pulled Gram's plan-time rehearsal
(ns_pull_rehearse) returns at once. Runs 42/44/45: compute-sanitizer memcheck of
`tpla ns -g 2` with pulls ran past 120-424 s, where run 39's (pulls, before the
rehearsal existed) took ~45 s; with NCCL sums it takes ~50 s. This copy tells
whether the rehearsal is what memcheck stalls on. Not part of the library."""
import sys

from patch_util import patch

patch(sys.argv[1] + "/src/core/ns_pull.c", [
    ("tpla_status_t ns_pull_rehearse(tpla_ns_plan_t plan, const char *fn) {\n",
     "tpla_status_t ns_pull_rehearse(tpla_ns_plan_t plan, const char *fn) {\n"
     "  if (plan != NULL)\n    return TPLA_SUCCESS; /* run 46: no rehearsal */\n"),
])
print("patched")
