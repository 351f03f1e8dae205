#!/usr/bin/env bash
# bench/device_run185.sh - one GPU (nvidia-h200), session 28: the mirror kernel that skips the
# whole diagonal blocks (32bf0e0) under compute-sanitizer's racecheck and synccheck (the skip
# is a `continue` before the tiles' barriers; run 184 ran memcheck only), synccheck of the
# batched NS test, initcheck of test_gpu_ops; then tpla_mirror_bench with the new blocks column
# (the kernel alone: full triangle, past the diagonal blocks, and a copy of the same bytes).
# Run in the repository root (no carry): bash bench/device_run185.sh
set -u
. bench/device_lib.sh 185
gpu_build test_gpu_ops test_gpu_ops_batch test_gpu_ns_batch tpla_mirror_bench
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1
bounded 60 "$L/mirror_bench.log" build-gpu/tpla_mirror_bench 50
say "tpla_mirror_bench: exit $? ($(el))"
grep -vE "^mirror_bench: done" "$L/mirror_bench.log" >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() { # san TOOL TEST LIMIT
  local log="$L/${1}_$2.log"
  bounded "$3" "$log" "$SAN" --tool "$1" --report-api-errors no --error-exitcode 99 \
    "build-gpu/tests/$2"
  say "$1 $2: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr '\n' ' ')"
  pack
}
san racecheck test_gpu_ops 200
san synccheck test_gpu_ops 120
san racecheck test_gpu_ops_batch 120
san synccheck test_gpu_ops_batch 60
san synccheck test_gpu_ns_batch 150
san initcheck test_gpu_ops 90
cat "$S"
