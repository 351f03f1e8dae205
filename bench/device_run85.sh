#!/usr/bin/env bash
# bench/device_run85.sh - per-call timelines (bench/run30_trace_patch.py, CUDA events around
# every push, pull, GEMM and fold of the 8th call; a patched copy, not the library) of the two
# 2-GPU overlap rows that miss eff 0.90 at the current library: GEMM+AR bf16 (8192, 4096, 8192)
# with the automatic half last chunk and with equal chunks (TPLA_OVERLAP_TAIL=1; run 30 traced
# equal chunks only), and FP8 e4m3 GEMM+RS (8192, 4096, 8192), split accumulation. Where do the
# ~120 us (AR) and ~60 us (FP8 RS) over the unchunked GEMM go? About 2 minutes.
# Run in the repository root of main: bash bench/device_run85.sh
set -u
. bench/device_lib.sh 85
patched_build /tmp/s85x "$PWD/bench/run30_trace_patch.py"
run() { # name tail op args...
  local name=$1 tail=$2 op=$3; shift 3
  TPLA_OVERLAP_TAIL=$tail TPLA_TRACE=8 CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/$name.log" \
    build-exp/tpla $op -g 2 -n 10 -w 5 -s 1234 "$@"
  say "$name: exit $? ($(el)) $(grep -E "^  $op " "$L/$name.log"), $(grep -c '^TRACE' "$L/$name.log") trace lines"
}
run ar_t2 0 gemm-ar -d bf16 8192 4096 8192
run ar_t1 1 gemm-ar -d bf16 8192 4096 8192
run rs_e4m3 0 gemm-rs -d e4m3 --accum=split 8192 4096 8192
run rs_bf16 0 gemm-rs -d bf16 8192 4096 8192
pack
cat "$S"
