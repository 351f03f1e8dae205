#!/usr/bin/env bash
# bench/device_run123.sh - two GPUs (nvidia-h200-x2), session 19, the final library: issue #3's
# Newton-Schulz table (bench/run_ns.sh: tpla and the PyTorch anchors in the same run; the table
# of record is run 97's, before the watchdog's call bracket), then AUTO against every forced
# algorithm on 2 GPUs (bench/ns_auto_check.py, the four 2-GPU shapes) while time remains.
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run123.sh
set -u
. bench/device_lib.sh 123
gpu_build tpla_tool
BUILD=build-gpu OUT=$L/run_ns timeout 400 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns: exit $? ($(el))"
cat "$L/run_ns/compare.txt" >> "$S" 2>/dev/null
pack
for shape in 16384x4096 8192x8192 14336x4096 4096x14336; do
  [ "$(( $(date +%s) - t0 ))" -lt 510 ] || { say "ns_auto_check $shape: not run (time)"; continue; }
  timeout 75 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 \
    --out "$L/auto_g2_$shape" "$shape" > "$L/auto_g2_$shape.log" 2>&1
  say "ns_auto_check -g 2 $shape: exit $? ($(el))"
  grep -E "PASS|MISS" "$L/auto_g2_$shape.log" >> "$S"
  pack
done
cat "$S"
