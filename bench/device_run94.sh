#!/usr/bin/env bash
# bench/device_run94.sh - one GPU: the whole GPU suite (tests/gpu/run.sh: every CTest test on 1
# GPU, then on all the GPUs the machine gives, here 1 again; MPI's test skips below 2 GPUs) at
# main with the new FP8 transpose kernel (transpose128), and compute-sanitizer memcheck of
# test_gpu_fp8_kernels and test_gpu_gemm. About 6 minutes.
# Run in the repository root of main, no carry: bash bench/device_run94.sh
set -u
. bench/device_lib.sh 94
OUT=$L/gpu-tests MEMCHECK_TESTS="test_gpu_fp8_kernels test_gpu_gemm" timeout 520 \
  bash tests/gpu/run.sh --memcheck > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|memcheck" "$L/gpu_tests.log" | head -20 >> "$S"
pack
cat "$S"
