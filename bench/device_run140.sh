#!/usr/bin/env bash
# bench/device_run140.sh - one GPU (nvidia-h200): bench/remote_d_bench.c with the own half also
# under the fastest of the heuristic's results for its key ("halves*"): the one-GPU bound of a
# two-launch GEMM+RS whose peer half is written into the peer's memory.
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run140.sh
set -u
. bench/device_lib.sh 140
gpu_build tpla_remote_d_bench
bounded 400 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
pack
cat "$S"
