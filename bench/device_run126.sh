#!/usr/bin/env bash
# bench/device_run126.sh - two GPUs (nvidia-h200-x2), session 19: compute-sanitizer on the
# overlap path at the final library (its last memcheck/racecheck of test_gpu_overlap and of the
# tool's overlapped calls was runs 35-62's, before d5fb6a2, the watchdog, abort and groups):
#  1. memcheck of test_gpu_overlap on both GPUs (TPLA_TEST_QUICK=1: bf16, op(B) N, and the FP8
#     cases, 1 GPU then 2);
#  2. memcheck and racecheck of one overlapped call each of ag-gemm, gemm-rs, gemm-ar (bf16,
#     PEER, 4 chunks) and of gemm-rs in E4M3 (split accumulation, op(B) N: the transpose kernel).
# Run in the repository root of main (no carry): bash bench/device_run126.sh
set -u
. bench/device_lib.sh 126
gpu_build tpla_tool test_gpu_overlap
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 bounded 300 "$L/memcheck_overlap.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_overlap
say "memcheck test_gpu_overlap (2 GPUs, quick): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck_overlap.log" | tr '\n' ' ')"
pack
calls=("ag-gemm -d bf16 --chunks=4" "gemm-rs -d bf16 --chunks=4" "gemm-ar -d bf16 --chunks=4"
       "gemm-rs -d e4m3 --accum=split --chunks=4")
for tool in memcheck racecheck; do
  i=0
  for c in "${calls[@]}"; do
    i=$((i + 1))
    [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "$tool $c: not run (time)"; continue; }
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=0,1 CUDA_MODULE_LOADING=EAGER bounded 60 "$L/${tool}_$i.log" "$SAN" \
      --tool $tool --report-api-errors no --error-exitcode 99 build-gpu/tpla $c -g 2 -n 2 -w 0 \
      1024 512 768
    say "$tool tpla $c: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|wrong elements' "$L/${tool}_$i.log" | tr '\n' ' ')"
  done
  pack
done
cat "$S"
