#!/usr/bin/env bash
# bench/device_run99.sh - one GPU: bench/chunk_bench.c's link model with the own chunks on the
# partials' lane ("1lane": every chunk GEMM in order on one stream, none overlapping another),
# for GEMM+RS (4, 3, 2 chunks and explicit cuts) and GEMM+AR, at 300 and 380 GB/s, against the
# library's two-lane schedules. About 2 minutes.
# Run in the repository root of main, no carry: bash bench/device_run99.sh
set -u
. bench/device_lib.sh 99
gpu_build tpla_chunk_bench
for gbs in 300 380; do
  bounded 250 "$L/chunk_bench_$gbs.log" build-gpu/tpla_chunk_bench 30 $gbs
  say "chunk_bench $gbs GB/s: exit $? ($(el))"
  grep -vE '^#' "$L/chunk_bench_$gbs.log" >> "$S"
  pack
done
cat "$S"
