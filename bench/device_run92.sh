#!/usr/bin/env bash
# bench/device_run92.sh - one GPU: bench/chunk_bench.c's link model for GEMM+RS and GEMM+AR
# chunk schedules (counts, tails, wait mechanisms), its rows marked * / + timed for real on 2
# H200s in runs 71 / 81, at 300 and 380 GB/s. About 2 minutes.
# Run in the repository root of main, no carry: bash bench/device_run92.sh
set -u
. bench/device_lib.sh 92
gpu_build tpla_chunk_bench
for gbs in 300 380; do
  bounded 200 "$L/chunk_bench_$gbs.log" build-gpu/tpla_chunk_bench 30 $gbs
  say "chunk_bench $gbs GB/s: exit $? ($(el))"
  grep -vE '^#' "$L/chunk_bench_$gbs.log" >> "$S"
  pack
done
cat "$S"
