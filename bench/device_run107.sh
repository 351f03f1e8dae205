#!/usr/bin/env bash
# bench/device_run107.sh - two GPUs: compute-sanitizer memcheck of test_gpu_overlap_groups (window
# groups; TPLA_TEST_QUICK=1: two rounds of the three calls), as tests/gpu/run.sh runs memcheck.
# The last seconds of session 16's device time: bounded to 80 s. Run in the repository root:
#   bash bench/device_run107.sh
set -u
. bench/device_lib.sh 107
gpu_build test_gpu_overlap_groups
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 bounded 80 "$L/memcheck.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 \
  build-gpu/tests/test_gpu_overlap_groups
say "memcheck test_gpu_overlap_groups (2 GPUs, quick): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck.log" | tr '\n' ' ')"
pack
cat "$S"
