#!/usr/bin/env bash
# bench/device_run105.sh - two GPUs: the window groups (branch shared-windows): the new
# test_gpu_overlap_groups (an AG+GEMM, a GEMM+RS and a GEMM+AR sharing one set of buffers, calls
# interleaved back to back, 2 GPUs then 1), and test_gpu_overlap and test_gpu_ns again (the CUDA
# transport now records per step whether a flag is a pull). Tight: about 3 minutes.
# Run in the repository root: bash bench/device_run105.sh
set -u
. bench/device_lib.sh 105
gpu_build test_gpu_overlap_groups test_gpu_overlap test_gpu_ns
for t in test_gpu_overlap_groups test_gpu_overlap test_gpu_ns; do
  CUDA_VISIBLE_DEVICES=0,1 bounded 100 "$L/$t.log" build-gpu/tests/$t
  say "$t (2 GPUs): exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
  grep -E "^# .*window group|FAIL|error" "$L/$t.log" | head -5 >> "$S"
  pack
done
cat "$S"
