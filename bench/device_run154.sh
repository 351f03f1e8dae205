#!/usr/bin/env bash
# bench/device_run154.sh - one GPU (nvidia-h200), session 24: the fixes from the audit of the
# session's changes. The whole GPU suite (tests/gpu/run.sh), with test_gpu_ops' tiny norms (the
# normalization now x (1/D) in fp64), test_gpu_graphs' GEMM on a stream forked into the
# capture, the FP8 scratch grown after a capture (the captured buffer kept), GEMM+RS and
# GEMM+AR captured; then compute-sanitizer memcheck of test_gpu_graphs and test_gpu_ops.
# Run in the repository root (no carry): bash bench/device_run154.sh
set -u
. bench/device_lib.sh 154
OUT=$L/gpu-tests bounded 330 "$L/gpu_tests.log" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in test_gpu_graphs test_gpu_ops; do
  CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(grep -E '^(ok|FAIL)' "$L/$t.log" | tr '\n' ' ')"
  CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 bounded 150 "$L/memcheck_$t.log" "$SAN" \
    --tool memcheck --report-api-errors no --error-exitcode 99 "build-gpu/tests/$t"
  say "memcheck $t: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_$t.log" | tr '\n' ' ')"
done
pack
cat "$S"
