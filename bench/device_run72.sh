#!/usr/bin/env bash
# bench/device_run72.sh - main after run 71 merged the lane-0 call (29d879b): 1. the whole GPU
# suite (1 and 2 GPUs; last run whole around run 51); 2. the per-row timelines of the pulled
# products and sums (bench/run66_pull_trace_patch.py, call 8 of each rank) at 8192^2 and
# 16384x4096: what is left past the GEMMs; 3. bench/ns_auto_check.py, bf16 Gram, the four
# 2-GPU shapes, each under its own limit, while the script is under 540 s. About 9 minutes.
# Run in the repository root of main (no snap needed): bash bench/device_run72.sh
set -u
. bench/device_lib.sh 72
ROOT=$PWD
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
patched_build /tmp/s72x "$ROOT/bench/run66_pull_trace_patch.py"
ns_trace square_auto 8192x8192
ns_trace tall_auto 16384x4096
cd "$ROOT" || exit 1
pack
for shape in 8192x8192 16384x4096 4096x14336 14336x4096; do
  [ "$(( $(date +%s) - t0 ))" -lt 470 ] || { say "ns_auto_check $shape: not run (time)"; continue; }
  timeout 100 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram input \
    --out "$L/auto_input_$shape" "$shape" > "$L/auto_input_$shape.log" 2>&1
  say "ns_auto_check bf16 Gram $shape: exit $? ($(el))"
  grep -E "PASS|MISS" "$L/auto_input_$shape.log" >> "$S"
  pack
done
cat "$S"
