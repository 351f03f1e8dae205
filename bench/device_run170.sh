#!/usr/bin/env bash
# bench/device_run170.sh - one GPU (nvidia-h200), session 26: the first GPU run of session 25's
# last changes (store_list's dtype check, the batches' nonzero-stride checks in the kernels and
# the batched GEMM, TPLA_NS_BATCH_GROUP's parse, test_gpu_ns_batch's runs of at most 4, the
# alltoallv tests split into test_gpu_alltoallv) and of this session's list test with one
# misaligned member: tests/gpu/run.sh --memcheck (ctest on GPU 0 and unrestricted, the MPI
# test, memcheck of test_gpu_gemm, test_gpu_ops, test_gpu_alltoallv, test_gpu_ns,
# test_gpu_ns_batch, test_gpu_ops_batch); then bench/ns_batch_bench.py's wide and tall rows
# (the tall row's PyTorch anchor, fixed after run 166, measured for the first time); then the
# Python checks on one rank.
# Run in the repository root (no carry): bash bench/device_run170.sh
set -u
. bench/device_lib.sh 170
OUT=$L/gpu-tests bounded 420 "$L/gpu_tests.log" bash tests/gpu/run.sh --memcheck
say "tests/gpu/run.sh --memcheck: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== memcheck|FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 100 "$L/ns_batch.log" python3 bench/ns_batch_bench.py --batches 8x1024x4096,8x4096x1024
say "ns_batch_bench: exit $? ($(el))"
grep -vE "^#" "$L/ns_batch.log" >> "$S"
bounded 90 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
