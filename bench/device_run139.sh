#!/usr/bin/env bash
# bench/device_run139.sh - one GPU (nvidia-h200): bench/remote_d_bench.c again, the own rows'
# GEMM variants now timed both as run 138 did (each right after the last, so C = D found part of
# C in L2, written by the call before) and after a 512 MiB L2 flush each: is a separate C
# (the library's fused reduction) slower than C = D for itself, or only colder?
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run139.sh
set -u
. bench/device_lib.sh 139
gpu_build tpla_remote_d_bench
bounded 400 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
pack
cat "$S"
