#!/usr/bin/env bash
# bench/device_run184.sh - one GPU (nvidia-h200), session 28: mirrors that skip the diagonal
# blocks a blocked symmetric product computed whole (32bf0e0). First tests/gpu/run.sh
# --memcheck with MEMCHECK_TESTS="test_gpu_ops test_gpu_ops_batch test_gpu_ns" (the mirror's
# new cases, bit for bit, and the NS properties); then the library of 32bf0e0 (new) against
# 33dc90c's (old, snap/lib_33dc90c.tar): `tpla ns -g 1` at the widths where products have 2-8
# block rows, and bench/muon_graph_bench.py --adamw at 2048 x 8 and 4096 x 2, alternating;
# then the Python checks on one rank.
# Run in the repository root, carry ["snap"]: bash bench/device_run184.sh
set -u
. bench/device_lib.sh 184
MEMCHECK_TESTS="test_gpu_ops test_gpu_ops_batch test_gpu_ns" OUT=$L/gpu-tests \
  bounded 420 "$L/gpu_tests.log" bash tests/gpu/run.sh --memcheck
say "tests/gpu/run.sh --memcheck: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== memcheck|FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
pack
tar_build /tmp/old184 snap/lib_33dc90c.tar old tpla_tool tpla
export CUDA_VISIBLE_DEVICES=0
for round in 1 2; do
  for lib in new old; do
    bin=$PWD/build-gpu/tpla; [ $lib = old ] && bin=/tmp/old184/build-gpu/tpla
    log="$L/ns_${lib}_$round.log"
    bounded 120 "$log" "$bin" ns -g 1 -n 40 -w 10 --gram=both --svd-max=0 \
      2048x2048 4096x4096 8192x8192 4096x14336 16384x4096
    say "ns $lib round $round: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$lib$round /" >> "$S"
    pack
  done
done
for spec in "2048 8" "4096 2"; do
  set -- $spec
  for lib in new old; do
    so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old184/build-gpu/libtpla.so
    log="$L/muon_${1}x${2}_$lib.log"
    TPLA_LIBRARY=$so bounded 200 "$log" python3 bench/muon_graph_bench.py --hidden $1 \
      --layers $2 --adamw
    say "muon $lib width $1 x $2: exit $? ($(el))"
    grep -E "^  |^# tpla" "$log" | sed "s/^/$lib /" >> "$S"
    pack
  done
done
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
