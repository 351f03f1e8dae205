#!/usr/bin/env bash
# bench/device_run141.sh - one GPU (nvidia-h200): bench/remote_d_bench.c with the own half
# also as two GEMMs of 2048 rows ("halves/2", the heuristic's result 0: a schedule the library
# could run without choosing among cuBLASLt's results), and the 2048-row own GEMM's variants.
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run141.sh
set -u
. bench/device_lib.sh 141
gpu_build tpla_remote_d_bench
bounded 400 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
pack
cat "$S"
