#!/usr/bin/env bash
# bench/device_run186.sh - one GPU (nvidia-h200), session 28: the mirror's compact walk over
# the tiles left of the diagonal blocks (run 185: skipping those tiles in the full walk made
# the fp32 mirror 4-9% slower, bf16 5-13% faster). test_gpu_ops (new whole-tile cases) plain,
# under racecheck and synccheck; test_gpu_ns; tpla_mirror_bench (full walk against the compact
# one); then `tpla ns -g 1` and a Muon step at 2048 x 8 against 33dc90c (snap/lib_33dc90c.tar,
# no block-aware mirror), alternating.
# Run in the repository root, carry ["snap"]: bash bench/device_run186.sh
set -u
. bench/device_lib.sh 186
gpu_build test_gpu_ops test_gpu_ns tpla_mirror_bench tpla_tool tpla
export CUDA_VISIBLE_DEVICES=0
bounded 60 "$L/mirror_bench.log" build-gpu/tpla_mirror_bench 100
say "tpla_mirror_bench: exit $? ($(el))"
grep -vE "^mirror_bench: done" "$L/mirror_bench.log" >> "$S"
bounded 120 "$L/test_gpu_ops.log" build-gpu/tests/test_gpu_ops
say "test_gpu_ops: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ops.log")"
bounded 200 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck synccheck; do
  log="$L/${tool}_test_gpu_ops.log"
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 150 "$log" "$SAN" --tool $tool \
    --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_ops
  say "$tool test_gpu_ops: exit $? ($(el)) $(grep -E 'passed|ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tr '\n' ' ')"
  pack
done
tar_build /tmp/old186 snap/lib_33dc90c.tar old tpla_tool tpla
for round in 1 2; do
  for lib in new old; do
    bin=$PWD/build-gpu/tpla; [ $lib = old ] && bin=/tmp/old186/build-gpu/tpla
    log="$L/ns_${lib}_$round.log"
    bounded 120 "$log" "$bin" ns -g 1 -n 40 -w 10 --gram=both --svd-max=0 \
      2048x2048 4096x4096 8192x8192
    say "ns $lib round $round: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$lib$round /" >> "$S"
    pack
  done
done
for lib in new old; do
  so=$PWD/build-gpu/libtpla.so; [ $lib = old ] && so=/tmp/old186/build-gpu/libtpla.so
  log="$L/muon_2048x8_$lib.log"
  TPLA_LIBRARY=$so bounded 200 "$log" python3 bench/muon_graph_bench.py --hidden 2048 \
    --layers 8 --adamw
  say "muon $lib width 2048 x 8: exit $? ($(el))"
  grep -E "^  |^# tpla" "$log" | sed "s/^/$lib /" >> "$S"
  pack
done
cat "$S"
