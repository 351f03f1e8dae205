#!/usr/bin/env bash
# bench/device_run169.sh - two GPUs (nvidia-h200-x2), session 25, warm from run 168: compute-
# sanitizer memcheck of test_gpu_ns_batch (owners with groups on 2 GPUs) and test_gpu_graphs
# (the 2-GPU captures), each packed as it ends.
# Run in the repository root (no carry), kind nvidia-h200-x2: bash bench/device_run169.sh
set -u
. bench/device_lib.sh 169
gpu_build tpla test_gpu_ns_batch test_gpu_graphs
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in test_gpu_ns_batch test_gpu_graphs; do
  TPLA_TEST_NO_WATCHDOG=1 bounded 90 "$L/memcheck_$t.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tests/$t
  say "memcheck $t: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_$t.log" | tr '\n' ' ')"
  pack
done
cat "$S"
