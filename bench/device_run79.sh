#!/usr/bin/env bash
# bench/device_run79.sh - the overlap benchmark with its PyTorch anchors at main a514e8b
# (GEMM+AllReduce's automatic half last chunk, ovl_auto_tail): bench/run_overlap.sh in bf16
# (its last whole run was run 6, f2a7241), then, while the time lasts, in FP8 (DTYPE=e4m3,
# split accumulation; run 34's table used its own script). About 6 minutes; each part packed
# as it ends.
# Run in the repository root of main: bash bench/device_run79.sh
set -u
. bench/device_lib.sh 79
gpu_build tpla_tool
OUT=$L/overlap_bf16 timeout 200 bash bench/run_overlap.sh > "$L/overlap_bf16.log" 2>&1
say "run_overlap bf16: exit $? ($(el))"
grep -E "PASS|MISS|miss|pass" "$L/overlap_bf16.log" | tail -n 20 >> "$S"
pack
left=$(( 370 - ($(date +%s) - t0) ))
if [ $left -gt 120 ]; then
  DTYPE=e4m3 ACCUM=split OUT=$L/overlap_e4m3 timeout $left bash bench/run_overlap.sh \
    > "$L/overlap_e4m3.log" 2>&1
  say "run_overlap e4m3: exit $? ($(el))"
  grep -E "PASS|MISS|miss|pass" "$L/overlap_e4m3.log" | tail -n 20 >> "$S"
else
  say "run_overlap e4m3: not run (time, $left s left)"
fi
pack
cat "$S"
