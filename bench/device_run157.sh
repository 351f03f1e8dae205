#!/usr/bin/env bash
# bench/device_run157.sh - two GPUs (nvidia-h200-x2), written in session 24 for the first
# session that is lent two GPUs: what sessions 23-24 changed and could only run on one GPU.
#  1. test_gpu_graphs on 2 GPUs: SENDRECV AG/RS/AR captured and replayed, the PEER refusals
#     (overlap plans, NS pulls), NS with gram_sum COLLECTIVE captured, a global capture beside
#     a call the watchdog polls;
#  2. test_gpu_overlap (session 23's GEMM+AR with per-rank beta over PEER, 757d710);
#  3. test_gpu_abort (the watchdog's repeated release after an abort, the transport drained
#     before the watchdog forgets it);
#  4. the Python checks under torchrun on 2 ranks (check_graphs' two-rank branches,
#     check_ns_numerics' gram_sum="collective" against the pulls);
#  5. memcheck of test_gpu_graphs.
# Then `bash bench/device_run142.sh` (the GEMM+RS/AR experiments) in a call of its own.
# Run in the repository root (no carry), kind nvidia-h200-x2: bash bench/device_run157.sh
set -u
. bench/device_lib.sh 157
gpu_build tpla test_gpu_graphs test_gpu_overlap test_gpu_abort
for t in test_gpu_graphs test_gpu_overlap test_gpu_abort; do
  bounded 200 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(grep -E '^(ok|FAIL|skip)' "$L/$t.log" | tr '\n' ' ')"
  pack
done
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_2gpu.log" \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/run_checks.py
say "python checks (2 ranks): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_2gpu.log" | tr '\n' ' ')"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_TEST_NO_WATCHDOG=1 bounded 150 "$L/memcheck_graphs.log" "$SAN" --tool memcheck \
  --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_graphs
say "memcheck test_gpu_graphs: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY' "$L/memcheck_graphs.log" | tr '\n' ' ')"
pack
cat "$S"
