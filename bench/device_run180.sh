#!/usr/bin/env bash
# bench/device_run180.sh - one GPU (nvidia-h200), session 27: the X iteration without a mirror
# after a symmetric product of one block row (c4ccae1; the AUTO iteration moves with the cost
# model). First tests/gpu/run.sh --memcheck with MEMCHECK_TESTS="test_gpu_ns test_gpu_ns_batch";
# then the library of c4ccae1 (new) against 07e3cd3's (old, snap/lib_07e3cd3.tar, the
# library before the change; the Python package is the same): bench/muon_graph_bench.py
# --adamw at 768 x 12 and 1024 x 8, bench/ns_batch_bench.py at 32x1024x1024, 8x4096x1024,
# 8x1024x4096 (time and orthogonality against PyTorch's reference), alternating; then the
# Python checks on one rank.
# Run in the repository root, carry ["snap"]: bash bench/device_run180.sh
set -u
. bench/device_lib.sh 180
MEMCHECK_TESTS="test_gpu_ns test_gpu_ns_batch" OUT=$L/gpu-tests bounded 400 "$L/gpu_tests.log" \
  bash tests/gpu/run.sh --memcheck
say "tests/gpu/run.sh --memcheck: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== memcheck|FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
pack
tar_build /tmp/old180 snap/lib_07e3cd3.tar old tpla
export CUDA_VISIBLE_DEVICES=0
for spec in "768 12" "1024 8"; do
  set -- $spec
  for lib in new old; do
    so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old180/build-gpu/libtpla.so
    log="$L/muon_${1}x${2}_$lib.log"
    TPLA_LIBRARY=$so bounded 200 "$log" python3 bench/muon_graph_bench.py --hidden $1 \
      --layers $2 --adamw
    say "muon $lib width $1 x $2: exit $? ($(el))"
    grep -E "^  |^# tpla" "$log" | sed "s/^/$lib /" >> "$S"
    pack
  done
done
for lib in new old; do
  so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old180/build-gpu/libtpla.so
  TPLA_LIBRARY=$so bounded 200 "$L/ns_batch_$lib.log" python3 bench/ns_batch_bench.py \
    --batches 32x1024x1024,8x4096x1024,8x1024x4096
  say "ns_batch_bench $lib: exit $? ($(el))"
  grep -vE "^#" "$L/ns_batch_$lib.log" | sed "s/^/$lib /" >> "$S"
  pack
done
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
