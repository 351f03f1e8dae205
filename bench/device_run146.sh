#!/usr/bin/env bash
# bench/device_run146.sh - one GPU (nvidia-h200), session 22's last library: the whole GPU suite
# (tests/gpu/run.sh) on one GPU after direct partials became one GEMM per destination (693e6c3),
# the in-flight wait's order (bcf8f3d) and the tuning's 2% rule, then test_gpu_overlap with
# TPLA_OVERLAP_TUNE=1 (the tuning's CUDA path; direct partials need two GPUs).
# Run in the repository root of main (no carry), kind nvidia-h200:
#   bash bench/device_run146.sh
set -u
. bench/device_lib.sh 146
OUT=$L/gpu-tests timeout 380 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|memcheck" "$L/gpu_tests.log" | head -12 >> "$S"
pack
TPLA_OVERLAP_TUNE=1 bounded 100 "$L/overlap_tune.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, TUNE=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_tune.log")"
pack
cat "$S"
