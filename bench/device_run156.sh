#!/usr/bin/env bash
# bench/device_run156.sh - one GPU (nvidia-h200), session 24: tpla_ns_desc_t.gram_sum (the
# capturable NCCL sum as a plan option instead of only the environment). The whole GPU suite
# (tests/gpu/run.sh) and the Python checks on the CUDA executor (one rank: check_ns_numerics'
# gram_sum="collective" against the default, check_graphs).
# Run in the repository root (no carry): bash bench/device_run156.sh
set -u
. bench/device_lib.sh 156
OUT=$L/gpu-tests bounded 330 "$L/gpu_tests.log" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/test_gpu_graphs.log" build-gpu/tests/test_gpu_graphs
say "test_gpu_graphs: exit $? ($(el)) $(grep -E '^(ok|FAIL)' "$L/test_gpu_graphs.log" | tr '\n' ' ')"
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0 bounded 150 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
