#!/usr/bin/env bash
# bench/device_run76.sh - main after run 75 merged the row split (ns_rowsplit.c) and the update
# by halves of W's rows, and the cost model counts them (row_split_product_time in ns_cost.c):
# 1. the whole GPU suite (1 and 2 GPUs; last whole in run 72 at ea6508f); 2. bench/ns_auto_check.py
# on the four 2-GPU shapes with a bf16 Gram, then with an fp32 Gram (the model now puts the fp32
# Gram iteration level with the X iteration at 16384x4096: 4.68 ms each), each under its own
# limit while the script is under 560 s. About 9 minutes.
# Run in the repository root of main (no snap needed): bash bench/device_run76.sh
set -u
. bench/device_lib.sh 76
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
for gram in input fp32; do
  for shape in 16384x4096 8192x8192 4096x14336 14336x4096; do
    [ "$(( $(date +%s) - t0 ))" -lt 500 ] || { say "ns_auto_check $gram $shape: not run (time)"; continue; }
    timeout 90 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram $gram \
      --out "$L/auto_${gram}_$shape" "$shape" > "$L/auto_${gram}_$shape.log" 2>&1
    say "ns_auto_check $gram Gram $shape: exit $? ($(el))"
    grep -E "PASS|MISS" "$L/auto_${gram}_$shape.log" >> "$S"
    pack
  done
done
cat "$S"
