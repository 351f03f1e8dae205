#!/usr/bin/env bash
# bench/device_run138.sh - one GPU (nvidia-h200): bench/remote_d_bench.c again, now with the
# own rows' GEMM alone in its variants (beta 0, beta 1 with C = D, beta 1 with a separate C
# under the heuristic's first 8 results), since run 137 read E4M3's two halves at 1.129x the
# unchunked GEMM against bf16's 1.005x.
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run138.sh
set -u
. bench/device_lib.sh 138
gpu_build tpla_remote_d_bench
bounded 400 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
pack
cat "$S"
