#!/usr/bin/env bash
# bench/device_run162.sh - one GPU (nvidia-h200), session 25: batched Newton-Schulz groups
# (src/core/ns_group.c: matrices of one shape and iteration through strided-batched GEMMs).
# 1. build everything; every GPU-labelled CTest on GPU 0 (the new test_gpu_ns_batch and
#    test_gpu_ops_batch, and the GEMM, FP8, NS, graph and overlap tests the changed cuBLASLt
#    key and kernels touch);
# 2. compute-sanitizer memcheck of test_gpu_ns_batch and test_gpu_ops_batch;
# 3. the Python checks on one rank (a Muon step against the reference, graphs).
# The Muon benchmark is run 163 (bench/device_run163.sh).
# Run in the repository root (no carry): bash bench/device_run162.sh
set -u
. bench/device_lib.sh 162
gpu_build all
export CUDA_VISIBLE_DEVICES=0
(cd build-gpu && bounded 300 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure)
say "ctest -L gpu on GPU 0: exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*Failed|Timeout" "$L/ctest_gpu.log" >> "$S"
grep -hE "rank\(s\)|^ok|FAIL" build-gpu/Testing/Temporary/LastTest.log 2>/dev/null | \
  grep -E "rank\(s\)|batch|FAIL" | head -n 20 >> "$S"
for t in test_gpu_ns_batch test_gpu_ops_batch; do
  CUDA_MODULE_LOADING=EAGER bounded 240 "$L/memcheck_$t.log" compute-sanitizer --tool memcheck \
    --error-exitcode 9 build-gpu/tests/$t
  say "memcheck $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck_$t.log" | tr '\n' ' ')"
done
export TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
