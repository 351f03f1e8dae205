#!/usr/bin/env bash
# bench/device_run59.sh - the AUTO checks run 58 ran out of time for, with two pull windows
# and eight symmetric block rows (97dd885's library): bench/ns_auto_check.py at 16384x4096
# with an fp32 Gram (run 57, one window: AUTO's Gram iteration 4% slower than the X
# iteration) and at 8192^2 with a bf16 Gram, one rep each. About 2 minutes.
set -u
. bench/device_lib.sh 59
gpu_build tpla_tool
timeout 60 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram fp32 \
  --out "$L/auto_fp32" 16384x4096 > "$L/auto_fp32.log" 2>&1
say "ns_auto_check fp32 16384x4096: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_fp32.log" >> "$S"
pack
timeout 50 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 \
  --out "$L/auto" 8192x8192 > "$L/auto_check.log" 2>&1
say "ns_auto_check bf16 8192^2: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_check.log" >> "$S"
pack
cat "$S"
