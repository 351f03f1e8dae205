#!/usr/bin/env bash
# bench/device_run107.sh - two GPUs: the whole GPU suite (tests/gpu/run.sh) at main, whose
# library is fe785b1's (window groups; the suite last ran at a56fb69's, run 103), then
# compute-sanitizer memcheck of test_gpu_overlap_groups on both GPUs (TPLA_TEST_QUICK=1: two
# rounds of the three calls), as tests/gpu/run.sh runs memcheck. About 5 minutes.
# Run in the repository root of main, no carry: bash bench/device_run107.sh
set -u
. bench/device_lib.sh 107
OUT=$L/gpu-tests timeout 450 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -20 >> "$S"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 bounded 150 "$L/memcheck.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 \
  build-gpu/tests/test_gpu_overlap_groups
say "memcheck test_gpu_overlap_groups (2 GPUs, quick): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck.log" | tr '\n' ' ')"
pack
cat "$S"
