#!/usr/bin/env bash
# bench/device_run127.sh - two GPUs (nvidia-h200-x2), session 19: run 126's memcheck of
# test_gpu_overlap again with TPLA_TEST_SANITIZER=1 (the no-growth checks print their figures
# instead of failing: run 126's one failure was the back-to-back GEMM+AR case's free memory,
# 4 MiB less per window under memcheck, with 0 memcheck errors).
# Run in the repository root of main (no carry): bash bench/device_run127.sh
set -u
. bench/device_lib.sh 127
gpu_build test_gpu_overlap
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 200 "$L/memcheck_overlap.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_overlap
say "memcheck test_gpu_overlap (2 GPUs, quick): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck_overlap.log" | tr '\n' ' ')"
grep -E "not judged|FAIL" "$L/memcheck_overlap.log" >> "$S"
pack
cat "$S"
