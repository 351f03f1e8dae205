#!/usr/bin/env bash
# bench/device_run160.sh - one GPU (nvidia-h200), session 24: the FP8 scratch kept for a graph
# through two growths (a second growth freed the kept buffer before the fix), test_gpu_graphs
# alone and under compute-sanitizer memcheck; test_gpu_fp8_kernels (the scratch's other users).
# Run in the repository root (no carry): bash bench/device_run160.sh
set -u
. bench/device_lib.sh 160
gpu_build test_gpu_graphs test_gpu_fp8_kernels
for t in test_gpu_graphs test_gpu_fp8_kernels; do
  CUDA_VISIBLE_DEVICES=0 bounded 90 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 bounded 150 "$L/memcheck_graphs.log" "$SAN" \
  --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_graphs
say "memcheck test_gpu_graphs: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_graphs.log" | tr '\n' ' ')"
pack
cat "$S"
