#!/usr/bin/env bash
# bench/device_run145.sh - one GPU (nvidia-h200): bench/remote_d_bench.c with the own half also
# as four GEMMs of 1024 rows ("halves/4"): what the library runs with direct partials (one
# GEMM of the peer's rows since 693e6c3) and its automatic 4 chunks.
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run145.sh
set -u
. bench/device_lib.sh 145
gpu_build tpla_remote_d_bench
bounded 400 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
pack
cat "$S"
