#!/usr/bin/env bash
# bench/device_run189.sh - one GPU (nvidia-h200), session 28: is run 187's two-stream gain of
# the TF32 square an artifact of order? Run 188 found the two-stream products neutral inside
# whole Newton-Schulz calls. bench/sym_lanes_bench.c with each round's order swapped: lanes
# before rows (lrf), rows right after lanes (lfr... ), and run 187's frl.
# Run in the repository root (no carry): bash bench/device_run189.sh
set -u
. bench/device_lib.sh 189
gpu_build tpla_sym_lanes_bench
export CUDA_VISIBLE_DEVICES=0
for order in lrf rlf frl flr; do
  bounded 60 "$L/sym_lanes_$order.log" build-gpu/tpla_sym_lanes_bench 30 $order
  say "sym_lanes_bench $order: exit $? ($(el))"
  grep -E "square|gram" "$L/sym_lanes_$order.log" | sed "s/^/$order /" >> "$S"
  pack
done
cat "$S"
