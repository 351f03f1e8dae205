#!/usr/bin/env bash
# bench/device_run137.sh - one GPU (nvidia-h200; no 2-GPU kind lent at the start of session 22):
# bench/remote_d_bench.c's one-GPU part (the unchunked GEMM against the peer's half alone and
# the two halves back to back, the own half adding a received partial in its epilogue: what a
# GEMM+RS that writes the peer's half straight into the peer's memory would run, less the
# remote stores), E4M3 split / fast and bf16; then test_gpu_abort on one GPU (its new bound case
# needs two and skips).
# Run in the repository root of main (no carry), kind nvidia-h200: bash bench/device_run137.sh
set -u
. bench/device_lib.sh 137
gpu_build tpla_remote_d_bench test_gpu_abort
bounded 240 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  " "$L/remote_d_bench.log" >> "$S"
bounded 120 "$L/test_gpu_abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_abort.log")"
pack
cat "$S"
