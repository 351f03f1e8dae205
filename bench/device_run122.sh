#!/usr/bin/env bash
# bench/device_run122.sh - two GPUs (nvidia-h200-x2), session 19, the final library:
#  1. the whole GPU suite (tests/gpu/run.sh, 1 GPU then 2, and the MPI test); test_gpu_overlap's
#     FP8 case 0 now needs the 16-row even split of GEMM+AR and GEMM+RS (d6344dd) at 2 GPUs;
#  2. the bf16 overlap table (bench/run_overlap.sh, PyTorch anchors in the same run): the table
#     of record is run 81's, before d5fb6a2 and the watchdog;
#  3. the FP8 overlap table (E4M3, split accumulation), the same way (record: run 98).
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run122.sh
set -u
. bench/device_lib.sh 122
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite (2 GPUs): exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -10 >> "$S"
grep -E "^(case|ok|FAIL).*E4M3.*272|NOT_SUPPORTED" "$L/gpu-tests"/*overlap*.log 2>/dev/null | head -5 >> "$S"
pack
for dt in bf16 e4m3; do
  left=$(( 590 - $(date +%s) + t0 ))
  [ "$left" -gt 120 ] || { say "overlap $dt: not run (time, $left s left)"; continue; }
  acc=; [ $dt = e4m3 ] && acc=split
  BUILD=build-gpu DTYPE=$dt ACCUM=$acc OUT=$L/ov_$dt STEP_TIMEOUT=60 timeout $((left - 5)) \
    bash bench/run_overlap.sh > "$L/ov_$dt.log" 2>&1
  say "run_overlap $dt: exit $? ($(el))"
  cat "$L/ov_$dt/compare.txt" >> "$S" 2>/dev/null
  pack
done
cat "$S"
