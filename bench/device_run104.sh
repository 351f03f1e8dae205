#!/usr/bin/env bash
# bench/device_run104.sh - one GPU: does cuBLASLt compute only a triangle of a square product?
# CUBLASLT_MATMUL_DESC_FILL_MODE (cublasFillMode_t) is in CUDA 13.0's cublasLt.h; tpla computes
# the symmetric products of Newton-Schulz by block rows of the upper triangle instead. For the
# whole-GEMM keys of bench/lt_fill_keys.txt (Grams and squares at 4096 and 8192) the bench times
# the full product's heuristic results, then asks again with fill mode upper: algorithms found,
# time, and which elements of D it left alone. About 1 minute.
# Run in the repository root of main, no carry: bash bench/device_run104.sh
set -u
. bench/device_lib.sh 104
gpu_build tpla_lt_algo_bench
CUDA_VISIBLE_DEVICES=0 bounded 240 "$L/fill.log" build-gpu/tpla_lt_algo_bench \
  bench/lt_fill_keys.txt 15 upper
say "fill probe: exit $? ($(el))"
cat "$L/fill.log" >> "$S"
pack
cat "$S"
