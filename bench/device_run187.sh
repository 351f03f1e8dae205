#!/usr/bin/env bash
# bench/device_run187.sh - one GPU (nvidia-h200), session 28: would Newton-Schulz's symmetric
# products gain from their block rows on two streams? bench/sym_lanes_bench.c: the Gram (bf16
# and fp32 D) and the TF32 square at s = 2048, 4096, 8192, one full GEMM / the block rows on one
# stream / on two streams with a workspace each, interleaved rounds; two invocations.
# Run in the repository root (no carry): bash bench/device_run187.sh
set -u
. bench/device_lib.sh 187
gpu_build tpla_sym_lanes_bench
export CUDA_VISIBLE_DEVICES=0
for round in 1 2; do
  bounded 120 "$L/sym_lanes_$round.log" build-gpu/tpla_sym_lanes_bench 30
  say "sym_lanes_bench round $round: exit $? ($(el))"
  grep -vE "^sym_lanes_bench: done" "$L/sym_lanes_$round.log" >> "$S"
  pack
done
cat "$S"
