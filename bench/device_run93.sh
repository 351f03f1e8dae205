#!/usr/bin/env bash
# bench/device_run93.sh - one GPU: bench/chunk_bench.c's link model with lane 0 at the highest
# stream priority (as tpla's transport creates it; run 92 had both lanes at the default) and
# without, and the own chunks (but the last) held to an SM count target (88, 100, 66) so the
# partials keep SMs while both lanes run. About 1 minute.
# Run in the repository root of main, no carry: bash bench/device_run93.sh
set -u
. bench/device_lib.sh 93
gpu_build tpla_chunk_bench
for cfg in "300 1" "300 0" "380 1"; do
  set -- $cfg
  bounded 200 "$L/chunk_bench_$1_prio$2.log" build-gpu/tpla_chunk_bench 30 $1 $2
  say "chunk_bench $1 GB/s, prio $2: exit $? ($(el))"
  grep -vE '^#' "$L/chunk_bench_$1_prio$2.log" >> "$S"
  pack
done
cat "$S"
