#!/usr/bin/env bash
# bench/device_run91.sh - one GPU: bench/chunk_bench.c with its link model (a link stream that
# spins for each partial chunk's push time before the own chunk may use it): the 4-chunk
# schedule of tpla's GEMM+RS waiting by event / stream memory value / watcher, and other
# splits of partials and own rows, at 300 and 380 GB/s. About 2 minutes.
# Run in the repository root of main, no carry: bash bench/device_run91.sh
set -u
. bench/device_lib.sh 91
gpu_build tpla_chunk_bench
for gbs in 300 380; do
  bounded 150 "$L/chunk_bench_$gbs.log" build-gpu/tpla_chunk_bench 30 $gbs
  say "chunk_bench $gbs GB/s: exit $? ($(el))"
  grep -vE '^#' "$L/chunk_bench_$gbs.log" >> "$S"
  pack
done
cat "$S"
