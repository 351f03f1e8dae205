#!/usr/bin/env bash
# bench/device_run151.sh - one GPU (nvidia-h200), session 23: the audit fixes that touch the
# CUDA executor, on the one GPU lent: scale_by_norm of zeros with eps 0 (test_gpu_ops), FP8
# staging refused in a captured stream and the graph after an uncaptured call
# (test_gpu_fp8_kernels), the FP8 NULL scale copied from the device 1.0f (test_gpu_overlap's
# FP8 cases and test_gpu_fp8), the one-GPU tests of NS and GEMMs, and memcheck of
# test_gpu_fp8_kernels. Two-GPU paths (GEMM+AR with per-rank beta) need two GPUs.
# Run in the repository root (no carry): bash bench/device_run151.sh
set -u
. bench/device_lib.sh 151
gpu_build test_gpu_ops test_gpu_fp8_kernels test_gpu_fp8 test_gpu_overlap test_gpu_ns \
  test_gpu_ns_api test_gpu_gemm
for t in test_gpu_ops test_gpu_fp8_kernels test_gpu_fp8 test_gpu_overlap test_gpu_ns \
  test_gpu_ns_api test_gpu_gemm; do
  CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 90 \
  "$L/memcheck_fp8_kernels.log" "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 \
  build-gpu/tests/test_gpu_fp8_kernels
say "memcheck test_gpu_fp8_kernels: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_fp8_kernels.log" | tr '\n' ' ')"
pack
