#!/usr/bin/env bash
# bench/device_run31.sh - the whole GPU suite after the FP8 amax rewrite
# (020f15b; run 27 ran only the FP8 tests), while run 29's and run 30's patched
# tools build in the background; then run 30 (timelines, ~1 min) on the quiet
# GPUs. Run 29 follows as a second call on the same machine:
#   cd /tmp/s31 && REUSE_BUILD=1 bash bench/device_run29.sh
set -u
. bench/device_lib.sh 31
(patched_build /tmp/s29x "$PWD/bench/run29_patch.py") &
(patched_build /tmp/s30x "$PWD/bench/run30_trace_patch.py") &
OUT=$L/gpu-tests timeout 320 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
wait
say "patched builds done ($(el))"
pack
OUT=$OUT/run30 REUSE_BUILD=1 bash bench/device_run30.sh
cat "$S"
