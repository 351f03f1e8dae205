#!/usr/bin/env bash
# bench/device_run167.sh - one GPU (nvidia-h200), session 25: the whole GPU suite at the session's
# library (groups with list launches, the mirror kernels in mirror_kernel.cu): tests/gpu/run.sh
# --memcheck (ctest on GPU 0 and unrestricted, the MPI test, memcheck of test_gpu_gemm,
# test_gpu_ops, test_gpu_ns, test_gpu_ns_batch, test_gpu_ops_batch), then the Python checks on
# one rank (check_ns_numerics' batch, check_muon_vs_reference with repeated shapes).
# Run in the repository root (no carry): bash bench/device_run167.sh
set -u
. bench/device_lib.sh 167
OUT=$L/gpu-tests bounded 420 "$L/gpu_tests.log" bash tests/gpu/run.sh --memcheck
say "tests/gpu/run.sh --memcheck: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== memcheck|FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_(ns_numerics|muon)" "$L/python_1gpu.log" | cut -c1-300 >> "$S"
pack
cat "$S"
