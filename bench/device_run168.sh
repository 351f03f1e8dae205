#!/usr/bin/env bash
# bench/device_run168.sh - two GPUs (nvidia-h200-x2), session 25, with the 366 device seconds
# left when the 2-GPU kind appeared: the 2-GPU cases of sessions 23-25 in order of value, each
# packed as it ends (the call may be cut short):
#  1. test_gpu_ns_batch (owners on 2 GPUs with groups) and test_gpu_graphs (SENDRECV captured,
#     the PEER refusals, NS with gram_sum COLLECTIVE, a global capture beside a watched call);
#  2. test_gpu_abort (the watchdog's repeated release) and test_gpu_overlap (GEMM+AR with
#     per-rank beta over PEER);
#  3. the Python checks under torchrun on 2 ranks.
# Run in the repository root (no carry), kind nvidia-h200-x2: bash bench/device_run168.sh
set -u
. bench/device_lib.sh 168
gpu_build tpla test_gpu_ns_batch test_gpu_graphs test_gpu_abort test_gpu_overlap
pack
for t in test_gpu_ns_batch test_gpu_graphs test_gpu_abort test_gpu_overlap; do
  bounded 90 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(grep -E '^(ok|FAIL|  skip)|rank\(s\)' "$L/$t.log" | tr '\n' ' ' | cut -c1-700)"
  pack
done
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 100 "$L/python_2gpu.log" \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/run_checks.py
say "python checks (2 ranks): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_2gpu.log" | tr '\n' ' ')"
pack
cat "$S"
