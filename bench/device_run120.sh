#!/usr/bin/env bash
# bench/device_run120.sh - four GPUs (nvidia-h200-x4), after the SM pulls past two ranks (run 119)
# and test_gpu_overlap's FP8 GEMM+AR case sized so that its even slices are multiples of 16 at
# P = 4: the overlap tests with the four GPUs visible (test_gpu_overlap runs every GPU as one
# group), then bench/run_overlap.sh at TP = 4 with the PyTorch anchors in the same run (run 116
# had no tpla GEMM+AR row: it hung). Run in the repository root of main (no carry).
set -u
. bench/device_lib.sh 120
gpu_build tpla_tool test_gpu_overlap test_gpu_overlap_groups test_gpu_overlap_mlp test_gpu_abort
for t in test_gpu_overlap test_gpu_overlap_groups test_gpu_overlap_mlp test_gpu_abort; do
  bounded 120 "$L/$t.log" build-gpu/tests/$t
  say "$t (4 GPUs): exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
  grep -E "^(FAIL|HANG)" "$L/$t.log" | head -5 >> "$S"
  pack
done
OUT=$L/overlap_tp4 TP=4 STEP_TIMEOUT=90 timeout 200 bash bench/run_overlap.sh > "$L/overlap_tp4.log" 2>&1
say "run_overlap TP=4: exit $? ($(el))"
cat "$L/overlap_tp4/compare.txt" >> "$S" 2>/dev/null
pack
cat "$S"
