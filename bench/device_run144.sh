#!/usr/bin/env bash
# bench/device_run144.sh - one GPU (nvidia-h200), session 22, branch exp-direct: the whole GPU
# suite (tests/gpu/run.sh) on one GPU after lt_plan.c's preference refactor
# (every cuBLASLt plan of the library is built through it) and the two experiments (off by
# default), then test_gpu_overlap and test_gpu_ns with TPLA_OVERLAP_TUNE=1.
# Run in the repository root of branch exp-direct (no carry), kind nvidia-h200:
#   bash bench/device_run144.sh
set -u
. bench/device_lib.sh 144
OUT=$L/gpu-tests timeout 380 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|memcheck" "$L/gpu_tests.log" | head -12 >> "$S"
pack
TPLA_OVERLAP_TUNE=1 bounded 100 "$L/overlap_tune.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, TUNE=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_tune.log")"
pack
cat "$S"
