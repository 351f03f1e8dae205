#!/usr/bin/env bash
# bench/device_run95.sh - one GPU: bench/chunk_bench.c's link model with explicit chunk cuts
# that keep E4M3's chunk GEMMs near whole waves (a 1152-row chunk is 288 tiles of 128 x 256,
# 2.2 waves on 132 SMs, which may be why tails and 3 chunks lose for FP8 GEMM+RS), with head and
# tail chunks, for GEMM+RS and GEMM+AR, at 300 and 380 GB/s, and the plans' tiles printed.
# About 1 minute. Run in the repository root of main, no carry: bash bench/device_run95.sh
set -u
. bench/device_lib.sh 95
gpu_build tpla_chunk_bench
for gbs in 300 380; do
  bounded 200 "$L/chunk_bench_$gbs.log" build-gpu/tpla_chunk_bench 30 $gbs
  say "chunk_bench $gbs GB/s: exit $? ($(el))"
  grep -vE '^# (chunk_bench|dtype)' "$L/chunk_bench_$gbs.log" >> "$S"
  pack
done
cat "$S"
