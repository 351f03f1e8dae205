#!/usr/bin/env bash
# bench/device_run152.sh - one GPU (nvidia-h200), session 24: CUDA graph capture and the fp64
# sum of squares. The whole GPU suite (tests/gpu/run.sh: test_gpu_graphs, test_gpu_ops' huge
# entries, every other test on one GPU), compute-sanitizer memcheck of test_gpu_graphs, and the
# Python checks on the CUDA executor (tests/python/gpu/run_checks.py under torchrun, one rank,
# with the graph-capture check). Two-GPU cases skip on one GPU.
# Run in the repository root (no carry): bash bench/device_run152.sh
set -u
. bench/device_lib.sh 152
OUT=$L/gpu-tests bounded 330 "$L/gpu_tests.log" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/test_gpu_graphs.log" build-gpu/tests/test_gpu_graphs
say "test_gpu_graphs: exit $? ($(el)) $(grep -E '^(ok|FAIL)' "$L/test_gpu_graphs.log" | tr '\n' ' ')"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 bounded 120 "$L/memcheck_graphs.log" "$SAN" \
  --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_graphs
say "memcheck test_gpu_graphs: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_graphs.log" | tr '\n' ' ')"
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0 bounded 150 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -iE "graph" "$L/python_1gpu.log" | head -n 5 >> "$S"
pack
cat "$S"
